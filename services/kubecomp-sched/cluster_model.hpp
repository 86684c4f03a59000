#pragma once
// kubecomp-sched's model of the cluster (kube-scheduler keeps the same split: backend/cache is
// the cluster, backend/queue the pods waiting): every Node and GPUPool as the compact models of
// libcore/alloc, what each pod holds on which node, and the pool model (alloc::ClusterState) a
// decision reads, kept current incrementally.
//
// What a node's GPUs look like to a decision (per pool, recomputed when something in the pool
// changes):
//   usable(n)  = GPUs the GPUPool status shows attached to n, healthy, not draining
//   visible(n) = min(usable(n), status.allocatable["kubecomp.io/gpu"] of n): a GPU kubelet does
//                not advertise yet cannot run a pod; the rest are marked draining in the model
//   held(n)    = kubecomp.io/gpu requested by the pods holding n (bound, assumed bound or
//                reserved there)
//   min(held, visible) GPUs of n are marked in use (those the device plugin reports in use
//   first); the rest of held, the reservations' outstanding deficit, is taken from the pool's
//   other free GPUs (unattached first), since reconfig-mgr will move them to n.
// So a pod may be placed only where the GPUs promised to earlier pods are already counted.
//
// Not thread-safe: the scheduler cache's mutex guards it.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "libcore/alloc/pod_fit.hpp"
#include "libcore/alloc/pool_model.hpp"
#include "libcore/alloc/sched_objects.hpp"
#include "services/kubecomp-sched/dra_state.hpp"

namespace kc::sched {

// One GPU of a GPUPool's inventory as the model reads it.
struct ModelGpu {
  std::string id;
  std::string uuid;
  std::string model;
  std::string node;  // "" unattached
  bool healthy = true;
  bool draining = false;
  bool reportedInUse = false;
  std::string chassis;
};

// One GPUPool: the nodes it connects and its inventory.
struct ModelPool {
  bool dra = false;  // spec.allocationPath DRA: ResourceSlices, not the device plugin
  std::vector<std::string> nodes;
  std::unordered_set<std::string> nodeSet;  // the same, for lookups (setPool fills it)
  std::vector<ModelGpu> gpus;
};

// What one pod holds: its request on a node.
struct Holding {
  std::string node;
  alloc::Resources request;
};

class ClusterModel {
 public:
  // Objects. A node or pool that changes shape (comes, goes, joins a pool) makes the next
  // fresh() rebuild the dense views; a node's allocatable GPUs or a holding only recomputes the
  // node's pool.
  void setNode(const std::string& name, alloc::SchedNode node);
  void removeNode(const std::string& name);
  // Whether some node has a PreferNoSchedule taint (kept as nodes are set and removed).
  bool anyPreferNoScheduleTaint() const { return preferTaintNodes_ > 0; }
  void setPool(const std::string& name, ModelPool pool);
  void removePool(const std::string& name);

  // What pod `key` holds: `request` on `node` ("" nothing). Returns whether it held something
  // else before (a node it no longer holds, or another request).
  bool setHolding(const std::string& key, const std::string& node, const alloc::Resources& request);
  // Pod `key` holds nothing any more. Returns whether it held something.
  bool dropHolding(const std::string& key);
  const std::unordered_map<std::string, Holding>& holdings() const { return holdings_; }

  // Brings the dense views and the pool model up to date; call before reading them.
  void refresh();

  // The dense views a decision reads (valid after refresh()).
  const std::vector<alloc::SchedNode>& nodes() const { return nodes_; }
  const std::vector<alloc::NodeUsage>& usage() const { return usage_; }
  const alloc::ClusterState& state() const { return state_; }
  std::optional<std::size_t> indexOf(const std::string& node) const;
  std::int64_t visibleGpus(std::size_t node) const { return visibleGpus_[node]; }
  // Per GpuIndex: draining in the inventory (or attached where it cannot be used).
  bool inventoryDraining(alloc::GpuIndex g) const { return gpuInvDraining_[g]; }
  // Per GpuIndex: held for a reservation's outstanding deficit (moved to its node in the plan).
  bool promised(alloc::GpuIndex g) const { return gpuPromised_[g]; }

  // The DRA path. The GPUPool whose nodes include `node` serves DRA (else the device plugin).
  bool draNode(const std::string& node) const;
  // The devices a DRA pod placed on `node` may get (dra_state.hpp): the node's own usable GPUs
  // (`local`), then the pool's other free ones (`remote`): unattached first, then those idle on
  // another node, fewest idle there first (the unattached-first GPU policy's order); and one
  // probe device per GPU model of every DRA pool (`probes`).
  void draCandidates(const std::string& node, std::vector<DraCandidate>* local,
                     std::vector<DraCandidate>* remote) const;
  const std::vector<DraCandidate>& draProbes() const;  // kept until a pool changes

  // The GPUPools by name (reservation_supply.hpp re-checks reservations against them).
  const std::map<std::string, ModelPool, std::less<>>& pools() const { return poolMap_; }

  std::size_t nodeCount() const { return nodeMap_.size(); }
  std::size_t poolCount() const { return poolMap_.size(); }
  std::size_t gpuCount() const;

 private:
  struct NodeEntry {
    alloc::SchedNode node;
    std::int64_t allocatableGpus = 0;
  };

  void rebuild();
  void recomputePool(alloc::PoolIndex p);
  void markPoolDirtyForNode(const std::string& node);
  void addUsage(const Holding& h);
  void removeUsage(const Holding& h);

  std::map<std::string, NodeEntry, std::less<>> nodeMap_;
  std::size_t preferTaintNodes_ = 0;  // nodes of nodeMap_ with a PreferNoSchedule taint
  std::map<std::string, ModelPool, std::less<>> poolMap_;
  std::unordered_map<std::string, Holding> holdings_;  // pod key -> what it holds

  bool structureDirty_ = true;
  std::vector<alloc::SchedNode> nodes_;
  std::vector<alloc::NodeUsage> usage_;
  std::vector<std::int64_t> visibleGpus_;  // visible(n)
  std::unordered_map<std::string, std::size_t> nodeIndex_;
  alloc::ClusterState state_;
  std::vector<std::vector<alloc::NodeIndex>> poolNodes_;
  std::set<alloc::PoolIndex> dirtyPools_;
  std::vector<alloc::GpuIndex> gpuIndexScratch_;
  std::vector<bool> gpuInvDraining_;
  std::vector<bool> gpuReportedUse_;  // per GpuIndex: inUseBy non-empty
  std::vector<bool> gpuPromised_;
  std::vector<bool> poolDra_;  // per PoolIndex
  mutable std::optional<std::vector<DraCandidate>> probes_;
  // draNode's answers by node (the first pool by name listing it), rebuilt after a pool change:
  // the device-plugin/DRA hook asks it for every node a decision filters.
  mutable std::optional<std::unordered_map<std::string, bool>> draByNode_;
};

}  // namespace kc::sched
