#pragma once
// The composable-GPU pool model (paper 001, sections III and V-C): GPU pools (one per chassis
// group), nodes wired to at most one pool, GPUs that are attached to one node of their pool or
// unattached, and the aggregates the allocation algorithms read.
//
// ClusterState is the single mutable view the scheduler and the simulator keep. Every mutator
// validates its input, returns kc::Status, changes nothing on error, and updates the aggregates
// in O(1): a decision reads "free GPUs on node n" or "free GPUs in pool p" without walking the
// cluster, so node selection (node_score.hpp) is one O(nodes) pass with O(1) work per node.
//
// A GPU is *free* when it is not in use, healthy and not draining. Only free GPUs count towards
// the aggregates: an unhealthy or draining GPU can neither run a pod nor be moved to one.

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::alloc {

using PoolIndex = std::uint32_t;
using NodeIndex = std::uint32_t;
using GpuIndex = std::uint32_t;

// A node wired to no pool (it can run only pods that need no pooled GPU), or a GPU attached
// to no node.
inline constexpr PoolIndex kNoPool = std::numeric_limits<PoolIndex>::max();
inline constexpr NodeIndex kNoNode = std::numeric_limits<NodeIndex>::max();

// What a pod (or simulated job) asks for. GPUs are whole devices from the node's pool.
struct PodRequest {
  std::uint64_t cpuMilli = 0;
  std::uint64_t memoryMiB = 0;
  std::uint32_t gpus = 0;
};

struct NodeSpec {
  std::string name{};
  PoolIndex pool = kNoPool;
  std::uint64_t cpuMilliCapacity = 0;
  std::uint64_t memoryMiBCapacity = 0;
};

struct GpuSpec {
  std::string id{};     // the pool's device id (device-plugin device ID), unique in the cluster
  std::string uuid{};   // the GPU's own UUID (NVIDIA_VISIBLE_DEVICES)
  std::string model{};  // "" (unknown) or a validGpuModelName (gpu_model.hpp), e.g. "A100"
  PoolIndex pool = 0;
  NodeIndex node = kNoNode;  // attached node, or kNoNode
  bool inUse = false;
  bool healthy = true;
  bool draining = false;
};

struct PoolState {
  std::string name{};
  std::uint32_t nodes = 0;
  std::uint32_t gpus = 0;
  std::uint32_t freeGpus = 0;            // attached or not
  std::uint32_t freeUnattachedGpus = 0;  // the cheapest to move: no detach needed

  friend bool operator==(const PoolState&, const PoolState&) = default;
};

struct NodeState {
  std::string name{};
  PoolIndex pool = kNoPool;
  std::uint64_t cpuMilliCapacity = 0;
  std::uint64_t cpuMilliUsed = 0;
  std::uint64_t memoryMiBCapacity = 0;
  std::uint64_t memoryMiBUsed = 0;
  bool schedulable = true;  // false: cordoned, filtered out by node selection
  std::uint32_t attachedGpus = 0;
  std::uint32_t freeGpus = 0;  // free GPUs attached to this node (the paper's availGPU)

  std::uint64_t cpuMilliFree() const { return cpuMilliCapacity - cpuMilliUsed; }
  std::uint64_t memoryMiBFree() const { return memoryMiBCapacity - memoryMiBUsed; }

  friend bool operator==(const NodeState&, const NodeState&) = default;
};

struct GpuState {
  std::string id{};
  std::string uuid{};
  std::string model{};  // what constrained pods match (GpuModelFilter); "" matches none
  PoolIndex pool = 0;
  NodeIndex node = kNoNode;
  bool inUse = false;
  bool healthy = true;
  bool draining = false;

  bool attached() const { return node != kNoNode; }
  bool free() const { return !inUse && healthy && !draining; }

  friend bool operator==(const GpuState&, const GpuState&) = default;
};

class ClusterState {
 public:
  // Building. Names and GPU ids must be non-empty and unique, a GPU model empty or a
  // validGpuModelName; errors: "invalid", "conflict".
  Result<PoolIndex> addPool(std::string name);
  Result<NodeIndex> addNode(NodeSpec spec);
  // The GPU may start attached (to a node of its pool), in use (only if attached), unhealthy
  // or draining, as an inventory read reports it.
  Result<GpuIndex> addGpu(GpuSpec spec);

  // Lookups by name (O(log n); not for hot paths). Error "not_found".
  Result<PoolIndex> findPool(std::string_view name) const;
  Result<NodeIndex> findNode(std::string_view name) const;
  Result<GpuIndex> findGpu(std::string_view id) const;

  std::size_t poolCount() const { return pools_.size(); }
  std::size_t nodeCount() const { return nodes_.size(); }
  std::size_t gpuCount() const { return gpus_.size(); }

  // Precondition for the accessors below: a valid index (see the counts above).
  const PoolState& pool(PoolIndex p) const { return pools_[p]; }
  const NodeState& node(NodeIndex n) const { return nodes_[n]; }
  const GpuState& gpu(GpuIndex g) const { return gpus_[g]; }
  // Every GPU of the pool, in inventory (insertion) order.
  std::span<const GpuIndex> poolGpus(PoolIndex p) const { return poolGpus_[p]; }
  // GPUs attached to the node, in no particular order (it changes as GPUs move).
  std::span<const GpuIndex> nodeGpus(NodeIndex n) const { return nodeGpus_[n]; }
  // Free GPUs in the whole cluster.
  std::uint64_t freeGpus() const { return freeGpus_; }

  // Fabric moves. Attach: the GPU must be unattached (or already on `node`: no-op) and the node
  // in the GPU's pool. Detach: the GPU must not be in use; detaching an unattached GPU is a
  // no-op. Errors: "invalid" (bad index, wrong pool), "conflict" (attached elsewhere, in use).
  Status attachGpu(GpuIndex g, NodeIndex node);
  Status detachGpu(GpuIndex g);

  // A pod takes / gives back a GPU. Allocate needs an attached, free GPU; release needs an
  // in-use GPU. Errors: "invalid", "conflict" (double allocate/release, not attached, not free).
  Status allocateGpu(GpuIndex g);
  Status releaseGpu(GpuIndex g);

  // Health and draining flags (idempotent).
  Status setGpuHealthy(GpuIndex g, bool healthy);
  Status setGpuDraining(GpuIndex g, bool draining);
  Status setNodeSchedulable(NodeIndex n, bool schedulable);

  // CPU and memory of a node. Reserve fails ("insufficient") if it would exceed capacity;
  // release fails ("conflict") if more is released than is used. Nothing changes on error.
  Status reserve(NodeIndex n, std::uint64_t cpuMilli, std::uint64_t memoryMiB);
  Status release(NodeIndex n, std::uint64_t cpuMilli, std::uint64_t memoryMiB);

  // What-if questions on one copy instead of a copy per question (backfill.hpp): while the
  // journal is on, every mutator above that changes something records how to undo it, and
  // rollbackTo(mark) undoes back to a journalSize() taken earlier, leaving the model exactly as
  // it was then (aggregates and the order of the GPUs on each node included). Building
  // (addPool, addNode, addGpu) is not journaled: do not build while a mark is outstanding.
  // Undoing costs what the undone mutations touched, not the model's size.
  void setJournaling(bool on) { journaling_ = on; }
  std::size_t journalSize() const { return journal_.size(); }
  void rollbackTo(std::size_t mark);

  // Makes this model equal to `other` (as operator= does; the journal emptied, journaling as it
  // was). When both are copies of one model built no further since (the same pools, nodes and
  // GPUs: names, ids, models, wiring and capacities), only what the mutators change is copied,
  // in O(nodes + GPUs) and without allocating: for a what-if copy refreshed often.
  void assignFrom(const ClusterState& other);

 private:
  // One journaled mutation, enough to undo it.
  struct Undo {
    enum class Op : std::uint8_t {
      kAllocate,
      kRelease,
      kAttach,
      kDetach,  // from `node` at `slot`
      kReserve,
      kUnreserve,
      kHealthy,   // the old flag in `flag`
      kDraining,  // the old flag in `flag`
      kSchedulable,
    };
    Op op;
    bool flag = false;
    std::uint32_t index = 0;  // GPU or node
    NodeIndex node = kNoNode;
    std::uint32_t slot = 0;
    std::uint64_t cpuMilli = 0;
    std::uint64_t memoryMiB = 0;
  };
  void record(const Undo& u) {
    if (journaling_) {
      journal_.push_back(u);
    }
  }

  Status checkGpu(GpuIndex g) const;
  Status checkNode(NodeIndex n) const;
  // Adds (+1) or removes (-1) the GPU's contribution to the free aggregates.
  void account(GpuIndex g, int sign);
  void linkToNode(GpuIndex g, NodeIndex n);
  void unlinkFromNode(GpuIndex g);

  std::vector<PoolState> pools_;
  std::vector<NodeState> nodes_;
  std::vector<GpuState> gpus_;
  std::vector<std::vector<GpuIndex>> poolGpus_;
  std::vector<std::vector<GpuIndex>> nodeGpus_;
  std::vector<std::uint32_t> slotInNode_;  // position of each attached GPU in nodeGpus_[node]
  std::uint64_t freeGpus_ = 0;
  bool journaling_ = false;
  std::vector<Undo> journal_;
  // Replaced by every addPool/addNode/addGpu and shared by copies: equal pointers mean the
  // same inventory (assignFrom).
  std::shared_ptr<const std::uint8_t> inventory_;
  std::map<std::string, PoolIndex, std::less<>> poolByName_;
  std::map<std::string, NodeIndex, std::less<>> nodeByName_;
  std::map<std::string, GpuIndex, std::less<>> gpuById_;
};

}  // namespace kc::alloc
