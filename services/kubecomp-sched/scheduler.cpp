#include "services/kubecomp-sched/scheduler.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>

#include <functional>

#include "libcore/base/rfc3339.hpp"
#include "libcore/obs/health.hpp"

namespace kc::sched {

using nlohmann::json;

struct Scheduler::Metrics {
  explicit Metrics(prometheus::Registry& reg)
      : attempts(prometheus::BuildCounter()
                     .Name("kubecomp_sched_schedule_attempts_total")
                     .Help("Scheduling decisions and what came of them")
                     .Register(reg)),
        scheduled(attempts.Add({{"result", "scheduled"}})),
        unschedulable(attempts.Add({{"result", "unschedulable"}})),
        reconfig(attempts.Add({{"result", "reconfig"}})),
        queued(attempts.Add({{"result", "queued"}})),
        error(attempts.Add({{"result", "error"}})),
        cancelled(prometheus::BuildCounter()
                      .Name("kubecomp_sched_reservations_cancelled_total")
                      .Help("Reservations dropped (timeout, node gone or unfit, request removed)")
                      .Register(reg)
                      .Add({})),
        invalid(prometheus::BuildCounter()
                    .Name("kubecomp_sched_invalid_pods_total")
                    .Help("Pods or request annotations refused as malformed")
                    .Register(reg)
                    .Add({})),
        e2e(prometheus::BuildHistogram()
                .Name("kubecomp_sched_pod_scheduling_seconds")
                .Help("From the pod's first sighting to its binding being accepted")
                .Register(reg)
                .Add({}, prometheus::Histogram::BucketBoundaries{0.001, 0.002, 0.005, 0.01, 0.02,
                                                                 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10,
                                                                 30, 60, 300})),
        leader(prometheus::BuildGauge()
                   .Name("kubecomp_sched_leader")
                   .Help("1 while this replica holds the lease and schedules")
                   .Register(reg)
                   .Add({})),
        decisionSeconds(prometheus::BuildGauge()
                            .Name("kubecomp_sched_decision_seconds_total")
                            .Help("Time spent in the placement decision itself (alloc::placePod)")
                            .Register(reg)
                            .Add({})),
        decisions(prometheus::BuildGauge()
                      .Name("kubecomp_sched_decisions_total")
                      .Help("Placement decisions made (alloc::placePod calls)")
                      .Register(reg)
                      .Add({})),
        cachePods(prometheus::BuildGauge()
                      .Name("kubecomp_sched_cache_pods")
                      .Help("Pods in the scheduler cache")
                      .Register(reg)
                      .Add({})),
        reservations(prometheus::BuildGauge()
                         .Name("kubecomp_sched_reservations")
                         .Help("Pods waiting for reconfig-mgr on a reserved node")
                         .Register(reg)
                         .Add({})),
        eventsPending(prometheus::BuildGauge()
                          .Name("kubecomp_sched_events_pending")
                          .Help("Events queued for the API server, not written yet")
                          .Register(reg)
                          .Add({})),
        headReservedStart(
            prometheus::BuildGauge()
                .Name("kubecomp_sched_queue_head_reserved_start_seconds")
                .Help("easy-/slack-backfill: Unix time the queue head is reserved to start "
                      "(0: no head waits with a reservation)")
                .Register(reg)
                .Add({})),
        backfilled(prometheus::BuildGauge()
                       .Name("kubecomp_sched_queue_backfilled_pods_total")
                       .Help("Pods started ahead of a queue head waiting with a reservation")
                       .Register(reg)
                       .Add({})),
        held(prometheus::BuildGauge()
                 .Name("kubecomp_sched_queue_held_total")
                 .Help("Decisions to hold a pod back behind the queue head (fcfs, "
                       "easy-/slack-backfill)")
                 .Register(reg)
                 .Add({})),
        pendingGpuPods(prometheus::BuildGauge()
                           .Name("kubecomp_sched_pending_gpu_pods")
                           .Help("Pods of this scheduler asking kubecomp.io/gpu and not bound yet "
                                 "(the leader's view; 0 on a standby)")
                           .Register(reg)
                           .Add({})),
        oldestPendingGpu(prometheus::BuildGauge()
                             .Name("kubecomp_sched_oldest_pending_gpu_pod_timestamp_seconds")
                             .Help("Unix time the longest-waiting of those pods was first seen "
                                   "(0: none)")
                             .Register(reg)
                             .Add({})) {}

  // The wait gauges from the cache (a pass over every pod): at most once a second while the
  // loop is busy, and always before it sleeps, so an idle loop never leaves a stale wait.
  void pendingGpu(const SchedCache& cache, Clock& clock, Clock::time_point& lastScan, bool idle) {
    const auto now = clock.now();
    if (!idle && lastScan != Clock::time_point{} && now - lastScan < std::chrono::seconds(1)) {
      return;
    }
    lastScan = now;
    const auto p = cache.pendingGpuStats();
    pendingGpuPods.Set(static_cast<double>(p.pods));
    oldestPendingGpu.Set(
        p.oldestFirstSeen ? std::chrono::duration<double>(
                                (clock.wallNow() - (now - *p.oldestFirstSeen)).time_since_epoch())
                                .count()
                          : 0.0);
  }

  prometheus::Family<prometheus::Counter>& attempts;
  prometheus::Counter& scheduled;
  prometheus::Counter& unschedulable;
  prometheus::Counter& reconfig;
  prometheus::Counter& queued;
  prometheus::Counter& error;
  prometheus::Counter& cancelled;
  prometheus::Counter& invalid;
  prometheus::Histogram& e2e;
  prometheus::Gauge& leader;
  prometheus::Gauge& decisionSeconds;
  prometheus::Gauge& decisions;
  prometheus::Gauge& cachePods;
  prometheus::Gauge& reservations;
  prometheus::Gauge& eventsPending;
  prometheus::Gauge& headReservedStart;
  prometheus::Gauge& backfilled;
  prometheus::Gauge& held;
  prometheus::Gauge& pendingGpuPods;
  prometheus::Gauge& oldestPendingGpu;
};

// An informer whose store keeps only identities; `ingest` parses each object into the cache.
std::unique_ptr<kube::Informer> compactInformer(kube::KubeClient& client,
                                                kube::GroupVersionResource resource,
                                                std::function<json(json&&)> ingest,
                                                std::function<void(const json&)> remove) {
  kube::InformerOptions io;
  io.resource = std::move(resource);
  io.transform = std::move(ingest);
  auto inf = std::make_unique<kube::Informer>(client, io);
  kube::ResourceEventHandler h;
  h.onDelete = [remove = std::move(remove)](const kube::ObjectPtr& obj) { remove(*obj); };
  inf->addHandler(std::move(h));
  return inf;
}

std::string nameOf(const json& obj) {
  return obj.at("metadata").value("name", std::string());
}

Scheduler::Scheduler(SchedulerOptions options, kube::KubeClient& client, obs::Metrics* metrics,
                     obs::HealthChecks* health)
    : opts_(std::move(options)),
      clock_(clockOr(opts_.cache.clock)),
      client_(client),
      health_(health),
      cache_(opts_.cache),
      recorder_(client, std::string(kSchedulerName), opts_.instance) {
  if (metrics != nullptr) {
    metrics_ = std::make_unique<Metrics>(metrics->registry());
  }
  // The transforms run on the informer threads before the store sees the object: the object
  // is parsed into the cache there and only its identity is stored (the informer's own cache
  // of whole pods costs about 8.5 KiB each). DELETED events pass the transform too (with the
  // last state) and then reach onDelete, which removes the entry.
  pods_ = compactInformer(
      client_, kube::gvr::pods(),
      [this](json&& obj) { return cache_.ingestPod(obj, clock_.now()); },
      [this](const json& obj) {
        const auto& m = obj.at("metadata");
        cache_.removePod(m.value("namespace", std::string()) + "/" +
                         m.value("name", std::string()));
      });
  nodes_ = compactInformer(
      client_, kube::gvr::nodes(), [this](json&& obj) { return cache_.ingestNode(obj); },
      [this](const json& obj) { cache_.removeNode(nameOf(obj)); });
  pools_ = compactInformer(
      client_, api::gvr::gpuPools(), [this](json&& obj) { return cache_.ingestPool(obj); },
      [this](const json& obj) { cache_.removePool(nameOf(obj)); });
  claims_ = compactInformer(
      client_, api::gvr::resourceClaims(), [this](json&& obj) { return cache_.ingestClaim(obj); },
      [this](const json& obj) {
        const auto& m = obj.at("metadata");
        cache_.removeClaim(m.value("namespace", std::string()) + "/" +
                           m.value("name", std::string()));
      });
  classes_ = compactInformer(
      client_, api::gvr::deviceClasses(),
      [this](json&& obj) { return cache_.ingestDeviceClass(obj); },
      [this](const json& obj) { cache_.removeDeviceClass(nameOf(obj)); });
  makeVolumeInformers();
  makeNamespaceInformer();
  if (health_ != nullptr) {
    health_->addReadinessCheck("informers", [this]() -> Status {
      if (synced()) {
        return okStatus();
      }
      return makeError(kc::errc::kUnavailable, "pods, nodes or GPUPools not listed yet");
    });
  }
}

Scheduler::~Scheduler() {
  stop();
}

bool Scheduler::synced() const {
  return pods_->hasSynced() && nodes_->hasSynced() && pools_->hasSynced() &&
         volumeInformersSynced() && (!namespacesWatched_ || namespaces_->hasSynced());
}

Scheduler::Counters Scheduler::counters() const {
  std::lock_guard<std::mutex> lock(condMu_);
  return counters_;
}

void Scheduler::runLoop() {
  // A new term (the lease lost and won again): the previous term's stop request is spent.
  if (stopped_) {
    return;
  }
  loopStop_ = false;
  // Wait for the first LISTs: deciding on a partial cache could over-commit a node.
  while (!loopStop_ && !synced()) {
    cache_.waitForWork(clock_.now() + std::chrono::milliseconds(50), loopStop_);
  }
  if (loopStop_) {
    return;
  }
  spdlog::info("leading: scheduling pods with schedulerName {}", kSchedulerName);
  leading_ = true;
  if (metrics_) {
    metrics_->leader.Set(1);
  }
  cache_.resetQueue(clock_.now());
  Clock::time_point lastPendingScan{};
  while (!loopStop_) {
    const auto now = clock_.now();
    auto actions = cache_.next(now, opts_.maxBatch);
    for (auto& a : actions) {
      const std::size_t w = std::hash<std::string>{}(a.key) % work_.size();
      ++inFlight_;
      std::lock_guard<std::mutex> lock(work_[w]->mu);
      work_[w]->q.push_back(std::move(a));
      work_[w]->cv.notify_one();
    }
    if (metrics_) {
      const auto d = cache_.decisionStats();
      metrics_->decisions.Set(static_cast<double>(d.decisions));
      metrics_->decisionSeconds.Set(std::chrono::duration<double>(d.total).count());
      const auto s = cache_.stats();
      metrics_->cachePods.Set(static_cast<double>(s.pods));
      metrics_->reservations.Set(static_cast<double>(s.reservations));
      const auto q = cache_.queueStats();
      metrics_->backfilled.Set(static_cast<double>(q.backfilled));
      metrics_->held.Set(static_cast<double>(q.held));
      metrics_->headReservedStart.Set(
          q.headStart ? std::chrono::duration<double>(q.headStart->time_since_epoch()).count()
                      : 0.0);
      metrics_->pendingGpu(cache_, clock_, lastPendingScan, actions.empty());
    }
    if (actions.empty()) {
      cache_.waitForWork(cache_.nextWake(clock_.now()), loopStop_);
    }
  }
  // Leaving the term: writes already handed to the workers finish; nothing new is decided.
  leading_ = false;
  if (metrics_) {
    metrics_->leader.Set(0);
    metrics_->pendingGpuPods.Set(0);  // a standby reports no waits
    metrics_->oldestPendingGpu.Set(0);
  }
  cache_.stopLeading();
  spdlog::info("stopped leading");
}

void Scheduler::workerMain(std::size_t i) {
  WorkQueue& w = *work_[i];
  for (;;) {
    Action a;
    {
      std::unique_lock<std::mutex> lock(w.mu);
      w.cv.wait(lock, [&] { return w.done || !w.q.empty(); });
      if (w.q.empty() || graceOver_) {
        // Drained, or stop()'s grace is over: what is left is dropped (the next leader decides
        // these pods again from what the API shows).
        droppedWrites_ += w.q.size();
        inFlight_ -= w.q.size();
        w.q.clear();
        break;
      }
      a = std::move(w.q.front());
      w.q.pop_front();
    }
    execute(a);
    --inFlight_;
  }
  drainerDone(false);
}

void Scheduler::eventMain() {
  for (;;) {
    PendingEvent e;
    {
      std::unique_lock<std::mutex> lock(eventMu_);
      eventCv_.wait(lock, [&] { return eventsDone_ || !events_.empty(); });
      if (events_.empty() || graceOver_) {
        droppedEvents_ += events_.size();
        events_.clear();
        break;
      }
      e = std::move(events_.front());
      events_.pop_front();
    }
    if (auto r = recorder_.record(e.ref, e.type, e.reason, e.message); !r) {
      spdlog::warn("event {} on pod {}/{}: {}", e.reason, e.ref.ns, e.ref.name, r.error().message);
    }
    if (metrics_) {
      std::lock_guard<std::mutex> lock(eventMu_);
      metrics_->eventsPending.Set(static_cast<double>(events_.size()));
    }
  }
  drainerDone(true);
}

void Scheduler::event(const Action& a, const std::string& type, const std::string& reason,
                      const std::string& message) {
  kube::ObjectReference ref;
  ref.kind = "Pod";
  ref.apiVersion = "v1";
  ref.ns = a.ns;
  ref.name = a.name;
  ref.uid = a.uid;
  std::lock_guard<std::mutex> lock(eventMu_);
  // Events are for people and best effort: under a flood the oldest are dropped rather than
  // letting memory grow (kube-scheduler's broadcaster also drops when its queue is full).
  if (events_.size() >= 10'000) {
    events_.pop_front();
  }
  events_.push_back(PendingEvent{std::move(ref), type, reason, message});
  if (metrics_) {
    metrics_->eventsPending.Set(static_cast<double>(events_.size()));
  }
  eventCv_.notify_one();
}

bool Scheduler::setCondition(const Action& a, const std::string& reason,
                             const std::string& message) {
  {
    // The same condition again (a retry after backoff) is not written again: no API write in
    // the hot path for nothing (the original patched every pod on every attempt).
    std::lock_guard<std::mutex> lock(condMu_);
    std::string& last = lastCondition_[a.key];
    if (last == reason + "\n" + message) {
      return false;
    }
    last = reason + "\n" + message;
    if (lastCondition_.size() > 100'000) {
      lastCondition_.clear();
    }
  }
  json patch = {
      {"status",
       {{"conditions", json::array({{{"type", "PodScheduled"},
                                     {"status", "False"},
                                     {"reason", reason},
                                     {"message", message},
                                     {"lastProbeTime", nullptr},
                                     {"lastTransitionTime", formatRfc3339(clock_.wallNow())}}})}}}};
  auto r = client_.patch(kube::gvr::pods(), a.ns, a.name, kube::PatchType::kStrategicMerge, patch,
                         "status");
  if (!r) {
    spdlog::warn("pod {}: PodScheduled condition: {}", a.key, r.error().message);
  }
  return true;
}

bool Scheduler::patchRequest(const Action& a, bool set) {
  const json ann = set ? api::reconfigRequestAnnotations({a.node, a.deficit, a.reservedAt})
                       : api::clearReconfigRequestAnnotations();
  json patch = {{"metadata", {{"annotations", ann}}}};
  auto r = client_.patch(kube::gvr::pods(), a.ns, a.name, kube::PatchType::kMerge, patch);
  if (!r) {
    spdlog::warn("pod {}: {} the reconfiguration request: {}", a.key, set ? "writing" : "removing",
                 r.error().message);
    return false;
  }
  return true;
}

void Scheduler::execute(const Action& a) {
  switch (a.kind) {
    case Action::Kind::kBind:
      executeBind(a);
      return;
    case Action::Kind::kReserve:
      executeReserve(a);
      return;
    case Action::Kind::kQueued:
      executeQueued(a);
      return;
    case Action::Kind::kAllocate:
      executeAllocate(a);
      return;
    case Action::Kind::kBindVolumes:
      executeBindVolumes(a);
      return;
    case Action::Kind::kPreempt:
      executePreempt(a);
      return;
    case Action::Kind::kUnschedulable:
    case Action::Kind::kCancel:
    case Action::Kind::kInvalid:
      executeRefusal(a);
      return;
  }
}

void Scheduler::executeBind(const Action& a) {
  const auto now = clock_.now();
  auto r = client_.bindPod(a.ns, a.name, a.node, a.uid);
  if (!r) {
    cache_.bindDone(a.key, false, clock_.now());
    if (metrics_) {
      metrics_->error.Increment();
    }
    {
      std::lock_guard<std::mutex> lock(condMu_);
      ++counters_.bindFailures;
    }
    if (!r.error().isNotFound()) {
      event(a, "Warning", "FailedScheduling", "Binding rejected: " + r.error().message);
    }
    return;
  }
  cache_.bindDone(a.key, true, now);
  if (metrics_) {
    metrics_->scheduled.Increment();
    if (a.firstSeen != Clock::time_point{}) {
      metrics_->e2e.Observe(std::chrono::duration<double>(clock_.now() - a.firstSeen).count());
    }
  }
  {
    std::lock_guard<std::mutex> lock(condMu_);
    ++counters_.bound;
    lastCondition_.erase(a.key);
    lastQueuedEvent_.erase(a.key);
  }
  event(a, "Normal", "Scheduled", "Successfully assigned " + a.key + " to " + a.node);
}

void Scheduler::executeReserve(const Action& a) {
  if (!a.volumeWrites.empty()) {
    // The claims are bound or provisioned while the GPUs move; a refused write drops both.
    const bool written = writeVolumes(a);
    cache_.volumesDone(a.key, written, clock_.now());
    if (!written) {
      noteError();
      return;
    }
  }
  const bool ok = patchRequest(a, true);
  cache_.reserveDone(a.key, ok, clock_.now());
  if (!ok) {
    return;
  }
  noteReconfigRequest();
  const std::string gpus = std::to_string(a.deficit) + " kubecomp.io/gpu";
  event(a, "Normal", "Reconfig",
        "Pod " + a.key + " needs reconfiguration: " + gpus + " to attach to node " + a.node);
  setCondition(a, std::string(kReasonWaitingForReconfig),
               "waiting for " + gpus + " to be attached to node " + a.node);
}

void Scheduler::noteReconfigRequest() {
  if (metrics_) {
    metrics_->reconfig.Increment();
  }
  std::lock_guard<std::mutex> lock(condMu_);
  ++counters_.reconfigRequests;
}

void Scheduler::noteError() {
  if (metrics_) {
    metrics_->error.Increment();
  }
}

void Scheduler::executeQueued(const Action& a) {
  if (metrics_) {
    metrics_->queued.Increment();
  }
  if (!setCondition(a, std::string(kReasonWaitingInQueue), a.message)) {
    return;
  }
  bool newHead = false;
  {
    std::lock_guard<std::mutex> lock(condMu_);
    ++counters_.queued;
    std::string& last = lastQueuedEvent_[a.key];
    // One Event per head (and node) a pod waits behind, not one per changed estimate.
    newHead = last != a.head + "\n" + a.node;
    last = a.head + "\n" + a.node;
    if (lastQueuedEvent_.size() > 100'000) {
      lastQueuedEvent_.clear();
    }
  }
  if (newHead) {
    event(a, "Normal", std::string(kReasonWaitingInQueue), a.message);
  }
}

void Scheduler::executeRefusal(const Action& a) {
  if (metrics_) {
    (a.kind == Action::Kind::kUnschedulable ? metrics_->unschedulable
     : a.kind == Action::Kind::kCancel      ? metrics_->cancelled
                                            : metrics_->invalid)
        .Increment();
  }
  {
    std::lock_guard<std::mutex> lock(condMu_);
    ++(a.kind == Action::Kind::kUnschedulable ? counters_.unschedulable
       : a.kind == Action::Kind::kCancel      ? counters_.cancelled
                                              : counters_.invalid);
  }
  if (!a.clearClaims.empty()) {
    clearAllocations(a);
  } else if (a.kind == Action::Kind::kCancel ||
             (a.kind == Action::Kind::kInvalid && a.clearAnnotations)) {
    patchRequest(a, false);
  }
  setCondition(a, "Unschedulable", a.message);
  event(a, "Warning", "FailedScheduling", a.message);
}

}  // namespace kc::sched
