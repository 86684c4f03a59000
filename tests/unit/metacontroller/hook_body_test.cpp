#include "libcore/metacontroller/hook_body.hpp"

#include <catch2/catch.hpp>

using namespace kc::metacontroller;
using nlohmann::json;

TEST_CASE("group keys are <Kind>.<apiVersion>", "[metacontroller]") {
  CHECK(groupKey("Pod", "v1") == "Pod.v1");
  CHECK(groupKey("Role", "rbac.authorization.k8s.io/v1") == "Role.rbac.authorization.k8s.io/v1");
  CHECK(objectKey(HookVersion::kV1, "ns", "a") == "a");
  CHECK(objectKey(HookVersion::kV2, "ns", "a") == "ns/a");
  CHECK(objectKey(HookVersion::kV2, "", "cluster-scoped") == "cluster-scoped");
}

TEST_CASE("the declared hook version", "[metacontroller]") {
  auto body = [](json version) {
    return json{{"controller", {{"spec", {{"hooks", {{"sync", {{"version", version}}}}}}}}}};
  };
  CHECK(*declaredHookVersion(json::object(), "sync") == HookVersion::kV1);
  CHECK(*declaredHookVersion(body(nullptr), "sync") == HookVersion::kV1);
  CHECK(*declaredHookVersion(body("v1"), "sync") == HookVersion::kV1);
  CHECK(*declaredHookVersion(body("v2"), "sync") == HookVersion::kV2);
  CHECK(*declaredHookVersion(body("v2"), "finalize") == HookVersion::kV1);  // per hook
  for (const json& bad : {json("v3"), json("V2"), json(2)}) {
    CAPTURE(bad);
    auto v = declaredHookVersion(body(bad), "sync");
    REQUIRE_FALSE(v.ok());
    CHECK_THAT(v.error().message, Catch::Contains("controller.spec.hooks.sync.version"));
  }
}

TEST_CASE("object maps: v1 and v2 keys, errors", "[metacontroller]") {
  auto obj = [](const char* ns, const char* name) {
    return json{{"metadata", {{"name", name}, {"namespace", ns}}}};
  };
  json body{{"children",
             {{"Pod.v1", {{"a", obj("ns", "a")}, {"ns/b", obj("ns", "b")}}},
              {"ConfigMap.v1", json::object()},
              {"Secret.v1", nullptr}}}};
  auto pods = groupObjects(body, "children", "Pod.v1");
  REQUIRE(pods.ok());
  CHECK(pods->size() == 2);
  CHECK(groupObjects(body, "children", "ConfigMap.v1")->empty());
  CHECK(groupObjects(body, "children", "Secret.v1")->empty());
  CHECK(groupObjects(body, "children", "Service.v1")->empty());
  CHECK(groupObjects(body, "related", "Pod.v1")->empty());

  struct Row {
    json body;
    std::string message;
  };
  auto row = GENERATE_COPY(values<Row>({
      {json{{"children", json::array()}}, "children must be an object"},
      {json{{"children", {{"Pod.v1", json::array()}}}}, "children[\"Pod.v1\"] must be an object"},
      {json{{"children", {{"Pod.v1", {{"a", 1}}}}}}, "is not an object"},
      {json{{"children", {{"Pod.v1", {{"a", json::object()}}}}}}, "has no metadata.name"},
      {json{{"children", {{"Pod.v1", {{"x", obj("ns", "a")}}}}}}, "names neither"},
      {json{{"children", {{"Pod.v1", {{"other/a", obj("ns", "a")}}}}}}, "names neither"},
  }));
  auto r = groupObjects(row.body, "children", "Pod.v1");
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains(row.message));
}

TEST_CASE("bodies must be JSON objects", "[metacontroller]") {
  CHECK(parseBody("{}").ok());
  CHECK_FALSE(parseBody("").ok());
  CHECK_FALSE(parseBody("[]").ok());
  CHECK_FALSE(parseBody("{\"a\":").ok());
  CHECK_FALSE(parseBody("{} {}").ok());
}

TEST_CASE("typed accessors", "[metacontroller]") {
  json o{{"s", "x"}, {"e", ""}, {"n", 1}};
  CHECK(*requiredString(o, "s", "obj") == "x");
  CHECK(requiredString(o, "e", "obj").error().message == "obj.e must be a non-empty string");
  CHECK_FALSE(requiredString(o, "n", "obj").ok());
  CHECK_FALSE(requiredString(o, "missing", "obj").ok());
  CHECK(optionalString(o, "n").empty());
  CHECK(member(json::array(), "s") == nullptr);
}
