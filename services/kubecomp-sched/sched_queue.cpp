// The queue policies other than backfill (docs/sched.md "Queue policies"): fcfs, and
// easy-backfill / slack-backfill through alloc::QueuePass, the pass the simulator runs. The
// cache is the pass's host: its pending pods in queue order (priority, then FCFS), a plan of
// the cluster (the pool model with the GPUs promised to reservations moved where they go, the
// running pods with their expected ends, the fabric clock of the outstanding moves) and
// decideLocked as the placement.

#include <spdlog/spdlog.h>

#include <algorithm>

#include "libcore/alloc/policy_registry.hpp"
#include "libcore/base/rfc3339.hpp"
#include "services/kubecomp-sched/sched_cache.hpp"

namespace kc::sched {
namespace {

std::int64_t msOf(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

std::int64_t gpuOf(const alloc::Resources& r) {
  return r.scalarOr0(alloc::kGpuResource);
}

std::int64_t saturatingAdd(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  return __builtin_add_overflow(a, b, &out) ? INT64_MAX : out;
}

}  // namespace

struct SchedCache::QueuePlan {
  alloc::ClusterState state;
  std::vector<alloc::RunningPod> running;
  alloc::FabricClock fabric;
};

std::chrono::system_clock::time_point SchedCache::wallNow() const {
  return opts_.wallClock ? opts_.wallClock() : clockOr(opts_.clock).wallNow();
}

std::int64_t SchedCache::runtimeMs(const PodInfo& pod) const {
  const std::int64_t s = pod.pod.expectedRuntimeSeconds.value_or(opts_.defaultRuntime.count());
  return s * 1000;  // at most kMaxExpectedRuntimeSeconds: no overflow
}

// The plan at `now`: the pool model as a decision sees it, except that the GPUs promised to a
// reservation (taken from elsewhere in its pool) are moved onto its node and in use there, as
// they will be once reconfig-mgr is done. Every pod holding GPUs is a running pod: a placed one
// ends at its start + expected run time (one past that counts as ending now); a reservation's
// pod starts when its pool's outstanding moves up to its own have landed (moves in one pool
// are serialised, reservations served in the order they were made, one --move-seconds each).
void SchedCache::buildPlanLocked(Clock::time_point now, QueuePlan& plan) {
  model_.refresh();
  const std::int64_t nowMs = msOf(now);
  const std::int64_t moveMs = opts_.moveTime.count();
  const alloc::ClusterState& state = model_.state();
  const std::size_t nodeCount = model_.nodes().size();
  plan.state.assignFrom(state);  // after the pass's first plan: only what changed is copied
  plan.running.clear();
  plan.fabric.busyUntil.assign(state.poolCount(), nowMs);
  std::vector<std::vector<const PodInfo*>> placedOn(nodeCount);
  std::vector<std::vector<const PodInfo*>> reservedOn(nodeCount);
  for (const auto& [key, h] : model_.holdings()) {
    auto n = model_.indexOf(h.node);
    const PodInfo* p = findLocked(key);
    if (!n || p == nullptr || gpuOf(h.request) <= 0) {
      continue;
    }
    (p->reserved() ? reservedOn : placedOn)[*n].push_back(p);
  }
  struct Outstanding {
    std::uint64_t order;
    std::size_t running;
    std::int64_t gpus;
  };
  std::vector<std::vector<Outstanding>> perPool(state.poolCount());
  std::vector<std::size_t> promisedNext(state.poolCount(), 0);
  for (std::size_t i = 0; i < nodeCount; ++i) {
    const auto n = static_cast<alloc::NodeIndex>(i);
    const alloc::PoolIndex pool = plan.state.node(n).pool;
    if (pool == alloc::kNoPool) {
      continue;
    }
    std::vector<alloc::GpuIndex> inUse;
    for (alloc::GpuIndex g : plan.state.nodeGpus(n)) {
      if (plan.state.gpu(g).inUse) {
        inUse.push_back(g);
      }
    }
    std::sort(inUse.begin(), inUse.end());
    std::size_t next = 0;
    auto& placed = placedOn[i];
    std::sort(placed.begin(), placed.end(),
              [](const PodInfo* a, const PodInfo* b) { return a->key < b->key; });
    for (const PodInfo* p : placed) {
      alloc::RunningPod r;
      r.node = n;
      for (std::int64_t k = 0; k < p->gpus && next < inUse.size(); ++k) {
        r.gpus.push_back(inUse[next++]);
      }
      r.pod.gpus = static_cast<std::uint32_t>(r.gpus.size());
      r.end = saturatingAdd(msOf(p->started.value_or(now)), runtimeMs(*p));
      plan.running.push_back(std::move(r));
    }
    auto& reserved = reservedOn[i];
    std::sort(reserved.begin(), reserved.end(), [&](const PodInfo* a, const PodInfo* b) {
      return a->reservation.order < b->reservation.order;
    });
    for (const PodInfo* p : reserved) {
      alloc::RunningPod r;
      r.node = n;
      for (std::int64_t k = 0; k < p->gpus && next < inUse.size(); ++k) {
        r.gpus.push_back(inUse[next++]);
      }
      const std::int64_t outstanding = p->gpus - static_cast<std::int64_t>(r.gpus.size());
      // The promised GPUs, moved onto the node in the plan.
      const auto poolGpus = plan.state.poolGpus(pool);
      while (static_cast<std::int64_t>(r.gpus.size()) < p->gpus &&
             promisedNext[pool] < poolGpus.size()) {
        const alloc::GpuIndex g = poolGpus[promisedNext[pool]++];
        if (!model_.promised(g)) {
          continue;
        }
        if (plan.state.setGpuDraining(g, false) && plan.state.detachGpu(g) &&
            plan.state.attachGpu(g, n) && plan.state.allocateGpu(g)) {
          r.gpus.push_back(g);
        }
      }
      r.pod.gpus = static_cast<std::uint32_t>(r.gpus.size());
      perPool[pool].push_back(Outstanding{p->reservation.order, plan.running.size(), outstanding});
      r.end = runtimeMs(*p);  // start added below, once the fabric order is known
      plan.running.push_back(std::move(r));
    }
  }
  for (std::size_t pool = 0; pool < perPool.size(); ++pool) {
    auto& list = perPool[pool];
    std::sort(list.begin(), list.end(),
              [](const Outstanding& a, const Outstanding& b) { return a.order < b.order; });
    std::int64_t moves = 0;
    for (const Outstanding& o : list) {
      moves += std::max<std::int64_t>(0, o.gpus);
      const std::int64_t lands = o.gpus > 0 ? saturatingAdd(nowMs, moves * moveMs) : nowMs;
      plan.running[o.running].end = saturatingAdd(lands, plan.running[o.running].end);
    }
    plan.fabric.busyUntil[pool] = saturatingAdd(nowMs, moves * moveMs);
  }
}

// The cache as the pass's host: the pending pods in queue order (priority, then FCFS), the plan,
// decideLocked.
class SchedCache::PassHost : public alloc::QueueHost {
 public:
  PassHost(SchedCache& cache, std::vector<PodInfo*> queue, Clock::time_point now,
           std::vector<Action>& out)
      : c_(cache), queue_(std::move(queue)), now_(now), out_(out) {
    c_.buildPlanLocked(now_, plan_);
    for (const PodInfo* p : queue_) {
      std::uint32_t key = 0;
      if (!p->pod.gpuModels.acceptsAny()) {
        auto it =
            std::find_if(filters_.begin(), filters_.end(),
                         [&](const alloc::GpuModelFilter* f) { return *f == p->pod.gpuModels; });
        key = static_cast<std::uint32_t>(it - filters_.begin()) + 1;
        if (it == filters_.end()) {
          filters_.push_back(&p->pod.gpuModels);
        }
      }
      modelsKey_.push_back(key);
    }
  }

  std::size_t waiting() const override { return queue_.size(); }
  alloc::QueuedPod queued(std::size_t i) const override {
    const PodInfo& p = *queue_[i];
    return alloc::QueuedPod{
        p.seq,
        alloc::PodRequest{0, 0, static_cast<std::uint32_t>(std::max<std::int64_t>(0, p.gpus))},
        &p.pod.gpuModels, modelsKey_[i], c_.runtimeMs(p)};
  }
  alloc::QueueView view() const override {
    return alloc::QueueView{&plan_.state, plan_.running, plan_.fabric, {}};
  }
  // The daemon does not choose the GPUs that move (reconfig-mgr does): the plan's moves use
  // unattached-first, which draws nothing.
  alloc::SplitMix64 placementRng() const override { return alloc::SplitMix64(1); }
  Result<bool> start(std::size_t i, bool tested) override {
    PodInfo& p = *queue_[i];
    if (!tested && c_.queue_.waiting(p.key)) {
      return false;  // backing off and nothing was released since it last failed: still unfit
    }
    c_.queue_.unwait(p.key);
    c_.queue_.remove(p.key);
    auto a = c_.decideLocked(p, now_);
    if (a) {
      out_.push_back(std::move(*a));
      answered_.insert(p.key);
    }
    const bool placed = p.assumed() || p.reserved();
    if (placed) {
      c_.buildPlanLocked(now_, plan_);
    }
    return placed;
  }

  // Whether start() produced an action for the pod.
  bool answered(const std::string& key) const { return answered_.contains(key); }
  const alloc::ClusterState& planState() const { return plan_.state; }

 private:
  SchedCache& c_;
  std::vector<PodInfo*> queue_;
  Clock::time_point now_;
  std::vector<Action>& out_;
  QueuePlan plan_;
  std::vector<const alloc::GpuModelFilter*> filters_;  // distinct constrained filters
  std::vector<std::uint32_t> modelsKey_;               // per queued pod: 0 any, else 1 + index
  std::set<std::string> answered_;
};

void SchedCache::queuePassLocked(Clock::time_point now, std::vector<Action>& out) {
  model_.refresh();
  // Pods due for a decision now (the rest back off); invalid ones are reported and dropped.
  const std::set<std::string> due = queue_.takeActive();
  std::vector<PodInfo*> queue;
  for (auto& [key, p] : pods_) {
    if (!p->ours || p->bound() || p->deleting || p->hold != PodInfo::Hold::kNone) {
      continue;
    }
    if (!p->invalid.empty()) {
      if (due.contains(key)) {
        if (auto a = decideLocked(*p, now)) {
          out.push_back(std::move(*a));
        }
      }
      continue;
    }
    if (due.contains(key) || queue_.waiting(key)) {
      queue.push_back(p.get());
    }
  }
  std::sort(queue.begin(), queue.end(), [](const PodInfo* a, const PodInfo* b) {
    return a->queueOrder() < b->queueOrder();  // priority, then FCFS (pod_order.hpp)
  });
  queueStats_.head.clear();
  queueStats_.headNode.clear();
  queueStats_.headStart.reset();
  if (opts_.queue.discipline == alloc::QueueDiscipline::Fcfs) {
    fcfsPassLocked(queue, due, now, out);
  } else {
    easyPassLocked(queue, due, now, out);
  }
}

void SchedCache::holdBackLocked(PodInfo& pod, const std::string& head, const std::string& node,
                                std::string message, bool due, Clock::time_point now,
                                std::vector<Action>& out) {
  ++queueStats_.held;
  if (due) {
    backoffLocked(pod.key, now);  // retried on its timer or when something is released
  }
  if (pod.heldReported == message) {
    return;  // told already
  }
  pod.heldReported = message;
  Action a = baseAction(pod, Action::Kind::kQueued);
  a.head = head;
  a.node = node;
  a.message = std::move(message);
  out.push_back(std::move(a));
}

void SchedCache::unfitLocked(PodInfo& pod, Clock::time_point now, std::vector<Action>& out) {
  // The plan found no room now: placePod gives kube-scheduler's message (it cannot find more
  // room than the pool model; if it does, the pod simply waits for its next turn).
  auto placed =
      alloc::placePod(pod.pod, model_.nodes(), model_.usage(), model_.state(), opts_.placement);
  backoffLocked(pod.key, now);
  if (placed) {
    return;
  }
  Action a = baseAction(pod, Action::Kind::kUnschedulable);
  a.message = placed.error().code == kc::errc::kUnschedulable
                  ? placed.error().message
                  : "scheduler error: " + placed.error().message;
  out.push_back(std::move(a));
}

// fcfs: the paper's strict queue. A head that waits, because it does not fit or because its
// GPUs are still being moved (any reservation), blocks every later pod.
void SchedCache::fcfsPassLocked(const std::vector<PodInfo*>& queue,
                                const std::set<std::string>& due, Clock::time_point now,
                                std::vector<Action>& out) {
  std::string head;
  std::string headNode;
  std::string why;
  if (!reservedByOrder_.empty()) {
    const std::string& oldest = reservedByOrder_.begin()->second;
    if (const PodInfo* o = findLocked(oldest); o != nullptr) {
      head = oldest;
      headNode = o->reservation.node;
      why = "waiting for " + std::to_string(o->reservation.gpus) + " kubecomp.io/gpu on node " +
            headNode;
    }
  }
  for (PodInfo* p : queue) {
    const bool isDue = due.contains(p->key);
    if (!head.empty()) {
      holdBackLocked(*p, head, headNode,
                     "waiting behind the queue head " + head + " (" + why +
                         "); queue policy fcfs starts pods in order",
                     isDue, now, out);
      continue;
    }
    p->heldReported.clear();
    if (!isDue) {
      head = p->key;  // backing off: it did not fit, nothing was released since
      why = "it does not fit now";
      continue;
    }
    queue_.remove(p->key);
    if (auto a = decideLocked(*p, now)) {
      out.push_back(std::move(*a));
    }
    if (p->assumed()) {
      continue;
    }
    head = p->key;
    if (p->reserved()) {
      headNode = p->reservation.node;
      why = "waiting for " + std::to_string(p->reservation.gpus) + " kubecomp.io/gpu on node " +
            headNode;
    } else {
      why = "it does not fit now";
    }
  }
  queueStats_.head = head;
  queueStats_.headNode = headNode;
}

void SchedCache::easyPassLocked(const std::vector<PodInfo*>& queue,
                                const std::set<std::string>& due, Clock::time_point now,
                                std::vector<Action>& out) {
  PassHost host(*this, queue, now, out);
  const alloc::PlacementRules rules{
      opts_.placement.mode,
      opts_.placement.policy.compare != nullptr ? opts_.placement.policy
                                                : *alloc::findNodePolicy(alloc::kDefaultNodePolicy),
      *alloc::findGpuPolicy(alloc::kDefaultGpuPolicy), opts_.moveTime.count()};
  const std::int64_t nowMs = msOf(now);
  auto pass = queuePass_.run(host, rules, nowMs);
  if (!pass) {
    // Not expected (the plan is consistent by construction): fall back to deciding every due
    // pod on its own, as backfill does, and say why.
    spdlog::error("queue pass ({}): {}; deciding the due pods without it", opts_.queue.name,
                  pass.error().message);
    for (PodInfo* p : queue) {
      if (due.contains(p->key) && !host.answered(p->key) && !p->assumed() && !p->reserved()) {
        if (auto a = decideLocked(*p, now)) {
          out.push_back(std::move(*a));
        }
      }
    }
    return;
  }
  queueStats_.backfilled += pass->backfilled;
  std::string head;
  std::string headNode;
  std::string headAt;
  if (pass->head && pass->reservation) {
    head = queue[*pass->head]->key;
    headNode = host.planState().node(pass->reservation->node).name;
    const auto wall = wallNow() + std::chrono::milliseconds(pass->reservation->start - nowMs);
    queueStats_.head = head;
    queueStats_.headNode = headNode;
    queueStats_.headStart = wall;
    headAt = formatRfc3339(wall);
  }
  for (std::size_t i = 0; i < queue.size(); ++i) {
    PodInfo& p = *queue[i];
    const bool isDue = due.contains(p.key);
    switch (pass->verdicts[i]) {
      case alloc::QueueVerdict::kStarted:
      case alloc::QueueVerdict::kHead:
      case alloc::QueueVerdict::kNeverFits:
      case alloc::QueueVerdict::kAlone:
        p.heldReported.clear();
        if (pass->verdicts[i] != alloc::QueueVerdict::kStarted && isDue && !host.answered(p.key)) {
          backoffLocked(p.key, now);
        }
        break;
      case alloc::QueueVerdict::kUnfit:
      case alloc::QueueVerdict::kDominated:
        p.heldReported.clear();
        if (isDue && !host.answered(p.key)) {
          unfitLocked(p, now, out);
        }
        break;
      case alloc::QueueVerdict::kDelaysHead: {
        std::string message = "waiting behind the queue head " + head + ", reserved on node " +
                              headNode + " from " + headAt +
                              ": starting this pod now would delay it";
        if (opts_.queue.discipline == alloc::QueueDiscipline::SlackBackfill) {
          message += " past its bound " +
                     formatRfc3339(wallNow() + std::chrono::milliseconds(pass->bound - nowMs));
        }
        message += " (queue policy " + std::string(opts_.queue.name) + ")";
        holdBackLocked(p, head, headNode, std::move(message), isDue, now, out);
        break;
      }
    }
  }
}

}  // namespace kc::sched
