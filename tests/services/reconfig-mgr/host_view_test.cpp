// The node as the judge of what it has, end to end on the development control plane: chassis-sim
// writes each node's sysfs and procfs as a real host shows its GPUs (--host-root: hot-add after
// an attach, gone after a detach, hot-remove and rescan acted on), the real disaggpu-devplugin
// reads them, reconfig-mgr moves GPUs, the test plays kubecomp-sched.

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "tests/services/reconfig-mgr/cluster.hpp"

using kc::reconfig::testing::ClusterSpec;
using kc::reconfig::testing::SimCluster;
using nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// chassis-sim's host tree rules (docs/fabric.md): the n-th GPU of the topology sits at BDF
// 0000:<0x10+n>:00.0 with minor n.
std::string bdfOf(int n) {
  char b[16];
  std::snprintf(b, sizeof(b), "0000:%02x:00.0", 0x10 + n);
  return b;
}

// The latest move of `gpu` in the pool status, or null.
json moveOf(SimCluster& c, const std::string& gpu) {
  json found = json::object();
  for (const auto& m : c.poolStatus().value("moves", json::array())) {
    if (m.value("gpu", "") == gpu) {
      found = m;
    }
  }
  return found;
}

json usageOf(SimCluster& c, const std::string& node) {
  auto n = c.nodes().get("", node);
  if (!n) {
    return json::object();
  }
  const std::string text = (*n)["metadata"]
                               .value("annotations", json::object())
                               .value(std::string(kc::api::kUsageAnnotation), "{}");
  return json::parse(text, nullptr, false);
}

ClusterSpec twoNodes(std::vector<std::string> pluginFlags, bool needsRescan) {
  ClusterSpec s;
  s.nodes = {"n1", "n2"};
  s.chassis["c0"] = {{"1", "n1"}, {"2", ""}};
  s.hostView = true;
  s.hostNeedsRescan = needsRescan;
  s.pluginFlags = std::move(pluginFlags);
  return s;
}

}  // namespace

TEST_CASE(
    "host view: a GPU attached at the chassis but not yet seen by its node is not offered and "
    "the pod waits, until the node's rescan shows it",
    "[reconfig][devplugin][e2e]") {
  // The kernel misses the hot-add (the GPU shows only after a rescan); the node rescans by
  // itself after 2 s of a GPU the pool says is attached but the host does not show.
  SimCluster c(twoNodes({"--rescan-after-seconds", "2"}, true));
  c.startManager();
  REQUIRE(c.waitAllocatable("n1", 1));
  c.createPod("train", 1, "n2");
  // Attached at the chassis, Verifying waits for the node.
  REQUIRE(c.pools().until(
      [&](const kc::kube::Store&) { return moveOf(c, "c0.2").value("phase", "") == "Verifying"; },
      20s));
  REQUIRE(c.simGpus().at("c0.2") == "n2");
  REQUIRE(c.nodes().until(
      [&](const kc::kube::Store&) {
        return usageOf(c, "n2").value("notVisible", json::object()).contains("c0.2");
      },
      10s));
  CHECK(c.allocatable("n2") == 0);  // not offered to kubelet
  CHECK(moveOf(c, "c0.2").value("phase", "") == "Verifying");
  // The node's rescan brings it: offered, the move verified by the node, the pod runs.
  REQUIRE(c.waitAllocatable("n2", 1, 20s));
  REQUIRE(c.pools().until(
      [&](const kc::kube::Store&) { return moveOf(c, "c0.2").value("phase", "") == "Succeeded"; },
      20s));
  CHECK(moveOf(c, "c0.2").value("message", "").find("host") != std::string::npos);
  CHECK(usageOf(c, "n2")["hostVisible"] == json::array({"c0.2"}));
  c.bindAndWaitRunning("train", "n2");
  c.invariants();
}

TEST_CASE(
    "host view: a GPU whose device node a process holds open is never hot-removed, the move "
    "waits, says why, and goes on once released",
    "[reconfig][devplugin][e2e]") {
  ClusterSpec spec = twoNodes({"--hot-remove"}, false);
  spec.chassis["c0"] = {{"1", "n1"}};
  SimCluster c(spec);
  c.startManager();
  REQUIRE(c.waitAllocatable("n1", 1));
  // A process outside any pod (a stuck tool) holds /dev/nvidia0 of c0.1 (GPU 0) open on n1.
  const std::string proc = c.hostRoot("n1") + "/proc/4242";
  fs::create_directories(proc + "/fd");
  std::ofstream(proc + "/comm") << "nvidia-smi\n";
  fs::create_symlink("/dev/nvidia0", proc + "/fd/3");
  c.createPod("train", 1, "n2");
  REQUIRE(c.pools().until(
      [&](const kc::kube::Store&) {
        return moveOf(c, "c0.1").value("message", "").find("pid 4242 (nvidia-smi)") !=
               std::string::npos;
      },
      20s));
  CHECK(moveOf(c, "c0.1").value("phase", "") == "Draining");
  CHECK(c.simGpus().at("c0.1") == "n1");  // never detached while held
  CHECK(fs::exists(c.hostRoot("n1") + "/sys/bus/pci/devices/" + bdfOf(0)));  // nor removed
  CHECK(usageOf(c, "n1")["removeBlocked"].contains("c0.1"));
  // Released: the node hot-removes it, then reconfig-mgr detaches and moves it.
  fs::remove_all(proc);
  REQUIRE(c.waitAllocatable("n2", 1, 30s));
  REQUIRE(c.pools().until(
      [&](const kc::kube::Store&) { return moveOf(c, "c0.1").value("phase", "") == "Succeeded"; },
      20s));
  c.bindAndWaitRunning("train", "n2");
  c.invariants();
}

TEST_CASE("host view: a GPU whose driver goes away turns Unhealthy and back without a restart",
          "[reconfig][devplugin][e2e]") {
  ClusterSpec spec = twoNodes({}, false);
  SimCluster c(spec);
  c.startManager();
  REQUIRE(c.waitAllocatable("n1", 1));
  const std::string dev = c.hostRoot("n1") + "/sys/devices/pci0000:00/" + bdfOf(0);
  const std::string info = c.hostRoot("n1") + "/proc/driver/nvidia/gpus/" + bdfOf(0);
  const std::string text = [&] {
    std::ifstream f(info + "/information");
    return std::string(std::istreambuf_iterator<char>(f), {});
  }();
  REQUIRE(text.find("GPU UUID") != std::string::npos);
  const fs::path target = fs::read_symlink(dev + "/driver");
  // Unbound (as `echo <bdf> > .../nvidia/unbind` does): the /proc entry goes with it.
  fs::remove(dev + "/driver");
  fs::remove_all(info);
  REQUIRE(c.nodes().until([&](const kc::kube::Store&) { return c.allocatable("n1") == 0; }, 10s));
  CHECK(usageOf(c, "n1")["notVisible"].contains("c0.1"));
  // Bound again: Healthy again, same plugin process.
  fs::create_symlink(target, dev + "/driver");
  fs::create_directories(info);
  std::ofstream(info + "/information") << text;
  REQUIRE(c.waitAllocatable("n1", 1, 10s));
  CHECK(usageOf(c, "n1")["hostVisible"] == json::array({"c0.1"}));
}
