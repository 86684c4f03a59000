#pragma once
// kubecomp-sched as a library: three informers (all Pods, Nodes, GPUPools) feeding the
// SchedCache, leader election on a Lease, the scheduling loop (leader only) and the workers that
// carry out its answers through the API: pods/binding, the PodScheduled condition, the
// kubecomp.io/dst-node + demand + reserved-at request for reconfig-mgr, Events. main.cpp parses
// flags and runs one; the tests run the binary or this class against the API test double.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "libcore/api/names.hpp"
#include "libcore/base/result.hpp"
#include "libcore/kube/client.hpp"
#include "libcore/kube/events.hpp"
#include "libcore/kube/informer.hpp"
#include "libcore/kube/leader.hpp"
#include "services/kubecomp-sched/sched_cache.hpp"
#include "services/kubecomp-sched/shutdown_clock.hpp"

namespace kc::obs {
class Metrics;
class HealthChecks;
}  // namespace kc::obs

namespace kc::sched {

// The PodScheduled=False reason while the pod waits for reconfig-mgr (kube-scheduler's own
// reasons are Unschedulable and SchedulerError).
inline constexpr std::string_view kReasonWaitingForReconfig = "WaitingForReconfiguration";
// The PodScheduled=False reason (and Event reason) of a pod the queue policy holds back behind
// the head (fcfs, easy-backfill, slack-backfill).
inline constexpr std::string_view kReasonWaitingInQueue = "WaitingInQueue";

struct SchedulerOptions {
  CacheOptions cache{};         // cache.clock is the scheduler's clock too
  std::size_t bindWorkers = 8;  // API writers (binds, patches); actions of one pod stay on one
  std::size_t maxBatch = 256;   // actions taken from the cache per loop turn
  bool leaderElect = true;
  kube::LeaderElectionConfig lease{};  // ns, name, identity, durations (callbacks are ours)
  std::string instance;                // Event source host / reportingInstance
  std::chrono::milliseconds initialSyncWait{60'000};
  // stop(): pending binds, patches and Events are still sent for up to this long; what is left
  // then is dropped (logged once) and clientClock's rate-limit waits are cut.
  std::chrono::milliseconds stopGrace{10'000};
  ShutdownClock* clientClock = nullptr;  // the client's clock, if main gave it one; not owned
};

class Scheduler {
 public:
  // `metrics` and `health` may be null.
  Scheduler(SchedulerOptions options, kube::KubeClient& client, obs::Metrics* metrics,
            obs::HealthChecks* health);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Informers (waits up to initialSyncWait for their first LIST), then the election (or the
  // loop at once without it). Errors: bad lease config ("invalid"). A stop() from another
  // thread (SIGTERM during start-up) makes it give up at once and return ok; after a stop()
  // it starts nothing.
  Status start();
  // Stops the loop and the election (the lease is released), lets the workers finish pending
  // writes and the Event thread its Events for up to opts.stopGrace, drops what is left then
  // (logged once), and stops the informers. Thread-safe, idempotent; during start() it waits
  // for start() to give up.
  void stop();

  bool leading() const { return leading_.load(); }
  bool synced() const;
  SchedCache& cache() { return cache_; }

  struct Counters {
    std::uint64_t bound = 0;
    std::uint64_t bindFailures = 0;
    std::uint64_t unschedulable = 0;
    std::uint64_t reconfigRequests = 0;
    std::uint64_t cancelled = 0;
    std::uint64_t invalid = 0;
    std::uint64_t queued = 0;  // hold decisions written (condition changed)
  };
  Counters counters() const;

  struct Metrics;

 private:
  void runLoop();  // the leader's term
  void execute(const Action& a);
  void executeBind(const Action& a);
  void executeReserve(const Action& a);
  void executeQueued(const Action& a);
  // Preemption (sched_preempt.cpp): the PodDisruptionBudgets informer, and a kPreempt carried
  // out (victims evicted, the node nominated, kube-scheduler's condition and Events).
  void startPreemption();
  void stopPreemption();
  void executePreempt(const Action& a);
  // The DRA path (scheduler_dra.cpp): the ResourceClaims and DeviceClasses informers when the
  // API serves resource.k8s.io/v1; allocations written and cleared as kube-scheduler does.
  void startDra();
  // VolumeBinding (scheduler_volumes.cpp): the PVC, PV and StorageClass informers, and the PV
  // bindings and selected-node annotations written before a pod binds.
  void makeVolumeInformers();
  void startVolumeInformers();
  bool volumeInformersSynced() const;
  bool writeVolumes(const Action& a);  // false: a write was refused (logged)
  void executeBindVolumes(const Action& a);
  // Gangs (scheduler_gang.cpp): the PodGroups informer when the API serves
  // scheduling.x-k8s.io/v1alpha1 PodGroups.
  void startGangs();
  // Namespaces (sched_namespaces.cpp): their labels for namespaceSelector; not watched when
  // the list is forbidden (warned once).
  void makeNamespaceInformer();
  void startNamespaces();
  void noteReconfigRequest();  // a request for GPU moves made (metric and counter)
  void noteError();            // an API write failed (metric)
  void executeAllocate(const Action& a);
  Status writeAllocation(const Action& a, const std::string& claim,
                         const std::vector<DraPick>& picks);
  Status clearAllocation(const Action& a, const std::string& claim);
  void clearAllocations(const Action& a);
  // kUnschedulable, kCancel, kInvalid: the pod is refused (for now) and told why.
  void executeRefusal(const Action& a);
  // false: the same condition is there already (nothing written).
  bool setCondition(const Action& a, const std::string& reason, const std::string& message);
  void event(const Action& a, const std::string& type, const std::string& reason,
             const std::string& message);
  bool patchRequest(const Action& a, bool set);
  void workerMain(std::size_t i);
  void eventMain();
  // start()'s wait for the first LISTs; false when it gave up (stop requested or time out).
  bool waitForInformers();
  // stop()'s drain: the writers, then the Event thread, each until it is done or `deadline`;
  // false when the grace ran out first.
  bool drainWithin(Clock::SteadyTime deadline);
  void drainerDone(bool eventThread);  // a worker (false) or the Event thread leaves

  SchedulerOptions opts_;
  Clock& clock_;
  kube::KubeClient& client_;
  obs::HealthChecks* health_;
  std::unique_ptr<Metrics> metrics_;
  SchedCache cache_;
  kube::EventRecorder recorder_;
  std::unique_ptr<kube::Informer> pods_;
  std::unique_ptr<kube::Informer> nodes_;
  std::unique_ptr<kube::Informer> pools_;
  std::unique_ptr<kube::Informer> claims_;
  std::unique_ptr<kube::Informer> classes_;
  std::unique_ptr<kube::Informer> volumeClaims_;
  std::unique_ptr<kube::Informer> volumes_;
  std::unique_ptr<kube::Informer> storageClasses_;
  // PodDisruptionBudgets (preemption).
  std::unique_ptr<kube::Informer> budgets_;
  bool draServed_ = false;                     // resource.k8s.io/v1 answered at start
  std::unique_ptr<kube::Informer> podGroups_;  // null: PodGroups not served
  std::unique_ptr<kube::Informer> namespaces_;
  std::atomic<bool> namespacesWatched_{false};  // started (the list is not forbidden)
  std::unique_ptr<kube::LeaderElector> elector_;
  std::thread loop_;  // without leader election
  std::atomic<bool> leading_{false};
  std::atomic<bool> loopStop_{false};
  std::atomic<bool> stopped_{false};
  std::mutex lifecycleMu_;  // held by start() throughout and by stop(); guards started_
  bool started_ = false;
  std::atomic<bool> stopRequested_{false};  // stop() was called: start() gives up
  // stop()'s grace is over: the workers and the Event thread drop what they still hold.
  std::atomic<bool> graceOver_{false};
  std::atomic<std::uint64_t> droppedWrites_{0};
  std::atomic<std::uint64_t> droppedEvents_{0};
  std::mutex drainMu_;  // guards writersLeft_ and eventsLeft_
  std::condition_variable drainCv_;
  std::size_t writersLeft_ = 0;  // worker threads still running
  bool eventsLeft_ = false;      // the Event thread still running

  struct WorkQueue {
    std::mutex mu;  // guards q and done
    std::condition_variable cv;
    std::deque<Action> q;
    bool done = false;
  };
  std::vector<std::unique_ptr<WorkQueue>> work_;
  std::vector<std::thread> workers_;
  std::atomic<std::size_t> inFlight_{0};

  struct PendingEvent {
    kube::ObjectReference ref;
    std::string type, reason, message;
  };
  std::mutex eventMu_;  // guards events_ and eventsDone_
  std::condition_variable eventCv_;
  std::deque<PendingEvent> events_;
  bool eventsDone_ = false;
  std::thread eventThread_;

  mutable std::mutex condMu_;  // guards lastCondition_ and counters_
  std::unordered_map<std::string, std::string> lastCondition_;  // pod key -> reason + message
  std::unordered_map<std::string, std::string>
      lastQueuedEvent_;  // pod key -> head + node of its last hold Event
  Counters counters_;
};

// An informer whose store keeps only identities; `ingest` parses each object into the cache,
// `remove` forgets a deleted one (every informer of the scheduler is one; scheduler.cpp).
std::unique_ptr<kube::Informer> compactInformer(
    kube::KubeClient& client, kube::GroupVersionResource resource,
    std::function<nlohmann::json(nlohmann::json&&)> ingest,
    std::function<void(const nlohmann::json&)> remove);
// metadata.name of an API object.
std::string nameOf(const nlohmann::json& obj);

}  // namespace kc::sched
