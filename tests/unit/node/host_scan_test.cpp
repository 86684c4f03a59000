// The host view read from fake sysfs/procfs trees written with the real layout (FakeHostTree):
// GPUs appearing, unbinding, leaving the bus and trading places, broken and oversized
// information files, holders found through /proc/<pid>/fd, and the remove/rescan writes.

#include "libcore/node/host_scan.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "libcore/node/fake_host.hpp"
#include "tests/support/temp_dir.hpp"

using kc::node::FakeGpu;
using kc::node::FakeHostTree;
using kc::node::HostRoots;
using kc::node::HostView;
using kc::node::OpenHolder;

namespace {

namespace fs = std::filesystem;

std::string uuidOf(int i) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "GPU-5d1c4f6e-2a8b-4c3d-9e7f-%012x", i);
  return buf;
}

FakeGpu gpu(const std::string& bdf, int i) {
  FakeGpu g;
  g.bdf = bdf;
  g.uuid = uuidOf(i);
  g.minor = i;
  g.numaNode = i % 2;
  return g;
}

// A fake host in a temp dir; tests write through `tree` and read through the scanner.
struct Host {
  kc::testing::TempDir dir;
  HostRoots roots{dir.file("sys"), dir.file("proc"), dir.file("dev")};
  FakeHostTree tree{roots};

  void add(const FakeGpu& g) { REQUIRE(tree.addGpu(g).ok()); }
  HostView scan() const { return kc::node::scanHost(roots); }
  std::string informationPath(const std::string& bdf) const {
    return roots.procfs + "/driver/nvidia/gpus/" + bdf + "/information";
  }
};

std::vector<std::string> bdfs(const HostView& v) {
  std::vector<std::string> out;
  for (const auto& g : v.gpus) {
    out.push_back(g.bdf);
  }
  return out;
}

}  // namespace

TEST_CASE("scanHost reads GPUs from the real layout and skips other functions", "[node]") {
  Host h;
  REQUIRE(h.tree.ready().ok());
  h.add(gpu("0000:86:00.0", 1));
  h.add(gpu("0000:3b:00.0", 0));
  REQUIRE(h.tree.addPciFunction("0000:00:01.0", "0x8086", "0x060400").ok());  // root port
  REQUIRE(h.tree.addPciFunction("0000:3b:00.1", "0x10de", "0x040300").ok());  // GPU's audio
  REQUIRE(h.tree.addPciFunction("0000:3c:00.0", "0x1002", "0x030000").ok());  // AMD GPU
  const HostView v = h.scan();
  CHECK(v.problems.empty());
  REQUIRE(bdfs(v) == std::vector<std::string>{"0000:3b:00.0", "0000:86:00.0"});
  const auto& g = v.gpus[1];
  CHECK(g.uuid == uuidOf(1));
  CHECK(g.minor == 1);
  CHECK(g.numaNode == 1);
  CHECK(g.driver == "nvidia");
  CHECK(g.model == "NVIDIA H100 80GB HBM3");
  CHECK(g.usable);
  CHECK(g.reason.empty());
  CHECK(g.devicePath() == "/dev/nvidia1");
  CHECK(fs::is_regular_file(h.roots.dev + "/nvidia1"));
  REQUIRE(v.byUuid(uuidOf(0)) != nullptr);
  CHECK(v.byUuid(uuidOf(0))->bdf == "0000:3b:00.0");
  CHECK(h.scan() == v);  // nothing changed, nothing differs
  CHECK(fs::exists(h.roots.sysfs + "/bus/pci/devices/0000:3c:00.0/vendor"));
  REQUIRE(h.tree.removeGpu("0000:3c:00.0").ok());
  CHECK_FALSE(fs::exists(h.roots.sysfs + "/bus/pci/devices/0000:3c:00.0"));
  CHECK(h.scan() == v);
}

TEST_CASE("a GPU appearing late is seen by the next scan after a rescan", "[node]") {
  Host h;
  h.add(gpu("0000:3b:00.0", 0));
  CHECK(h.scan().gpus.size() == 1);
  CHECK_FALSE(h.tree.takeRescanRequest());
  REQUIRE(kc::node::requestPciRescan(h.roots).ok());
  // The simulator acts on the request: the hot-added GPU shows up.
  REQUIRE(h.tree.takeRescanRequest());
  CHECK_FALSE(h.tree.takeRescanRequest());  // consumed
  h.add(gpu("0000:86:00.0", 1));
  const HostView v = h.scan();
  REQUIRE(bdfs(v) == std::vector<std::string>{"0000:3b:00.0", "0000:86:00.0"});
  CHECK(v.gpus[1].usable);
  CHECK(v.byUuid(uuidOf(1)) == &v.gpus[1]);
}

TEST_CASE("a GPU whose driver is unbound is present but not usable", "[node]") {
  Host h;
  h.add(gpu("0000:3b:00.0", 0));
  REQUIRE(h.tree.setDriverBound("0000:3b:00.0", false).ok());
  HostView v = h.scan();
  REQUIRE(v.gpus.size() == 1);
  CHECK_FALSE(v.gpus[0].usable);
  CHECK(v.gpus[0].reason == "no driver bound");
  CHECK(v.gpus[0].driver.empty());
  CHECK(v.gpus[0].uuid.empty());  // the nvidia driver's procfs entry left with it
  CHECK(v.byUuid(uuidOf(0)) == nullptr);
  REQUIRE(h.tree.setDriverBound("0000:3b:00.0", true).ok());
  v = h.scan();
  CHECK(v.gpus[0].usable);
  CHECK(v.byUuid(uuidOf(0)) != nullptr);
}

TEST_CASE("a GPU bound to vfio-pci is present but not usable", "[node]") {
  Host h;
  FakeGpu g = gpu("0000:3b:00.0", 0);
  g.driverName = "vfio-pci";
  h.add(g);
  const HostView v = h.scan();
  REQUIRE(v.gpus.size() == 1);
  CHECK(v.gpus[0].driver == "vfio-pci");
  CHECK(v.gpus[0].reason == "bound to vfio-pci");
  CHECK_FALSE(v.gpus[0].usable);
}

TEST_CASE("a GPU gone from the bus is gone from the view", "[node]") {
  Host h;
  h.add(gpu("0000:3b:00.0", 0));
  h.add(gpu("0000:86:00.0", 1));
  REQUIRE(h.tree.removeGpu("0000:3b:00.0").ok());
  const HostView v = h.scan();
  CHECK(bdfs(v) == std::vector<std::string>{"0000:86:00.0"});
  CHECK(v.byBdf("0000:3b:00.0") == nullptr);
  CHECK(v.byUuid(uuidOf(0)) == nullptr);
  CHECK(v.problems.empty());
  CHECK_FALSE(fs::exists(h.roots.dev + "/nvidia0"));
  CHECK(h.tree.removeGpu("0000:3b:00.0").error().code == "not_found");
}

TEST_CASE("two GPUs swapped between BDFs are found at their new functions", "[node]") {
  Host h;
  h.add(gpu("0000:3b:00.0", 0));
  h.add(gpu("0000:86:00.0", 1));
  CHECK(h.scan().byUuid(uuidOf(0))->bdf == "0000:3b:00.0");
  REQUIRE(h.tree.removeGpu("0000:3b:00.0").ok());
  REQUIRE(h.tree.removeGpu("0000:86:00.0").ok());
  FakeGpu a = gpu("0000:86:00.0", 0);
  FakeGpu b = gpu("0000:3b:00.0", 1);
  h.add(a);
  h.add(b);
  const HostView v = h.scan();
  REQUIRE(v.byUuid(uuidOf(0)) != nullptr);
  CHECK(v.byUuid(uuidOf(0))->bdf == "0000:86:00.0");
  CHECK(v.byUuid(uuidOf(0))->devicePath() == "/dev/nvidia0");
  CHECK(v.byUuid(uuidOf(1))->bdf == "0000:3b:00.0");
}

TEST_CASE("a malformed information file makes the GPU unusable, naming what is wrong", "[node]") {
  const auto [text, words] = GENERATE(table<std::string, std::string>({
      {"", "no \"GPU UUID\""},
      {"GPU UUID: \t ??\nDevice Minor: \t 0\n", "'?\?'"},
      {"GPU UUID: \t GPU-5d1c4f6e-2a8b-4c3d-9e7f-000000000000\nDevice Minor: \t 300\n", "'300'"},
      {"GPU UUID: \t GPU-5d1c4f6e-2a8b-4c3d-9e7f-000000000000\n", "no \"Device Minor\""},
      {std::string("\0\0\0\xff", 4), "no \"GPU UUID\""},
  }));
  CAPTURE(text);
  Host h;
  h.add(gpu("0000:3b:00.0", 0));
  h.dir.write("proc/driver/nvidia/gpus/0000:3b:00.0/information", text);
  const HostView v = h.scan();
  REQUIRE(v.gpus.size() == 1);
  CHECK_FALSE(v.gpus[0].usable);
  CHECK_THAT(v.gpus[0].reason, Catch::StartsWith("information: ") && Catch::Contains(words));
  CHECK(v.gpus[0].uuid.empty());
  CHECK(v.byUuid(uuidOf(0)) == nullptr);
}

TEST_CASE("an information file over the limit is refused without reading it", "[node]") {
  Host h;
  h.add(gpu("0000:3b:00.0", 0));
  h.add(gpu("0000:86:00.0", 1));
  // 1 MiB of real text, and a 4 GiB sparse file that a reader reading it all would choke on.
  h.dir.write("proc/driver/nvidia/gpus/0000:3b:00.0/information", std::string(1 << 20, 'x'));
  fs::resize_file(h.informationPath("0000:86:00.0"), std::uintmax_t{4} << 30);
  const auto t0 = std::chrono::steady_clock::now();
  const HostView v = h.scan();
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(took < std::chrono::seconds(1));
  REQUIRE(v.gpus.size() == 2);
  for (const auto& g : v.gpus) {
    CAPTURE(g.bdf);
    CHECK_FALSE(g.usable);
    CHECK(g.reason == "information file too large");
  }
  REQUIRE(v.problems.size() == 2);
  CHECK_THAT(v.problems[0], Catch::StartsWith("0000:3b:00.0: ") && Catch::Contains("16384"));
  CHECK_THAT(v.problems[1], Catch::StartsWith("0000:86:00.0: "));
}

TEST_CASE("two functions reporting one UUID are both withheld", "[node]") {
  Host h;
  h.add(gpu("0000:3b:00.0", 0));
  FakeGpu twin = gpu("0000:86:00.0", 1);
  twin.uuid = uuidOf(0);
  h.add(twin);
  const HostView v = h.scan();
  REQUIRE(v.gpus.size() == 2);
  CHECK(v.gpus[0].reason == "UUID also at 0000:86:00.0");
  CHECK(v.gpus[1].reason == "UUID also at 0000:3b:00.0");
  CHECK(v.byUuid(uuidOf(0)) == nullptr);
  REQUIRE(v.problems.size() == 1);
  CHECK_THAT(v.problems[0], Catch::Contains(uuidOf(0)));
}

TEST_CASE("a host without the PCI devices directory gives an empty view and a problem", "[node]") {
  kc::testing::TempDir dir;
  const HostView v = kc::node::scanHost(HostRoots{dir.file("nosys"), dir.file("noproc"), ""});
  CHECK(v.gpus.empty());
  REQUIRE(v.problems.size() == 1);
  CHECK_THAT(v.problems[0], Catch::Contains("nosys/bus/pci/devices"));
}

TEST_CASE("openHolders finds the processes holding a GPU's device node", "[node]") {
  Host h;
  h.add(gpu("0000:3b:00.0", 0));
  h.add(gpu("0000:86:00.0", 1));
  const HostView v = h.scan();
  const std::string dev0 = v.gpus[0].devicePath();
  const std::string dev1 = v.gpus[1].devicePath();
  REQUIRE(h.tree.holdOpen(4242, "python3", dev0).ok());
  REQUIRE(h.tree.holdOpen(4242, "python3", dev0).ok());  // two fds, one holder
  REQUIRE(h.tree.holdOpen(77, "nvidia-smi", dev0).ok());
  REQUIRE(h.tree.holdOpen(91, "train", dev1 + " (deleted)").ok());  // node unlinked while open
  REQUIRE(h.tree.holdOpen(5, "bash", "/dev/null").ok());
  const auto report = kc::node::openHolders(h.roots, {dev0, dev1, "/dev/nvidia2"});
  CHECK(report.unreadable == 0);
  CHECK(report.holders == std::map<std::string, std::vector<OpenHolder>>{
                              {"/dev/nvidia0", {{77, "nvidia-smi"}, {4242, "python3"}}},
                              {"/dev/nvidia1", {{91, "train"}}},
                          });
  REQUIRE(h.tree.release(77).ok());
  REQUIRE(h.tree.release(91).ok());
  CHECK(kc::node::openHolders(h.roots, {dev0, dev1}).holders ==
        std::map<std::string, std::vector<OpenHolder>>{{"/dev/nvidia0", {{4242, "python3"}}}});
  CHECK(kc::node::openHolders(h.roots, {}).holders.empty());
  CHECK(h.tree.release(77).error().code == "not_found");

  if (::geteuid() != 0) {  // root reads every fd directory whatever its mode
    ::chmod((h.roots.procfs + "/4242/fd").c_str(), 0);
    const auto hidden = kc::node::openHolders(h.roots, {dev0});
    CHECK(hidden.unreadable == 1);
    CHECK(hidden.holders.empty());
    ::chmod((h.roots.procfs + "/4242/fd").c_str(), 0755);
  }
  // No procfs at all: nothing seen is not "nobody holds it".
  CHECK(kc::node::openHolders(HostRoots{"", h.dir.file("noproc"), ""}, {dev0}).unreadable == 1);
}

TEST_CASE("removePciFunction writes the remove file the simulator then consumes", "[node]") {
  Host h;
  h.add(gpu("0000:3b:00.0", 0));
  h.add(gpu("0000:86:00.0", 1));
  CHECK(h.tree.takeRemoveRequests().empty());
  REQUIRE(kc::node::removePciFunction(h.roots, "0000:3B:00.0").ok());
  CHECK(h.tree.takeRemoveRequests() == std::vector<std::string>{"0000:3b:00.0"});
  CHECK(h.tree.takeRemoveRequests().empty());
  REQUIRE(h.tree.removeGpu("0000:3b:00.0").ok());
  const auto gone = kc::node::removePciFunction(h.roots, "0000:3b:00.0");
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.error().code == "not_found");
  CHECK(h.scan().gpus.size() == 1);
}

TEST_CASE("removePciFunction refuses a bdf that is not one", "[node]") {
  Host h;
  h.add(gpu("0000:3b:00.0", 0));
  const auto bdf = GENERATE(as<std::string>{}, "../x", "", "0000:3b:00.0/../..", "../../../..",
                            "0000:3b:00.8", "0000:3b:00.0\n");
  CAPTURE(bdf);
  const auto s = kc::node::removePciFunction(h.roots, bdf);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code == "invalid");
  CHECK(h.tree.takeRemoveRequests().empty());
}

TEST_CASE("requestPciRescan on a host without the file says so", "[node]") {
  kc::testing::TempDir dir;
  const auto s = kc::node::requestPciRescan(HostRoots{dir.file("nosys"), "", ""});
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code == "not_found");
}

TEST_CASE("FakeHostTree refuses what a bus would not hold", "[node]") {
  Host h;
  h.add(gpu("0000:3b:00.0", 0));
  CHECK(h.tree.addGpu(gpu("0000:3B:00.0", 1)).error().code == "already_exists");
  CHECK(h.tree.addGpu(gpu("3b:00.0", 1)).error().code == "invalid");
  CHECK(h.tree.addPciFunction("0000:3b:00.0", "0x8086", "0x060400").error().code ==
        "already_exists");
  CHECK(h.tree.setDriverBound("0000:99:00.0", true).error().code == "not_found");
  CHECK(h.tree.holdOpen(0, "x", "/dev/nvidia0").error().code == "invalid");
}

TEST_CASE("scanHost reads this machine's own sysfs without a problem", "[node]") {
  // Real sysfs reports 4096 bytes for every attribute file and procfs 0: sizes must come from
  // reading, which a fake tree's plain files cannot show.
  if (!fs::is_directory("/sys/bus/pci/devices") || fs::is_empty("/sys/bus/pci/devices")) {
    WARN("no PCI functions in /sys: nothing to read");
    return;
  }
  const HostView v = kc::node::scanHost(HostRoots{});
  CAPTURE(v.problems);
  CHECK(v.problems.empty());
  for (const auto& g : v.gpus) {
    CAPTURE(g.bdf, g.reason);
    CHECK(kc::node::isBdf(g.bdf));
    CHECK((g.usable ? !g.uuid.empty() && g.minor.has_value() : !g.reason.empty()));
  }
}
