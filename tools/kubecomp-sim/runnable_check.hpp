#pragma once
// Whether a job could ever run on the simulated cluster (the engine rejects it at arrival
// otherwise). Internal to kc_sim.

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "libcore/alloc/gpu_model.hpp"
#include "libcore/alloc/node_score.hpp"
#include "libcore/alloc/pool_model.hpp"

namespace kc::sim {

// Whether a request could run on the EMPTY cluster: some node type with enough CPU, memory
// and reachable GPUs of an accepted model (its pool's healthy GPUs when composable, its own
// when preconfigured). One table of node types per GPU model filter, built when first needed.
class RunnableCheck {
 public:
  RunnableCheck(const alloc::ClusterState& s, alloc::Composability mode) : state_(s), mode_(mode) {}

  bool runnable(const alloc::PodRequest& pod, std::uint32_t filter,
                const alloc::GpuModelFilter& models) {
    const Key key{pod.cpuMilli, pod.memoryMiB, pod.gpus, filter};
    if (auto it = cache_.find(key); it != cache_.end()) {
      return it->second;
    }
    if (types_.size() <= filter) {
      types_.resize(filter + 1);
    }
    if (!types_[filter]) {
      types_[filter] = nodeTypes(models);
    }
    bool ok = false;
    for (const auto& [cpu, mem, gpus] : *types_[filter]) {
      if (pod.cpuMilli <= cpu && pod.memoryMiB <= mem && pod.gpus <= gpus) {
        ok = true;
        break;
      }
    }
    cache_.emplace(key, ok);
    return ok;
  }

 private:
  using Types = std::vector<std::tuple<std::uint64_t, std::uint64_t, std::uint64_t>>;

  Types nodeTypes(const alloc::GpuModelFilter& models) const {
    const alloc::ClusterState& s = state_;
    std::vector<std::uint64_t> poolHealthy(s.poolCount(), 0);
    std::vector<std::uint64_t> nodeHealthy(s.nodeCount(), 0);
    for (alloc::GpuIndex g = 0; g < s.gpuCount(); ++g) {
      const auto& gpu = s.gpu(g);
      if (!gpu.healthy || !models.accepts(gpu.model)) {
        continue;
      }
      ++poolHealthy[gpu.pool];
      if (gpu.attached()) {
        ++nodeHealthy[gpu.node];
      }
    }
    std::set<std::tuple<std::uint64_t, std::uint64_t, std::uint64_t>> types;
    for (alloc::NodeIndex n = 0; n < s.nodeCount(); ++n) {
      const auto& node = s.node(n);
      if (!node.schedulable) {
        continue;
      }
      std::uint64_t gpus = 0;
      if (mode_ == alloc::Composability::Composable) {
        gpus = node.pool == alloc::kNoPool ? 0 : poolHealthy[node.pool];
      } else {
        gpus = nodeHealthy[n];
      }
      types.emplace(node.cpuMilliCapacity, node.memoryMiBCapacity, gpus);
    }
    return Types(types.begin(), types.end());
  }

  struct Key {
    std::uint64_t cpu, mem, gpus;
    std::uint32_t filter;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const {
      return std::hash<std::uint64_t>()(k.cpu * 1'000'003ULL ^ k.mem * 7919ULL ^ k.gpus ^
                                        (std::uint64_t{k.filter} << 40));
    }
  };
  const alloc::ClusterState& state_;  // the empty cluster (the engine's copy is mutated)
  alloc::Composability mode_;
  std::vector<std::optional<Types>> types_;  // per filter index
  std::unordered_map<Key, bool, KeyHash> cache_;
};

}  // namespace kc::sim
