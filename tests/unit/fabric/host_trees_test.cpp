// chassis-sim's host trees (--host-root): what each host's sysfs/procfs shows of the chassis'
// attach, detach, hot-remove, rescan and lost GPUs, read back with the node agent's own scanner
// (kc::node::scanHost) on a fake clock.

#include "tools/chassis-sim/host_trees.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <string>

#include "libcore/node/host_scan.hpp"
#include "tests/support/fakes/fake_clock.hpp"
#include "tests/support/temp_dir.hpp"
#include "tools/chassis-sim/model.hpp"

using namespace kc::chassis_sim;
using namespace std::chrono_literals;

namespace {

// GPU n (the naming rules' index) is the n-th line below: falcon-a 001300 = 0, 001800 = 1,
// 000C00 = 2, 000500 = 3; falcon-b 002F00 = 4, 004200 = 5. node-1 is on both chassis.
const char* kTopology = R"(
chassis:
  - name: falcon-a
    hosts: [{port: 48, system: node-1}, {port: 0, system: node-2}]
    gpus:
      - {gid: "001300", uuid: GPU-16a0c321-fc4f-fd47-26e7-770eb9ecf5f9, model: Tesla V100-PCIE-32GB, host: 48}
      - {gid: "001800", uuid: GPU-00000000-0000-4000-8000-000000000018, host: 48}
      - {gid: "000C00", uuid: GPU-00000000-0000-4000-8000-00000000000c, host: 0}
      - {gid: "000500", uuid: GPU-00000000-0000-4000-8000-000000000005}
  - name: falcon-b
    hosts: [{port: 7, system: node-1}]
    gpus:
      - {gid: "002F00", uuid: GPU-00000000-0000-4000-8000-00000000002f, host: 7}
      - {gid: "004200", uuid: GPU-00000000-0000-4000-8000-000000000042, healthy: false, host: 7}
)";

const std::string kUuid0 = "GPU-16a0c321-fc4f-fd47-26e7-770eb9ecf5f9";
const std::string kUuid3 = "GPU-00000000-0000-4000-8000-000000000005";

Topology topology() {
  auto t = parseTopology(kTopology);
  REQUIRE(t.ok());
  t->latencies.scale = 0;
  return std::move(t).value();
}

// A model with host trees on a fake clock; the test polls by hand (no thread).
struct Rig {
  explicit Rig(kc::chassis_sim::Millis delay = 300ms, bool needsRescan = false)
      : model(topology()) {
    HostTreeOptions options;
    options.root = dir.path().string();
    options.visibleDelay = delay;
    options.needsRescan = needsRescan;
    options.clock = &clock;
    options.onError = [this](std::string message) { errors.push_back(std::move(message)); };
    auto made = HostTrees::create(model.snapshotAll(), options);
    INFO((made.ok() ? std::string() : made.error().message));
    REQUIRE(made.ok());
    trees = std::move(*made);
    model.setChangeListener([this](const GpuChange& c) { trees->onChange(c); });
  }
  ~Rig() { model.setChangeListener(nullptr); }

  kc::node::HostRoots roots(const std::string& system) const {
    return hostTreeRoots(dir.path().string(), system);
  }
  kc::node::HostView view(const std::string& system) const {
    return kc::node::scanHost(roots(system));
  }
  // The usable GPU with that UUID on the host, or null.
  const kc::node::HostGpu* usable(const kc::node::HostView& v, const std::string& uuid) const {
    return v.byUuid(uuid);
  }

  kc::testing::TempDir dir;
  kc::testing::FakeClock clock;
  ChassisModel model;
  std::unique_ptr<HostTrees> trees;
  std::vector<std::string> errors;
};

std::optional<std::uint32_t> hostPort(const ChassisModel& m, const std::string& chassis,
                                      const std::string& gid) {
  return m.snapshot(chassis)->gpu(gid)->host;
}

}  // namespace

TEST_CASE("host trees: naming rules (folder, BDF, minor)", "[fabric][sim-hosts]") {
  auto [n, bdf] = GENERATE(table<std::size_t, std::string>({
      {0, "0000:10:00.0"},
      {5, "0000:15:00.0"},
      {0x0f, "0000:1f:00.0"},
      {239, "0000:ff:00.0"},
  }));
  CAPTURE(n);
  CHECK(hostGpuBdf(n) == bdf);
  CHECK(hostGpuMinor(n) == static_cast<std::int32_t>(n));
  const auto roots = hostTreeRoots("/run/hosts", "css-host-128");
  CHECK(roots.sysfs == "/run/hosts/css-host-128/sys");
  CHECK(roots.procfs == "/run/hosts/css-host-128/proc");
  CHECK(roots.dev == "/run/hosts/css-host-128/dev");
  CHECK(kMaxHostGpus == 240);
}

TEST_CASE("host trees: at start each host shows the GPUs attached to it on every chassis",
          "[fabric][sim-hosts]") {
  Rig rig;
  CHECK(rig.trees->systems() == std::vector<std::string>{"node-1", "node-2"});
  const auto one = rig.view("node-1");
  INFO(one.problems.size());
  REQUIRE(one.gpus.size() == 4);  // 001300, 001800 (falcon-a), 002F00, 004200 (falcon-b)
  const auto* first = one.byBdf("0000:10:00.0");
  REQUIRE(first != nullptr);
  CHECK(first->usable);
  CHECK(first->uuid == kUuid0);
  CHECK(first->minor == 0);
  CHECK(first->numaNode == 0);
  CHECK(first->model == "Tesla V100-PCIE-32GB");
  CHECK(first->devicePath() == "/dev/nvidia0");
  const auto* other = one.byBdf("0000:14:00.0");  // falcon-b's first GPU: n = 4
  REQUIRE(other != nullptr);
  CHECK(other->usable);
  CHECK(other->uuid == "GPU-00000000-0000-4000-8000-00000000002f");
  CHECK(other->minor == 4);
  // healthy: false in the topology: on the bus, no driver.
  const auto* lost = one.byBdf("0000:15:00.0");
  REQUIRE(lost != nullptr);
  CHECK_FALSE(lost->usable);
  CHECK(lost->driver.empty());

  const auto two = rig.view("node-2");
  REQUIRE(two.gpus.size() == 1);
  CHECK(two.gpus[0].bdf == "0000:12:00.0");
  CHECK(two.gpus[0].minor == 2);
  CHECK(two.gpus[0].usable);
  // The free GPU is on nobody's bus.
  CHECK(one.byBdf("0000:13:00.0") == nullptr);
  CHECK(two.byBdf("0000:13:00.0") == nullptr);
  CHECK(rig.errors.empty());
}

TEST_CASE("host trees: an attached GPU appears after the delay, a detached one goes at once",
          "[fabric][sim-hosts]") {
  Rig rig(300ms);
  REQUIRE(rig.model.assign("falcon-a", "000500", 0).ok());
  rig.trees->poll();
  CHECK(rig.view("node-2").byBdf("0000:13:00.0") == nullptr);
  rig.clock.advance(299ms);
  rig.trees->poll();
  CHECK(rig.view("node-2").byBdf("0000:13:00.0") == nullptr);
  rig.clock.advance(1ms);
  rig.trees->poll();
  const auto v = rig.view("node-2");
  const auto* g = rig.usable(v, kUuid3);
  REQUIRE(g != nullptr);
  CHECK(g->bdf == "0000:13:00.0");
  CHECK(g->minor == 3);
  CHECK(rig.view("node-1").byUuid(kUuid3) == nullptr);

  // Detach: gone before anything polls (the fabric pulled it off the bus).
  REQUIRE(rig.model.unassign("falcon-a", "000500").ok());
  CHECK(rig.view("node-2").byBdf("0000:13:00.0") == nullptr);
  REQUIRE(rig.model.unassign("falcon-a", "001300").ok());
  CHECK(rig.view("node-1").byBdf("0000:10:00.0") == nullptr);
  CHECK(rig.view("node-1").byBdf("0000:11:00.0") != nullptr);  // its neighbour stays

  // Moved to the other host: it shows there, with the same BDF and minor, after the delay.
  REQUIRE(rig.model.assign("falcon-a", "001300", 0).ok());
  rig.clock.advance(300ms);
  rig.trees->poll();
  const auto moved = rig.view("node-2");
  REQUIRE(moved.byUuid(kUuid0) != nullptr);
  CHECK(moved.byUuid(kUuid0)->bdf == "0000:10:00.0");
  CHECK(moved.byUuid(kUuid0)->minor == 0);
  CHECK(rig.errors.empty());
}

TEST_CASE("host trees: a GPU detached before its delay ends never appears", "[fabric][sim-hosts]") {
  Rig rig(300ms);
  REQUIRE(rig.model.assign("falcon-a", "000500", 0).ok());
  rig.clock.advance(100ms);
  REQUIRE(rig.model.unassign("falcon-a", "000500").ok());
  rig.clock.advance(1s);
  rig.trees->poll();
  CHECK(rig.view("node-2").byBdf("0000:13:00.0") == nullptr);
}

TEST_CASE("host trees: with no delay an attach shows before the call returns",
          "[fabric][sim-hosts]") {
  Rig rig(0ms);
  REQUIRE(rig.model.assign("falcon-a", "000500", 48).ok());
  CHECK(rig.view("node-1").byUuid(kUuid3) != nullptr);
}

TEST_CASE("host trees: a hot-remove takes the GPU off the host, a rescan brings it back",
          "[fabric][sim-hosts]") {
  Rig rig;
  const auto one = rig.roots("node-1");
  REQUIRE(kc::node::removePciFunction(one, "0000:10:00.0").ok());
  rig.trees->poll();
  CHECK(rig.view("node-1").byBdf("0000:10:00.0") == nullptr);
  CHECK(hostPort(rig.model, "falcon-a", "001300") == 48u);  // the chassis still has it there
  CHECK(rig.view("node-1").byBdf("0000:11:00.0") != nullptr);

  // A rescan on another host does not concern node-1.
  REQUIRE(kc::node::requestPciRescan(rig.roots("node-2")).ok());
  rig.trees->poll();
  CHECK(rig.view("node-1").byBdf("0000:10:00.0") == nullptr);

  REQUIRE(kc::node::requestPciRescan(one).ok());
  rig.trees->poll();
  const auto back = rig.view("node-1");
  REQUIRE(back.byUuid(kUuid0) != nullptr);
  CHECK(back.byUuid(kUuid0)->bdf == "0000:10:00.0");
  CHECK(back.byUuid(kUuid0)->minor == 0);

  // Hot-removed, then detached at the chassis: a rescan finds nothing to bring back.
  REQUIRE(kc::node::removePciFunction(one, "0000:11:00.0").ok());
  rig.trees->poll();
  REQUIRE(rig.model.unassign("falcon-a", "001800").ok());
  REQUIRE(kc::node::requestPciRescan(one).ok());
  rig.trees->poll();
  CHECK(rig.view("node-1").byBdf("0000:11:00.0") == nullptr);
  CHECK(rig.errors.empty());
}

TEST_CASE("host trees: --host-needs-rescan shows an attached GPU only after a rescan",
          "[fabric][sim-hosts]") {
  Rig rig(300ms, true);
  const auto two = rig.roots("node-2");
  // A rescan before the attach completes finds nothing.
  REQUIRE(kc::node::requestPciRescan(two).ok());
  rig.trees->poll();
  REQUIRE(rig.model.assign("falcon-a", "000500", 0).ok());
  rig.clock.advance(1h);
  rig.trees->poll();
  CHECK(rig.view("node-2").byBdf("0000:13:00.0") == nullptr);
  REQUIRE(kc::node::requestPciRescan(two).ok());
  rig.trees->poll();
  const auto v = rig.view("node-2");
  REQUIRE(v.byUuid(kUuid3) != nullptr);
  CHECK(v.byUuid(kUuid3)->bdf == "0000:13:00.0");
}

TEST_CASE("host trees: a GPU the chassis loses stays on the bus without a driver",
          "[fabric][sim-hosts]") {
  Rig rig;
  REQUIRE(rig.model.loseGpu("falcon-a", "001300").ok());
  const auto v = rig.view("node-1");
  const auto* g = v.byBdf("0000:10:00.0");
  REQUIRE(g != nullptr);
  CHECK_FALSE(g->usable);
  CHECK(g->driver.empty());
  CHECK(v.byUuid(kUuid0) == nullptr);
  // Hot-removed and rescanned, it comes back still without a driver.
  REQUIRE(kc::node::removePciFunction(rig.roots("node-1"), "0000:10:00.0").ok());
  rig.trees->poll();
  CHECK(rig.view("node-1").byBdf("0000:10:00.0") == nullptr);
  REQUIRE(kc::node::requestPciRescan(rig.roots("node-1")).ok());
  rig.trees->poll();
  const auto back = rig.view("node-1");
  REQUIRE(back.byBdf("0000:10:00.0") != nullptr);
  CHECK_FALSE(back.byBdf("0000:10:00.0")->usable);
}

TEST_CASE("host trees: a start over an earlier run's trees begins from the topology",
          "[fabric][sim-hosts]") {
  Rig rig(0ms);
  REQUIRE(rig.model.assign("falcon-a", "000500", 48).ok());
  REQUIRE(rig.view("node-1").byBdf("0000:13:00.0") != nullptr);
  ChassisModel fresh(topology());
  HostTreeOptions options;
  options.root = rig.dir.path().string();
  auto again = HostTrees::create(fresh.snapshotAll(), options);
  REQUIRE(again.ok());
  const auto v = rig.view("node-1");
  CHECK(v.byBdf("0000:13:00.0") == nullptr);
  CHECK(v.gpus.size() == 4);
  CHECK(v.problems.empty());
}

TEST_CASE("host trees: a topology with more GPUs than PCI buses is refused",
          "[fabric][sim-hosts]") {
  std::string text = "chassis:\n  - name: big\n    hosts: [{port: 1}]\n    gpus:\n";
  for (std::size_t i = 0; i <= kMaxHostGpus; ++i) {
    char line[128];
    std::snprintf(line, sizeof line,
                  "      - {gid: \"%zx\", uuid: GPU-00000000-0000-4000-8000-%012zx}\n", i + 1, i);
    text += line;
  }
  auto topo = parseTopology(text);
  REQUIRE(topo.ok());
  kc::testing::TempDir dir;
  HostTreeOptions options;
  options.root = dir.path().string();
  auto made = HostTrees::create(topo->chassis, options);
  REQUIRE_FALSE(made.ok());
  CHECK(made.error().code == "invalid");
  CHECK_THAT(made.error().message, Catch::Contains("240"));
}
