#include "libcore/alloc/pool_model.hpp"

#include <string>
#include <utility>

#include "libcore/alloc/gpu_model.hpp"

namespace kc::alloc {
namespace {

std::string str(std::uint64_t v) {
  return std::to_string(v);
}

}  // namespace

Result<PoolIndex> ClusterState::addPool(std::string name) {
  if (name.empty()) {
    return makeError(kc::errc::kInvalid, "pool name is empty");
  }
  if (pools_.size() >= kNoPool) {
    return makeError(kc::errc::kInvalid, "too many pools");
  }
  if (poolByName_.contains(name)) {
    return makeError(kc::errc::kConflict, "pool '" + name + "' already exists");
  }
  const auto index = static_cast<PoolIndex>(pools_.size());
  poolByName_.emplace(name, index);
  inventory_ = std::make_shared<const std::uint8_t>(0);
  pools_.push_back(PoolState{.name = std::move(name)});
  poolGpus_.emplace_back();
  return index;
}

Result<NodeIndex> ClusterState::addNode(NodeSpec spec) {
  if (spec.name.empty()) {
    return makeError(kc::errc::kInvalid, "node name is empty");
  }
  if (spec.pool != kNoPool && spec.pool >= pools_.size()) {
    return makeError(kc::errc::kInvalid,
                     "node '" + spec.name + "': unknown pool index " + str(spec.pool));
  }
  if (nodes_.size() >= kNoNode) {
    return makeError(kc::errc::kInvalid, "too many nodes");
  }
  if (nodeByName_.contains(spec.name)) {
    return makeError(kc::errc::kConflict, "node '" + spec.name + "' already exists");
  }
  const auto index = static_cast<NodeIndex>(nodes_.size());
  nodeByName_.emplace(spec.name, index);
  inventory_ = std::make_shared<const std::uint8_t>(0);
  if (spec.pool != kNoPool) {
    ++pools_[spec.pool].nodes;
  }
  nodes_.push_back(NodeState{.name = std::move(spec.name),
                             .pool = spec.pool,
                             .cpuMilliCapacity = spec.cpuMilliCapacity,
                             .memoryMiBCapacity = spec.memoryMiBCapacity});
  nodeGpus_.emplace_back();
  return index;
}

Result<GpuIndex> ClusterState::addGpu(GpuSpec spec) {
  if (spec.id.empty()) {
    return makeError(kc::errc::kInvalid, "GPU id is empty");
  }
  if (spec.pool >= pools_.size()) {
    return makeError(kc::errc::kInvalid,
                     "GPU '" + spec.id + "': unknown pool index " + str(spec.pool));
  }
  if (spec.node != kNoNode) {
    if (spec.node >= nodes_.size()) {
      return makeError(kc::errc::kInvalid,
                       "GPU '" + spec.id + "': unknown node index " + str(spec.node));
    }
    if (nodes_[spec.node].pool != spec.pool) {
      return makeError(kc::errc::kInvalid, "GPU '" + spec.id + "' of pool '" +
                                               pools_[spec.pool].name +
                                               "' cannot be attached to node '" +
                                               nodes_[spec.node].name + "' outside that pool");
    }
  } else if (spec.inUse) {
    return makeError(kc::errc::kInvalid, "GPU '" + spec.id + "' is in use but attached to no node");
  }
  if (!spec.model.empty() && !validGpuModelName(spec.model)) {
    return makeError(kc::errc::kInvalid,
                     "GPU '" + spec.id + "': '" + spec.model + "' is not a GPU model name");
  }
  if (gpus_.size() >= std::numeric_limits<GpuIndex>::max()) {
    return makeError(kc::errc::kInvalid, "too many GPUs");
  }
  if (gpuById_.contains(spec.id)) {
    return makeError(kc::errc::kConflict, "GPU '" + spec.id + "' already exists");
  }
  const auto index = static_cast<GpuIndex>(gpus_.size());
  gpuById_.emplace(spec.id, index);
  inventory_ = std::make_shared<const std::uint8_t>(0);
  gpus_.push_back(GpuState{.id = std::move(spec.id),
                           .uuid = std::move(spec.uuid),
                           .model = std::move(spec.model),
                           .pool = spec.pool,
                           .node = kNoNode,
                           .inUse = spec.inUse,
                           .healthy = spec.healthy,
                           .draining = spec.draining});
  slotInNode_.push_back(0);
  poolGpus_[spec.pool].push_back(index);
  ++pools_[spec.pool].gpus;
  if (spec.node != kNoNode) {
    linkToNode(index, spec.node);
  }
  account(index, +1);
  return index;
}

Result<PoolIndex> ClusterState::findPool(std::string_view name) const {
  if (auto it = poolByName_.find(name); it != poolByName_.end()) {
    return it->second;
  }
  return makeError(kc::errc::kNotFound, "no pool '" + std::string(name) + "'");
}

Result<NodeIndex> ClusterState::findNode(std::string_view name) const {
  if (auto it = nodeByName_.find(name); it != nodeByName_.end()) {
    return it->second;
  }
  return makeError(kc::errc::kNotFound, "no node '" + std::string(name) + "'");
}

Result<GpuIndex> ClusterState::findGpu(std::string_view id) const {
  if (auto it = gpuById_.find(id); it != gpuById_.end()) {
    return it->second;
  }
  return makeError(kc::errc::kNotFound, "no GPU '" + std::string(id) + "'");
}

Status ClusterState::checkGpu(GpuIndex g) const {
  if (g >= gpus_.size()) {
    return makeError(kc::errc::kInvalid, "unknown GPU index " + str(g));
  }
  return okStatus();
}

Status ClusterState::checkNode(NodeIndex n) const {
  if (n >= nodes_.size()) {
    return makeError(kc::errc::kInvalid, "unknown node index " + str(n));
  }
  return okStatus();
}

void ClusterState::account(GpuIndex g, int sign) {
  const GpuState& gpu = gpus_[g];
  if (!gpu.free()) {
    return;
  }
  // Unsigned wrap-around by adding -1 is well defined and exact here: a contribution is only
  // removed after it was added.
  const auto delta = static_cast<std::uint32_t>(sign);
  pools_[gpu.pool].freeGpus += delta;
  if (gpu.attached()) {
    nodes_[gpu.node].freeGpus += delta;
  } else {
    pools_[gpu.pool].freeUnattachedGpus += delta;
  }
  freeGpus_ += static_cast<std::uint64_t>(static_cast<std::int64_t>(sign));
}

void ClusterState::linkToNode(GpuIndex g, NodeIndex n) {
  gpus_[g].node = n;
  slotInNode_[g] = static_cast<std::uint32_t>(nodeGpus_[n].size());
  nodeGpus_[n].push_back(g);
  ++nodes_[n].attachedGpus;
}

void ClusterState::unlinkFromNode(GpuIndex g) {
  const NodeIndex n = gpus_[g].node;
  auto& list = nodeGpus_[n];
  const std::uint32_t slot = slotInNode_[g];
  const GpuIndex last = list.back();
  list[slot] = last;
  slotInNode_[last] = slot;
  list.pop_back();
  --nodes_[n].attachedGpus;
  gpus_[g].node = kNoNode;
}

Status ClusterState::attachGpu(GpuIndex g, NodeIndex n) {
  if (auto s = checkGpu(g); !s) {
    return s;
  }
  if (auto s = checkNode(n); !s) {
    return s;
  }
  GpuState& gpu = gpus_[g];
  if (gpu.node == n) {
    return okStatus();
  }
  if (gpu.attached()) {
    return makeError(kc::errc::kConflict, "GPU '" + gpu.id + "' is attached to node '" +
                                              nodes_[gpu.node].name + "'; detach it first");
  }
  if (nodes_[n].pool != gpu.pool) {
    return makeError(kc::errc::kInvalid, "GPU '" + gpu.id + "' of pool '" + pools_[gpu.pool].name +
                                             "' is not reachable from node '" + nodes_[n].name +
                                             "'");
  }
  account(g, -1);
  linkToNode(g, n);
  account(g, +1);
  record({.op = Undo::Op::kAttach, .index = g});
  return okStatus();
}

Status ClusterState::detachGpu(GpuIndex g) {
  if (auto s = checkGpu(g); !s) {
    return s;
  }
  GpuState& gpu = gpus_[g];
  if (!gpu.attached()) {
    return okStatus();
  }
  if (gpu.inUse) {
    return makeError(kc::errc::kConflict, "GPU '" + gpu.id + "' is in use on node '" +
                                              nodes_[gpu.node].name + "'; cannot detach");
  }
  const Undo undo{.op = Undo::Op::kDetach, .index = g, .node = gpu.node, .slot = slotInNode_[g]};
  account(g, -1);
  unlinkFromNode(g);
  account(g, +1);
  record(undo);
  return okStatus();
}

Status ClusterState::allocateGpu(GpuIndex g) {
  if (auto s = checkGpu(g); !s) {
    return s;
  }
  GpuState& gpu = gpus_[g];
  if (!gpu.attached()) {
    return makeError(kc::errc::kConflict, "GPU '" + gpu.id + "' is not attached to any node");
  }
  if (gpu.inUse) {
    return makeError(kc::errc::kConflict, "GPU '" + gpu.id + "' is already in use");
  }
  if (!gpu.healthy) {
    return makeError(kc::errc::kConflict, "GPU '" + gpu.id + "' is unhealthy");
  }
  if (gpu.draining) {
    return makeError(kc::errc::kConflict, "GPU '" + gpu.id + "' is draining");
  }
  account(g, -1);
  gpu.inUse = true;
  record({.op = Undo::Op::kAllocate, .index = g});
  return okStatus();
}

Status ClusterState::releaseGpu(GpuIndex g) {
  if (auto s = checkGpu(g); !s) {
    return s;
  }
  GpuState& gpu = gpus_[g];
  if (!gpu.inUse) {
    return makeError(kc::errc::kConflict, "GPU '" + gpu.id + "' is not in use");
  }
  gpu.inUse = false;
  account(g, +1);
  record({.op = Undo::Op::kRelease, .index = g});
  return okStatus();
}

Status ClusterState::setGpuHealthy(GpuIndex g, bool healthy) {
  if (auto s = checkGpu(g); !s) {
    return s;
  }
  record({.op = Undo::Op::kHealthy, .flag = gpus_[g].healthy, .index = g});
  account(g, -1);
  gpus_[g].healthy = healthy;
  account(g, +1);
  return okStatus();
}

Status ClusterState::setGpuDraining(GpuIndex g, bool draining) {
  if (auto s = checkGpu(g); !s) {
    return s;
  }
  record({.op = Undo::Op::kDraining, .flag = gpus_[g].draining, .index = g});
  account(g, -1);
  gpus_[g].draining = draining;
  account(g, +1);
  return okStatus();
}

Status ClusterState::setNodeSchedulable(NodeIndex n, bool schedulable) {
  if (auto s = checkNode(n); !s) {
    return s;
  }
  record({.op = Undo::Op::kSchedulable, .flag = nodes_[n].schedulable, .index = n});
  nodes_[n].schedulable = schedulable;
  return okStatus();
}

Status ClusterState::reserve(NodeIndex n, std::uint64_t cpuMilli, std::uint64_t memoryMiB) {
  if (auto s = checkNode(n); !s) {
    return s;
  }
  NodeState& node = nodes_[n];
  // Compare against what is left, never add first: no overflow whatever the input.
  if (cpuMilli > node.cpuMilliFree()) {
    return makeError(kc::errc::kInsufficient, "node '" + node.name + "': " + str(cpuMilli) +
                                                  " mCPU requested, " + str(node.cpuMilliFree()) +
                                                  " free");
  }
  if (memoryMiB > node.memoryMiBFree()) {
    return makeError(kc::errc::kInsufficient, "node '" + node.name + "': " + str(memoryMiB) +
                                                  " MiB requested, " + str(node.memoryMiBFree()) +
                                                  " free");
  }
  node.cpuMilliUsed += cpuMilli;
  node.memoryMiBUsed += memoryMiB;
  record({.op = Undo::Op::kReserve, .index = n, .cpuMilli = cpuMilli, .memoryMiB = memoryMiB});
  return okStatus();
}

Status ClusterState::release(NodeIndex n, std::uint64_t cpuMilli, std::uint64_t memoryMiB) {
  if (auto s = checkNode(n); !s) {
    return s;
  }
  NodeState& node = nodes_[n];
  if (cpuMilli > node.cpuMilliUsed || memoryMiB > node.memoryMiBUsed) {
    return makeError(kc::errc::kConflict, "node '" + node.name + "': releasing " + str(cpuMilli) +
                                              " mCPU / " + str(memoryMiB) + " MiB but only " +
                                              str(node.cpuMilliUsed) + " mCPU / " +
                                              str(node.memoryMiBUsed) + " MiB are used");
  }
  node.cpuMilliUsed -= cpuMilli;
  node.memoryMiBUsed -= memoryMiB;
  record({.op = Undo::Op::kUnreserve, .index = n, .cpuMilli = cpuMilli, .memoryMiB = memoryMiB});
  return okStatus();
}

void ClusterState::assignFrom(const ClusterState& other) {
  if (this == &other) {
    return;
  }
  const bool journaling = journaling_;
  if (inventory_ == nullptr || inventory_ != other.inventory_) {
    *this = other;
  } else {
    for (std::size_t p = 0; p < pools_.size(); ++p) {
      pools_[p].freeGpus = other.pools_[p].freeGpus;
      pools_[p].freeUnattachedGpus = other.pools_[p].freeUnattachedGpus;
    }
    for (std::size_t n = 0; n < nodes_.size(); ++n) {
      NodeState& to = nodes_[n];
      const NodeState& from = other.nodes_[n];
      to.cpuMilliUsed = from.cpuMilliUsed;
      to.memoryMiBUsed = from.memoryMiBUsed;
      to.schedulable = from.schedulable;
      to.attachedGpus = from.attachedGpus;
      to.freeGpus = from.freeGpus;
      nodeGpus_[n] = other.nodeGpus_[n];  // reuses the storage when it is large enough
    }
    for (std::size_t g = 0; g < gpus_.size(); ++g) {
      GpuState& to = gpus_[g];
      const GpuState& from = other.gpus_[g];
      to.node = from.node;
      to.inUse = from.inUse;
      to.healthy = from.healthy;
      to.draining = from.draining;
    }
    slotInNode_ = other.slotInNode_;
    freeGpus_ = other.freeGpus_;
  }
  journal_.clear();
  journaling_ = journaling;
}

// Each undo is the exact inverse of its mutation, applied newest first, so every GPU is in the
// state its mutation found it in (the aggregates are re-derived by account() as the mutation
// did). A detach is undone by putting the GPU back into its old slot and the GPU that
// unlinkFromNode moved there back at the end; an attach appended its GPU last, and as every
// later mutation is already undone it is still last.
void ClusterState::rollbackTo(std::size_t mark) {
  while (journal_.size() > mark) {
    const Undo u = journal_.back();
    journal_.pop_back();
    switch (u.op) {
      case Undo::Op::kAllocate:
        gpus_[u.index].inUse = false;
        account(u.index, +1);
        break;
      case Undo::Op::kRelease:
        account(u.index, -1);
        gpus_[u.index].inUse = true;
        break;
      case Undo::Op::kAttach:
        account(u.index, -1);
        unlinkFromNode(u.index);
        account(u.index, +1);
        break;
      case Undo::Op::kDetach: {
        account(u.index, -1);
        auto& list = nodeGpus_[u.node];
        if (u.slot < list.size()) {
          const GpuIndex moved = list[u.slot];
          slotInNode_[moved] = static_cast<std::uint32_t>(list.size());
          list.push_back(moved);
          list[u.slot] = u.index;
        } else {
          list.push_back(u.index);
        }
        slotInNode_[u.index] = u.slot;
        gpus_[u.index].node = u.node;
        ++nodes_[u.node].attachedGpus;
        account(u.index, +1);
        break;
      }
      case Undo::Op::kReserve:
        nodes_[u.index].cpuMilliUsed -= u.cpuMilli;
        nodes_[u.index].memoryMiBUsed -= u.memoryMiB;
        break;
      case Undo::Op::kUnreserve:
        nodes_[u.index].cpuMilliUsed += u.cpuMilli;
        nodes_[u.index].memoryMiBUsed += u.memoryMiB;
        break;
      case Undo::Op::kHealthy:
      case Undo::Op::kDraining:
        account(u.index, -1);
        (u.op == Undo::Op::kHealthy ? gpus_[u.index].healthy : gpus_[u.index].draining) = u.flag;
        account(u.index, +1);
        break;
      case Undo::Op::kSchedulable:
        nodes_[u.index].schedulable = u.flag;
        break;
    }
  }
}

}  // namespace kc::alloc
