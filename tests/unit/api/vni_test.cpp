#include "libcore/api/vni.hpp"

#include <catch2/catch.hpp>

using nlohmann::json;

TEST_CASE("VNI object: written as the CRD and Metacontroller expect, read back", "[api]") {
  const kc::api::VniObject o{kc::api::vniObjectName("uid-1"), "ns", "uid-1", 4097};
  const json j = kc::api::toJson(o);
  const json expected = json::parse(R"({"apiVersion":"kubecomp.io/v1","kind":"VNI",
      "metadata":{"name":"vni-uid-1","namespace":"ns","labels":{"vni.kubecomp.io/owner-uid":"uid-1"}},
      "spec":{"vni":4097}})");
  CHECK(j == expected);
  CHECK(kc::api::parseVniObject(j) == o);
}

TEST_CASE("VNI object: a spec.vni outside 1..65535 or of another type reads as none", "[api]") {
  for (const json& v : {json(0), json(65536), json(-3), json("12"), json(1.5), json(nullptr)}) {
    CAPTURE(v.dump());
    const json obj = {{"metadata", {{"name", "vni-x"}, {"namespace", "ns"}}},
                      {"spec", {{"vni", v}}}};
    const auto o = kc::api::parseVniObject(obj);
    CHECK_FALSE(o.vni.has_value());
    CHECK(o.name == "vni-x");
  }
  CHECK(kc::api::parseVniObject(json{{"spec", {{"vni", 65535}}}}).vni == 65535u);
  CHECK(kc::api::parseVniObject(json{{"spec", {{"vni", 1}}}}).vni == 1u);
  CHECK(kc::api::parseVniObject(json("x")) == kc::api::VniObject{});
}
