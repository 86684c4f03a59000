// bench_devplugin: how soon kubelet hears of a change to this node's GPUs.
//
// End to end: a GPUPool status write on kube-apiserver-double (a separate process, TLS) ->
// watch event -> the plugin's informer -> ListAndWatch message read by a kubelet-side gRPC
// client on the plugin's unix socket. Each change flips one GPU between healthy and
// unhealthy or withdraws/returns one (draining), one change at a time; the latency is from
// the start of the status write to the arrival of the list that shows it. Beside it, the
// plugin's own share (inventory set in-process -> list received), and the anchor: the
// original design polled every 1 s, so a change waited U(0, 1 s) for the next poll (p50
// 500 ms, p99 990 ms, computed, not run: 1,000 changes at 1 s would take 17 minutes).
// The LAST stdout line is one JSON object:
//   {"listandwatch_p50_ms":..,"listandwatch_p99_ms":..,"listandwatch_max_ms":..,
//    "service_p50_ms":..,"service_p99_ms":..,"changes":..,"anchor_polling_p50_ms":500,
//    "anchor_polling_p99_ms":990,"host_scan_ms":..,"host_scan_p99_ms":..,
//    "preferred_90k_ms":..,"preferred_90k_seed_ms":..,"preferred_seed_ids":..,
//    "dra_prepare_p50_ms":..,"dra_prepare_p99_ms":..,"dra_unprepare_p50_ms":..,
//    "dra_unprepare_p99_ms":..,"dra_prepare_goal_ms":20,"dra_claims":..,
//    "dra_cdi_on_tmpfs":..,"dra_checkpoint_on_tmpfs":..,"dra_prepare_tmpfs_p50_ms":..,
//    "dra_prepare_tmpfs_p99_ms":..,"dra_unprepare_tmpfs_p99_ms":..}
// Beside them: host_scan_ms, the node's full host view (libcore/node scanHost) of 16 GPUs
// among 128 PCI functions of a fake sysfs/procfs with the real layout (goal p50 < 5 ms);
// GetPreferredAllocation over 90,000 ids on one chassis, half requested, against the seed's
// quadratic algorithm (kept here as seedPreferredAllocation; on 20,000 ids with --quick); and
// dra_prepare_*: kubelet's NodePrepareResources of one claim as kubelet sees it, timed by a
// C++ gRPC client (DRAPlugin v1) on <dra-plugin-dir>/dra.sock of the REAL binary
// `disaggpu-devplugin --mode dra`, run as a child process (its own API client, gRPC server and
// threads, as on a node) against the same API double, over a fake host tree holding the 8 GPUs
// a DRA GPUPool attaches to the node. Each call GETs the claim, writes its CDI spec and the
// checkpoint (each file: temp file, fsync, rename, fsync of the directory) inside the call;
// 400 claims (100 with --quick), each allocated one GPU of the node's DRA pool
// "<pool>/<node>", prepared one at a time 25 ms apart, each answer checked (the allocated
// device, one CDI id of our kind, the spec file present) and then unprepared (timed too; the
// spec must be gone). Goal: prepare p99 < 20 ms. The files lie as on a node: the CDI specs on
// tmpfs (/dev/shm, as /var/run/cdi is on /run; --cdi-on-disk puts them on disk), the
// checkpoint in the temp dir (disk, as /var/lib/kubelet). A second pass with every file on
// tmpfs gives the plugin's own share (dra_prepare_tmpfs_*; null without a tmpfs /dev/shm): on
// a slow disk the fsyncs are most of a call.
#include <fcntl.h>
#include <fmt/core.h>
#include <grpcpp/client_context.h>
#include <linux/magic.h>
#include <spdlog/spdlog.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <random>
#include <thread>

#include "dra/v1/api.grpc.pb.h"
#include "libcore/api/dra_claim.hpp"
#include "libcore/api/dra_slice.hpp"
#include "libcore/api/names.hpp"
#include "libcore/cdi/cdi_store.hpp"
#include "libcore/grpc/channel.hpp"
#include "libcore/grpc/unix_server.hpp"
#include "libcore/kube/client.hpp"
#include "libcore/kube/resource.hpp"
#include "libcore/node/fake_host.hpp"
#include "libcore/node/host_scan.hpp"
#include "services/disaggpu-devplugin/device_state.hpp"
#include "services/disaggpu-devplugin/devplugin.hpp"
#include "tests/services/disaggpu-devplugin/fake_kubelet.hpp"
#include "tests/services/disaggpu-devplugin/pool_builder.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/dra_objects.hpp"
#include "tests/support/manifests.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/kube/double_process.hpp"
#include "tools/bench/bench_util.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using kc::testing::GpuOpts;
using kc::testing::ListAndWatchReader;
using kc::testing::PoolBuilder;

using kc::bench::percentile;

namespace {

const kc::kube::GroupVersionResource kPools = kc::api::gvr::gpuPools();

// Thrown, not exit(): the API double child is stopped by its destructor on the way out.
[[noreturn]] void die(const std::string& what) {
  throw std::runtime_error(what);
}

// Change i of the run: 8 GPUs on node n1; GPU (i % 8) unhealthy on odd rounds, GPU
// ((i / 8) % 8) withdrawn on every third change. Consecutive changes always differ.
PoolBuilder poolAt(int i) {
  PoolBuilder b("pool-bench");
  for (int g = 0; g < 8; ++g) {
    GpuOpts o;
    if (g == i % 8 && (i / 8) % 2 == 1) {
      o.health = "Unhealthy";
    }
    o.draining = i % 3 == 0 && g == (i / 8) % 8;
    b.gpu(fmt::format("c{}.{}", g / 4, g % 4), "n1", o);
  }
  // A counter keeps every write distinct even when the advertised list repeats.
  b.rawGpu({{"id", "c9.0"},
            {"uuid", "GPU-c9.0"},
            {"chassis", "c9"},
            {"node", "n2"},
            {"health", "Healthy"},
            {"draining", false},
            {"healthDetail", std::to_string(i)}});
  return b;
}

std::vector<std::pair<std::string, std::string>> expectedList(int i) {
  std::vector<std::pair<std::string, std::string>> out;
  const nlohmann::json pool = poolAt(i).json();  // not a temporary: the loop reads into it
  for (const auto& g : pool["status"]["gpus"]) {
    if (g["node"] == "n1" && !g["draining"].get<bool>()) {
      out.emplace_back(g["id"], g["health"]);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

void printRow(const char* what, const std::vector<double>& ms) {
  std::cout << fmt::format("  {:<52} p50 {:>8.2f} ms   p99 {:>8.2f} ms   max {:>8.2f} ms\n", what,
                           percentile(ms, 0.50), percentile(ms, 0.99),
                           *std::max_element(ms.begin(), ms.end()));
}

// --- host_scan_ms: the node's host view (libcore/node) of 16 GPUs from sysfs/procfs --------

struct HostScanFigures {
  std::vector<double> ms;
  int functions = 0;
};

// A fake host with the real sysfs/procfs layout: 16 GPUs (2 NUMA nodes) among 128 PCI
// functions (two 8-GPU baseboards with their switches and NICs); the scan reads every
// function's vendor and class.
HostScanFigures benchHostScan(const std::filesystem::path& root, int scans) {
  constexpr int kGpus = 16;
  constexpr int kOtherFunctions = 112;
  const kc::node::HostRoots roots{(root / "sys").string(), (root / "proc").string(),
                                  (root / "dev").string()};
  kc::node::FakeHostTree tree(roots);
  for (int i = 0; i < kGpus; ++i) {
    kc::node::FakeGpu g;
    g.bdf = fmt::format("0000:{:02x}:00.0", 0x10 + 0x0e * i);
    g.uuid = fmt::format("GPU-5d1c4f6e-2a8b-4c3d-9e7f-{:012x}", i);
    g.minor = i;
    g.numaNode = i / 8;
    if (auto s = tree.addGpu(g); !s) {
      die("fake host: " + s.error().message);
    }
  }
  for (int i = 0; i < kOtherFunctions; ++i) {
    // Root ports and bridges on bus 0, NICs/NVMe elsewhere: vendor and class are read, then
    // skipped.
    const std::string bdf = fmt::format("0000:{:02x}:{:02x}.{}", 0x01 + i / 32, i % 32, 0);
    if (auto s = tree.addPciFunction(bdf, i % 2 == 0 ? "0x8086" : "0x15b3",
                                     i % 2 == 0 ? "0x060400" : "0x020700");
        !s) {
      die("fake host: " + s.error().message);
    }
  }
  HostScanFigures f;
  f.functions = kGpus + kOtherFunctions;
  for (int i = 0; i < scans; ++i) {
    const auto t0 = Clock::now();
    const kc::node::HostView view = kc::node::scanHost(roots);
    f.ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    const auto usable = std::count_if(view.gpus.begin(), view.gpus.end(),
                                      [](const kc::node::HostGpu& g) { return g.usable; });
    if (usable != kGpus || !view.problems.empty()) {
      die(fmt::format("host scan saw {} usable GPUs of {} ({} problems)", usable, kGpus,
                      view.problems.size()));
    }
  }
  return f;
}

// --- preferred_90k_ms: GetPreferredAllocation over 90,000 ids ------------------------------

// The seed's algorithm, kept verbatim as the baseline: it erases from the front of a vector,
// so taking k ids from a group of n costs O(k n).
std::vector<std::string> seedPreferredAllocation(const kc::devplugin::NodeInventory& inventory,
                                                 const std::vector<std::string>& available,
                                                 const std::vector<std::string>& mustInclude,
                                                 std::int32_t size) {
  std::vector<std::string> out;
  if (size <= 0) {
    return out;
  }
  const auto want = static_cast<std::size_t>(size);
  std::set<std::string> taken;
  std::set<std::string> preferredChassis;
  const auto chassisOf = [&](const std::string& id) {
    const kc::devplugin::NodeGpu* g = inventory.find(id);
    return g != nullptr ? g->chassis : std::string();
  };
  for (const std::string& id : mustInclude) {
    if (out.size() < want && taken.insert(id).second) {
      out.push_back(id);
      preferredChassis.insert(chassisOf(id));
    }
  }
  // Remaining candidates grouped by chassis (ids sorted inside a group).
  std::map<std::string, std::vector<std::string>> groups;
  for (const std::string& id : available) {
    if (taken.count(id) == 0) {
      groups[chassisOf(id)].push_back(id);
      taken.insert(id);
    }
  }
  for (auto& [chassis, ids] : groups) {
    std::sort(ids.begin(), ids.end());
  }
  const auto takeFrom = [&](std::vector<std::string>& ids) {
    while (out.size() < want && !ids.empty()) {
      out.push_back(ids.front());
      ids.erase(ids.begin());
    }
  };
  // 1. The must-include GPUs' chassis first.
  for (const std::string& chassis : preferredChassis) {
    if (auto it = groups.find(chassis); it != groups.end()) {
      takeFrom(it->second);
    }
  }
  while (out.size() < want) {
    const std::size_t need = want - out.size();
    // 2. The smallest group that can supply the rest alone; 3. else the largest group.
    std::string bestFit;
    std::size_t bestFitSize = 0;
    std::string largest;
    std::size_t largestSize = 0;
    for (const auto& [chassis, ids] : groups) {
      if (ids.empty()) {
        continue;
      }
      if (ids.size() >= need && (bestFitSize == 0 || ids.size() < bestFitSize)) {
        bestFit = chassis;
        bestFitSize = ids.size();
      }
      if (ids.size() > largestSize) {
        largest = chassis;
        largestSize = ids.size();
      }
    }
    if (bestFitSize == 0 && largestSize == 0) {
      break;  // available is short
    }
    takeFrom(groups[bestFitSize != 0 ? bestFit : largest]);
  }
  return out;
}

// n ids on one chassis (the case), two of them must-include, half requested.
struct PreferredInput {
  kc::devplugin::NodeInventory inventory;
  std::vector<std::string> available;
  std::vector<std::string> mustInclude;
  std::int32_t size = 0;
};

PreferredInput preferredInput(int n) {
  PoolBuilder b("pool-big");
  PreferredInput in;
  for (int i = 0; i < n; ++i) {
    const std::string id = fmt::format("c0.{:05d}", i);
    b.gpu(id, "n1");
    in.available.push_back(id);
  }
  std::shuffle(in.available.begin(), in.available.end(), std::mt19937(5));
  in.inventory = kc::devplugin::nodeInventory({b.json()}, "n1");
  in.mustInclude = {in.available[0], in.available[1]};
  in.size = n / 2;
  return in;
}

// The new algorithm must give the seed's answers: small random inventories first.
void checkSameAsSeed() {
  std::mt19937 rng(17);
  for (int round = 0; round < 2000; ++round) {
    PoolBuilder b("p");
    std::vector<std::string> all;
    const int chassis = 1 + static_cast<int>(rng() % 6);
    for (int c = 0; c < chassis; ++c) {
      const int n = 1 + static_cast<int>(rng() % 8);
      for (int i = 0; i < n; ++i) {
        all.push_back(fmt::format("k{}.{}", c, i));
        b.gpu(all.back(), "n1");
      }
    }
    std::shuffle(all.begin(), all.end(), rng);
    std::vector<std::string> must;
    for (std::size_t m = rng() % 3; m > 0; --m) {
      must.push_back(rng() % 4 == 0 ? "unknown" : all[rng() % all.size()]);
    }
    const auto inv = kc::devplugin::nodeInventory({b.json()}, "n1");
    const auto available =
        std::vector<std::string>(all.begin(), all.begin() + rng() % (all.size() + 1));
    const auto size = static_cast<std::int32_t>(rng() % (all.size() + 2));
    if (kc::devplugin::preferredAllocation(inv, available, must, size) !=
        seedPreferredAllocation(inv, available, must, size)) {
      die(fmt::format("preferredAllocation differs from the seed's in round {}", round));
    }
  }
}

struct PreferredFigures {
  double newMs = 0;   // p50 over a few runs on 90k ids
  double seedMs = 0;  // one run on seedIds ids
  int seedIds = 0;
};

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::vector<std::string> preferredOf(const PreferredInput& in, bool seed) {
  return seed ? seedPreferredAllocation(in.inventory, in.available, in.mustInclude, in.size)
              : kc::devplugin::preferredAllocation(in.inventory, in.available, in.mustInclude,
                                                   in.size);
}

PreferredFigures benchPreferred(bool quick) {
  checkSameAsSeed();
  PreferredFigures f;
  f.seedIds = quick ? 20'000 : 90'000;
  const PreferredInput big = preferredInput(90'000);
  std::vector<double> runs;
  std::vector<std::string> got;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    got = preferredOf(big, false);
    runs.push_back(msSince(t0));
  }
  f.newMs = percentile(runs, 0.50);
  if (got.size() != static_cast<std::size_t>(big.size) ||
      !std::equal(big.mustInclude.begin(), big.mustInclude.end(), got.begin())) {
    die("preferredAllocation: wrong answer on 90k ids");
  }
  const PreferredInput small = quick ? preferredInput(f.seedIds) : PreferredInput{};
  const PreferredInput& seedInput = quick ? small : big;
  const auto t0 = Clock::now();
  const auto seedGot = preferredOf(seedInput, true);
  f.seedMs = msSince(t0);
  if (seedGot != (quick ? preferredOf(seedInput, false) : got)) {
    die(fmt::format("preferredAllocation differs from the seed's on {} ids", f.seedIds));
  }
  return f;
}

// --- dra_prepare_ms: NodePrepareResources of one claim, as kubelet sees it ------------------

namespace drav1 = k8s::io::kubelet::pkg::apis::dra::v1;

// kubelet prepares a pod's claims when it starts the pod: a few claims a second on a busy
// node. The plugin's API client is rate limited (50 QPS, burst 100, as in its own process) and
// each prepare GETs its claim, so back-to-back calls would soon time the token bucket; one call
// every 25 ms (40/s) stays under it.
constexpr auto kDraSpacing = 25ms;
constexpr int kDraGpus = 8;
constexpr double kDraPrepareGoalMs = 20.0;

struct DraFigures {
  std::vector<double> prepare;
  std::vector<double> unprepare;
};

bool onTmpfs(const std::string& path) {
  struct statfs fs {};
  return ::statfs(path.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

// A fresh directory on tmpfs (/dev/shm), removed on exit; empty path() when /dev/shm is not a
// tmpfs. On a node /var/run/cdi is on tmpfs (/run) while the checkpoint lies under
// /var/lib/kubelet on disk.
class ShmDir {
 public:
  ShmDir() {
    if (onTmpfs("/dev/shm")) {
      std::random_device rd;
      path_ = fmt::format("/dev/shm/kc-bench-devplugin-{}-{}", ::getpid(), rd());
      std::filesystem::create_directories(path_);
    }
  }
  ~ShmDir() {
    if (!path_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(path_, ec);
    }
  }
  ShmDir(const ShmDir&) = delete;
  ShmDir& operator=(const ShmDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string draGpuId(int g) {
  return fmt::format("c0.{}", g);
}

// The status kube-scheduler writes when it allocates device `gpuId` of `node`'s DRA pool of
// GPUPool `gpuPool` ("<gpuPool>/<node>": node-local, no binding conditions), reserved for pod
// `pod`.
nlohmann::json nodePoolAllocationStatus(const std::string& gpuPool, const std::string& gpuId,
                                        const std::string& node, const std::string& pod) {
  kc::api::ClaimDevice d;
  d.request = "gpu";
  d.driver = std::string(kc::api::kDraDriverName);
  d.pool = gpuPool + "/" + node;
  d.device = kc::api::draDeviceName(gpuId);
  kc::api::ClaimAllocation a;
  a.results = {d};
  a.nodeName = node;
  a.allocationTimestamp = "2026-01-01T00:00:00Z";
  return {{"allocation", kc::api::toJson(a)},
          {"reservedFor",
           nlohmann::json::array({{{"resource", "pods"}, {"name", pod}, {"uid", "uid-" + pod}}})}};
}

struct BenchClaim {
  std::string ns;
  std::string name;
  std::string uid;
  std::string gpuId;
};

BenchClaim createAllocatedClaim(kc::kube::KubeClient& kube, const std::string& gpuPool,
                                const std::string& name, const std::string& gpuId) {
  const std::string ns = "default";
  auto created =
      kube.create(kc::api::gvr::resourceClaims(), ns, kc::testing::oneGpuClaim(name, ns));
  if (!created) {
    die("create ResourceClaim " + name + ": " + created.error().message);
  }
  nlohmann::json body = *created;
  body["status"] = nodePoolAllocationStatus(gpuPool, gpuId, "n1", "p-" + name);
  auto written = kube.updateStatus(kc::api::gvr::resourceClaims(), ns, body);
  if (!written) {
    die("allocate ResourceClaim " + name + ": " + written.error().message);
  }
  const std::string uid = (*written)["metadata"].value("uid", "");
  if (uid.empty()) {
    die("ResourceClaim " + name + " has no UID");
  }
  return BenchClaim{ns, name, uid, gpuId};
}

drav1::NodePrepareResourcesRequest prepareRequest(const BenchClaim& c) {
  drav1::NodePrepareResourcesRequest req;
  auto* claim = req.add_claims();
  claim->set_namespace_(c.ns);
  claim->set_uid(c.uid);
  claim->set_name(c.name);
  return req;
}

drav1::NodeUnprepareResourcesRequest unprepareRequest(const BenchClaim& c) {
  drav1::NodeUnprepareResourcesRequest req;
  auto* claim = req.add_claims();
  claim->set_namespace_(c.ns);
  claim->set_uid(c.uid);
  claim->set_name(c.name);
  return req;
}

// "" when the answer is the claim prepared: one device, the allocated one, with one CDI id of
// our kind, and the claim's CDI spec file present; else what is wrong.
std::string checkPrepared(const grpc::Status& status, const drav1::NodePrepareResourcesResponse& r,
                          const BenchClaim& c, const std::string& pool,
                          const kc::cdi::SpecDir& specs) {
  if (!status.ok()) {
    return "gRPC " + status.error_message();
  }
  auto it = r.claims().find(c.uid);
  if (it == r.claims().end()) {
    return "no answer for the claim's UID";
  }
  const drav1::NodePrepareResourceResponse& a = it->second;
  if (!a.error().empty()) {
    return a.error();
  }
  if (a.devices_size() != 1 || a.devices(0).cdi_device_ids_size() != 1) {
    return fmt::format("{} devices, not one with one CDI id", a.devices_size());
  }
  const drav1::Device& d = a.devices(0);
  if (d.pool_name() != pool || d.device_name() != kc::api::draDeviceName(c.gpuId)) {
    return "device " + d.pool_name() + "/" + d.device_name() + ", allocated was " + pool + "/" +
           kc::api::draDeviceName(c.gpuId);
  }
  if (!d.cdi_device_ids(0).starts_with(std::string(kc::api::kCdiKind) + "=")) {
    return "CDI id " + d.cdi_device_ids(0) + " is not of kind " + std::string(kc::api::kCdiKind);
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(specs.pathFor(c.uid), ec)) {
    return "no CDI spec " + specs.pathFor(c.uid);
  }
  return "";
}

// What every pass works on: a fake host under `root` with 8 GPUs, a GPUPool on the DRA path
// attaching them to n1, and `claims` ResourceClaims (plus one to warm up with) each allocated
// one of them in n1's DRA pool.
struct DraSetup {
  kc::node::HostRoots roots;
  std::string draPool;  // "<gpuPool>/n1"
  BenchClaim warm;
  std::vector<BenchClaim> claims;
};

DraSetup setUpDra(kc::kube::KubeClient& kube, const std::filesystem::path& root, int claims) {
  DraSetup out;
  out.roots = kc::node::HostRoots{(root / "sys").string(), (root / "proc").string(),
                                  (root / "dev").string()};
  kc::node::FakeHostTree tree(out.roots);
  const std::string gpuPool = "pool-dra";
  PoolBuilder b(gpuPool);
  for (int g = 0; g < kDraGpus; ++g) {
    kc::node::FakeGpu fg;
    fg.bdf = fmt::format("0000:{:02x}:00.0", 0x18 + 0x10 * g);
    fg.uuid = fmt::format("GPU-7e3a9c10-4b2d-4f8e-a1c5-{:012x}", g);
    fg.minor = g;
    fg.numaNode = g / 4;
    if (auto s = tree.addGpu(fg); !s) {
      die("fake host: " + s.error().message);
    }
    GpuOpts o;
    o.uuid = fg.uuid;
    b.gpu(draGpuId(g), "n1", o);
  }
  nlohmann::json poolObject = b.json();
  poolObject["spec"]["allocationPath"] = std::string(kc::api::kPathDra);
  auto created = kube.create(kPools, "", poolObject);
  if (!created) {
    die("create DRA pool: " + created.error().message);
  }
  nlohmann::json withStatus = *created;
  withStatus["status"] = poolObject["status"];
  if (auto r = kube.updateStatus(kPools, "", withStatus); !r) {
    die("DRA pool status: " + r.error().message);
  }
  out.draPool = gpuPool + "/n1";
  out.warm = createAllocatedClaim(kube, gpuPool, "claim-warm", draGpuId(0));
  for (int i = 0; i < claims; ++i) {
    out.claims.push_back(createAllocatedClaim(kube, gpuPool, fmt::format("claim-{:05d}", i),
                                              draGpuId(i % kDraGpus)));
  }
  return out;
}

// One pass: the real `disaggpu-devplugin --mode dra` (a child process, its own API client and
// gRPC server) for node n1 of the API double, its plugin directory (dra.sock, checkpoint.json)
// in `pluginDir` and its CDI specs in `cdiDir`; every claim prepared then unprepared, one call
// at a time, on one channel to <pluginDir>/dra.sock. The plugin starts with no checkpoint, so
// a later pass prepares the same claims anew.
DraFigures runDraPass(const DraSetup& setup, const std::string& kubeconfig,
                      const std::string& registry, const std::string& pluginDir,
                      const std::string& cdiDir) {
  const kc::node::HostRoots& roots = setup.roots;
  const std::string& draPool = setup.draPool;
  const BenchClaim& warm = setup.warm;
  const std::vector<BenchClaim>& all = setup.claims;
  std::filesystem::create_directories(registry);
  std::filesystem::create_directories(pluginDir);
  kc::testing::ChildProcess plugin({KC_DEVPLUGIN_EXE,
                                    "--mode",
                                    "dra",
                                    "--node-name",
                                    "n1",
                                    "--kubeconfig",
                                    kubeconfig,
                                    "--plugins-registry-dir",
                                    registry,
                                    "--dra-plugin-dir",
                                    pluginDir,
                                    "--cdi-spec-dir",
                                    cdiDir,
                                    "--sysfs-root",
                                    roots.sysfs,
                                    "--procfs-root",
                                    roots.procfs,
                                    "--dev-root",
                                    roots.dev,
                                    "--bind-address",
                                    "127.0.0.1",
                                    "--port",
                                    "0",
                                    "--log-level",
                                    "warn"});
  const std::string socket = pluginDir + "/dra.sock";
  plugin.waitUntil([&] { return std::filesystem::exists(socket); }, 20s,
                   "disaggpu-devplugin --mode dra serving " + socket);
  auto channel = kc::grpcx::dialUnix(socket);
  if (auto s = kc::grpcx::waitConnected(*channel, 10s, "DRA plugin"); !s) {
    die(s.error().message);
  }
  auto stub = drav1::DRAPlugin::NewStub(channel);
  const kc::cdi::SpecDir specs(cdiDir);

  // Untimed: the first prepare waits until the plugin's inventory shows the pool's GPUs verified
  // on the host (informer and host scan are asynchronous to its socket).
  std::string why;
  for (const auto deadline = Clock::now() + 10s; Clock::now() < deadline;
       std::this_thread::sleep_for(20ms)) {
    grpc::ClientContext ctx;
    kc::grpcx::setTimeout(ctx, 5s);
    drav1::NodePrepareResourcesResponse r;
    why = checkPrepared(stub->NodePrepareResources(&ctx, prepareRequest(warm), &r), r, warm,
                        draPool, specs);
    if (why.empty()) {
      break;
    }
  }
  if (!why.empty()) {
    die("DRA plugin never prepared the first claim: " + why);
  }
  {
    grpc::ClientContext ctx;
    kc::grpcx::setTimeout(ctx, 5s);
    drav1::NodeUnprepareResourcesResponse r;
    if (!stub->NodeUnprepareResources(&ctx, unprepareRequest(warm), &r).ok()) {
      die("DRA plugin: unprepare of the first claim failed");
    }
  }

  DraFigures f;
  auto next = Clock::now();
  for (const BenchClaim& c : all) {
    std::this_thread::sleep_until(next);
    next = Clock::now() + kDraSpacing;
    {
      grpc::ClientContext ctx;
      kc::grpcx::setTimeout(ctx, 10s);
      drav1::NodePrepareResourcesResponse r;
      const auto req = prepareRequest(c);
      const auto t0 = Clock::now();
      const grpc::Status s = stub->NodePrepareResources(&ctx, req, &r);
      f.prepare.push_back(msSince(t0));
      if (std::string bad = checkPrepared(s, r, c, draPool, specs); !bad.empty()) {
        die("NodePrepareResources " + c.name + ": " + bad);
      }
    }
    {
      grpc::ClientContext ctx;
      kc::grpcx::setTimeout(ctx, 10s);
      drav1::NodeUnprepareResourcesResponse r;
      const auto req = unprepareRequest(c);
      const auto t0 = Clock::now();
      const grpc::Status s = stub->NodeUnprepareResources(&ctx, req, &r);
      f.unprepare.push_back(msSince(t0));
      auto it = r.claims().find(c.uid);
      if (!s.ok() || it == r.claims().end() || !it->second.error().empty()) {
        die("NodeUnprepareResources " + c.name + ": " +
            (!s.ok()                  ? s.error_message()
             : it == r.claims().end() ? "no answer"
                                      : it->second.error()));
      }
      std::error_code ec;
      if (std::filesystem::exists(specs.pathFor(c.uid), ec)) {
        die("NodeUnprepareResources " + c.name + ": its CDI spec is still there");
      }
    }
  }
  if (const int rc = plugin.terminate(5s); rc != 0) {
    die(fmt::format("disaggpu-devplugin --mode dra exited {} on SIGTERM", rc));
  }
  return f;
}
}  // namespace

int run(int argc, char** argv) {
  CLI::App app{
      "bench_devplugin: GPUPool change -> ListAndWatch update latency of "
      "disaggpu-devplugin, beside the original design's 1 s polling; the host view scan; "
      "GetPreferredAllocation on 90,000 ids; DRA NodePrepareResources of one claim (the real "
      "binary in --mode dra)"};
  bool quick = false;
  int changes = 0;
  int claims = 0;
  app.add_flag("--quick", quick, "1,000 changes and 100 DRA claims (the default is 5,000 and 400)");
  app.add_option("--changes", changes, "number of changes (overrides --quick)")
      ->check(CLI::Range(10, 1'000'000));
  app.add_option("--claims", claims, "number of DRA claims prepared (overrides --quick)")
      ->check(CLI::Range(10, 100'000));
  bool cdiOnDisk = false;
  app.add_flag("--cdi-on-disk", cdiOnDisk,
               "DRA: CDI specs beside the checkpoint on disk (default: on tmpfs, as /var/run/cdi)");
  CLI11_PARSE(app, argc, argv);
  if (changes == 0) {
    changes = quick ? 1000 : 5000;
  }
  if (claims == 0) {
    claims = quick ? 100 : 400;
  }
  spdlog::set_level(spdlog::level::warn);

  kc::testing::TempDir dir;
  kc::kube::testing::DoubleProcess api(KC_APISERVER_DOUBLE_EXE, dir.path());
  // The writer stands for reconfig-mgr: its own client, not rate-limited, so the figures are
  // the plugin's. The plugin gets a client with the default limits, as in its own process.
  kc::kube::KubeClientOptions writerOptions;
  writerOptions.qps = 0;
  auto client = kc::kube::KubeClient::create(api.config(), writerOptions);
  auto pluginClient = kc::kube::KubeClient::create(api.config());
  if (!client || !pluginClient) {
    die("client: " + (client ? pluginClient.error().message : client.error().message));
  }
  kc::kube::KubeClient& kube = **client;
  kc::testing::installCrd(
      kube,
      kc::testing::loadYamlFile(KC_SOURCE_DIR "/charts/kubecomp/crds/gpupools.kubecomp.io.yaml"));
  if (auto n = kube.create(kc::kube::gvr::nodes(), "", {{"metadata", {{"name", "n1"}}}}); !n) {
    die("create Node: " + n.error().message);
  }
  auto created = kube.create(kPools, "", poolAt(0).json());
  if (!created) {
    die("create pool: " + created.error().message);
  }
  nlohmann::json pool = *created;
  auto writeStatus = [&](int i) {
    pool["status"] = poolAt(i).json()["status"];
    auto r = kube.updateStatus(kPools, "", pool);
    if (!r) {
      die("status write: " + r.error().message);
    }
    pool = *r;
  };
  writeStatus(0);

  // kubelet's side: Registration on <dir>/kubelet.sock (PodResources is left absent: the
  // usage reporter retries quietly, which is what it does when kubelet lacks the API).
  kc::testing::FakeRegistration registration;
  kc::grpcx::UnixServer kubelet(kc::grpcx::UnixServerOptions{dir.file("kubelet.sock")});
  kubelet.addService(&registration);
  if (auto s = kubelet.start(); !s) {
    die(s.error().message);
  }
  kc::devplugin::DevPluginOptions o;
  o.nodeName = "n1";
  o.registrar.pluginDir = dir.path();
  o.podResourcesSocket = dir.file("no-pod-resources.sock");
  o.usage.pollInterval = 3600s;
  o.hostCheck = false;  // the GPUs are the pool's only: this measures the watch path
  kc::devplugin::DevPlugin plugin(o, **pluginClient, nullptr, nullptr);
  if (auto s = plugin.start(); !s) {
    die(s.error().message);
  }
  if (!registration.waitForMoreThan(0, 10s)) {
    die("the plugin did not register");
  }

  std::cout << fmt::format("bench_devplugin: {} changes, one at a time, 8 GPUs on the node\n",
                           changes);
  std::vector<double> e2e;
  {
    ListAndWatchReader reader(plugin.registrar().socketPath());
    if (!reader.waitForList(0, 10s)) {
      die("no first list");
    }
    std::size_t seen = reader.count();
    for (int i = 1; i <= changes; ++i) {
      const auto want = expectedList(i);
      const bool listChanges = want != expectedList(i - 1);
      const auto t0 = Clock::now();
      writeStatus(i);
      if (!listChanges) {
        continue;  // only the counter moved: nothing for kubelet
      }
      auto got = reader.waitForList(seen, 10s);
      if (!got) {
        die(fmt::format("change {}: no list within 10 s", i));
      }
      auto sorted = got->devices;
      std::sort(sorted.begin(), sorted.end());
      if (sorted != want) {
        die(fmt::format("change {}: kubelet got a list other than the pool's", i));
      }
      ++seen;
      e2e.push_back(std::chrono::duration<double, std::milli>(got->at - t0).count());
      if (i % 250 == 0) {
        std::fprintf(stderr, "  %d/%d changes\n", i, changes);
      }
    }
  }
  plugin.stop();

  // The plugin's own share: inventory set in-process -> list received by a client.
  std::vector<double> service;
  {
    kc::devplugin::DevicePluginService svc;
    kc::grpcx::UnixServer server(kc::grpcx::UnixServerOptions{dir.file("svc.sock")});
    server.addService(&svc);
    if (auto s = server.start(); !s) {
      die(s.error().message);
    }
    svc.setInventory(kc::devplugin::nodeInventory({poolAt(0).json()}, "n1"));
    ListAndWatchReader reader(server.path());
    if (!reader.waitForList(0, 10s)) {
      die("no first list (service)");
    }
    std::size_t n = 1;
    for (int i = 1; i <= changes; ++i) {
      if (expectedList(i) == expectedList(i - 1)) {
        continue;
      }
      const auto t0 = Clock::now();
      svc.setInventory(kc::devplugin::nodeInventory({poolAt(i).json()}, "n1"));
      auto got = reader.waitForList(n, 10s);
      if (!got) {
        die("service: no list");
      }
      ++n;
      service.push_back(std::chrono::duration<double, std::milli>(got->at - t0).count());
    }
    svc.finishAll();
    server.stop(1s);
  }

  kc::testing::TempDir hostDir;
  const HostScanFigures scan = benchHostScan(hostDir.path(), quick ? 200 : 2000);
  const PreferredFigures preferred = benchPreferred(quick);
  // DRA: as on a node (the checkpoint on disk in the temp dir, as /var/lib/kubelet; the CDI
  // specs on tmpfs, as /var/run/cdi), then with every file on tmpfs: the plugin's own share.
  kc::testing::TempDir draDir;
  const ShmDir shm;
  const std::string driverDir = "plugins/" + std::string(kc::api::kDraDriverName);
  const DraSetup draSetup = setUpDra(kube, draDir.path(), claims);
  const std::string nodeCdi =
      !cdiOnDisk && !shm.path().empty() ? shm.path() + "/cdi" : draDir.file("cdi");
  const DraFigures dra = runDraPass(draSetup, api.kubeconfigPath(), draDir.file("plugins_registry"),
                                    draDir.file(driverDir), nodeCdi);
  const bool cdiOnTmpfs = onTmpfs(nodeCdi);
  const bool checkpointOnTmpfs = onTmpfs(draDir.file(driverDir));
  std::optional<DraFigures> draOwn;
  if (!shm.path().empty()) {
    draOwn = runDraPass(draSetup, api.kubeconfigPath(), shm.path() + "/plugins_registry",
                        shm.path() + "/" + driverDir, shm.path() + "/cdi-own");
  }

  if (e2e.empty() || service.empty()) {
    die(fmt::format("nothing measured ({} end-to-end, {} service samples)", e2e.size(),
                    service.size()));
  }
  std::cout << fmt::format(
      "{} list changes measured (changes that left kubelet's list as it was "
      "are written but not timed)\n",
      e2e.size());
  printRow("GPUPool status write -> ListAndWatch (end to end)", e2e);
  printRow("inventory set in-process -> ListAndWatch (plugin only)", service);
  std::cout << fmt::format("  {:<52} p50 {:>8.2f} ms   p99 {:>8.2f} ms   (computed: U(0, 1 s))\n",
                           "anchor: original design, 1 s polling", 500.0, 990.0);
  std::cout << fmt::format("  goal p99 < 50 ms: {}\n",
                           percentile(e2e, 0.99) < 50.0 ? "met" : "MISSED");
  std::cout << fmt::format(
      "  {:<52} p50 {:>8.3f} ms   p99 {:>8.3f} ms   ({} scans; goal p50 < 5 ms: {})\n",
      fmt::format("host view: 16 GPUs among {} PCI functions", scan.functions),
      percentile(scan.ms, 0.50), percentile(scan.ms, 0.99), scan.ms.size(),
      percentile(scan.ms, 0.50) < 5.0 ? "met" : "MISSED");
  std::cout << fmt::format(
      "  {:<52} {:>8.1f} ms on 90,000 ids (p50 of 5); seed's algorithm {:>8.1f} ms on {} ids\n",
      "GetPreferredAllocation, 1 chassis, half requested", preferred.newMs, preferred.seedMs,
      preferred.seedIds);
  std::cout << fmt::format(
      "  {:<52} p50 {:>8.2f} ms   p99 {:>8.2f} ms   ({} claims; goal p99 < {:.0f} ms: {})\n",
      "DRA NodePrepareResources, 1 claim (GET, CDI, ckpt)", percentile(dra.prepare, 0.50),
      percentile(dra.prepare, 0.99), dra.prepare.size(), kDraPrepareGoalMs,
      percentile(dra.prepare, 0.99) < kDraPrepareGoalMs ? "met" : "MISSED");
  std::cout << fmt::format("  {:<52} p50 {:>8.2f} ms   p99 {:>8.2f} ms\n",
                           "DRA NodeUnprepareResources, 1 claim", percentile(dra.unprepare, 0.50),
                           percentile(dra.unprepare, 0.99));
  std::cout << fmt::format("  {:<52} CDI specs on {}, the checkpoint on {}\n",
                           "  (the files inside those calls)",
                           cdiOnTmpfs ? "tmpfs (as /var/run/cdi)" : "disk",
                           checkpointOnTmpfs ? "tmpfs" : "disk (as /var/lib/kubelet)");
  if (draOwn) {
    std::cout << fmt::format("  {:<52} p50 {:>8.2f} ms   p99 {:>8.2f} ms\n",
                             "DRA NodePrepareResources, all files on tmpfs",
                             percentile(draOwn->prepare, 0.50), percentile(draOwn->prepare, 0.99));
    std::cout << fmt::format("  {:<52} p50 {:>8.2f} ms   p99 {:>8.2f} ms\n",
                             "DRA NodeUnprepareResources, all files on tmpfs",
                             percentile(draOwn->unprepare, 0.50),
                             percentile(draOwn->unprepare, 0.99));
  }
  const auto ownMs = [&](const std::vector<double> DraFigures::*v, double p) -> nlohmann::json {
    if (!draOwn) {
      return nullptr;
    }
    return percentile((*draOwn).*v, p);
  };
  nlohmann::json out = {{"listandwatch_p50_ms", percentile(e2e, 0.50)},
                        {"listandwatch_p99_ms", percentile(e2e, 0.99)},
                        {"listandwatch_max_ms", *std::max_element(e2e.begin(), e2e.end())},
                        {"service_p50_ms", percentile(service, 0.50)},
                        {"service_p99_ms", percentile(service, 0.99)},
                        {"changes", e2e.size()},
                        {"anchor_polling_p50_ms", 500},
                        {"anchor_polling_p99_ms", 990},
                        {"host_scan_ms", percentile(scan.ms, 0.50)},
                        {"host_scan_p99_ms", percentile(scan.ms, 0.99)},
                        {"preferred_90k_ms", preferred.newMs},
                        {"preferred_90k_seed_ms", preferred.seedMs},
                        {"preferred_seed_ids", preferred.seedIds},
                        {"dra_prepare_p50_ms", percentile(dra.prepare, 0.50)},
                        {"dra_prepare_p99_ms", percentile(dra.prepare, 0.99)},
                        {"dra_unprepare_p50_ms", percentile(dra.unprepare, 0.50)},
                        {"dra_unprepare_p99_ms", percentile(dra.unprepare, 0.99)},
                        {"dra_prepare_goal_ms", static_cast<int>(kDraPrepareGoalMs)},
                        {"dra_claims", dra.prepare.size()},
                        {"dra_cdi_on_tmpfs", cdiOnTmpfs},
                        {"dra_checkpoint_on_tmpfs", checkpointOnTmpfs},
                        {"dra_prepare_tmpfs_p50_ms", ownMs(&DraFigures::prepare, 0.50)},
                        {"dra_prepare_tmpfs_p99_ms", ownMs(&DraFigures::prepare, 0.99)},
                        {"dra_unprepare_tmpfs_p99_ms", ownMs(&DraFigures::unprepare, 0.99)}};
  std::cout << out.dump() << std::endl;
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_devplugin: %s\n", e.what());
    return 1;
  }
}
