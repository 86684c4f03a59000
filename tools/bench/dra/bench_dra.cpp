// bench_dra: the DRA path (docs/dra.md), three figures, each beside the anchor or goal the
// issue names, on real processes:
//
//   dra_pods_per_s_500_nodes  pods with one ResourceClaim each (1 GPU) through kubecomp-sched
//                             with the pool policy on, 500 nodes in 5 DRA GPUPools, created in a
//                             burst: created -> all bound (every pod gets a device of its node:
//                             allocation written, then the binding). Anchor: kube-scheduler
//                             schedules pods with claims at about 117-270 pods/s at 500 nodes.
//   attach_overhead_ms        reconfig-mgr's attach controller: a claim allocated a fabric GPU
//                             (written as kube-scheduler writes it) -> its gpu.kubecomp.io/attached
//                             condition True. chassis-sim answers at zero latency, so the whole
//                             figure is ours: the chassis' own latency is 0 here. p50, one
//                             attach at a time (a burst is paced by reconfig-mgr's client-side
//                             rate limit, about 5 attaches/s, far above a real chassis' pace).
//   slice_publish_p99_ms      the GPUPool status showing an inventory change (a GPU the chassis
//                             now reports failed) -> the ResourceSlice without it (withheld),
//                             both seen by this process's watches. p99.
//
// --quick finishes in under a minute; the last stdout line is one JSON object with those keys.

#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <iostream>
#include <thread>

#include "libcore/api/dra_binding.hpp"
#include "libcore/api/dra_claim.hpp"
#include "libcore/api/dra_slice.hpp"
#include "libcore/api/names.hpp"
#include "libcore/kube/client.hpp"
#include "libcore/kube/resource.hpp"
#include "tests/services/reconfig-mgr/cluster.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/dra_objects.hpp"
#include "tests/support/manifests.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/kube/double_process.hpp"
#include "tools/bench/bench_util.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

using kc::bench::parallel;
using kc::bench::percentile;

namespace {

constexpr int kNodes = 500;
constexpr int kNodesPerPool = 100;
constexpr int kGpusPerNode = 4;
constexpr double kAnchorLow = 117;
constexpr double kAnchorHigh = 270;
constexpr double kGoalPodsPerS = 1000;
constexpr double kGoalMs = 100;

[[noreturn]] void die(const std::string& what) {
  throw std::runtime_error(what);
}

double ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

double r1(double v) {
  return std::round(v * 10) / 10;
}

std::string nodeName(int i) {
  return fmt::format("node-{:03d}", i);
}

json deviceClass() {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "DeviceClass"},
          {"metadata", {{"name", kc::api::kDraDeviceClassName}}},
          {"spec",
           {{"selectors",
             json::array({{{"cel", {{"expression", "device.driver == \"gpu.kubecomp.io\""}}}}})}}}};
}

// ---------------------------------------------------------------- throughput

json node(int i) {
  const json alloc = {{"cpu", "64"}, {"memory", "256Gi"}, {"pods", "110"}};
  return {
      {"metadata", {{"name", nodeName(i)}, {"labels", {{"kubernetes.io/hostname", nodeName(i)}}}}},
      {"status", {{"allocatable", alloc}, {"capacity", alloc}}}};
}

json pool(int p) {
  json nodes = json::array();
  json gpus = json::array();
  for (int i = p * kNodesPerPool; i < (p + 1) * kNodesPerPool; ++i) {
    nodes.push_back({{"name", nodeName(i)}, {"hostPort", std::to_string(i % kNodesPerPool + 1)}});
    for (int g = 0; g < kGpusPerNode; ++g) {
      const std::string id = fmt::format("c{}.{}", p, (i % kNodesPerPool) * kGpusPerNode + g);
      gpus.push_back({{"id", id},
                      {"uuid", "GPU-" + id},
                      {"chassis", fmt::format("c{}", p)},
                      {"node", nodeName(i)},
                      {"health", "Healthy"},
                      {"draining", false}});
    }
  }
  return {
      {"apiVersion", kc::api::kGpuPoolApiVersion},
      {"kind", "GPUPool"},
      {"metadata", {{"name", fmt::format("pool-{:02d}", p)}}},
      {"spec",
       {{"chassis",
         {{{"name", fmt::format("c{}", p)}, {"driver", "h3"}, {"endpoint", "http://127.0.0.1:1"}}}},
        {"nodes", nodes},
        {"allocationPath", "DRA"}}},
      {"status", {{"gpus", gpus}}}};
}

json claim(int i) {
  return kc::testing::oneGpuClaim(fmt::format("claim-{:05d}", i), "bench");
}

json pod(int i) {
  return {
      {"metadata", {{"name", fmt::format("pod-{:05d}", i)}, {"namespace", "bench"}}},
      {"spec",
       {{"schedulerName", "kubecomp-sched"},
        {"resourceClaims",
         json::array({{{"name", "gpu"}, {"resourceClaimName", fmt::format("claim-{:05d}", i)}}})},
        {"containers",
         {{{"name", "main"},
           {"image", "registry.local/train:1"},
           {"resources",
            {{"requests", {{"cpu", "100m"}, {"memory", "128Mi"}}},
             {"claims", json::array({{{"name", "gpu"}}})}}}}}}}}};
}

struct Throughput {
  int pods = 0;
  double seconds = 0;
  double podsPerS = 0;
  double p50Ms = 0;
  double p99Ms = 0;
};

void setUpCluster(kc::kube::KubeClient& c, int pods) {
  kc::testing::installCrd(c, kc::testing::loadYamlFile(
                                 KC_SOURCE_DIR "/charts/kubecomp/crds/gpupools.kubecomp.io.yaml"));
  if (auto r = c.create(kc::kube::gvr::namespaces(), "", {{"metadata", {{"name", "bench"}}}});
      !r && !r.error().isAlreadyExists()) {
    die(r.error().message);
  }
  if (auto r = c.create(kc::api::gvr::deviceClasses(), "", deviceClass()); !r) {
    die("DeviceClass: " + r.error().message);
  }
  parallel(kNodes, 4, [&](int i) {
    if (auto r = c.create(kc::kube::gvr::nodes(), "", node(i)); !r) {
      die("node: " + r.error().message);
    }
  });
  parallel(kNodes / kNodesPerPool, 4, [&](int p) {
    json obj = pool(p);
    json status = obj["status"];
    obj.erase("status");
    if (auto r = c.create(kc::api::gvr::gpuPools(), "", obj); !r) {
      die("pool: " + r.error().message);
    }
    if (auto r = c.patch(kc::api::gvr::gpuPools(), "", obj["metadata"]["name"],
                         kc::kube::PatchType::kMerge, {{"status", status}}, "status");
        !r) {
      die("pool status: " + r.error().message);
    }
  });
  parallel(pods, 4, [&](int i) {
    if (auto r = c.create(kc::api::gvr::resourceClaims(), "bench", claim(i)); !r) {
      die("claim: " + r.error().message);
    }
  });
}

Throughput measureThroughput(int pods) {
  kc::testing::TempDir dir;
  kc::kube::testing::DoubleProcess api(KC_APISERVER_DOUBLE_EXE, dir.path());
  kc::kube::KubeClientOptions co;
  co.qps = 0;
  auto client = kc::kube::KubeClient::create(api.config(), co);
  if (!client) {
    die(client.error().message);
  }
  auto& c = **client;
  const auto setup0 = Clock::now();
  setUpCluster(c, pods);
  std::cout << fmt::format("setup: {} nodes, {} DRA GPUPools, {} GPUs, {} claims in {:.1f} s\n",
                           kNodes, kNodes / kNodesPerPool, kNodes * kGpusPerNode, pods,
                           std::chrono::duration<double>(Clock::now() - setup0).count());
  std::cout.flush();
  kc::testing::ChildProcess sched({KUBECOMP_SCHED_EXE, "--kubeconfig", api.kubeconfigPath(),
                                   "--port", "0", "--port-file", dir.file("port"), "--kube-api-qps",
                                   "0", "--leader-elect=false", "--log-level", "warn"});
  sched.waitUntil([&] { return kc::testing::readPortFile(dir.file("port")).has_value(); }, 30s,
                  "port file");
  std::vector<Clock::time_point> sent(static_cast<std::size_t>(pods));
  std::vector<Clock::time_point> bound(static_cast<std::size_t>(pods));
  std::atomic<int> boundCount{0};
  kc::net::CancelToken cancel;
  auto list = c.list(kc::kube::gvr::pods(), "bench");
  if (!list) {
    die(list.error().message);
  }
  std::thread watcher([&] {
    kc::kube::ListOptions lo;
    lo.resourceVersion = list->resourceVersion;
    lo.timeoutSeconds = 300;
    (void)c.watch(
        kc::kube::gvr::pods(), "bench", lo,
        [&](kc::kube::WatchEvent&& ev) {
          const auto now = Clock::now();
          const auto& spec = ev.object["spec"];
          if (ev.type == "MODIFIED" && spec.contains("nodeName") && spec["nodeName"].is_string()) {
            const int i = std::stoi(ev.object["metadata"]["name"].get<std::string>().substr(4));
            if (bound[static_cast<std::size_t>(i)] == Clock::time_point{}) {
              bound[static_cast<std::size_t>(i)] = now;
              ++boundCount;
            }
          }
          return boundCount.load() < pods;
        },
        &cancel);
  });
  const auto t0 = Clock::now();
  parallel(pods, 4, [&](int i) {
    sent[static_cast<std::size_t>(i)] = Clock::now();
    if (auto r = c.create(kc::kube::gvr::pods(), "bench", pod(i)); !r) {
      die("pod: " + r.error().message);
    }
  });
  const auto limit = Clock::now() + 120s;
  while (boundCount.load() < pods && Clock::now() < limit) {
    std::this_thread::sleep_for(2ms);
  }
  if (boundCount.load() < pods) {
    cancel.cancel();
    watcher.join();
    die(fmt::format("only {} of {} pods bound within 120 s", boundCount.load(), pods));
  }
  watcher.join();
  Throughput t;
  t.pods = pods;
  t.seconds = ms(*std::max_element(bound.begin(), bound.end()) - t0) / 1000;
  t.podsPerS = pods / t.seconds;
  std::vector<double> lat;
  for (std::size_t i = 0; i < bound.size(); ++i) {
    lat.push_back(ms(bound[i] - sent[i]));
  }
  t.p50Ms = percentile(lat, 0.5);
  t.p99Ms = percentile(lat, 0.99);
  // Every claim allocated exactly one device, no device twice.
  auto claims = c.listAll(kc::api::gvr::resourceClaims(), "bench");
  if (!claims) {
    die(claims.error().message);
  }
  std::set<std::string> devices;
  for (const json& obj : claims->items) {
    auto parsed = kc::api::parseClaim(obj);
    if (!parsed || !parsed->allocation || parsed->allocation->results.size() != 1 ||
        !devices
             .insert(parsed->allocation->results[0].pool + "/" +
                     parsed->allocation->results[0].device)
             .second) {
      die("claim " + obj["metadata"].value("name", "") + " not allocated one device of its own");
    }
  }
  return t;
}

// ---------------------------------------------------------------- attach and publish

using kc::reconfig::testing::ClusterSpec;
using kc::reconfig::testing::SimCluster;

// Node n1 and `gpus` unattached GPUs c0.01, c0.02, ... in pool-a.
ClusterSpec oneNodeFabric(int gpus) {
  ClusterSpec s;
  s.nodes = {"n1"};
  for (int i = 1; i <= gpus; ++i) {
    s.chassis["c0"].push_back({fmt::format("{:02X}", i), ""});
  }
  return s;
}

void setDra(SimCluster& c) {
  if (!c.client().patch(kc::api::gvr::gpuPools(), "", "pool-a", kc::kube::PatchType::kMerge,
                        {{"spec", {{"allocationPath", "DRA"}}}})) {
    die("cannot switch pool-a to DRA");
  }
}

// The claim allocated device `gpu` of pool-a's fabric pool for `node`, as kube-scheduler writes.
void allocate(SimCluster& c, const std::string& name, const std::string& gpu,
              const std::string& node) {
  auto created = c.client().create(kc::api::gvr::resourceClaims(), "default",
                                   kc::testing::oneGpuClaim(name, "default"));
  if (!created) {
    die("claim: " + created.error().message);
  }
  json body = *created;
  body["status"] = kc::testing::fabricAllocationStatus("pool-a", gpu, node, "p-" + name);
  if (auto r = c.client().updateStatus(kc::api::gvr::resourceClaims(), "default", body); !r) {
    die("allocation: " + r.error().message);
  }
}

bool attached(SimCluster& c, const std::string& name) {
  auto obj = c.client().get(kc::api::gvr::resourceClaims(), "default", name);
  if (!obj) {
    return false;
  }
  auto parsed = kc::api::parseClaim(*obj);
  return parsed && parsed->allocation &&
         kc::api::bindingState(*parsed, parsed->allocation->results[0]) ==
             kc::api::BindingState::kAttached;
}

std::vector<double> measureAttach(int samples) {
  SimCluster c(oneNodeFabric(samples));
  c.startManager();
  setDra(c);
  std::vector<double> out;
  for (int i = 1; i <= samples; ++i) {
    const std::string name = fmt::format("attach-{}", i);
    const std::string gpu = fmt::format("c0.{:02X}", i);
    // Published in the fabric pool first, as an allocator would have seen it.
    if (!c.poolUntil(
            [&](const json& st) {
              for (const auto& g : st.value("gpus", json::array())) {
                if (g.value("id", "") == gpu) {
                  return true;
                }
              }
              return false;
            },
            30s)) {
      die("GPU " + gpu + " never listed");
    }
    // One attach at a time, spaced so that reconfig-mgr's client-side rate limit (50 requests/s,
    // about 10 per attach) has refilled: this is the latency of one attach, not a burst's.
    std::this_thread::sleep_for(250ms);
    const auto t0 = Clock::now();
    allocate(c, name, gpu, "n1");
    const auto limit = t0 + 30s;
    while (!attached(c, name) && Clock::now() < limit) {
      std::this_thread::sleep_for(1ms);
    }
    if (!attached(c, name)) {
      die("claim " + name + " never attached");
    }
    out.push_back(ms(Clock::now() - t0));
  }
  return out;
}

std::vector<double> measurePublish(int samples) {
  SimCluster c(oneNodeFabric(samples));
  c.startManager();
  setDra(c);
  // One watch client sees both objects: when the status drops a GPU, when the slice does.
  std::mutex mu;
  std::map<std::string, Clock::time_point> statusGone;
  std::map<std::string, Clock::time_point> sliceGone;
  kc::net::CancelToken cancel;
  std::atomic<bool> stop{false};
  auto watch = [&](kc::kube::GroupVersionResource r, bool slices) {
    return std::thread([&, r, slices] {
      kc::kube::ListOptions lo;
      lo.timeoutSeconds = 60;
      (void)c.client().watch(
          r, "", lo,
          [&](kc::kube::WatchEvent&& ev) {
            const auto now = Clock::now();
            if (stop) {
              return false;
            }
            std::set<std::string> ids;
            if (slices) {
              if (auto sl = kc::api::parseResourceSlice(ev.object);
                  sl && sl->poolName == "pool-a") {
                for (const auto& d : sl->devices) {
                  ids.insert(d.id);
                }
              } else {
                return true;
              }
            } else {
              const json gpus =
                  ev.object.value("status", json::object()).value("gpus", json::array());
              if (gpus.empty()) {
                return true;  // no inventory yet
              }
              for (const auto& g : gpus) {
                // Shown and healthy: a GPU the chassis reports failed is the change here.
                ids.insert(g.value("health", "") == "Healthy" ? g.value("id", "") : "");
              }
            }
            std::lock_guard lock(mu);
            auto& gone = slices ? sliceGone : statusGone;
            for (int i = 1; i <= samples; ++i) {
              const std::string id = fmt::format("c0.{:02X}", i);
              if (!ids.count(id) && !gone.count(id)) {
                gone[id] = now;
              }
            }
            return true;
          },
          &cancel);
    });
  };
  std::thread w1 = watch(kc::api::gvr::gpuPools(), false);
  std::thread w2 = watch(kc::api::gvr::resourceSlices(), true);
  // A watch ends at its next event once stopped: the pool leaving DRA sends one to both.
  auto endWatches = [&] {
    stop = true;
    cancel.cancel();
    (void)c.client().patch(kc::api::gvr::gpuPools(), "", "pool-a", kc::kube::PatchType::kMerge,
                           {{"spec", {{"allocationPath", "DevicePlugin"}}}});
    w1.join();
    w2.join();
  };
  if (!c.poolUntil([&](const json& st) { return st.value("totalGPUs", 0) == samples; }, 30s)) {
    die("inventory never read");
  }
  std::this_thread::sleep_for(200ms);  // the watches are up and the first slices written
  std::vector<double> out;
  for (int i = 1; i <= samples; ++i) {
    const std::string id = fmt::format("c0.{:02X}", i);
    c.fault({{"chassis", "c0"},
             {"op", "inventory"},
             {"kind", "lose_gpu"},
             {"gpu", fmt::format("{:02X}", i)},
             {"times", 1}});
    const auto limit = Clock::now() + 30s;
    for (;;) {
      {
        std::lock_guard lock(mu);
        if (statusGone.count(id) && sliceGone.count(id)) {
          out.push_back(std::max(0.0, ms(sliceGone[id] - statusGone[id])));
          break;
        }
      }
      if (Clock::now() > limit) {
        endWatches();
        die("GPU " + id + " never left the status and the slices");
      }
      std::this_thread::sleep_for(1ms);
    }
  }
  endWatches();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "bench_dra: the DRA path - pods with claims per second through kubecomp-sched at 500 "
      "nodes, the attach controller's overhead, the slice publisher's latency"};
  bool quick = false;
  int pods = 0;
  int samples = 0;
  app.add_flag("--quick", quick, "1,000 pods and 5 samples each (finishes well under a minute)");
  app.add_option("--pods", pods, "pods with one claim each (default 2,000; 1,000 with --quick)")
      ->check(CLI::Range(1, kNodes * kGpusPerNode));
  app.add_option("--samples", samples, "attaches and slice updates measured (default 20; 5 quick)")
      ->check(CLI::Range(1, 200));
  CLI11_PARSE(app, argc, argv);
  if (pods == 0) {
    pods = quick ? 1'000 : 2'000;
  }
  if (samples == 0) {
    samples = quick ? 5 : 20;
  }
  try {
    const Throughput t = measureThroughput(pods);
    std::cout << fmt::format("kubecomp-sched, {} pods with one claim each at {} nodes:\n", t.pods,
                             kNodes);
    std::cout << fmt::format(
        "  ours (pool policy)     {:8.0f} pods/s  (p50 {:.0f} ms, p99 {:.0f} ms)\n", t.podsPerS,
        t.p50Ms, t.p99Ms);
    std::cout << fmt::format("  anchor kube-scheduler  {:.0f}-{:.0f} pods/s  goal >= {:.0f}\n",
                             kAnchorLow, kAnchorHigh, kGoalPodsPerS);
    std::cout.flush();
    const auto attach = measureAttach(samples);
    std::cout << fmt::format(
        "attach controller, {} claims (allocated -> attached=True, chassis latency 0):\n"
        "  ours p50 {:.1f} ms  p99 {:.1f} ms   goal < {:.0f} ms\n",
        samples, percentile(attach, 0.5), percentile(attach, 0.99), kGoalMs);
    std::cout.flush();
    const auto publish = measurePublish(samples);
    std::cout << fmt::format(
        "slice publisher, {} inventory changes (a GPU failed: status shows it -> slice withholds "
        "it):\n"
        "  ours p50 {:.1f} ms  p99 {:.1f} ms   goal < {:.0f} ms\n",
        samples, percentile(publish, 0.5), percentile(publish, 0.99), kGoalMs);
    const json out = {{"dra_pods_per_s_500_nodes", std::round(t.podsPerS)},
                      {"attach_overhead_ms", r1(percentile(attach, 0.5))},
                      {"slice_publish_p99_ms", r1(percentile(publish, 0.99))}};
    std::cout << out.dump() << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "bench_dra: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
