#include "tools/kube-apiserver-double/patch.hpp"

#include <catch2/catch.hpp>

using namespace kc::apiserver;
using nlohmann::json;

TEST_CASE("merge patch replaces lists and deletes with null (RFC 7386)", "[patch]") {
  json target = {{"a", 1}, {"b", {{"c", 2}, {"d", 3}}}, {"l", {1, 2}}};
  json patch = {{"a", nullptr}, {"b", {{"c", 5}}}, {"l", {3}}};
  CHECK(applyMergePatch(target, patch) == json({{"b", {{"c", 5}, {"d", 3}}}, {"l", {3}}}));
}

// The test vectors of RFC 7386 appendix A (original, patch, result), written out by hand.
TEST_CASE("merge patch gives the RFC 7386 appendix A results", "[patch]") {
  auto [original, patch, result] = GENERATE(table<const char*, const char*, const char*>({
      {R"({"a":"b"})", R"({"a":"c"})", R"({"a":"c"})"},
      {R"({"a":"b"})", R"({"b":"c"})", R"({"a":"b","b":"c"})"},
      {R"({"a":"b"})", R"({"a":null})", R"({})"},
      {R"({"a":"b","b":"c"})", R"({"a":null})", R"({"b":"c"})"},
      {R"({"a":["b"]})", R"({"a":"c"})", R"({"a":"c"})"},
      {R"({"a":"c"})", R"({"a":["b"]})", R"({"a":["b"]})"},
      {R"({"a":{"b":"c"}})", R"({"a":{"b":"d","c":null}})", R"({"a":{"b":"d"}})"},
      {R"({"a":[{"b":"c"}]})", R"({"a":[1]})", R"({"a":[1]})"},
      {R"(["a","b"])", R"(["c","d"])", R"(["c","d"])"},
      {R"({"a":"b"})", R"(["c"])", R"(["c"])"},
      {R"({"a":"foo"})", "null", "null"},
      {R"({"a":"foo"})", R"("bar")", R"("bar")"},
      {R"({"e":null})", R"({"a":1})", R"({"e":null,"a":1})"},
      {R"([1,2])", R"({"a":"b","c":null})", R"({"a":"b"})"},
      {R"({})", R"({"a":{"bb":{"ccc":null}}})", R"({"a":{"bb":{}}})"},
  }));
  CAPTURE(original, patch);
  CHECK(applyMergePatch(json::parse(original), json::parse(patch)) == json::parse(result));
}

TEST_CASE("json patch applies RFC 6902 ops and reports failed tests as invalid", "[patch]") {
  json target = {{"metadata", {{"labels", {{"a", "b"}}}}}};
  auto ok =
      applyJsonPatch(target, json::parse(R"([{"op":"test","path":"/metadata/labels/a","value":"b"},
      {"op":"replace","path":"/metadata/labels/a","value":"c"},{"op":"add","path":"/metadata/labels/x","value":"y"}])"));
  REQUIRE(ok.ok());
  CHECK(ok.value()["metadata"]["labels"] == json({{"a", "c"}, {"x", "y"}}));

  auto failed = applyJsonPatch(
      target, json::parse(R"([{"op":"test","path":"/metadata/labels/a","value":"zz"}])"));
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error().code == "invalid");
  auto malformed = applyJsonPatch(target, json::parse(R"({"op":"add"})"));
  REQUIRE_FALSE(malformed.ok());
  CHECK(malformed.error().code == "bad_request");
  auto badOp = applyJsonPatch(target, json::parse(R"([{"op":"frobnicate","path":"/a"}])"));
  REQUIRE_FALSE(badOp.ok());
  CHECK(badOp.error().code == "bad_request");
}

TEST_CASE("strategic merge merges keyed lists of core types", "[patch]") {
  json pod = json::parse(R"({"spec":{"containers":[
      {"name":"a","image":"a:1","env":[{"name":"X","value":"1"}],"ports":[{"containerPort":80,"name":"http"}]},
      {"name":"b","image":"b:1"}]},
    "status":{"conditions":[{"type":"Ready","status":"False"},{"type":"PodScheduled","status":"True"}]},
    "metadata":{"finalizers":["f1"]}})");
  SECTION("containers by name, env by name, container ports by containerPort") {
    auto r = applyStrategicMergePatch(pod, json::parse(R"({"spec":{"containers":[
        {"name":"a","image":"a:2","env":[{"name":"Y","value":"2"}],"ports":[{"containerPort":80,"protocol":"TCP"}]}]}})"));
    REQUIRE(r.ok());
    const json& cs = r.value()["spec"]["containers"];
    REQUIRE(cs.size() == 2);
    CHECK(cs[0]["image"] == "a:2");
    CHECK(cs[0]["env"].size() == 2);
    CHECK(cs[0]["ports"].size() == 1);
    CHECK(cs[0]["ports"][0]["name"] == "http");
    CHECK(cs[0]["ports"][0]["protocol"] == "TCP");
    CHECK(cs[1]["image"] == "b:1");
  }
  SECTION("conditions by type") {
    auto r = applyStrategicMergePatch(
        pod, json::parse(R"({"status":{"conditions":[{"type":"Ready","status":"True"}]}})"));
    REQUIRE(r.ok());
    CHECK(r.value()["status"]["conditions"].size() == 2);
    CHECK(r.value()["status"]["conditions"][0]["status"] == "True");
  }
  SECTION("$patch: delete removes an element, $patch: replace replaces a list") {
    auto del = applyStrategicMergePatch(
        pod, json::parse(R"({"spec":{"containers":[{"name":"b","$patch":"delete"}]}})"));
    REQUIRE(del.ok());
    CHECK(del.value()["spec"]["containers"].size() == 1);
    auto rep = applyStrategicMergePatch(
        pod,
        json::parse(R"({"spec":{"containers":[{"$patch":"replace"},{"name":"c","image":"c"}]}})"));
    REQUIRE(rep.ok());
    CHECK(rep.value()["spec"]["containers"] == json::parse(R"([{"name":"c","image":"c"}])"));
  }
  SECTION("finalizers merge as a set; $deleteFromPrimitiveList removes") {
    auto add =
        applyStrategicMergePatch(pod, json::parse(R"({"metadata":{"finalizers":["f2","f1"]}})"));
    REQUIRE(add.ok());
    CHECK(add.value()["metadata"]["finalizers"] == json({"f1", "f2"}));
    auto rm = applyStrategicMergePatch(
        pod, json::parse(R"({"metadata":{"$deleteFromPrimitiveList/finalizers":["f1"]}})"));
    REQUIRE(rm.ok());
    CHECK(rm.value()["metadata"]["finalizers"] == json::array());
  }
  SECTION("$setElementOrder is accepted and ignored; unknown directives are rejected") {
    auto r = applyStrategicMergePatch(
        pod,
        json::parse(R"({"spec":{"$setElementOrder/containers":[{"name":"a"},{"name":"b"}]}})"));
    REQUIRE(r.ok());
    CHECK(r.value() == pod);
    auto bad = applyStrategicMergePatch(pod, json::parse(R"({"spec":{"$patch":"explode"}})"));
    REQUIRE_FALSE(bad.ok());
  }
  SECTION("list elements without the merge key are rejected") {
    auto bad =
        applyStrategicMergePatch(pod, json::parse(R"({"spec":{"containers":[{"image":"x"}]}})"));
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().code == "bad_request");
  }
}
