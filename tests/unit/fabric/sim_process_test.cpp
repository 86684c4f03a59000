// The chassis-sim executable as a separate process: flags, --help, and both drivers against it.

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <string>

#include "libcore/fabric/h3_driver.hpp"
#include "libcore/fabric/redfish_driver.hpp"
#include "libcore/net/http_client.hpp"
#include "libcore/node/host_scan.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/wait.hpp"
#include "tests/unit/fabric/support.hpp"

using namespace kc::fabric;

namespace {

using kc::testing::ChildOutput;
using kc::testing::ChildProcess;
constexpr auto kLimit = std::chrono::seconds(20);

const std::string kBin = CHASSIS_SIM_BIN;
const std::string kTestbed = CHASSIS_SIM_TESTBED;

// --host-root: one chassis without operation latency (so --latency-scale 1 leaves the host
// delay as given). By the documented rules GPU n (file order) is at 0000:<10+n>:00.0 with
// minor n, in <root>/<system>/{sys,proc,dev}.
constexpr const char* kHostTopology = R"(
latency: {inventory: [0, 0], unassign: [0, 0], assign: [0, 0]}
chassis:
  - name: falcon-0
    hosts: [{port: 48, system: css-host-128}, {port: 0, system: css-host-129}]
    gpus:
      - {gid: "001300", uuid: GPU-16a0c321-fc4f-fd47-26e7-770eb9ecf5f9, host: 48}
      - {gid: "000500", uuid: GPU-0f1e2d3c-4b5a-4697-8877-665544332211}
)";
const std::string kAttachedUuid = "GPU-16a0c321-fc4f-fd47-26e7-770eb9ecf5f9";  // n = 0
const std::string kFreeUuid = "GPU-0f1e2d3c-4b5a-4697-8877-665544332211";      // n = 1

kc::node::HostRoots hostRoots(const test::TempDir& dir, const std::string& system) {
  const std::string base = dir.file("hosts/" + system);
  return {base + "/sys", base + "/proc", base + "/dev"};
}

bool usableAt(const kc::node::HostRoots& roots, const std::string& uuid, const std::string& bdf) {
  const auto view = kc::node::scanHost(roots);
  const auto* gpu = view.byUuid(uuid);
  return gpu != nullptr && gpu->bdf == bdf;
}

bool onBus(const kc::node::HostRoots& roots, const std::string& bdf) {
  return kc::node::scanHost(roots).byBdf(bdf) != nullptr;
}

std::unique_ptr<H3Driver> h3Driver(const std::string& firstLine) {
  const auto at = firstLine.find("http://");
  REQUIRE(at != std::string::npos);
  H3Options h3;
  h3.chassis = "falcon-0";
  h3.baseUrl = firstLine.substr(at, firstLine.find(' ', at) - at) + "/chassis/falcon-0";
  h3.sleeper = [](Millis) {};
  auto driver = H3Driver::create(h3);
  REQUIRE(driver.ok());
  return std::move(*driver);
}

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
  CHECK_THAT(help, Catch::Contains("--host-root"));
  CHECK_THAT(help, Catch::Contains("--host-visible-delay-ms"));
  CHECK_THAT(help, Catch::Contains("--host-needs-rescan"));
}

TEST_CASE("chassis-sim process: the host flags need --host-root", "[fabric][sim-process]") {
  ChildProcess child({kBin, "--topology", kTestbed, "--host-needs-rescan"},
                     ChildOutput::kCaptureMerged);
  const std::string out = child.readAll();
  CHECK(child.waitExit(kLimit) == 2);
  CHECK_THAT(out, Catch::Contains("--host-root"));
}

TEST_CASE(
    "chassis-sim process: --host-root shows attach after the delay, detach at once, hot-remove "
    "and rescan",
    "[fabric][sim-process][sim-hosts]") {
  test::TempDir dir;
  const std::string topology = dir.write("topology.yaml", kHostTopology);
  ChildProcess child({kBin, "--topology", topology, "--port", "0", "--host-root", dir.file("hosts"),
                      "--host-visible-delay-ms", "1500"},
                     ChildOutput::kCaptureMerged);
  const std::string first = child.readLine(kLimit).value_or("");
  INFO(first);
  auto driver = h3Driver(first);
  const auto a = hostRoots(dir, "css-host-128");
  const auto b = hostRoots(dir, "css-host-129");
  CHECK(usableAt(a, kAttachedUuid, "0000:10:00.0"));  // attached at start: there at once
  CHECK_FALSE(onBus(b, "0000:11:00.0"));

  const auto asked = std::chrono::steady_clock::now();
  REQUIRE(driver->attach("falcon-0.000500", "0").ok());
  CHECK_FALSE(onBus(b, "0000:11:00.0"));  // the attach is done at the chassis, not yet on the bus
  REQUIRE(kc::testing::eventually([&] { return usableAt(b, kFreeUuid, "0000:11:00.0"); }));
  CHECK(std::chrono::steady_clock::now() - asked >= std::chrono::milliseconds(1500));
  CHECK(kc::node::scanHost(b).byUuid(kFreeUuid)->minor == 1);

  REQUIRE(driver->detach("falcon-0.000500").ok());
  CHECK_FALSE(onBus(b, "0000:11:00.0"));  // gone by the time the detach is answered

  // The node agent hot-removes: gone from the host, still attached at the chassis.
  REQUIRE(kc::node::removePciFunction(a, "0000:10:00.0").ok());
  REQUIRE(kc::testing::eventually([&] { return !onBus(a, "0000:10:00.0"); }));
  auto inv = driver->inventory();
  REQUIRE(inv.ok());
  CHECK(inv->find("falcon-0.001300")->hostPort == "48");
  REQUIRE(kc::node::requestPciRescan(a).ok());
  CHECK(kc::testing::eventually([&] { return usableAt(a, kAttachedUuid, "0000:10:00.0"); }));

  child.signal(SIGTERM);
  CHECK(child.waitExit(kLimit) == 0);
}

TEST_CASE("chassis-sim process: --host-needs-rescan shows an attached GPU only after a rescan",
          "[fabric][sim-process][sim-hosts]") {
  test::TempDir dir;
  const std::string topology = dir.write("topology.yaml", kHostTopology);
  ChildProcess child({kBin, "--topology", topology, "--port", "0", "--host-root", dir.file("hosts"),
                      "--host-visible-delay-ms", "0", "--host-needs-rescan"},
                     ChildOutput::kCaptureMerged);
  const std::string first = child.readLine(kLimit).value_or("");
  INFO(first);
  auto driver = h3Driver(first);
  const auto a = hostRoots(dir, "css-host-128");
  REQUIRE(driver->attach("falcon-0.000500", "48").ok());
  // A hot-remove of the other GPU, once acted on, proves the simulator has read this host's
  // requests since the attach: the new GPU (no delay) would be there by now without the flag.
  REQUIRE(kc::node::removePciFunction(a, "0000:10:00.0").ok());
  REQUIRE(kc::testing::eventually([&] { return !onBus(a, "0000:10:00.0"); }));
  CHECK_FALSE(onBus(a, "0000:11:00.0"));
  REQUIRE(kc::node::requestPciRescan(a).ok());
  CHECK(kc::testing::eventually([&] {
    return usableAt(a, kFreeUuid, "0000:11:00.0") && usableAt(a, kAttachedUuid, "0000:10:00.0");
  }));

  child.signal(SIGTERM);
  CHECK(child.waitExit(kLimit) == 0);
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
  // A composition without an Id is refused as the DMTF Redfish Interface Emulator refuses it.
  kc::net::ClientOptions o;
  o.baseUrl = base;
  auto http = kc::net::HttpClient::create(o);
  REQUIRE(http);
  auto bare = (*http)->request("POST", "/chassis/falcon-1/redfish/v1/Systems",
                               R"({"Links":{"ResourceBlocks":[]}})",
                               {{"Content-Type", "application/json"}});
  REQUIRE(bare);
  CHECK(bare->status == 400);
  CHECK_THAT(bare->body, Catch::Contains("Missing attribute: Id"));
  child.signal(SIGTERM);
  CHECK(child.waitExit(kLimit) == 0);
}
