// The chassis-sim executable as a separate process: flags, --help, and both drivers against it.

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <string>

#include "libcore/fabric/h3_driver.hpp"
#include "libcore/fabric/redfish_driver.hpp"
#include "tests/support/child_process.hpp"
#include "tests/unit/fabric/support.hpp"

using namespace kc::fabric;

namespace {

using kc::testing::ChildOutput;
using kc::testing::ChildProcess;
constexpr auto kLimit = std::chrono::seconds(20);

const std::string kBin = CHASSIS_SIM_BIN;
const std::string kTestbed = CHASSIS_SIM_TESTBED;

}  // namespace

TEST_CASE("chassis-sim process: --help says it is a test double that persists nothing",
          "[fabric][sim-process]") {
  ChildProcess child({kBin, "--help"}, ChildOutput::kCaptureMerged);
  const std::string help = child.readAll();
  CHECK(child.waitExit(kLimit) == 0);
  CHECK_THAT(help, Catch::Contains("PERSISTS NOTHING"));
  CHECK_THAT(help, Catch::Contains("--latency-scale"));
  CHECK_THAT(help, Catch::Contains("--dialect"));
  CHECK_THAT(help, Catch::Contains("--basic-auth"));
  CHECK_THAT(help, Catch::Contains("--redfish-profile"));
}

TEST_CASE("chassis-sim process: a bad topology fails fast with the reason",
          "[fabric][sim-process]") {
  test::TempDir dir;
  const std::string bad =
      dir.write("bad.yaml", "chassis: [{name: a, hosts: [{port: 999}], gpus: []}]\n");
  ChildProcess child({kBin, "--topology", bad, "--port", "0"}, ChildOutput::kCaptureMerged);
  const std::string out = child.readAll();
  CHECK(child.waitExit(kLimit) == 2);
  CHECK_THAT(out, Catch::Contains("0..255"));
}

TEST_CASE("chassis-sim process: both drivers against the executable, then SIGTERM",
          "[fabric][sim-process]") {
  ChildProcess child({kBin, "--topology", kTestbed, "--port", "0", "--latency-scale", "0",
                      "--basic-auth", "ops:pw"},
                     ChildOutput::kCaptureMerged);
  const std::string first = child.readLine(kLimit).value_or("");
  INFO(first);
  const auto at = first.find("http://");
  REQUIRE(at != std::string::npos);
  const std::string base = first.substr(at, first.find(' ', at) - at);

  H3Options h3;
  h3.chassis = "falcon-0";
  h3.baseUrl = base + "/chassis/falcon-0";
  h3.credentials = Credentials{"ops", "pw"};
  h3.sleeper = [](Millis) {};
  auto h3d = H3Driver::create(h3);
  REQUIRE(h3d.ok());
  auto inv = (*h3d)->inventory();
  REQUIRE(inv.ok());
  CHECK(inv->gpus.size() == 4);
  CHECK(inv->find("falcon-0.001300")->uuid == "GPU-16a0c321-fc4f-fd47-26e7-770eb9ecf5f9");
  REQUIRE((*h3d)->attach("falcon-0.000500", "0").ok());

  RedfishOptions rf;
  rf.chassis = "falcon-1";
  rf.baseUrl = base + "/chassis/falcon-1";
  rf.credentials = Credentials{"ops", "pw"};
  rf.sleeper = [](Millis) {};
  auto rfd = RedfishDriver::create(rf);
  REQUIRE(rfd.ok());
  REQUIRE((*rfd)->detach("falcon-1.002F00").ok());
  REQUIRE((*rfd)->attach("falcon-1.002F00", "css-host-129").ok());
  auto rinv = (*rfd)->inventory();
  REQUIRE(rinv.ok());
  CHECK(rinv->find("falcon-1.002F00")->hostPort == "css-host-129");
  rfd->reset();  // logs out while the simulator still runs

  child.signal(SIGTERM);
  CHECK(child.waitExit(kLimit) == 0);
}

TEST_CASE("chassis-sim process: --redfish-profile emulator serves the second Redfish profile",
          "[fabric][sim-process]") {
  ChildProcess child({kBin, "--topology", kTestbed, "--port", "0", "--latency-scale", "0",
                      "--dialect", "redfish", "--redfish-profile", "emulator"},
                     ChildOutput::kCaptureMerged);
  const std::string first = child.readLine(kLimit).value_or("");
  INFO(first);
  CHECK_THAT(first, Catch::Contains("redfish profile emulator"));
  const auto at = first.find("http://");
  REQUIRE(at != std::string::npos);
  const std::string base = first.substr(at, first.find(' ', at) - at);
  RedfishOptions rf;
  rf.chassis = "falcon-1";
  rf.baseUrl = base + "/chassis/falcon-1";
  rf.auth = RedfishAuth::kNone;
  rf.sleeper = [](Millis) {};
  auto rfd = RedfishDriver::create(rf);
  REQUIRE(rfd.ok());
  REQUIRE((*rfd)->detach("falcon-1.002F00").ok());                  // DELETE of the composed system
  REQUIRE((*rfd)->attach("falcon-1.002F00", "css-host-129").ok());  // POST to Systems
  auto inv = (*rfd)->inventory();
  REQUIRE(inv.ok());
  CHECK(inv->find("falcon-1.002F00")->hostPort == "css-host-129");
  child.signal(SIGTERM);
  CHECK(child.waitExit(kLimit) == 0);
}
