#include "libcore/fabric/redfish_expand.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

using namespace kc::fabric;

TEST_CASE("redfish $expand: the query follows what the service root advertises",
          "[fabric][redfish]") {
  // root body, levels asked, the query DSP0266 allows (empty: none)
  auto [root, levels, want] = GENERATE(table<std::string, std::int64_t, std::string>({
      {R"({})", 2, ""},
      {R"({"ProtocolFeaturesSupported":null})", 2, ""},
      {R"({"ProtocolFeaturesSupported":{"ExpandQuery":"yes"}})", 2, ""},
      {R"({"ProtocolFeaturesSupported":{"ExpandQuery":{"Links":true,"Levels":true}}})", 2, ""},
      {R"({"ProtocolFeaturesSupported":{"ExpandQuery":{"NoLinks":true}}})", 2, "$expand=."},
      {R"({"ProtocolFeaturesSupported":{"ExpandQuery":{"ExpandAll":true}}})", 1, "$expand=*"},
      // The DMTF public mockups: everything, up to 6 levels.
      {R"({"ProtocolFeaturesSupported":{"ExpandQuery":{"ExpandAll":true,"Levels":true,
          "MaxLevels":6,"Links":true,"NoLinks":true}}})",
       2, "$expand=.($levels=2)"},
      {R"({"ProtocolFeaturesSupported":{"ExpandQuery":{"ExpandAll":true,"Levels":true,
          "MaxLevels":6}}})",
       1, "$expand=*($levels=1)"},
      // Levels without MaxLevels: one level is all that is known to work.
      {R"({"ProtocolFeaturesSupported":{"ExpandQuery":{"NoLinks":true,"Levels":true}}})", 2,
       "$expand=.($levels=1)"},
      {R"({"ProtocolFeaturesSupported":{"ExpandQuery":{"NoLinks":true,"Levels":true,
          "MaxLevels":"3"}}})",
       2, "$expand=.($levels=1)"},
      {R"({"ProtocolFeaturesSupported":{"ExpandQuery":{"NoLinks":"true","ExpandAll":1}}})", 2, ""},
      {"not json", 2, ""},
  }));
  CAPTURE(root, levels);
  const auto support = redfish::parseExpandSupport(root);
  CHECK(redfish::expandQuery(support, levels).value_or("") == want);
}

TEST_CASE("redfish $expand: inline resources are found by @odata.id, bare references are not",
          "[fabric][redfish]") {
  const std::string body = R"({
    "@odata.id":"/rb","Name":"Resource Blocks",
    "Members":[
      {"@odata.id":"/rb/1","Id":"1","Processors":[{"@odata.id":"/rb/1/p/0","Id":"0","UUID":"u"}],
       "Links":{"ComputerSystems":[{"@odata.id":"/s/1"}]}},
      {"@odata.id":"/rb/2","@odata.type":"#ResourceBlock.v1_4_0.ResourceBlock"},
      {"@odata.id":"/rb/3","Id":"3","Processors":[{"@odata.id":"/rb/3/p/0"}]},
      {"@odata.id":"/rb/4#/Frag","Id":"4"},
      {"@odata.id":"rb/5","Id":"5"},
      {"Id":"6"}
    ],
    "Members@odata.count":6})";
  auto found = redfish::embeddedResources(body, "collection");
  REQUIRE(found.ok());
  std::vector<std::string> links;
  for (const auto& [link, text] : *found) {
    links.push_back(link);
  }
  // 2 is a reference (annotations only), 4 and 5 have no usable @odata.id, 6 none at all (a
  // member the collection parser itself refuses), /s/1 and /rb/3/p/0 are references.
  CHECK(links == std::vector<std::string>{"/rb/1", "/rb/1/p/0", "/rb/3"});
  // The text is the object as the service sent it, nested resources included.
  const auto block = nlohmann::json::parse(found->at("/rb/1"));
  CHECK(block["Processors"][0]["UUID"] == "u");
  CHECK(nlohmann::json::parse(found->at("/rb/1/p/0"))["Id"] == "0");

  auto bad = redfish::embeddedResources("[1,2]", "collection");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == kc::errc::kProtocol);
  CHECK_FALSE(redfish::embeddedResources(std::string(40, '['), "collection").ok());
}

TEST_CASE("redfish $expand: the query is appended to a target with or without one",
          "[fabric][redfish]") {
  CHECK(redfish::withQuery("/redfish/v1/Systems", "$expand=.") == "/redfish/v1/Systems?$expand=.");
  CHECK(redfish::withQuery("/redfish/v1/Systems?$skip=2", "$expand=.") ==
        "/redfish/v1/Systems?$skip=2&$expand=.");
}
