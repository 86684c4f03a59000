#include "libcore/fabric/redfish_codec.hpp"

#include <catch2/catch.hpp>
#include <random>
#include <string>

using namespace kc::fabric;

TEST_CASE("redfish: service root links", "[fabric][redfish]") {
  auto root = redfish::parseServiceRoot(R"({
    "@odata.id":"/redfish/v1","Systems":{"@odata.id":"/redfish/v1/Systems"},
    "CompositionService":{"@odata.id":"/redfish/v1/CompositionService"},
    "Links":{"Sessions":{"@odata.id":"/redfish/v1/SessionService/Sessions"}}})");
  REQUIRE(root.ok());
  CHECK(root->systems == "/redfish/v1/Systems");
  CHECK(root->compositionService == "/redfish/v1/CompositionService");
  CHECK(root->sessions == "/redfish/v1/SessionService/Sessions");
  auto noComp = redfish::parseServiceRoot(R"({"Systems":{"@odata.id":"/redfish/v1/Systems"}})");
  REQUIRE_FALSE(noComp.ok());
  CHECK_THAT(noComp.error().message, Catch::Contains("CompositionService"));
}

TEST_CASE("redfish: resource block with processor and system links", "[fabric][redfish]") {
  auto block = redfish::parseResourceBlock(R"({
    "@odata.id":"/redfish/v1/CompositionService/ResourceBlocks/001300","Id":"001300",
    "ResourceBlockType":["Processor"],
    "CompositionStatus":{"CompositionState":"Composed","SharingCapable":false},
    "Status":{"State":"Enabled","Health":"OK"},
    "Processors":[{"@odata.id":"/redfish/v1/CompositionService/ResourceBlocks/001300/Processors/GPU0"}],
    "Links":{"ComputerSystems":[{"@odata.id":"/redfish/v1/Systems/node-1"}]}})");
  REQUIRE(block.ok());
  CHECK(block->id == "001300");
  CHECK(block->compositionState == "Composed");
  CHECK(block->health == "OK");
  REQUIRE(block->processors.size() == 1);
  CHECK(block->systems == std::vector<std::string>{"/redfish/v1/Systems/node-1"});
}

TEST_CASE("redfish: computer system actions", "[fabric][redfish]") {
  auto sys = redfish::parseComputerSystem(R"({
    "@odata.id":"/redfish/v1/Systems/node-1","Id":"node-1",
    "Links":{"ResourceBlocks":[{"@odata.id":"/redfish/v1/CompositionService/ResourceBlocks/001300"}]},
    "Actions":{"#ComputerSystem.AddResourceBlock":{"target":"/redfish/v1/Systems/node-1/Actions/ComputerSystem.AddResourceBlock"},
               "#ComputerSystem.RemoveResourceBlock":{"target":"/x/remove"}}})");
  REQUIRE(sys.ok());
  CHECK(sys->addTarget == "/redfish/v1/Systems/node-1/Actions/ComputerSystem.AddResourceBlock");
  CHECK(sys->removeTarget == "/x/remove");
  CHECK(sys->resourceBlocks.size() == 1);
}

TEST_CASE("redfish: action and login bodies", "[fabric][redfish]") {
  CHECK(redfish::encodeBlockAction("/rb/1", std::nullopt, std::nullopt) ==
        R"({"ResourceBlock":{"@odata.id":"/rb/1"}})");
  CHECK(
      redfish::encodeBlockAction("/rb/1", std::string("\"3\""), std::string("\"7\"")) ==
      R"({"ResourceBlock":{"@odata.id":"/rb/1"},"ResourceBlockETag":"\"3\"","ComputerSystemETag":"\"7\""})");
  auto req = redfish::parseBlockAction(
      R"({"ResourceBlock":{"@odata.id":"/rb/1"},"ComputerSystemETag":"\"7\""})");
  REQUIRE(req.ok());
  CHECK(req->block == "/rb/1");
  CHECK(req->systemEtag == "\"7\"");
  CHECK_FALSE(redfish::parseBlockAction(R"({"ResourceBlock":"/rb/1"})").ok());
  CHECK(redfish::encodeLogin("admin", "p\"w") == R"({"UserName":"admin","Password":"p\"w"})");
  CHECK(redfish::parseLogin(R"({"UserName":"a","Password":"b"})").ok());
  CHECK_FALSE(redfish::parseLogin(R"({"UserName":"a"})").ok());
}

TEST_CASE("redfish: malformed documents are clear errors", "[fabric][redfish]") {
  auto [body, fragment] = GENERATE(table<std::string, std::string>({
      {R"([])", "expected an object"},
      {R"({"Id":"1"})", "@odata.id"},
      {R"({"@odata.id":"/rb/1","Id":"1"})", "CompositionStatus"},
      {R"({"@odata.id":"/rb/1","Id":"1","CompositionStatus":{}})", "CompositionState"},
      {R"({"@odata.id":"/rb/1","Id":"1","CompositionStatus":{"CompositionState":3}})",
       "CompositionState"},
      {R"({"@odata.id":"/rb/1","Id":"1","CompositionStatus":{"CompositionState":"Unused"},"Processors":{}})",
       "Processors"},
      {R"({"@odata.id":"/rb/1","Id":"1","CompositionStatus":{"CompositionState":"Unused"},"Processors":[{"@odata.id":"http://evil/x"}]})",
       "absolute path"},
      {R"({"@odata.id":"/rb/1","Id":"1","CompositionStatus":{"CompositionState":"Unused"},"Status":{"Health":1}})",
       "Health"},
      {R"({"@odata.id":"/rb/1","Id":"","CompositionStatus":{"CompositionState":"Unused"}})",
       "1..128"},
  }));
  CAPTURE(body);
  auto block = redfish::parseResourceBlock(body);
  REQUIRE_FALSE(block.ok());
  CHECK(block.error().code == "protocol");
  CHECK_THAT(block.error().message, Catch::Contains(fragment));
}

TEST_CASE("redfish: collections and error bodies", "[fabric][redfish]") {
  auto members = redfish::parseCollection(
      R"({"Members":[{"@odata.id":"/a"},{"@odata.id":"/b"}],"Members@odata.count":2})", "c");
  REQUIRE(members.ok());
  CHECK(members->size() == 2);
  CHECK_FALSE(redfish::parseCollection(R"({"Members":[{"id":"/a"}]})", "c").ok());
  CHECK_FALSE(redfish::parseCollection(R"({})", "c").ok());
  CHECK(
      redfish::describeError(
          R"({"error":{"code":"Base.1.8.GeneralError","message":"boom","@Message.ExtendedInfo":[{"Message":"detail"}]}})") ==
      "Base.1.8.GeneralError: boom; detail");
  CHECK(redfish::describeError("plain text") == "plain text");
}

TEST_CASE("redfish: fuzzed documents never crash", "[fabric][redfish][fuzz]") {
  std::mt19937 rng(7);
  const std::string seed =
      R"({"@odata.id":"/rb/1","Id":"1","CompositionStatus":{"CompositionState":"Composed"},"Status":{"Health":"OK"},"Processors":[{"@odata.id":"/p"}],"Links":{"ComputerSystems":[{"@odata.id":"/s"}]},"Actions":{"#ComputerSystem.AddResourceBlock":{"target":"/t"}}})";
  const std::string alphabet = "{}[]\":,@/ 0aZ";
  for (int i = 0; i < 3000; ++i) {
    std::string body = seed;
    for (int e = 0; e < 1 + static_cast<int>(rng() % 5); ++e) {
      const std::size_t pos = rng() % body.size();
      if (rng() % 2) {
        body[pos] = alphabet[rng() % alphabet.size()];
      } else {
        body.erase(pos, 1 + rng() % 6);
      }
      if (body.empty()) {
        break;
      }
    }
    auto block = redfish::parseResourceBlock(body);
    auto sys = redfish::parseComputerSystem(body);
    auto root = redfish::parseServiceRoot(body);
    if (block.ok()) {
      CHECK_FALSE(block->id.empty());
      for (const auto& link : block->processors) {
        CHECK(link.front() == '/');
      }
    }
    (void)sys;
    (void)root;
  }
}

TEST_CASE("redfish: collections are read in the spec form and the common deviations",
          "[fabric][redfish]") {
  auto [body, shape, members] = GENERATE(table<std::string, std::string, std::string>({
      {R"({"Members":[{"@odata.id":"/a"},{"@odata.id":"/b"}],"Members@odata.count":2})", "Members",
       "/a /b"},
      // Spec form wins over a stale Links.Members beside it.
      {R"({"Members":[{"@odata.id":"/a"}],"Links":{"Members":[{"@odata.id":"/z"}]}})", "Members",
       "/a"},
      {R"({"Links":{"Members":[{"@odata.id":"/a"},{"@odata.id":"/b"}],"Member@odata.count":2}})",
       "Links.Members", "/a /b"},
      {R"({"Members":["/a","/b"]})", "Members", "/a /b"},
      {R"({"Links":{"Members":["/a"]}})", "Links.Members", "/a"},
      {R"({"Members":null,"Links":{"Members":[{"@odata.id":"/a"}]}})", "Links.Members", "/a"},
      {R"({"Members@odata.count":0})", "empty (Members@odata.count 0, no Members)", ""},
      {R"({"Members":[]})", "Members", ""},
  }));
  CAPTURE(body);
  auto page = redfish::parseCollectionPage(body, "Redfish test collection");
  REQUIRE(page.ok());
  CHECK(page->shape == shape);
  std::string got;
  for (const auto& m : page->members) {
    got += (got.empty() ? "" : " ") + m;
  }
  CHECK(got == members);
  CHECK_FALSE(page->nextLink);
  CHECK_FALSE(page->compositionTarget);
}

TEST_CASE("redfish: a collection that fits no form says what it had", "[fabric][redfish]") {
  auto [body, fragment] = GENERATE(table<std::string, std::string>({
      {R"({"Name":"Systems","Items":[{"@odata.id":"/a"}]})",
       "lists no members: expected \"Members\""},
      {R"({"Name":"Systems","Items":[]})", "the reply has keys: Items, Name"},
      {R"({"Members@odata.count":2})", "lists no members"},  // count without a list
      {R"({"Members":"all"})", "\"Members\" is a string"},
      {R"({"Links":{"Members":{"@odata.id":"/a"}}})", "\"Links\".\"Members\" is a object"},
      {R"({"Members":[{"id":"/a"}]})", "Members[0]"},
      {R"({"Members":["http://elsewhere/a"]})", "absolute path"},
      {R"({"Members":[],"Members@odata.nextLink":5})", "nextLink\" is a number"},
      {R"({"Members":[],"Members@odata.nextLink":"http://elsewhere/s?$skip=2"})",
       "nextLink\" is not an absolute path"},
  }));
  CAPTURE(body);
  auto page = redfish::parseCollectionPage(body, "Redfish test collection");
  REQUIRE_FALSE(page.ok());
  CHECK(page.error().code == "protocol");
  CHECK_THAT(page.error().message,
             Catch::Contains("Redfish test collection") && Catch::Contains(fragment));
}

TEST_CASE("redfish: next pages and composition capabilities", "[fabric][redfish]") {
  auto page = redfish::parseCollectionPage(R"({"Members":[{"@odata.id":"/a"}],
      "Members@odata.nextLink":"/redfish/v1/Systems?$skip=1",
      "@Redfish.CollectionCapabilities":{"Capabilities":[
        {"UseCase":"ComputerSystemConstrainedComposition","Links":{"TargetCollection":{"@odata.id":"/other"}}},
        {"UseCase":"ComputerSystemComposition","Links":{"TargetCollection":{"@odata.id":"/redfish/v1/Systems"}}}]}})",
                                           "Systems");
  REQUIRE(page.ok());
  CHECK(page->nextLink == "/redfish/v1/Systems?$skip=1");
  CHECK(page->compositionTarget == "/redfish/v1/Systems");

  // A zone (not a collection) may carry the capability too; malformed capabilities only mean
  // "no specific composition offered".
  auto zone = redfish::parseCompositionTarget(R"({"@odata.id":"/z/1","Id":"1",
      "@Redfish.CollectionCapabilities":{"Capabilities":[{"UseCase":"ComputerSystemComposition",
      "Links":{"TargetCollection":{"@odata.id":"/redfish/v1/Systems"}}}]}})",
                                              "zone");
  REQUIRE(zone.ok());
  CHECK(*zone == "/redfish/v1/Systems");
  auto none = redfish::parseCompositionTarget(
      R"({"@Redfish.CollectionCapabilities":{"Capabilities":"lots"}})", "zone");
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
  CHECK_FALSE(redfish::parseCompositionTarget("[1]", "zone").ok());
}

TEST_CASE("redfish: a composition request carries an Id the service can use as a URI segment",
          "[fabric][redfish]") {
  using namespace kc::fabric::redfish;
  const std::string id = composeRequestId("host 01/a", "GPU#3");
  CHECK(id == "kubecomp-host-01-a-GPU-3");
  const std::string body = encodeComposeRequest(id, "kubecomp host 01/a + GPU#3",
                                                {"/redfish/v1/rb/c", "/redfish/v1/rb/g"});
  auto req = parseComposeRequest(body);
  REQUIRE(req);
  CHECK(req->id == id);
  CHECK(req->blocks == std::vector<std::string>{"/redfish/v1/rb/c", "/redfish/v1/rb/g"});
  // Without an Id (what the DMTF emulator refuses) the parse says so by an empty id.
  auto bare = parseComposeRequest(R"({"Links":{"ResourceBlocks":[{"@odata.id":"/x"}]}})");
  REQUIRE(bare);
  CHECK(bare->id.empty());
  CHECK_FALSE(parseComposeRequest(R"({"Id":3,"Links":{"ResourceBlocks":[]}})"));
}
