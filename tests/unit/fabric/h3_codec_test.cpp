#include "libcore/fabric/h3_codec.hpp"

#include <catch2/catch.hpp>
#include <random>
#include <string>

#include "tests/support/text_mutator.hpp"

using namespace kc::fabric;

namespace {

// A reply as the real chassis shapes it: flat string maps, GPU rows and port rows mixed.
const char* kRealShape = R"([
  {"dev_type":"GPU","Dev_GID":"001300","Host_Port#":"48","OB_GPU_GUID":"GPU-16a0c321-fc4f-fd47-26e7-770eb9ecf5f9"},
  {"dev_type":"GPU","Dev_GID":"000C00","Host_Port#":"","OB_GPU_GUID":"GPU-2"},
  {"dev_type":"NVMe","Dev_GID":"002000","Host_Port#":"0"},
  {"Port#":"48","Port_GID":"30h"},
  {"Port#":"0","Port_GID":"00h"}
])";

}  // namespace

TEST_CASE("h3: resources reply rows become GPUs and ports", "[fabric][h3]") {
  auto parsed = h3::parseResources(kRealShape);
  REQUIRE(parsed.ok());
  REQUIRE(parsed->gpus.size() == 2);
  CHECK(parsed->gpus[0].devGid == "001300");
  CHECK(parsed->gpus[0].hostPort == 48u);
  CHECK(parsed->gpus[0].guid == "GPU-16a0c321-fc4f-fd47-26e7-770eb9ecf5f9");
  CHECK_FALSE(parsed->gpus[1].hostPort.has_value());
  CHECK(parsed->ports.at(48) == "30h");
  CHECK(parsed->ports.at(0) == "00h");
}

TEST_CASE("h3: host port <-> port_gid", "[fabric][h3]") {
  auto [port, gid] = GENERATE(
      table<std::uint32_t, std::string>({{48, "30h"}, {0, "00h"}, {10, "0Ah"}, {255, "FFh"}}));
  CAPTURE(port, gid);
  CHECK(*h3::portGid(port) == gid);
  CHECK(*h3::parsePortGid(gid) == port);
  CHECK_FALSE(h3::portGid(256).ok());
  for (const char* bad : {"30", "h", "3Gh", "", "100h", "30hh"}) {
    CAPTURE(bad);
    CHECK_FALSE(h3::parsePortGid(bad).ok());
  }
}

TEST_CASE("h3: request bodies are byte-exact", "[fabric][h3]") {
  CHECK(h3::encodeAssign("0", "30h", "001300") ==
        R"({"gep":"0","port_gid":"30h","dev_gid":"001300"})");
  CHECK(h3::encodeUnassign("0", "001300") == R"({"gep":"0","dev_gid":"001300"})");
  auto req = h3::parseAllocationRequest(
      R"({"gep" : "0", "port_gid" : "30h", "dev_gid" : "001300"})", true);
  REQUIRE(req.ok());
  CHECK(req->portGid == "30h");
  CHECK(req->devGid == "001300");
  CHECK_FALSE(h3::parseAllocationRequest(R"({"gep":"0","dev_gid":"001300"})", true).ok());
  CHECK(h3::parseAllocationRequest(R"({"gep":"0","dev_gid":"001300"})", false).ok());
  CHECK_FALSE(h3::parseAllocationRequest(R"({"gep":0,"dev_gid":"001300"})", false).ok());
}

TEST_CASE("h3: allocation replies", "[fabric][h3]") {
  auto ok = h3::parseReply(R"({"Action":"assign","Result":[true],"Remark":""})");
  REQUIRE(ok.ok());
  CHECK(ok->result);
  auto quirk = h3::parseReply(R"({"Action":"assign","Result":[false],"Remark":"done"})");
  REQUIRE(quirk.ok());
  CHECK_FALSE(quirk->result);
  CHECK(quirk->remark == "done");
}

TEST_CASE("h3: malformed replies are clear errors, never a success", "[fabric][h3]") {
  auto [body, fragment] = GENERATE(table<std::string, std::string>({
      {"", "not valid JSON"},
      {"{", "not valid JSON"},
      {R"({"Action":"assign"})", "no \"Result\""},
      {R"({"Result":true})", "array of one boolean"},
      {R"({"Result":["true"]})", "array of one boolean"},
      {R"({"Result":[true,true]})", "array of one boolean"},
      {R"({"Result":[]})", "array of one boolean"},
      {R"({"Result":[true],"Remark":5})", "Remark"},
      {R"({"Action":7,"Result":[true]})", "Action"},
      {R"([true])", "expected an object"},
      {"<html>502 Bad Gateway</html>", "not valid JSON"},
  }));
  CAPTURE(body);
  auto reply = h3::parseReply(body);
  REQUIRE_FALSE(reply.ok());
  CHECK(reply.error().code == "protocol");
  CHECK_THAT(reply.error().message, Catch::Contains(fragment));
}

TEST_CASE("h3: malformed resources are clear errors", "[fabric][h3]") {
  auto [body, fragment] = GENERATE(table<std::string, std::string>({
      {R"({"dev_type":"GPU"})", "expected an array"},
      {R"([1])", "expected an object"},
      {R"([{"dev_type":"GPU","Host_Port#":"48"}])", "Dev_GID"},
      {R"([{"dev_type":"GPU","Dev_GID":"xyz"}])", "Dev_GID"},
      {R"([{"dev_type":"GPU","Dev_GID":1300}])", "expected a string"},
      {R"([{"dev_type":"GPU","Dev_GID":"001300","Host_Port#":48}])", "expected a string"},
      {R"([{"dev_type":"GPU","Dev_GID":"001300","Host_Port#":"-1"}])", "decimal"},
      {R"([{"dev_type":"GPU","Dev_GID":"001300","Host_Port#":"999"}])", "above"},
      {R"([{"dev_type":"GPU","Dev_GID":"001300"},{"dev_type":"GPU","Dev_GID":"001300"}])", "twice"},
      {R"([{"dev_type":["GPU"]}])", "dev_type"},
      {std::string(100, '[') + std::string(100, ']'), "deeper"},
  }));
  CAPTURE(body);
  auto parsed = h3::parseResources(body);
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.error().code == "protocol");
  CHECK_THAT(parsed.error().message, Catch::Contains(fragment));
}

TEST_CASE("h3: huge bodies are refused before parsing", "[fabric][h3]") {
  std::string huge = "[" + std::string(9 * 1024 * 1024, ' ') + "]";
  auto parsed = h3::parseResources(huge);
  REQUIRE_FALSE(parsed.ok());
  CHECK_THAT(parsed.error().message, Catch::Contains("over the limit"));
}

TEST_CASE("h3: fuzzed replies never crash and never read as success", "[fabric][h3][fuzz]") {
  std::mt19937 rng(20240917);
  const std::string seeds[] = {kRealShape, R"({"Action":"assign","Result":[true],"Remark":""})"};
  const std::string alphabet = "{}[]\":,01tfnGPU#_ \\ux";
  for (int i = 0; i < 3000; ++i) {
    const std::string body =
        kc::testing::mutateText(seeds[static_cast<std::size_t>(i) % 2], rng, alphabet);
    auto resources = h3::parseResources(body);
    auto reply = h3::parseReply(body);
    if (reply.ok()) {
      // A reply that parses must really say Result:[true] / [false] in a well-formed object.
      CHECK(body.find("Result") != std::string::npos);
    }
    if (resources.ok()) {
      for (const auto& gpu : resources->gpus) {
        CHECK(h3::isValidDevGid(gpu.devGid));
      }
    }
  }
}
