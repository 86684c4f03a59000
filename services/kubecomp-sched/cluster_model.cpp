#include "services/kubecomp-sched/cluster_model.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <tuple>

#include "libcore/api/dra_slice.hpp"

namespace kc::sched {
namespace {

std::int64_t gpuOf(const alloc::Resources& r) {
  return r.scalarOr0(alloc::kGpuResource);
}

std::size_t preferTaint(const alloc::SchedNode& n) {
  return std::any_of(
             n.taints.begin(), n.taints.end(),
             [](const alloc::Taint& t) { return t.effect == alloc::TaintEffect::PreferNoSchedule; })
             ? 1
             : 0;
}

}  // namespace

void ClusterModel::setNode(const std::string& name, alloc::SchedNode node) {
  const std::int64_t gpus = gpuOf(node.allocatable);
  preferTaintNodes_ += preferTaint(node);
  auto it = nodeMap_.find(name);
  if (it == nodeMap_.end()) {
    nodeMap_.emplace(name, NodeEntry{std::move(node), gpus});
    structureDirty_ = true;
    return;
  }
  const bool gpusChanged = it->second.allocatableGpus != gpus;
  preferTaintNodes_ -= preferTaint(it->second.node);
  it->second.node = std::move(node);
  it->second.allocatableGpus = gpus;
  if (!structureDirty_) {
    nodes_[nodeIndex_.at(name)] = it->second.node;
    if (gpusChanged) {
      markPoolDirtyForNode(name);
    }
  }
}

void ClusterModel::removeNode(const std::string& name) {
  auto it = nodeMap_.find(name);
  if (it != nodeMap_.end()) {
    preferTaintNodes_ -= preferTaint(it->second.node);
    nodeMap_.erase(it);
    structureDirty_ = true;
  }
}

void ClusterModel::setPool(const std::string& name, ModelPool pool) {
  pool.nodeSet.insert(pool.nodes.begin(), pool.nodes.end());
  poolMap_[name] = std::move(pool);
  structureDirty_ = true;
  probes_.reset();
  draByNode_.reset();
}

void ClusterModel::removePool(const std::string& name) {
  if (poolMap_.erase(name) > 0) {
    structureDirty_ = true;
    probes_.reset();
    draByNode_.reset();
  }
}

std::size_t ClusterModel::gpuCount() const {
  std::size_t n = 0;
  for (const auto& [name, p] : poolMap_) {
    n += p.gpus.size();
  }
  return n;
}

std::optional<std::size_t> ClusterModel::indexOf(const std::string& node) const {
  auto n = nodeIndex_.find(node);
  if (n == nodeIndex_.end()) {
    return std::nullopt;
  }
  return n->second;
}

// ---------------------------------------------------------------- holdings

void ClusterModel::addUsage(const Holding& h) {
  if (structureDirty_) {
    return;  // the rebuild counts every holding
  }
  if (auto n = nodeIndex_.find(h.node); n != nodeIndex_.end()) {
    alloc::addPodUsage(usage_[n->second], h.request);
    markPoolDirtyForNode(h.node);
  }
}

void ClusterModel::removeUsage(const Holding& h) {
  if (structureDirty_) {
    return;
  }
  if (auto n = nodeIndex_.find(h.node); n != nodeIndex_.end()) {
    alloc::removePodUsage(usage_[n->second], h.request);
    markPoolDirtyForNode(h.node);
  }
}

bool ClusterModel::setHolding(const std::string& key, const std::string& node,
                              const alloc::Resources& request) {
  auto it = holdings_.find(key);
  if (it != holdings_.end() && it->second.node == node && it->second.request == request) {
    return false;
  }
  const bool had = it != holdings_.end();
  if (had) {
    removeUsage(it->second);
    holdings_.erase(it);
  }
  if (!node.empty()) {
    auto added = holdings_.emplace(key, Holding{node, request}).first;
    addUsage(added->second);
  }
  return had;
}

bool ClusterModel::dropHolding(const std::string& key) {
  auto it = holdings_.find(key);
  if (it == holdings_.end()) {
    return false;
  }
  removeUsage(it->second);
  holdings_.erase(it);
  return true;
}

// ---------------------------------------------------------------- the pool model

void ClusterModel::refresh() {
  if (structureDirty_) {
    rebuild();
  }
  for (alloc::PoolIndex p : dirtyPools_) {
    recomputePool(p);
  }
  dirtyPools_.clear();
}

void ClusterModel::rebuild() {
  nodes_.clear();
  nodeIndex_.clear();
  nodes_.reserve(nodeMap_.size());
  for (const auto& [name, e] : nodeMap_) {
    nodeIndex_.emplace(name, nodes_.size());
    nodes_.push_back(e.node);
  }
  state_ = alloc::ClusterState();
  poolNodes_.assign(poolMap_.size(), {});
  std::unordered_map<std::string, alloc::PoolIndex> poolOf;
  alloc::PoolIndex p = 0;
  poolDra_.clear();
  for (const auto& [name, pool] : poolMap_) {
    (void)state_.addPool(name);
    poolDra_.push_back(pool.dra);
    for (const auto& n : pool.nodes) {
      if (!poolOf.emplace(n, p).second) {
        spdlog::warn("node {} is listed by two GPUPools; it belongs to the first by name", n);
      }
    }
    ++p;
  }
  for (const auto& [name, e] : nodeMap_) {
    auto it = poolOf.find(name);
    const alloc::PoolIndex pool = it == poolOf.end() ? alloc::kNoPool : it->second;
    auto idx = state_.addNode({name, pool, 0, 0});
    if (idx && pool != alloc::kNoPool) {
      poolNodes_[pool].push_back(*idx);
    }
  }
  gpuInvDraining_.clear();
  gpuReportedUse_.clear();
  gpuPromised_.clear();
  p = 0;
  for (const auto& [name, pool] : poolMap_) {
    for (const auto& g : pool.gpus) {
      alloc::GpuSpec spec{g.id, g.uuid, g.model, p, alloc::kNoNode, false, g.healthy, g.draining};
      bool unusable = false;
      if (!g.node.empty()) {
        auto n = nodeIndex_.find(g.node);
        auto owner = poolOf.find(g.node);
        if (n != nodeIndex_.end() && owner != poolOf.end() && owner->second == p) {
          spec.node = static_cast<alloc::NodeIndex>(n->second);
        } else {
          // Attached to a node we do not know (yet) or to one outside the pool: not usable.
          unusable = true;
          spec.draining = true;
        }
      }
      auto added = state_.addGpu(spec);
      if (!added) {
        spdlog::warn("GPUPool {}: GPU {}: {}", name, g.id, added.error().message);
        continue;
      }
      gpuInvDraining_.push_back(g.draining || unusable);
      gpuReportedUse_.push_back(g.reportedInUse);
      gpuPromised_.push_back(false);
    }
    ++p;
  }
  usage_.assign(nodes_.size(), alloc::NodeUsage{});
  // Nodes in no pool: visible GPUs stay 0 (what kubelet advertises, no pool can add any).
  visibleGpus_.assign(nodes_.size(), 0);
  for (const auto& [key, h] : holdings_) {
    if (auto n = nodeIndex_.find(h.node); n != nodeIndex_.end()) {
      alloc::addPodUsage(usage_[n->second], h.request);
    }
  }
  structureDirty_ = false;
  dirtyPools_.clear();
  for (alloc::PoolIndex q = 0; q < state_.poolCount(); ++q) {
    dirtyPools_.insert(q);
  }
}

void ClusterModel::markPoolDirtyForNode(const std::string& node) {
  if (structureDirty_) {
    return;
  }
  auto n = nodeIndex_.find(node);
  if (n == nodeIndex_.end()) {
    return;
  }
  const alloc::PoolIndex p = state_.node(static_cast<alloc::NodeIndex>(n->second)).pool;
  if (p != alloc::kNoPool) {
    dirtyPools_.insert(p);
  }
}

void ClusterModel::recomputePool(alloc::PoolIndex p) {
  // Back to the inventory's flags.
  for (alloc::GpuIndex g : state_.poolGpus(p)) {
    if (state_.gpu(g).inUse) {
      (void)state_.releaseGpu(g);
    }
    (void)state_.setGpuDraining(g, gpuInvDraining_[g]);
    gpuPromised_[g] = false;
  }
  std::uint64_t outstanding = 0;
  for (alloc::NodeIndex n : poolNodes_[p]) {
    auto& usable = gpuIndexScratch_;
    usable.clear();
    for (alloc::GpuIndex g : state_.nodeGpus(n)) {
      if (state_.gpu(g).free()) {
        usable.push_back(g);
      }
    }
    // Reported in use first (the device plugin knows which ones the pods have), then id order.
    std::sort(usable.begin(), usable.end(), [&](alloc::GpuIndex a, alloc::GpuIndex b) {
      if (gpuReportedUse_[a] != gpuReportedUse_[b]) {
        return static_cast<bool>(gpuReportedUse_[a]);
      }
      return a < b;
    });
    // A DRA pool's GPUs are published as ResourceSlices, not advertised by kubelet: every
    // usable one is visible.
    const std::int64_t allocatable =
        poolDra_[p]
            ? static_cast<std::int64_t>(usable.size())
            : std::max<std::int64_t>(0, nodeMap_.find(nodes_[n].name)->second.allocatableGpus);
    const std::size_t visible =
        std::min<std::size_t>(usable.size(), static_cast<std::size_t>(allocatable));
    for (std::size_t i = visible; i < usable.size(); ++i) {
      (void)state_.setGpuDraining(usable[i], true);  // not advertised by kubelet yet
    }
    visibleGpus_[n] = static_cast<std::int64_t>(visible);
    const std::int64_t held = std::max<std::int64_t>(0, gpuOf(usage_[n].requested));
    const std::size_t take = std::min<std::size_t>(visible, static_cast<std::size_t>(held));
    for (std::size_t i = 0; i < take; ++i) {
      (void)state_.allocateGpu(usable[i]);
    }
    outstanding += static_cast<std::uint64_t>(held) - take;
  }
  // The reservations' deficits: GPUs reconfig-mgr will bring from elsewhere in the pool, the
  // unattached ones first. They are no longer free for anyone else.
  for (int pass = 0; pass < 2 && outstanding > 0; ++pass) {
    for (alloc::GpuIndex g : state_.poolGpus(p)) {
      if (outstanding == 0) {
        break;
      }
      const auto& gpu = state_.gpu(g);
      if (gpu.free() && (pass == 0) == !gpu.attached()) {
        (void)state_.setGpuDraining(g, true);
        gpuPromised_[g] = true;
        --outstanding;
      }
    }
  }
}

bool ClusterModel::draNode(const std::string& node) const {
  if (!draByNode_) {
    draByNode_.emplace();
    for (const auto& [name, pool] : poolMap_) {
      for (const std::string& n : pool.nodes) {
        draByNode_->emplace(n, pool.dra);  // the first pool by name listing the node decides
      }
    }
  }
  auto it = draByNode_->find(node);
  return it != draByNode_->end() && it->second;
}

namespace {

DraCandidate candidateOf(const std::string& gpuPool, const ModelGpu& g, std::string pool) {
  return DraCandidate{.gpuId = g.id,
                      .gpuPool = gpuPool,
                      .model = g.model,
                      .uuid = g.uuid,
                      .chassis = g.chassis,
                      .node = g.node,
                      .pool = std::move(pool),
                      .device = api::draDeviceName(g.id)};
}

}  // namespace

void ClusterModel::draCandidates(const std::string& node, std::vector<DraCandidate>* local,
                                 std::vector<DraCandidate>* remote) const {
  for (const auto& [name, pool] : poolMap_) {
    if (!pool.dra || pool.nodeSet.count(node) == 0) {
      continue;
    }
    std::map<std::string, int> idleOn;
    std::vector<const ModelGpu*> idle;
    for (const ModelGpu& g : pool.gpus) {
      if (!g.healthy || g.draining) {
        continue;
      }
      if (g.node == node) {
        local->push_back(candidateOf(name, g, name + "/" + node));
      } else if (g.node.empty()) {
        remote->push_back(candidateOf(name, g, name));
      } else if (!g.reportedInUse && pool.nodeSet.count(g.node) != 0) {
        ++idleOn[g.node];
        idle.push_back(&g);
      }
    }
    // Idle on other nodes after the unattached ones: fragments (fewest idle on their node)
    // first, a node's together, then id (the unattached-first GPU policy's order).
    std::stable_sort(idle.begin(), idle.end(), [&](const ModelGpu* a, const ModelGpu* b) {
      return std::tie(idleOn[a->node], a->node, a->id) < std::tie(idleOn[b->node], b->node, b->id);
    });
    for (const ModelGpu* g : idle) {
      remote->push_back(candidateOf(name, *g, name + "/" + g->node));
    }
    return;
  }
}

const std::vector<DraCandidate>& ClusterModel::draProbes() const {
  if (probes_) {
    return *probes_;
  }
  auto& out = probes_.emplace();
  for (const auto& [name, pool] : poolMap_) {
    if (!pool.dra) {
      continue;
    }
    std::set<std::string> models;
    for (const ModelGpu& g : pool.gpus) {
      if (models.insert(g.model).second) {
        out.push_back(candidateOf(name, g, name));
      }
    }
  }
  return out;
}

}  // namespace kc::sched
