#pragma once
// kubecomp-sched's scheduler cache: every Pod, Node and GPUPool of the cluster as the compact
// models of libcore/alloc (never whole JSON objects), the pool model (alloc::ClusterState) the
// Eq. 1 decision reads, what each node's pods hold, the FCFS queue with per-pod backoff, and the
// reservations of pods waiting for reconfig-mgr.
//
// Filled by the informers' transforms (ingest*: the object is parsed here and the informer's
// store keeps only its identity, see sched_informers in scheduler.cpp) and by the scheduler's
// own decisions (assume a bind, reserve a node). Thread-safe: one mutex guards everything; the
// scheduling loop holds it for one decision, the informer threads for one object.
//
// Three parts, as kube-scheduler keeps its cache and its queue apart: the cluster
// (cluster_model.hpp: nodes, pools, what each pod holds, the pool model a decision reads), the
// queue (scheduling_queue.hpp: FCFS order and backoff) and, here, one record per pod (PodInfo:
// what the API says of it and what this scheduler is doing with it). A pod's hold on a node
// (assumed bound, reserved) changes in one function (setHoldLocked), and a pod leaves this
// scheduler's hands in one function (forgetLocked).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "libcore/alloc/backfill.hpp"
#include "libcore/alloc/gang.hpp"
#include "libcore/alloc/placed_pods.hpp"
#include "libcore/alloc/pod_fit.hpp"
#include "libcore/alloc/pod_placement.hpp"
#include "libcore/alloc/pool_model.hpp"
#include "libcore/alloc/queue_pass.hpp"
#include "libcore/alloc/rt_filter.hpp"
#include "libcore/alloc/sched_objects.hpp"
#include "libcore/api/dra_claim.hpp"
#include "libcore/api/gpupool.hpp"
#include "libcore/api/reconfig_request.hpp"
#include "libcore/base/clock.hpp"
#include "services/kubecomp-sched/cluster_model.hpp"
#include "services/kubecomp-sched/dra_state.hpp"
#include "services/kubecomp-sched/gang_state.hpp"
#include "services/kubecomp-sched/sched_preempt.hpp"
#include "services/kubecomp-sched/sched_volumes.hpp"
#include "services/kubecomp-sched/scheduling_queue.hpp"

namespace kc::sched {

using api::kSchedulerName;
// The reconfiguration request (libcore/api/reconfig_request.hpp, docs/sched.md "Contract with
// reconfig-mgr"). kubecomp.io/reserved-at, written in the same patch as the two others, lets a
// replica that adopts the request after a restart or failover time the reservation out at that
// time + the timeout, not a fresh timeout from when it adopted it.
using api::kDemandAnnotation;
using api::kDstNodeAnnotation;
using api::kReservedAtAnnotation;
// A kubecomp.io/reserved-at up to this far ahead of the adopting replica's wall clock is taken as
// it is (clocks of two machines differ a little); further ahead, the timeout starts at adoption.
inline constexpr std::chrono::seconds kReservedAtSkew{5};

// Time: kc::Clock (libcore/base/clock.hpp); every time point here is on its steady clock.
using kc::Clock;

namespace detail {
// What the informers' stores keep of every object: metadata name, namespace, uid and
// resourceVersion.
nlohmann::json storeIdentity(const nlohmann::json& obj);
}  // namespace detail

// A node held for a pod until reconfig-mgr has moved the GPUs.
struct Reservation {
  std::string node;
  std::uint32_t gpus = 0;     // the pod's whole request
  std::uint32_t deficit = 0;  // GPUs asked for (kubecomp.io/demand)
  Clock::time_point deadline{};
  // When the request was made (wall clock, whole milliseconds): kubecomp.io/reserved-at.
  std::chrono::system_clock::time_point reservedAt{};
  bool requested = false;   // the annotations are (known to be) on the pod
  std::uint64_t order = 0;  // reservations on one node are served in this order
};

// One pod as the cache keeps it.
struct PodInfo {
  std::string key;  // "ns/name"
  std::string ns;
  std::string name;
  std::string uid;
  std::int64_t created = 0;  // metadata.creationTimestamp (s); the queue order: queueOrder()
  std::uint64_t seq = 0;     // order of first sight: a stable id (the queue pass's QueuedPod::id)
  bool ours = false;         // spec.schedulerName == kubecomp-sched
  bool deleting = false;     // metadata.deletionTimestamp
  std::string invalid;       // parse error ("" = parsed); an invalid pod is never placed
  std::string resourceVersion;
  alloc::SchedPod pod;       // containers dropped once bound (only `request` is read then)
  alloc::Resources request;  // alloc::podRequests(pod)
  std::int64_t gpus = 0;     // kubecomp.io/gpu of request
  // The reconfiguration request annotations as the API shows them (raw text).
  api::ReconfigRequestText reconfig;
  // When it started running: status.startTime (on the steady clock), else when this scheduler
  // bound it, else when it was first seen bound. Read by the queue policies that plan ahead.
  std::optional<Clock::time_point> started;
  // When this scheduler first saw it Succeeded or Failed (its claims are about to be let go).
  std::optional<Clock::time_point> ended;
  // The DRA path (pod.usesClaims): the claims spec.resourceClaims names, and the devices this
  // scheduler chose for them (kept while it holds the pod; docs/dra.md "kubecomp-sched").
  std::vector<api::PodClaimRef> claimRefs;
  std::vector<DraPick> draPicks;
  std::vector<std::string> heldDevices;  // deviceKey of the picks counted in draInflight_

  // What this scheduler is doing with the pod (the leader's state, kept apart from what the
  // API says above). Queue membership and backoff are the SchedulingQueue's.
  enum class Hold {
    kNone,      // holds no node (queued, backing off, or nothing to do)
    kAssumed,   // bound by this scheduler: `assumedNode`, until the watch shows it bound
    kReserved,  // `reservation`'s node, until reconfig-mgr has moved the GPUs
  };
  Hold hold = Hold::kNone;
  std::string assumedNode;
  Reservation reservation;
  // When it was first seen wanting a decision (the end-to-end latency metric).
  std::optional<Clock::time_point> firstSeen;
  bool clearing = false;        // its request annotations are being removed
  std::string invalidReported;  // the invalid-pod message sent ("" none)
  std::string heldReported;     // the queue policy's hold message sent ("" none)
  // VolumeBinding (sched_volumes.cpp): the PV bindings and provisioning asked for its node;
  // it binds once every claim shows bound.
  VolumeWait volumeWait;
  GangRef gang;  // the gang it names (PodGroup or Kueue pod group), if any

  bool bound() const { return !pod.nodeName.empty(); }
  // Its place in the queue (libcore/alloc/pod_order.hpp: priority, then FCFS, then ns/name).
  SchedulingQueue::Order queueOrder() const { return {pod.priority, created, ns, name, key}; }
  // Ours, unbound, alive and valid: something for this scheduler to do.
  bool pending() const { return ours && !bound() && !deleting && invalid.empty(); }
  bool assumed() const { return hold == Hold::kAssumed; }
  bool reserved() const { return hold == Hold::kReserved; }
};

// What the scheduling loop does next with one pod.
struct Action {
  enum class Kind {
    kBind,           // POST pods/binding (node)
    kUnschedulable,  // condition + FailedScheduling (message)
    kReserve,        // annotations dst-node/demand/reserved-at + Reconfig event (node, deficit,
                     // reservedAt)
    kCancel,         // clear the annotations, FailedScheduling (message); requeued
    kInvalid,        // bad pod or annotation: FailedScheduling (message), nothing bound
    kQueued,         // held back by the queue policy behind the head (head, node, message)
    kAllocate,       // DRA: write the claims' allocations (picks) for node; bind at once when
                     // no device has binding conditions (bindNow), else wait for them
    kBindVolumes,    // VolumeBinding: write volumeWrites (the node has the GPUs), then wait
    kPreempt,        // evict `victims` (Eviction API), nominate `node`, FailedScheduling
                     // (message); sched_preempt.cpp
  };
  Kind kind = Kind::kUnschedulable;
  std::string key;
  std::string ns;
  std::string name;
  std::string uid;
  std::string node;
  std::uint32_t deficit = 0;
  std::uint32_t gpus = 0;
  std::chrono::system_clock::time_point reservedAt{};  // kReserve: kubecomp.io/reserved-at
  std::string message;
  bool clearAnnotations = false;  // kInvalid of a bad annotation: remove them too
  std::string head;               // kQueued: the pod it waits behind ("ns/name")
  Clock::time_point firstSeen{};  // for the end-to-end latency metric
  // DRA: the devices to allocate (kAllocate), the claims whose allocation to clear (kCancel,
  // kUnschedulable of a partly allocated pod: "ns/name"), and whether to bind right after.
  std::vector<DraPick> picks;
  std::vector<std::string> clearClaims;
  bool bindNow = false;
  // VolumeBinding: PVs to bind and claims to provision for `node`, written before anything else
  // of kReserve and as the whole of kBindVolumes.
  VolumeWrites volumeWrites;
  std::vector<PreemptVictim> victims;  // kPreempt
};

struct CacheOptions {
  alloc::PlacementOptions placement{};
  // The queue policy (docs/sched.md "Queue policies"): backfill (the daemon's queue so far: an
  // unschedulable pod backs off and later pods are tried), fcfs, easy-backfill, slack-backfill.
  alloc::QueuePolicy queue{alloc::GreedyBackfillQueuePolicy::kName,
                           alloc::GreedyBackfillQueuePolicy::kDescription,
                           alloc::GreedyBackfillQueuePolicy::kDiscipline};
  // What easy- and slack-backfill plan with: the time one GPU move takes (an estimate) and the
  // run time of a pod that states none.
  std::chrono::milliseconds moveTime{36'000};
  std::chrono::seconds defaultRuntime{300};
  // slack-backfill: a later pod may delay the head by up to this many times the head's own run
  // time (alloc::QueuePass; 1 is the textbook bound; docs/results.md measures 3 on Workload 4).
  double slackFactor = alloc::kDefaultSlackFactor;
  // The clock the cache waits on and reads the wall time from (status.startTime placed on the
  // steady clock, reserved starts printed); null: the system clock. Not owned.
  Clock* clock = nullptr;
  // Tests: the wall clock alone; empty: clock's wallNow.
  std::function<std::chrono::system_clock::time_point()> wallClock{};
  std::chrono::milliseconds reservationTimeout{300'000};
  // DRA: how long a pod waits for its devices' binding conditions before the allocation is
  // cleared and the pod tried again (kube-scheduler's bindingTimeout, 10 minutes).
  std::chrono::milliseconds bindingTimeout{600'000};
  // DRA: how long after their pods finished the devices of a claim still allocated count as
  // about to be free (the resourceclaim controller deallocates such a claim at once): a pod
  // waits for them rather than having a GPU moved; past it, the claim counts as held.
  std::chrono::milliseconds draReleaseWait{5000};
  // VolumeBinding: how long a pod waits for its claims to be bound (kube-scheduler's
  // bindTimeoutSeconds) before it is scheduled again.
  std::chrono::milliseconds volumeBindTimeout{kDefaultVolumeBindTimeout};
  std::chrono::milliseconds initialBackoff{1000};  // kube-scheduler's podInitialBackoffSeconds
  std::chrono::milliseconds maxBackoff{10'000};    // and podMaxBackoffSeconds
};

// What the queue policy did (easy- and slack-backfill: the head's reservation).
struct QueueStats {
  std::uint64_t backfilled = 0;  // pods started while an older pod waited with a reservation
  std::uint64_t held = 0;        // decisions to hold a pod back behind the head
  std::string head;              // the reserved head ("" none)
  std::string headNode;
  std::optional<std::chrono::system_clock::time_point> headStart;  // its reserved start
};

struct CacheStats {
  std::size_t pods = 0;
  std::size_t nodes = 0;
  std::size_t pools = 0;
  std::size_t gpus = 0;
  std::size_t active = 0;
  std::size_t backoff = 0;
  std::size_t reservations = 0;
  std::size_t assumed = 0;
};

// Pods of this scheduler waiting for a node that ask kubecomp.io/gpu (the wait metrics).
struct PendingGpuStats {
  std::size_t pods = 0;
  std::optional<Clock::time_point> oldestFirstSeen;  // the longest-waiting one's first sighting
};

class SchedCache {
 public:
  explicit SchedCache(CacheOptions options);

  // Informer side. ingest* parse the object into the cache and return what the informer's store
  // keeps (metadata name, namespace, uid, resourceVersion). remove* take the store key.
  nlohmann::json ingestPod(const nlohmann::json& pod, Clock::time_point now);
  void removePod(const std::string& key);
  nlohmann::json ingestNode(const nlohmann::json& node);
  void removeNode(const std::string& name);
  nlohmann::json ingestPool(const nlohmann::json& pool);
  void removePool(const std::string& name);
  // The DRA path (sched_dra.cpp): ResourceClaims and DeviceClasses. `key` "ns/name" / name.
  nlohmann::json ingestClaim(const nlohmann::json& claim);
  void removeClaim(const std::string& key);
  nlohmann::json ingestDeviceClass(const nlohmann::json& deviceClass);
  void removeDeviceClass(const std::string& name);
  // VolumeBinding (sched_volumes.cpp): PersistentVolumeClaims (`key` "ns/name"),
  // PersistentVolumes and StorageClasses (`name`); and the result of a kBindVolumes or of the
  // volume writes of a kReserve (not ok: the assumptions are dropped, the pod scheduled again).
  nlohmann::json ingestVolumeClaim(const nlohmann::json& pvc);
  void removeVolumeClaim(const std::string& key);
  nlohmann::json ingestVolume(const nlohmann::json& pv);
  void removeVolume(const std::string& name);
  nlohmann::json ingestStorageClass(const nlohmann::json& storageClass);
  void removeStorageClass(const std::string& name);
  void volumesDone(const std::string& key, bool ok, Clock::time_point now);
  // Preemption (sched_preempt.cpp): PodDisruptionBudgets (`key` "ns/name"), and the result of
  // a kPreempt (not ok: an eviction was refused, the nomination is dropped and the pod decided
  // again after its backoff).
  nlohmann::json ingestBudget(const nlohmann::json& pdb);
  void removeBudget(const std::string& key);
  void preemptDone(const std::string& key, bool ok);
  // The node a preemption nominated the pod to, if any.
  std::optional<std::string> nominatedNode(const std::string& key) const;
  // Gangs (sched_gang.cpp): scheduler-plugins PodGroups. `key` "ns/name".
  nlohmann::json ingestPodGroup(const nlohmann::json& podGroup);
  void removePodGroup(const std::string& key);
  // Namespaces (sched_namespaces.cpp): their labels, for namespaceSelector. `name` the store key.
  nlohmann::json ingestNamespace(const nlohmann::json& ns);
  void removeNamespace(const std::string& name);

  // Scheduling side (the leader's loop).
  // Forgets the queue and the in-memory reservation deadlines and rebuilds both from the cache:
  // every pending pod of ours queued in FCFS order, every one carrying kubecomp.io/dst-node
  // adopted as a reservation (no new request is sent) whose deadline is kubecomp.io/reserved-at
  // + the timeout on the wall clock (a fresh timeout if the pod has no reserved-at, from an
  // older version; a reserved-at more than kReservedAtSkew ahead counts as now). Called when
  // this replica starts leading.
  void resetQueue(Clock::time_point now);
  // The next actions, at most `max`: reservations whose node can now run the pod (kBind),
  // timed out or no longer possible (kCancel), then pods from the head of the queue, each
  // decided with alloc::placePod. Every kBind is assumed at once (its resources held) until
  // bindDone(). Empty when there is nothing to do before nextWake().
  std::vector<Action> next(Clock::time_point now, std::size_t max);
  // When next() may have something again (a backoff or a reservation deadline).
  Clock::time_point nextWake(Clock::time_point now) const;
  // Something changed since the last next() (an ingest, a done call): the loop should not sleep.
  bool dirty() const;

  // Results of carrying out an action.
  void bindDone(const std::string& key, bool ok, Clock::time_point now);
  // kReserve written (ok) or not (the reservation is dropped and the pod requeued).
  void reserveDone(const std::string& key, bool ok, Clock::time_point now);
  // kAllocate written (ok: the pod waits for its binding conditions, or was bound) or not (the
  // pod is requeued; the executor has cleared what it wrote).
  void allocateDone(const std::string& key, bool ok, Clock::time_point now);
  // Unschedulable / cancelled / failed pods go to the backoff queue.
  void backoff(const std::string& key, Clock::time_point now);

  // The time a decision took (placePod alone), summed, and decisions made; for the
  // decision-only rate.
  struct DecisionStats {
    std::uint64_t decisions = 0;
    std::chrono::nanoseconds total{0};
  };
  DecisionStats decisionStats() const;
  CacheStats stats() const;
  PendingGpuStats pendingGpuStats() const;  // one pass over the pods
  QueueStats queueStats() const;
  // Tests: the reservation of a pod, if any.
  std::optional<Reservation> reservation(const std::string& key) const;
  // Tests: the free GPUs the model shows on a node (visible minus held).
  std::optional<std::int64_t> freeGpus(const std::string& node);
  // Wakes whoever waits in waitForWork (an ingest, stop).
  void notifyAll();
  // Blocks until dirty() or `until` (the loop's sleep). `stop` is read under the lock.
  void waitForWork(Clock::time_point until, const std::atomic<bool>& stop);
  // Leaving leadership: the queue, reservations and assumed binds are forgotten (the next
  // leader rebuilds them from the API).
  void stopLeading();

 private:
  // All private members below run with mu_ held.
  // The pod's hold becomes `to` (for kAssumed with `node`, for kReserved with `r`), and what it
  // holds in the cluster model follows.
  void setHoldLocked(PodInfo& pod, PodInfo::Hold to, const std::string& node = {},
                     const Reservation* r = nullptr);
  // The pod is no longer this scheduler's to decide (bound, deleted, not ours, replaced):
  // queue entry, backoff, reservation and assumption go.
  void forgetLocked(PodInfo& pod);
  void refreshHoldingLocked(PodInfo& pod);
  std::string effectiveNodeLocked(const PodInfo& pod) const;
  void enqueueLocked(const PodInfo& pod);
  void backoffLocked(const std::string& key, Clock::time_point now);
  PodInfo* findLocked(const std::string& key);
  void adoptReservationLocked(PodInfo& pod, Clock::time_point now, std::vector<Action>* out);
  Action baseAction(const PodInfo& pod, Action::Kind kind) const;
  // A reservation whose node now shows the GPUs and still passes the filters: kBind. Gone or
  // failing the filters: kCancel. Otherwise nothing.
  std::optional<Action> checkReservationLocked(PodInfo& pod, Clock::time_point now);
  // One pod's decision: decidePodLocked with the nominated pods held (below).
  std::optional<Action> decideLocked(PodInfo& pod, Clock::time_point now);
  std::optional<Action> decidePodLocked(PodInfo& pod, Clock::time_point now);
  // VolumeBinding (sched_volumes.cpp). The node chosen for the pod: plans its claims there
  // (PVs to bind, claims to provision), assumes them in the catalog and fills `writes`; false
  // when nothing is to be written (the pod binds at once as far as volumes go).
  bool planVolumesLocked(PodInfo& pod, const std::string& node, Clock::time_point now,
                         VolumeWrites& writes);
  // A pod waiting for its claims: kCancel when a binding failed or the wait timed out;
  // `waiting` says whether a claim is not bound yet.
  std::optional<Action> checkVolumesLocked(PodInfo& pod, Clock::time_point now, bool& waiting);
  // The pod no longer waits for its claims: the catalog's assumptions about them go.
  void clearVolumeWaitLocked(PodInfo& pod);
  // A Namespace's labels changed: pods waiting for a decision are tried again at once.
  void namespacesChangedLocked();
  // A pod that fits nowhere (`refusal` is its kUnschedulable): preempt lower-priority pods for
  // it (refusal becomes kPreempt), or add kube-scheduler's "preemption: ..." to its message.
  void preemptLocked(PodInfo& pod, Action& refusal, Clock::time_point now);
  // kube-scheduler's nominated pods (sched_preempt.cpp): the pods a preemption nominated to a
  // node, of priority >= `pod`'s, count there (model and NodePorts) while `pod` is decided;
  // released after, when `pod`'s own nomination also ends if it now holds a node.
  void holdNominatedLocked(const PodInfo& pod);
  void releaseNominatedLocked(const PodInfo& pod);
  // placePod, the pod's nominated node tried first (kube-scheduler's evaluateNominatedNode).
  Result<alloc::PodPlacement> placeNominatedFirstLocked(const PodInfo& pod);
  // The DRA path (sched_dra.cpp): a pod that names ResourceClaims, decided; its reservation
  // (waiting for the binding conditions) checked; its claims' GPUs counted in its request.
  std::optional<Action> decideDraLocked(PodInfo& pod, Clock::time_point now);
  std::optional<Action> checkDraReservationLocked(PodInfo& pod, Clock::time_point now);
  // Claims allocated for the pod before (by this scheduler before a restart, or the previous
  // leader): a reservation waiting for the binding conditions, timed from the allocation.
  void adoptDraAllocationLocked(PodInfo& pod, const DraDemand& d, Clock::time_point now);
  void applyClaimGpusLocked(PodInfo& pod);
  // A reservation waiting for attaches whose node now has free devices enough to serve all of
  // the pod's claims without them: how many attaches that saves (nullopt: none).
  std::optional<std::uint32_t> draFreedOnNodeLocked(const PodInfo& pod);
  // Every pod the claim is reserved for finished (or went) within draReleaseWait.
  bool claimReleasingLocked(const api::Claim& c, Clock::time_point now) const;
  // A pick that moves `fabric` GPUs to `node` where claims of finished pods are about to free
  // devices that would need fewer moves: wait for them (kUnschedulable with the reason).
  std::optional<Action> draReleaseWaitLocked(PodInfo& pod, const DraDemand& d,
                                             const std::vector<DraCandidate>& local,
                                             const std::vector<DraCandidate>& remote,
                                             std::uint32_t fabric, const std::string& node,
                                             Clock::time_point now);
  // A DRA pod's refusal: the condition message, and backoff.
  Action draClearPartialLocked(PodInfo& pod, const DraDemand& d, Clock::time_point now);
  Action draRefusalLocked(PodInfo& pod, Action::Kind kind, std::string message,
                          Clock::time_point now);
  // The reservations, oldest first, through checkReservationLocked (when something changed or
  // a deadline passed). Returns whether one was bound.
  bool serveReservationsLocked(Clock::time_point now, std::vector<Action>& out);

  // Gangs (sched_gang.cpp). A gang member's decision is its whole gang's: true when handled
  // (`out` the action for `pod`, if any; the other members' actions go to gangActions_), false
  // when the pod is scheduled on its own (its gang's quorum already runs).
  struct GangCount {
    std::uint32_t placed = 0;        // bound (running) or assumed
    std::vector<PodInfo*> reserved;  // in queue order
    std::vector<PodInfo*> waiting;   // pending, holding nothing, in queue order
  };
  GangCount gangCountLocked(const PodInfo& pod);
  bool decideGangLocked(PodInfo& pod, Clock::time_point now, std::optional<Action>& out);
  void applyGangPlanLocked(PodInfo& pod, const std::vector<PodInfo*>& members,
                           const alloc::GangPlan& plan, std::optional<std::chrono::seconds> timeout,
                           Clock::time_point now, std::optional<Action>& out);
  // A reservation served with its gang (not on its own): the gang's quorum is not running yet.
  bool gangHeldLocked(PodInfo& pod);
  // The gangs' reservations: all bound in one pass once every member can be, or all cancelled.
  bool serveGangsLocked(Clock::time_point now, std::vector<Action>& out);

  // The queue policies other than backfill (sched_queue.cpp): one pass over every pending pod
  // in FCFS order, appending its actions to `out`.
  struct QueuePlan;
  class PassHost;
  void queuePassLocked(Clock::time_point now, std::vector<Action>& out);
  void fcfsPassLocked(const std::vector<PodInfo*>& queue, const std::set<std::string>& due,
                      Clock::time_point now, std::vector<Action>& out);
  void easyPassLocked(const std::vector<PodInfo*>& queue, const std::set<std::string>& due,
                      Clock::time_point now, std::vector<Action>& out);
  void buildPlanLocked(Clock::time_point now, QueuePlan& plan);
  void holdBackLocked(PodInfo& pod, const std::string& head, const std::string& node,
                      std::string message, bool due, Clock::time_point now,
                      std::vector<Action>& out);
  void unfitLocked(PodInfo& pod, Clock::time_point now, std::vector<Action>& out);
  std::int64_t runtimeMs(const PodInfo& pod) const;
  std::chrono::system_clock::time_point wallNow() const;

  // Real-time admission (rt.kubecomp.io annotations): per-node RT state kept as the nodes'
  // rt-kubelet-shim keeps it; its hook is the placement's FilterOptions::rt.
  alloc::RtAdmission rt_;
  CacheOptions opts_;
  DraState dra_;
  // Devices (deviceKey) the pods this scheduler holds were given, whose allocation the claims
  // informer may not show yet: kept by setHoldLocked alone.
  std::unordered_map<std::string, int> draInflight_;
  // uid -> when a pod that named ResourceClaims finished or went (kept draReleaseWait).
  std::unordered_map<std::string, Clock::time_point> goneClaimPods_;
  // "<pool>/<gpu>/<model>" already warned about (an invalid model name): the GPUPool informer's
  // thread alone reads and writes it.
  std::set<std::string> warnedModels_;
  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  bool dirty_ = true;
  std::uint64_t nextSeq_ = 0;
  std::uint64_t nextOrder_ = 0;

  std::unordered_map<std::string, std::unique_ptr<PodInfo>> pods_;
  ClusterModel model_;
  // The pods holding each node (bound, assumed, reserved) as NodePorts reads them; kept by
  // refreshHoldingLocked and removePod, next to model_'s holdings.
  alloc::PlacedPods placed_;
  SchedulingQueue queue_;
  // The pods with Hold::kReserved by reservation order (oldest first), and how many are
  // kAssumed: indexes of the pods' own state, kept by setHoldLocked alone.
  std::map<std::uint64_t, std::string> reservedByOrder_;
  std::size_t assumedCount_ = 0;
  bool reservationsDirty_ = false;
  // Something may have freed room (a pod stopped holding a node, a node or pool changed):
  // next() retries every backing-off pod at once, oldest first, instead of when its timer
  // runs out, so a release is taken in FCFS order (the paper's and the simulator's order) and
  // not by whichever pod's backoff happens to end first.
  bool released_ = false;
  bool leading_ = false;

  DecisionStats decisions_;
  // VolumeBinding: the cluster's PVCs, PVs and StorageClasses, with this scheduler's
  // assumptions on top (placement's FilterOptions::volumes points here).
  alloc::VolumeCatalog volumes_;
  // Namespace name -> labels (placement's FilterOptions::namespaces points here).
  alloc::NamespaceLabels namespaces_;
  PreemptionState preempt_;  // budgets and nominations (sched_preempt.cpp)
  GangState gangs_;
  alloc::GangPlanner gangPlanner_;
  std::vector<Action> gangActions_;  // other members' actions of a gang decided with one pod
  // easy- and slack-backfill: the pass (slack keeps its head's bound in it) and what it did.
  alloc::QueuePass queuePass_;
  QueueStats queueStats_;
};

}  // namespace kc::sched
