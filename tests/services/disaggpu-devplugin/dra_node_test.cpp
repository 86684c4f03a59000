// The node's own view and the DRA mode's decisions: host verdicts over the GPUPool's word
// (host_check), what a claim may be prepared with (dra_prepare), the checkpoint, and DraDriver's
// prepare / unprepare over a temp CDI directory with a fake claim source.

#include "services/disaggpu-devplugin/dra_node.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "libcore/api/dra_binding.hpp"
#include "libcore/api/dra_claim.hpp"
#include "libcore/api/dra_slice.hpp"
#include "libcore/api/names.hpp"
#include "libcore/cdi/cdi_spec.hpp"
#include "libcore/cdi/cdi_store.hpp"
#include "libcore/node/fake_host.hpp"
#include "libcore/node/host_scan.hpp"
#include "services/disaggpu-devplugin/device_state.hpp"
#include "services/disaggpu-devplugin/dra_checkpoint.hpp"
#include "services/disaggpu-devplugin/dra_driver.hpp"
#include "services/disaggpu-devplugin/dra_prepare.hpp"
#include "services/disaggpu-devplugin/host_actions.hpp"
#include "services/disaggpu-devplugin/host_check.hpp"
#include "tests/services/disaggpu-devplugin/pool_builder.hpp"
#include "tests/support/dra_objects.hpp"
#include "tests/support/fakes/fake_clock.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using kc::devplugin::NodeGpu;
using kc::devplugin::NodeInventory;
using kc::node::HostGpu;
using kc::node::HostView;
using kc::testing::GpuOpts;
using kc::testing::PoolBuilder;
using nlohmann::json;

const std::string kUuidA = "GPU-aaaaaaaa-0000-4000-8000-000000000001";
const std::string kUuidB = "GPU-aaaaaaaa-0000-4000-8000-000000000002";
const std::string kUuidC = "GPU-aaaaaaaa-0000-4000-8000-000000000003";

HostGpu hostGpu(const std::string& bdf, const std::string& uuid, int minor, bool usable = true,
                const std::string& reason = "") {
  HostGpu h;
  h.bdf = bdf;
  h.uuid = uuid;
  h.minor = minor;
  h.numaNode = 1;
  h.driver = usable ? "nvidia" : "";
  h.usable = usable;
  h.reason = reason;
  return h;
}

// Three GPUs attached to n1 in pool-a: c0.1 (A), c0.2 (B), c0.3 (C).
NodeInventory poolInventory(GpuOpts c2 = {}) {
  GpuOpts a;
  a.uuid = kUuidA;
  GpuOpts b = c2;
  b.uuid = kUuidB;
  GpuOpts c;
  c.uuid = kUuidC;
  auto pool = PoolBuilder("pool-a").gpu("c0.1", "n1", a).gpu("c0.2", "n1", b).gpu("c0.3", "n1", c);
  return kc::devplugin::nodeInventory({pool.json()}, "n1");
}

const NodeGpu& gpu(const NodeInventory& inv, const std::string& id) {
  const NodeGpu* g = inv.find(id);
  REQUIRE(g != nullptr);
  return *g;
}

}  // namespace

TEST_CASE("host view: a GPU is offered only when the host sees it with the pool's UUID",
          "[devplugin][dra]") {
  NodeInventory inv = poolInventory();
  // c0.1 seen usable; c0.2 on the bus without its driver; c0.3 not on this host at all.
  HostView view =
      kc::node::assembleHostView({hostGpu("0000:3b:00.0", kUuidA, 0),
                                  hostGpu("0000:5e:00.0", kUuidB, 1, false, "no driver bound")},
                                 {});
  kc::devplugin::applyHostView(inv, view, {});
  CHECK(inv.hostChecked);
  CHECK(gpu(inv, "c0.1").hostVisible);
  CHECK(gpu(inv, "c0.1").healthy);
  CHECK(gpu(inv, "c0.1").minor == 0);
  CHECK(gpu(inv, "c0.1").numaNode == 1);
  CHECK_FALSE(gpu(inv, "c0.2").hostVisible);
  CHECK_FALSE(gpu(inv, "c0.2").healthy);
  CHECK(gpu(inv, "c0.2").detail.find("no driver bound") != std::string::npos);
  CHECK_FALSE(gpu(inv, "c0.2").hidden);  // on the bus: kubelet sees it, Unhealthy
  CHECK(gpu(inv, "c0.3").hidden);        // never offered: not advertised at all
  const auto adv = kc::devplugin::advertisedDevices(inv);
  REQUIRE(adv.size() == 2);
  CHECK(adv[0] == kc::devplugin::Advertised{"c0.1", true, 1});
  CHECK(adv[1] == kc::devplugin::Advertised{"c0.2", false, 1});

  const auto verdicts = kc::devplugin::hostVerdicts(inv);
  CHECK(verdicts.visible == std::vector<std::string>{"c0.1"});
  CHECK(verdicts.notVisible.size() == 2);
  CHECK(verdicts.notVisible.at("c0.3").find(kUuidC) != std::string::npos);

  // Allocate refuses what the host does not back.
  auto hidden = kc::devplugin::planAllocation(inv, {{"c0.3"}});
  REQUIRE_FALSE(hidden.ok());
  CHECK(hidden.error().code == "not_found");
  CHECK_FALSE(kc::devplugin::planAllocation(inv, {{"c0.2"}}).ok());
  CHECK(kc::devplugin::planAllocation(inv, {{"c0.1"}}).ok());
}

TEST_CASE("each mode serves the GPUPools of its allocation path only", "[devplugin][dra]") {
  GpuOpts a;
  a.uuid = kUuidA;
  json dpPool = PoolBuilder("pool-dp").gpu("c0.1", "n1", a).json();
  json draPool = PoolBuilder("pool-dra").gpu("c1.1", "n1").json();
  draPool["spec"]["allocationPath"] = std::string(kc::api::kPathDra);
  const auto dp = kc::devplugin::nodeInventory({dpPool, draPool}, "n1");
  const auto dra =
      kc::devplugin::nodeInventory({dpPool, draPool}, "n1", kc::devplugin::PoolPath::kDra);
  REQUIRE(dp.gpus.size() == 1);
  CHECK(dp.gpus[0].id == "c0.1");
  REQUIRE(dra.gpus.size() == 1);
  CHECK(dra.gpus[0].id == "c1.1");
}

TEST_CASE("host view: a GPU that fell off the bus turns Unhealthy, and Healthy when back",
          "[devplugin][dra]") {
  const HostView all = kc::node::assembleHostView(
      {hostGpu("0000:3b:00.0", kUuidA, 0), hostGpu("0000:5e:00.0", kUuidB, 1),
       hostGpu("0000:86:00.0", kUuidC, 2)},
      {});
  NodeInventory inv = poolInventory();
  kc::devplugin::applyHostView(inv, all, {});
  const std::set<std::string> advertised = {"c0.1", "c0.2", "c0.3"};
  // c0.2 gone from the bus after kubelet had it: Unhealthy at once, still listed.
  const HostView gone = kc::node::assembleHostView(
      {hostGpu("0000:3b:00.0", kUuidA, 0), hostGpu("0000:86:00.0", kUuidC, 2)}, {});
  NodeInventory later = poolInventory();
  kc::devplugin::applyHostView(later, gone, advertised);
  CHECK_FALSE(gpu(later, "c0.2").hidden);
  CHECK_FALSE(gpu(later, "c0.2").healthy);
  CHECK(gpu(later, "c0.2").detail.find("PCI bus") != std::string::npos);
  // Back: Healthy again from the same inputs, no restart.
  NodeInventory back = poolInventory();
  kc::devplugin::applyHostView(back, all, advertised);
  CHECK(gpu(back, "c0.2").healthy);
  CHECK(gpu(back, "c0.2").hostVisible);
  // Two GPUs swapped between BDFs: matched by UUID, minors follow the host.
  const HostView swapped = kc::node::assembleHostView(
      {hostGpu("0000:3b:00.0", kUuidB, 1), hostGpu("0000:5e:00.0", kUuidA, 0),
       hostGpu("0000:86:00.0", kUuidC, 2)},
      {});
  NodeInventory sw = poolInventory();
  kc::devplugin::applyHostView(sw, swapped, advertised);
  CHECK(gpu(sw, "c0.1").bdf == "0000:5e:00.0");
  CHECK(gpu(sw, "c0.2").bdf == "0000:3b:00.0");
  // A pool entry without a UUID is never offered, whatever the host shows.
  auto noUuid = PoolBuilder("pool-a").rawGpu(
      {{"id", "c9.0"}, {"chassis", "c9"}, {"node", "n1"}, {"health", "Healthy"}});
  NodeInventory nu = kc::devplugin::nodeInventory({noUuid.json()}, "n1");
  kc::devplugin::applyHostView(nu, all, {"c9.0"});
  CHECK(kc::devplugin::advertisedDevices(nu).empty());
}

namespace {

kc::api::Claim allocatedClaim(const std::string& pool, const std::string& gpuId,
                              const std::string& node, const std::string& uid = "uid-1") {
  json obj = kc::testing::oneGpuClaim("train", "ml");
  obj["metadata"]["uid"] = uid;
  obj["status"] = kc::testing::fabricAllocationStatus(pool, gpuId, node, "p1");
  auto c = kc::api::parseClaim(obj);
  REQUIRE(c.ok());
  return *c;
}

NodeInventory verified() {
  NodeInventory inv = poolInventory();
  kc::devplugin::applyHostView(
      inv,
      kc::node::assembleHostView({hostGpu("0000:3b:00.0", kUuidA, 0),
                                  hostGpu("0000:5e:00.0", kUuidB, 1, false, "bound to vfio-pci")},
                                 {}),
      {});
  return inv;
}

}  // namespace

TEST_CASE("DRA prepare: only GPUs attached here and verified on this host", "[devplugin][dra]") {
  const NodeInventory inv = verified();
  auto ok =
      kc::devplugin::decidePrepare(allocatedClaim("pool-a", "c0.1", "n1"), "uid-1", "n1", inv);
  REQUIRE(ok.ok());
  REQUIRE(ok->devices.size() == 1);
  CHECK(ok->devices[0].gpuId == "c0.1");
  CHECK(ok->devices[0].uuid == kUuidA);
  CHECK(ok->devices[0].minor == 0);
  CHECK(ok->devices[0].requestNames == std::vector<std::string>{"gpu"});
  CHECK(ok->devices[0].pool == "pool-a");
  CHECK(kc::cdi::isValidDeviceName(ok->devices[0].cdiName));
  // Allocated in another node's pool (an idle GPU there, given to this pod and moved here):
  // it is attached here now, which is what counts.
  auto moved =
      kc::devplugin::decidePrepare(allocatedClaim("pool-a/n2", "c0.1", "n1"), "uid-1", "n1", inv);
  REQUIRE(moved.ok());
  CHECK(moved->devices[0].pool == "pool-a/n2");

  auto [pool, gpuId, node, uid, code, words] =
      GENERATE(table<std::string, std::string, std::string, std::string, std::string, std::string>({
          {"pool-a", "c0.1", "n1", "uid-2", "not_found", "deleted and created anew"},
          {"pool-a", "c0.1", "n2", "uid-1", "failed_precondition", "allocated for node n2"},
          {"pool-a", "c0.2", "n1", "uid-1", "failed_precondition", "not verified on this host"},
          {"pool-a", "c0.3", "n1", "uid-1", "failed_precondition", "not verified on this host"},
          {"pool-a", "c7.7", "n1", "uid-1", "failed_precondition", "shows no such GPU"},
          {"pool-b", "c0.1", "n1", "uid-1", "failed_precondition", "shows no such GPU"},
          {"pool-a/n2", "c0.3", "", "uid-1", "failed_precondition", "not verified on this host"},
      }));
  CAPTURE(pool, gpuId, node, uid);
  auto bad = kc::devplugin::decidePrepare(allocatedClaim(pool, gpuId, node), uid, "n1", inv);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == code);
  CHECK(bad.error().message.find(words) != std::string::npos);
}

TEST_CASE("DRA prepare: draining and unallocated claims are refused", "[devplugin][dra]") {
  GpuOpts draining;
  draining.draining = true;
  NodeInventory inv = poolInventory(draining);
  kc::devplugin::applyHostView(
      inv, kc::node::assembleHostView({hostGpu("0000:5e:00.0", kUuidB, 1)}, {}), {});
  auto d = kc::devplugin::decidePrepare(allocatedClaim("pool-a", "c0.2", "n1"), "uid-1", "n1", inv);
  REQUIRE_FALSE(d.ok());
  CHECK(d.error().message.find("draining") != std::string::npos);
  kc::api::Claim unallocated = allocatedClaim("pool-a", "c0.2", "n1");
  unallocated.allocation.reset();
  auto u = kc::devplugin::decidePrepare(unallocated, "uid-1", "n1", inv);
  REQUIRE_FALSE(u.ok());
  CHECK(u.error().message.find("not allocated") != std::string::npos);
}

TEST_CASE("DRA checkpoint: round trip, and what is not one is refused", "[devplugin][dra]") {
  auto claim = kc::devplugin::decidePrepare(allocatedClaim("pool-a", "c0.1", "n1"), "uid-1", "n1",
                                            verified());
  REQUIRE(claim.ok());
  kc::devplugin::PreparedClaims all{{"uid-1", *claim}};
  auto back = kc::devplugin::parseCheckpoint(kc::devplugin::serializeCheckpoint(all));
  REQUIRE(back.ok());
  CHECK(*back == all);
  for (const std::string bad :
       {"", "[]", R"({"version":2,"claims":[]})", R"({"version":1,"claims":{}})",
        R"({"version":1,"claims":[{"uid":"","namespace":"a","name":"b","devices":[]}]})",
        R"({"version":1,"claims":[{"uid":"u","namespace":"a","name":"b","devices":[{}]}]})"}) {
    CAPTURE(bad);
    auto r = kc::devplugin::parseCheckpoint(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == "invalid");
  }
}

namespace {

class FakeClaims final : public kc::devplugin::ClaimSource {
 public:
  std::map<std::string, json> objects;
  int gets = 0;
  kc::Result<json> getClaim(const std::string& ns, const std::string& name) override {
    ++gets;
    auto it = objects.find(ns + "/" + name);
    if (it == objects.end()) {
      return kc::makeError("not_found", "resourceclaims " + name + " not found");
    }
    return it->second;
  }
};

json claimObject(const std::string& name, const std::string& uid, const std::string& gpuId) {
  json obj = kc::testing::oneGpuClaim(name, "ml");
  obj["metadata"]["uid"] = uid;
  obj["status"] = kc::testing::fabricAllocationStatus("pool-a", gpuId, "n1", "p-" + name);
  return obj;
}

}  // namespace

TEST_CASE("DRA driver: prepare writes one CDI spec per claim, unprepare removes exactly it",
          "[devplugin][dra]") {
  kc::testing::TempDir dir;
  std::filesystem::create_directories(dir.file("dev"));
  std::ofstream(dir.file("dev/nvidiactl")).put('\n');
  FakeClaims claims;
  claims.objects["ml/a"] = claimObject("a", "uid-a", "c0.1");
  claims.objects["ml/b"] = claimObject("b", "uid-b", "c0.2");
  kc::devplugin::DraDriverOptions o{"n1", dir.file("checkpoint.json"), dir.file("cdi"),
                                    dir.file("dev")};
  NodeInventory inv = poolInventory();
  kc::devplugin::applyHostView(
      inv, kc::node::assembleHostView({hostGpu("0000:3b:00.0", kUuidA, 0)}, {}), {});
  auto driver = std::make_unique<kc::devplugin::DraDriver>(o, claims, [&] { return inv; });
  REQUIRE(driver->start().ok());

  auto answers = driver->prepare({{"ml", "uid-a", "a"}, {"ml", "uid-b", "b"}});
  REQUIRE(answers.size() == 2);
  CHECK(answers["uid-a"].error.empty());
  REQUIRE(answers["uid-a"].devices.size() == 1);
  const auto& dev = answers["uid-a"].devices[0];
  CHECK(dev.pool == "pool-a");
  CHECK(dev.device == kc::api::draDeviceName("c0.1"));
  REQUIRE(dev.cdiIds.size() == 1);
  CHECK(dev.cdiIds[0].starts_with(std::string(kc::api::kCdiKind) + "="));
  // c0.2 is attached per the pool but the host does not see it: refused, nothing written.
  CHECK(answers["uid-b"].error.find("not verified on this host") != std::string::npos);
  kc::cdi::SpecDir specs(dir.file("cdi"));
  CHECK(specs.tags() == std::vector<std::string>{"uid-a"});
  auto spec = specs.read("uid-a");
  REQUIRE(spec.ok());
  auto gpus = kc::cdi::parseOurSpec(*spec);
  REQUIRE(gpus.ok());
  REQUIRE(gpus->size() == 1);
  CHECK((*gpus)[0].uuid == kUuidA);
  CHECK((*gpus)[0].minor == 0);

  // Repeated by kubelet: the same answer, no second read of the claim.
  const int gets = claims.gets;
  auto again = driver->prepare({{"ml", "uid-a", "a"}});
  CHECK(again["uid-a"].devices[0].cdiIds == dev.cdiIds);
  CHECK(claims.gets == gets);

  // A restart keeps the prepared claim; an orphan spec (a crash before the checkpoint) goes.
  REQUIRE(specs.write("uid-orphan", *spec).ok());
  driver = std::make_unique<kc::devplugin::DraDriver>(o, claims, [&] { return inv; });
  REQUIRE(driver->start().ok());
  CHECK(driver->prepared().count("uid-a") == 1);
  CHECK(specs.tags() == std::vector<std::string>{"uid-a"});

  auto un = driver->unprepare({{"ml", "uid-a", "a"}, {"ml", "uid-never", "x"}});
  CHECK(un["uid-a"].empty());
  CHECK(un["uid-never"].empty());  // nothing prepared: a success
  CHECK(specs.tags().empty());
  CHECK(driver->prepared().empty());
  // A bad UID never reaches the file system.
  auto bad = driver->prepare({{"ml", "../../etc", "a"}});
  CHECK_FALSE(bad["../../etc"].error.empty());
}

TEST_CASE("DRA driver: a corrupt checkpoint is kept aside and the driver starts empty",
          "[devplugin][dra]") {
  kc::testing::TempDir dir;
  std::ofstream(dir.file("checkpoint.json")) << "{not json";
  FakeClaims claims;
  kc::devplugin::DraDriverOptions o{"n1", dir.file("checkpoint.json"), dir.file("cdi"),
                                    dir.file("dev")};
  kc::devplugin::DraDriver driver(o, claims, [] { return NodeInventory{}; });
  REQUIRE(driver.start().ok());
  CHECK(driver.prepared().empty());
  CHECK(std::filesystem::exists(dir.file("checkpoint.json.corrupt")));
}

TEST_CASE("DRA usage report: prepared claims hold their GPUs, a free draining GPU is withdrawn",
          "[devplugin][dra]") {
  GpuOpts draining;
  draining.draining = true;
  NodeInventory inv = poolInventory(draining);
  kc::devplugin::applyHostView(
      inv,
      kc::node::assembleHostView(
          {hostGpu("0000:3b:00.0", kUuidA, 0), hostGpu("0000:5e:00.0", kUuidB, 1)}, {}),
      {});
  auto claim =
      kc::devplugin::decidePrepare(allocatedClaim("pool-a", "c0.1", "n1"), "uid-1", "n1", inv);
  REQUIRE(claim.ok());
  const auto r = kc::devplugin::draUsageReport(inv, {{"uid-1", *claim}}, true);
  CHECK(r.pool == "pool-a");
  CHECK(r.advertised == std::vector<std::string>{"c0.1"});
  CHECK(r.inUse.at("c0.1") == std::vector<std::string>{kc::api::claimHolder("ml", "train")});
  CHECK(r.withdrawn == std::vector<std::string>{"c0.2"});
  CHECK(r.hostChecked);
  CHECK(r.hostVisible == std::vector<std::string>{"c0.1", "c0.2"});  // draining ones too
  CHECK(r.notVisible.count("c0.3") == 1);
  CHECK(r.registered);
}

namespace {

kc::node::HostRoots rootsIn(const kc::testing::TempDir& dir) {
  return kc::node::HostRoots{dir.file("sys"), dir.file("proc"), dir.file("dev")};
}

// c0.2 draining and withdrawable; the host (a fake tree) shows all three GPUs.
NodeInventory drainingOnHost(const kc::node::HostRoots& roots) {
  GpuOpts draining;
  draining.draining = true;
  NodeInventory inv = poolInventory(draining);
  kc::devplugin::applyHostView(inv, kc::node::scanHost(roots), {});
  return inv;
}

}  // namespace

TEST_CASE("hot-remove: a drained GPU leaves the bus before its detach, never while held open",
          "[devplugin][dra]") {
  kc::testing::TempDir dir;
  const auto roots = rootsIn(dir);
  kc::node::FakeHostTree tree(roots);
  REQUIRE(tree.addGpu({"0000:3b:00.0", kUuidA, 0}).ok());
  REQUIRE(tree.addGpu({"0000:5e:00.0", kUuidB, 1}).ok());
  REQUIRE(tree.addGpu({"0000:86:00.0", kUuidC, 2}).ok());
  kc::testing::FakeClock clock;
  kc::devplugin::HostActions actions({.hotRemove = true}, roots, clock);

  // Held open by a process: not removed, the report says why, not withdrawn.
  REQUIRE(tree.holdOpen(4242, "python3", "/dev/nvidia1").ok());
  NodeInventory inv = drainingOnHost(roots);
  auto blocked = actions.removeDrained(inv, {"c0.2"});
  REQUIRE(blocked.count("c0.2") == 1);
  CHECK(blocked["c0.2"].find("pid 4242 (python3)") != std::string::npos);
  CHECK(tree.takeRemoveRequests().empty());
  kc::api::UsageReport r;
  r.withdrawn = {"c0.2"};
  kc::devplugin::applyHotRemove(r, inv, blocked);
  CHECK(r.withdrawn.empty());
  CHECK(r.removeBlocked.count("c0.2") == 1);

  // Released: removed through sysfs; withdrawn only once the host no longer shows it.
  REQUIRE(tree.release(4242).ok());
  blocked = actions.removeDrained(inv, {"c0.2"});
  CHECK(blocked.empty());
  CHECK(tree.takeRemoveRequests() == std::vector<std::string>{"0000:5e:00.0"});
  r.withdrawn = {"c0.2"};
  kc::devplugin::applyHotRemove(r, inv, blocked);
  CHECK(r.withdrawn.empty());                    // the scan still shows it
  REQUIRE(tree.removeGpu("0000:5e:00.0").ok());  // what the kernel does on the write
  inv = drainingOnHost(roots);
  r.withdrawn = {"c0.2"};
  kc::devplugin::applyHotRemove(r, inv, actions.removeDrained(inv, {"c0.2"}));
  CHECK(r.withdrawn == std::vector<std::string>{"c0.2"});
  CHECK(r.removeBlocked.empty());
  CHECK(tree.takeRemoveRequests().empty());  // gone: nothing written again
  // Without --hot-remove nothing is ever written.
  kc::devplugin::HostActions off({}, roots, clock);
  CHECK(off.removeDrained(drainingOnHost(roots), {"c0.1"}).empty());
  CHECK(tree.takeRemoveRequests().empty());
}

TEST_CASE("rescan: a GPU attached per the pool but missing from the host, once per period",
          "[devplugin][dra]") {
  kc::testing::TempDir dir;
  const auto roots = rootsIn(dir);
  kc::node::FakeHostTree tree(roots);
  REQUIRE(tree.addGpu({"0000:3b:00.0", kUuidA, 0}).ok());
  REQUIRE(tree.addGpu({"0000:5e:00.0", kUuidB, 1}).ok());
  kc::testing::FakeClock clock;
  kc::devplugin::HostActions actions({.rescanAfter = std::chrono::seconds(5)}, roots, clock);
  NodeInventory inv = poolInventory();  // c0.3 attached per the pool, not on the host
  kc::devplugin::applyHostView(inv, kc::node::scanHost(roots), {});
  CHECK_FALSE(actions.rescanIfDue(inv));  // just noticed
  clock.advance(std::chrono::seconds(4));
  CHECK_FALSE(actions.rescanIfDue(inv));
  clock.advance(std::chrono::seconds(2));
  CHECK(actions.rescanIfDue(inv));
  CHECK(tree.takeRescanRequest());
  clock.advance(std::chrono::seconds(1));
  CHECK_FALSE(actions.rescanIfDue(inv));  // at most once per period
  clock.advance(std::chrono::seconds(5));
  CHECK(actions.rescanIfDue(inv));
  // Once the host shows it, no more rescans.
  REQUIRE(tree.addGpu({"0000:86:00.0", kUuidC, 2}).ok());
  NodeInventory all = poolInventory();
  kc::devplugin::applyHostView(all, kc::node::scanHost(roots), {});
  clock.advance(std::chrono::seconds(60));
  CHECK_FALSE(actions.rescanIfDue(all));
}
