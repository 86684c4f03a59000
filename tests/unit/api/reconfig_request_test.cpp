#include "libcore/api/reconfig_request.hpp"

#include <catch2/catch.hpp>
#include <string>

#include "libcore/base/rfc3339.hpp"

namespace {

using nlohmann::json;

json podWith(json annotations) {
  return {{"metadata", {{"name", "p"}, {"annotations", std::move(annotations)}}}};
}

}  // namespace

TEST_CASE("reconfiguration request: the writer's patch is what the reader accepts", "[api]") {
  const auto at = kc::parseRfc3339("2026-11-28T06:00:01.234Z");
  REQUIRE(at.ok());
  const kc::api::ReconfigRequest request{"gpu-node-2", 3, *at};
  const json ann = kc::api::reconfigRequestAnnotations(request);
  CHECK(ann == json{{"kubecomp.io/dst-node", "gpu-node-2"},
                    {"kubecomp.io/demand", "3"},
                    {"kubecomp.io/reserved-at", "2026-11-28T06:00:01.234Z"}});
  const auto text = kc::api::reconfigRequestText(podWith(ann));
  CHECK(text.present());
  const auto back = kc::api::parseReconfigRequest(text);
  REQUIRE(back.ok());
  CHECK(*back == request);

  // Removal names all three, so a merge patch deletes them together.
  const json clear = kc::api::clearReconfigRequestAnnotations();
  CHECK(clear == json{{"kubecomp.io/dst-node", nullptr},
                      {"kubecomp.io/demand", nullptr},
                      {"kubecomp.io/reserved-at", nullptr}});
}

TEST_CASE("reconfiguration request: an older writer's request has no reserved-at", "[api]") {
  const auto r = kc::api::parseReconfigRequest(kc::api::reconfigRequestText(
      podWith({{"kubecomp.io/dst-node", "n1"}, {"kubecomp.io/demand", "0"}})));
  REQUIRE(r.ok());
  CHECK(r->dstNode == "n1");
  CHECK(r->demand == 0);
  CHECK_FALSE(r->reservedAt.has_value());
}

TEST_CASE("reconfiguration request: no annotations is no request", "[api]") {
  CHECK_FALSE(kc::api::reconfigRequestText(json{{"metadata", {{"name", "p"}}}}).present());
  CHECK_FALSE(kc::api::reconfigRequestText(podWith(json{{"other", "x"}})).present());
  CHECK_FALSE(kc::api::reconfigRequestText(json(3)).present());
}

TEST_CASE("reconfiguration request: invalid values are refused naming the annotation", "[api]") {
  const auto [dst, demand, reservedAt, named] = GENERATE(table<json, json, json, std::string>({
      {"Node_1", "1", nullptr, "kubecomp.io/dst-node"},
      {"", "1", nullptr, "kubecomp.io/dst-node"},
      {"-n", "1", nullptr, "kubecomp.io/dst-node"},
      {std::string(254, 'a'), "1", nullptr, "kubecomp.io/dst-node"},
      {5, "1", nullptr, "kubecomp.io/dst-node"},  // not a string: its JSON text, not a name
      {nullptr, "1", nullptr, "kubecomp.io/dst-node"},
      {"n1", "65536", nullptr, "kubecomp.io/demand"},
      {"n1", "-1", nullptr, "kubecomp.io/demand"},
      {"n1", "1.5", nullptr, "kubecomp.io/demand"},
      {"n1", " 1", nullptr, "kubecomp.io/demand"},
      {"n1", 2, nullptr, "kubecomp.io/demand"},
      {"n1", nullptr, nullptr, "kubecomp.io/demand"},
      {"n1", "1", "yesterday", "kubecomp.io/reserved-at"},
  }));
  json ann = json::object();
  for (auto [key, value] :
       {std::pair{"kubecomp.io/dst-node", dst}, std::pair{"kubecomp.io/demand", demand},
        std::pair{"kubecomp.io/reserved-at", reservedAt}}) {
    if (!value.is_null()) {
      ann[key] = value;
    }
  }
  CAPTURE(ann.dump());
  const auto r = kc::api::parseReconfigRequest(kc::api::reconfigRequestText(podWith(ann)));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == "invalid");
  CHECK(r.error().message.find("annotation " + named + " ") == 0);
}

TEST_CASE("node names: RFC 1123 subdomains", "[api]") {
  CHECK(kc::api::isValidNodeName("gpu-node-1.example.com"));
  CHECK(kc::api::isValidNodeName("0"));
  CHECK_FALSE(kc::api::isValidNodeName("Gpu"));
  CHECK_FALSE(kc::api::isValidNodeName("a."));
  CHECK_FALSE(kc::api::isValidNodeName("a_b"));
}
