#include "tools/kubecomp-sim/cluster.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace kc::sim {
namespace {

std::string padded(const char* prefix, std::uint64_t index, int width) {
  char buf[48];
  const int n = std::snprintf(buf, sizeof buf, "%s%0*llu", prefix, width,
                              static_cast<unsigned long long>(index));
  return std::string(buf, static_cast<std::size_t>(n));
}

}  // namespace

void ChassisNames::startPool(std::uint64_t gpus) {
  firstChassis_ = nextChassis_;
  chassisInPool_ =
      perChassis_ == 0 ? 1 : std::max<std::uint64_t>(1, (gpus + perChassis_ - 1) / perChassis_);
  nextChassis_ += chassisInPool_;
  inPool_ = 0;
}

std::string ChassisNames::nextId(std::uint64_t index) {
  if (perChassis_ == 0) {
    return padded("g", index, 7);
  }
  const std::uint64_t chassis = firstChassis_ + inPool_++ % chassisInPool_;
  std::string id("falcon-");
  id.append(std::to_string(chassis)).append(".").append(padded("g", index, 7));
  return id;
}

Result<std::vector<std::uint32_t>> parseLayout(const std::string& text) {
  std::vector<std::uint32_t> out;
  std::string_view rest = text;
  if (rest.empty()) {
    return makeError(kc::errc::kInvalid, "empty GPU layout (expected e.g. 4+4+8+8)");
  }
  while (true) {
    const std::size_t plus = rest.find('+');
    const std::string_view part = rest.substr(0, plus);
    std::uint32_t v = 0;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc{} || ptr != part.data() + part.size() || v > 1024) {
      return makeError(kc::errc::kInvalid, "bad GPU layout " + quoteInput(text) +
                                               " (expected counts joined by '+', e.g. 4+4+8+8)");
    }
    out.push_back(v);
    if (plus == std::string_view::npos) {
      break;
    }
    rest = rest.substr(plus + 1);
  }
  return out;
}

Result<alloc::ClusterState> buildCluster(const LayoutSpec& spec) {
  if (spec.pools == 0 || spec.perNodeGpus.empty()) {
    return makeError(kc::errc::kInvalid, "a cluster needs at least one pool and one node per pool");
  }
  if (spec.nodeCpuMilli <= 0) {
    return makeError(kc::errc::kInvalid, "node CPU must be positive");
  }
  if (spec.nodeMemoryMib < 0) {
    return makeError(kc::errc::kInvalid, "node memory must be >= 0");
  }
  // Sizes are checked before anything is allocated (the limits are in job.hpp).
  std::uint64_t gpusPerPool = spec.unattachedPerPool;
  for (std::uint32_t g : spec.perNodeGpus) {
    gpusPerPool += g;
  }
  if (spec.pools > kMaxPools) {
    return makeError(kc::errc::kInvalid,
                     "more than " + std::to_string(kMaxPools) + " pools (the limit)");
  }
  if (std::uint64_t{spec.pools} * spec.perNodeGpus.size() > kMaxNodes) {
    return makeError(kc::errc::kInvalid,
                     "more than " + std::to_string(kMaxNodes) + " nodes (the limit)");
  }
  if (std::uint64_t{spec.pools} * gpusPerPool > kMaxGpus) {
    return makeError(kc::errc::kInvalid,
                     "more than " + std::to_string(kMaxGpus) + " GPUs (the limit)");
  }
  alloc::ClusterState state;
  std::uint64_t nodeIndex = 0;
  std::uint64_t gpuIndex = 0;
  ChassisNames names(spec.gpusPerChassis);
  for (std::uint32_t p = 0; p < spec.pools; ++p) {
    auto pool = state.addPool(padded("pool", p, 5));
    if (!pool) {
      return pool.error();
    }
    names.startPool(gpusPerPool);
    for (std::uint32_t gpus : spec.perNodeGpus) {
      alloc::NodeSpec ns;
      ns.name = padded("n", nodeIndex++, 6);
      ns.pool = *pool;
      ns.cpuMilliCapacity = static_cast<std::uint64_t>(spec.nodeCpuMilli);
      ns.memoryMiBCapacity = static_cast<std::uint64_t>(spec.nodeMemoryMib);
      auto node = state.addNode(std::move(ns));
      if (!node) {
        return node.error();
      }
      for (std::uint32_t g = 0; g < gpus; ++g) {
        alloc::GpuSpec gs;
        gs.id = names.nextId(gpuIndex);
        gs.uuid = padded("GPU-sim-", gpuIndex++, 7);
        gs.model = spec.gpuModel;
        gs.pool = *pool;
        gs.node = *node;
        if (auto r = state.addGpu(std::move(gs)); !r) {
          return r.error();
        }
      }
    }
    for (std::uint32_t g = 0; g < spec.unattachedPerPool; ++g) {
      alloc::GpuSpec gs;
      gs.id = names.nextId(gpuIndex);
      gs.uuid = padded("GPU-sim-", gpuIndex++, 7);
      gs.model = spec.gpuModel;
      gs.pool = *pool;
      if (auto r = state.addGpu(std::move(gs)); !r) {
        return r.error();
      }
    }
  }
  return state;
}

Result<alloc::ClusterState> buildClusterFromNodes(const std::vector<NodeSpec>& nodes,
                                                  std::uint32_t nodesPerPool,
                                                  std::uint32_t gpusPerChassis) {
  if (nodes.empty()) {
    return makeError(kc::errc::kInvalid, "the node list is empty");
  }
  alloc::ClusterState state;
  const std::size_t perPool = nodesPerPool == 0 ? nodes.size() : nodesPerPool;
  std::uint64_t gpuIndex = 0;
  alloc::PoolIndex pool = 0;
  ChassisNames names(gpusPerChassis);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (i % perPool == 0) {
      auto p = state.addPool(padded("pool", i / perPool, 5));
      if (!p) {
        return p.error();
      }
      pool = *p;
      std::uint64_t poolGpus = 0;
      for (std::size_t k = i; k < nodes.size() && k < i + perPool; ++k) {
        poolGpus += nodes[k].gpus;
      }
      names.startPool(poolGpus);
    }
    alloc::NodeSpec ns;
    // The trace's names sort in file order already (openb-node-0000 ...); keep them.
    ns.name = nodes[i].name;
    ns.pool = pool;
    ns.cpuMilliCapacity = static_cast<std::uint64_t>(nodes[i].cpuMilli);
    ns.memoryMiBCapacity = static_cast<std::uint64_t>(nodes[i].memoryMib);
    auto node = state.addNode(std::move(ns));
    if (!node) {
      return node.error();
    }
    for (std::uint32_t g = 0; g < nodes[i].gpus; ++g) {
      alloc::GpuSpec gs;
      gs.id = names.nextId(gpuIndex);
      gs.uuid = padded("GPU-sim-", gpuIndex++, 7);
      gs.model = nodes[i].model;
      gs.pool = pool;
      gs.node = *node;
      if (auto r = state.addGpu(std::move(gs)); !r) {
        return r.error();
      }
    }
  }
  return state;
}

std::uint64_t totalGpus(const alloc::ClusterState& state) {
  return state.gpuCount();
}

}  // namespace kc::sim
