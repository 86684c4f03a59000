#include "tools/bench/sched/gang_bench.hpp"

#include <fmt/core.h>

#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

#include "libcore/api/names.hpp"
#include "services/kubecomp-sched/sched_cache.hpp"
#include "tools/bench/sched/bench_cluster.hpp"

namespace kc::bench {
namespace {

using nlohmann::json;

constexpr int kNodes = 5'000;
constexpr int kNodesPerPool = 100;
constexpr int kAttached = 3;
constexpr int kUnattachedPerPool = 100;

json pool(int p) {
  json nodes = json::array();
  json gpus = json::array();
  auto gpu = [&](const std::string& id, const std::string& on) {
    json g = {{"id", id},
              {"uuid", "GPU-" + id},
              {"chassis", fmt::format("c{}", p)},
              {"health", "Healthy"},
              {"draining", false}};
    if (!on.empty()) {
      g["node"] = on;
    }
    gpus.push_back(std::move(g));
  };
  for (int i = p * kNodesPerPool; i < (p + 1) * kNodesPerPool; ++i) {
    nodes.push_back(
        {{"name", benchNodeName(i)}, {"hostPort", std::to_string(i % kNodesPerPool + 1)}});
    for (int g = 0; g < kAttached; ++g) {
      gpu(fmt::format("c{}.{}", p, (i % kNodesPerPool) * kAttached + g), benchNodeName(i));
    }
  }
  for (int u = 0; u < kUnattachedPerPool; ++u) {
    gpu(fmt::format("c{}.u{}", p, u), "");
  }
  return {{"metadata", {{"name", fmt::format("pool-{:02d}", p)}}},
          {"spec", {{"nodes", nodes}}},
          {"status", {{"gpus", gpus}}}};
}

json podGroup(std::uint32_t g, std::uint32_t size) {
  return {{"metadata",
           {{"name", fmt::format("job-{:05d}", g)},
            {"namespace", "bench"},
            {"creationTimestamp", "2026-11-28T00:00:00Z"}}},
          {"spec", {{"minMember", size}}}};
}

json member(std::uint32_t g, std::uint32_t m) {
  json res = {{"cpu", "100m"}, {"memory", "128Mi"}, {kc::api::kGpuResource, "2"}};
  const std::string name = fmt::format("job-{:05d}-{}", g, m);
  return {{"metadata",
           {{"name", name},
            {"namespace", "bench"},
            {"uid", "uid-" + name},
            {"creationTimestamp", "2026-11-28T00:00:00Z"},
            {"labels", {{"scheduling.x-k8s.io/pod-group", fmt::format("job-{:05d}", g)}}}}},
          {"spec",
           {{"schedulerName", "kubecomp-sched"},
            {"containers",
             {{{"name", "main"},
               {"image", "train"},
               {"resources", {{"requests", res}, {"limits", res}}}}}}}}};
}

}  // namespace

GangFigures measureGangs(const GangScenario& sc) {
  sched::CacheOptions opts;
  sched::SchedCache cache(opts);
  const auto now = sched::Clock::time_point{} + std::chrono::hours(1);
  for (int i = 0; i < kNodes; ++i) {
    cache.ingestNode(benchNode(i, kAttached));
  }
  for (int p = 0; p < kNodes / kNodesPerPool; ++p) {
    cache.ingestPool(pool(p));
  }
  cache.resetQueue(now);
  for (std::uint32_t g = 0; g < sc.gangs; ++g) {
    cache.ingestPodGroup(podGroup(g, sc.size));
    for (std::uint32_t m = 0; m < sc.size; ++m) {
      cache.ingestPod(member(g, m), now);
    }
  }
  GangFigures f;
  std::string firstRefusal;
  const std::uint64_t total = std::uint64_t{sc.gangs} * sc.size;
  const auto t0 = std::chrono::steady_clock::now();
  for (int round = 0; round < 100'000 && f.pods + f.refused * sc.size < total; ++round) {
    const auto actions = cache.next(now, 256);
    if (actions.empty() && !cache.dirty()) {
      break;
    }
    for (const auto& a : actions) {
      switch (a.kind) {
        case sched::Action::Kind::kBind:
          ++f.bound;
          ++f.pods;
          break;
        case sched::Action::Kind::kReserve:
        case sched::Action::Kind::kQueued:
          ++f.reserved;
          ++f.pods;
          break;
        case sched::Action::Kind::kUnschedulable:
          ++f.refused;  // counted per pod; a whole gang is refused together
          if (firstRefusal.empty()) {
            firstRefusal = a.message;
          }
          break;
        default:
          break;
      }
    }
  }
  f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  f.refused /= sc.size;
  if (f.pods != total) {
    throw std::runtime_error(fmt::format(
        "gang bench: {} of {} gang pods decided ({} gangs refused)", f.pods, total, f.refused));
  }
  return f;
}

void GangFigures::print(std::ostream& out) const {
  out << fmt::format(
      "Gangs at 5,000 nodes (PodGroups of 8 pods x 2 GPUs, eq1, the cache alone):\n"
      "  {:8.0f} gang pods decided/s ({} pods: {} bound at once, {} reserved for GPU moves; "
      "{:.1f} ms in all; goal >= 1,000)\n",
      podsPerS(), pods, bound, reserved, seconds * 1000);
}

void GangFigures::addTo(json& out) const {
  out["gang_pods_per_s_5000_nodes"] = std::round(podsPerS());
  out["gang_pods"] = pods;
  out["gang_pods_reserved_for_moves"] = reserved;
}

}  // namespace kc::bench
