#include "tools/kubecomp-sim/engine.hpp"

#include <algorithm>
#include <deque>
#include <optional>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>

#include "libcore/alloc/device_offer.hpp"
#include "libcore/alloc/gang.hpp"
#include "libcore/alloc/gpu_candidate.hpp"
#include "libcore/alloc/pod_order.hpp"
#include "libcore/alloc/queue_pass.hpp"
#include "libcore/alloc/rng.hpp"
#include "tools/kubecomp-sim/idle_return.hpp"
#include "tools/kubecomp-sim/runnable_check.hpp"
#include "tools/kubecomp-sim/sim_fabric.hpp"
#include "tools/kubecomp-sim/sim_input.hpp"
#include "tools/kubecomp-sim/usage_accumulator.hpp"

namespace kc::sim {
namespace {

Error internal(const std::string& what, const Error& cause) {
  return makeError(kc::errc::kInternal, "simulator: " + what + ": " + cause.message);
}

// Event kinds, in the order they are handled at one instant.
constexpr std::uint8_t kStart = 0;          // job `job` starts using its GPUs
constexpr std::uint8_t kEnd = 1;            // job `job` ends (frees resources)
constexpr std::uint8_t kLanding = 2;        // pool `job`'s background move lands (recomposition)
constexpr std::uint8_t kIdleCheck = 3;      // GPU `job` may have been idle for the idle timeout
constexpr std::uint8_t kReturnLanding = 4;  // idle return `job` (IdleReturns id) is done

struct Event {
  SimMs time;
  std::uint8_t kind;
  std::uint32_t job;
  bool operator>(const Event& o) const {
    return std::tie(time, kind, job) > std::tie(o.time, o.kind, o.job);
  }
};

bool idleReturnsOn(const SimConfig& c) {
  return c.idleReturn == alloc::ReturnKind::IdleTimeout &&
         c.mode == alloc::Composability::Composable;
}

class Engine {
 public:
  Engine(const alloc::ClusterState& cluster, const Trace& trace, const SimConfig& config)
      : initial_(cluster),
        state_(cluster),
        trace_(trace),
        config_(config),
        rng_(config.seed),
        usage_(cluster.gpuCount()),
        runnable_(initial_, config.mode),
        fabric_(cluster, config.moves),
        inflight_(cluster.poolCount()),
        gpuLands_(cluster.gpuCount(), 0),
        returns_(idleReturnsOn(config) ? cluster.gpuCount() : 0, config.idleTimeout),
        easyPass_(config.queue == QueueDiscipline::SlackBackfill ? QueueDiscipline::SlackBackfill
                                                                 : QueueDiscipline::EasyBackfill,
                  config.queue == QueueDiscipline::SlackBackfill ? config.slackFactor
                                                                 : alloc::kDefaultSlackFactor) {
    result_.jobs.resize(trace.jobs.size());
    result_.totalGpus = cluster.gpuCount();
    runningGpus_.resize(trace.jobs.size());
    poolNodes_.resize(cluster.poolCount());
    for (alloc::NodeIndex n = 0; n < cluster.nodeCount(); ++n) {
      if (cluster.node(n).pool != alloc::kNoPool) {
        poolNodes_[cluster.node(n).pool].push_back(n);
      }
    }
  }

  Result<SimResult> run() {
    const auto& jobs = trace_.jobs;
    progressEvery_ = std::max<std::uint64_t>(1, jobs.size() / 1000);  // the CLI rate-limits
    std::size_t nextArrival = 0;
    SimMs lastEnd = jobs.empty() ? 0 : jobs.front().arrival;
    if (!jobs.empty()) {
      usage_.start(jobs.front().arrival);
      startIdleClocks(jobs.front().arrival);
    }
    while (nextArrival < jobs.size() || !events_.empty()) {
      SimMs now = events_.empty() ? jobs[nextArrival].arrival : events_.top().time;
      if (nextArrival < jobs.size()) {
        now = std::min(now, jobs[nextArrival].arrival);
      }
      // An instant with only background events (landings, idle checks) changes no usage: not
      // advancing to it keeps the usage record within [first arrival, last end].
      const bool onlyBackground = !events_.empty() && events_.top().time == now &&
                                  events_.top().kind >= kLanding &&
                                  (nextArrival == jobs.size() || jobs[nextArrival].arrival != now);
      if (!onlyBackground) {
        if (auto st = usage_.advance(now); !st) {
          return st.error();
        }
      }
      fabric_.prune(now);
      countStranded(now);
      bool released = false;
      while (!events_.empty() && events_.top().time == now) {
        const Event e = events_.top();
        events_.pop();
        if (e.kind == kStart) {
          usage_.add(static_cast<std::uint32_t>(jobs[e.job].totalGpus()));
          --startsPending_;
        } else if (e.kind == kEnd) {
          if (auto s = endJob(e.job, now); !s) {
            return s.error();
          }
          released = true;
          lastEnd = std::max(lastEnd, now);
        } else if (e.kind == kLanding) {
          landed(e.job);
        } else if (e.kind == kIdleCheck) {
          due_.push_back(e.job);
        } else {
          returnLanded(e.job);
          released = true;  // a GPU is back in the pool: a stock node may be offered it now
        }
      }
      if (released) {
        failedHead_ = kNone;
      }
      while (nextArrival < jobs.size() && jobs[nextArrival].arrival == now) {
        if (auto s = arrive(static_cast<std::uint32_t>(nextArrival++)); !s) {
          return s.error();
        }
      }
      if (auto s = schedule(now); !s) {
        return s.error();
      }
      if (auto s = recompose(now, nextArrival < jobs.size()); !s) {
        return s.error();
      }
      if (auto s = returnIdle(now, nextArrival < jobs.size()); !s) {
        return s.error();
      }
    }
    if (config_.progress) {
      config_.progress(finished_, jobs.size());
    }
    if (!queue_.empty()) {
      const std::string id = quoteInput(jobs[queue_.front()].id);
      return makeError(kc::errc::kInternal, "simulator: job " + id + " still waited at the end");
    }
    auto usage = usage_.finish(lastEnd);
    if (!usage) {
      return usage.error();
    }
    result_.usage = std::move(*usage);
    return std::move(result_);
  }

  // Checks the trace and config, and parses the trace's gpu_spec texts once each (a job's
  // filter is filters_[job.gpuSpec]).
  Status validate() {
    auto filters = checkSimInput(trace_, config_);
    if (!filters) {
      return filters.error();
    }
    filters_ = std::move(*filters);
    return okStatus();
  }

 private:
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;

  static Error pastTimeLimit(const Job& job) {
    return makeError(kc::errc::kInvalid, "job " + quoteInput(job.id) +
                                             " would end past the simulated-time limit of 2^62 ms "
                                             "(queueing behind very long jobs)");
  }

  static alloc::PodRequest podOf(const Job& j) {
    return alloc::PodRequest{static_cast<std::uint64_t>(j.cpuMilli),
                             static_cast<std::uint64_t>(j.memoryMib), j.gpus};
  }

  // A job ends: its GPUs and CPU/memory are free again, its GPUs idle where they are.
  Status endJob(std::uint32_t j, SimMs now) {
    const Job& job = trace_.jobs[j];
    usage_.remove(static_cast<std::uint32_t>(job.totalGpus()));
    for (alloc::GpuIndex g : runningGpus_[j]) {
      if (auto s = state_.releaseGpu(g); !s) {
        return internal("releaseGpu", s.error());
      }
      becameIdle(g, now);
    }
    allocated_ -= runningGpus_[j].size();
    running_.erase(j);
    runningGpus_[j].clear();
    runningGpus_[j].shrink_to_fit();
    if (job.members <= 1) {
      if (auto s = releaseRequest(result_.jobs[j].node, job); !s) {
        return s;
      }
    } else {
      for (alloc::NodeIndex n : memberNodes_[j]) {
        if (auto s = releaseRequest(n, job); !s) {
          return s;
        }
      }
      memberNodes_.erase(j);
    }
    countFinished();
    return okStatus();
  }

  // One pod's CPU and memory back on its node.
  Status releaseRequest(alloc::NodeIndex n, const Job& job) {
    if (auto s = state_.release(n, static_cast<std::uint64_t>(job.cpuMilli),
                                static_cast<std::uint64_t>(job.memoryMib));
        !s) {
      return internal("release", s.error());
    }
    return okStatus();
  }

  // A job arrives: queued, or rejected when it could not run even on the empty cluster.
  Status arrive(std::uint32_t j) {
    const Job& job = trace_.jobs[j];
    const std::uint32_t f = job.gpuSpec;
    if (config_.recompose != alloc::RecomposeKind::None && f == 0 && job.gpus > 0) {
      recent_.push_back(podOf(job));
      if (recent_.size() > alloc::kRecentArrivals) {
        recent_.pop_front();
      }
    }
    auto runnable = runnableOnEmpty(j, f);
    if (!runnable) {
      return runnable.error();
    }
    if (*runnable) {
      enqueue(j);
      return okStatus();
    }
    ++result_.rejected;
    if (!filters_[f].acceptsAny()) {
      auto anyModel = runnableOnEmpty(j, 0);
      if (!anyModel) {
        return anyModel.error();
      }
      result_.rejectedGpuModel += *anyModel ? 1 : 0;
    }
    countFinished();
    return okStatus();
  }

  // Whether job j (with the GPU model filter f) could run on the empty cluster: one pod by
  // RunnableCheck; a gang when also the gang rule places all its members there at once
  // (gangFits).
  Result<bool> runnableOnEmpty(std::uint32_t j, std::uint32_t f) {
    const Job& job = trace_.jobs[j];
    if (!runnable_.runnable(podOf(job), f, filters_[f])) {
      return false;
    }
    if (job.members <= 1) {
      return true;
    }
    return gangFits(initial_, j, f);
  }

  // Queued in the order of alloc::podBefore (priority, then arrival; equal keys keep arrival
  // order). Without priorities every job goes to the back, as before.
  void enqueue(std::uint32_t j) {
    const Job& job = trace_.jobs[j];
    auto key = [&](std::uint32_t i) {
      return alloc::PodOrderKey{trace_.jobs[i].priority, trace_.jobs[i].arrival, {}, {}};
    };
    if (job.members > 1) {
      ++gangsWaiting_;
    }
    if (queue_.empty() || !alloc::podBefore(key(j), key(queue_.back()))) {
      queue_.push_back(j);
      return;
    }
    auto at = std::upper_bound(
        queue_.begin(), queue_.end(), j,
        [&](std::uint32_t a, std::uint32_t b) { return alloc::podBefore(key(a), key(b)); });
    queue_.insert(at, j);
  }

  // Stranded GPU time: GPUs allocated to no job while some gang waits in the queue, from the
  // previous event to `now`.
  void countStranded(SimMs now) {
    if (gangsWaiting_ > 0 && now > lastTick_) {
      const double idle = static_cast<double>(result_.totalGpus - allocated_);
      result_.strandedGpuMs += idle * static_cast<double>(now - lastTick_);
    }
    lastTick_ = now;
  }

  void countFinished() {
    ++finished_;
    if (config_.progress && finished_ % progressEvery_ == 0) {
      config_.progress(finished_, trace_.jobs.size());
    }
  }

  // GPU g is free where it is from `since` on: under idle-timeout, check it then + timeout.
  void becameIdle(alloc::GpuIndex g, SimMs since) {
    if (auto due = returns_.idleFrom(g, since)) {
      events_.push(Event{*due, kIdleCheck, g});
    }
  }

  // The GPUs attached at the start are idle from the first arrival on.
  void startIdleClocks(SimMs origin) {
    for (alloc::GpuIndex g = 0; g < state_.gpuCount(); ++g) {
      if (state_.gpu(g).attached() && state_.gpu(g).free()) {
        becameIdle(g, origin);
      }
    }
  }

  // Idle-timeout returns (after the scheduling pass): each GPU checked now that is still idle
  // since its check was set is detached, the detach queued on its pool's fabric. Nothing is
  // returned once no job is to arrive and none waits (no pod could use it).
  Status returnIdle(SimMs now, bool arrivalsLeft) {
    if (!returns_.enabled()) {
      return okStatus();
    }
    const bool waiting = !queue_.empty() || startsPending_ > 0;
    if (waiting) {
      returns_.podsWaiting();
    }
    std::vector<alloc::GpuIndex> due;
    due.swap(due_);
    if (!arrivalsLeft && queue_.empty()) {
      return okStatus();
    }
    for (alloc::GpuIndex g : due) {
      if (!returns_.expired(state_, g, now)) {
        continue;  // used (or moved) since: a later check is set if it idles again
      }
      const alloc::PoolIndex pool = state_.gpu(g).pool;
      // The detach holds the GPU's chassis (and a place in its pool) for the return time.
      const alloc::GpuIndex one[] = {g};
      auto slot = fabric_.slots(pool, one, config_.returnTime, now);
      if (!slot || slot->front().end > kMaxSimMs) {
        continue;  // it could not land within the simulated-time limit: it stays
      }
      const SimMs lands = slot->front().end;
      if (auto s = state_.detachGpu(g); !s) {
        return internal("detachGpu (idle return)", s.error());
      }
      fabric_.book(pool, one, *slot);
      gpuLands_[g] = lands;
      events_.push(Event{lands, kReturnLanding, returns_.start(waiting)});
    }
    return okStatus();
  }

  void returnLanded(std::uint32_t id) {
    ++result_.idleReturns;
    ++result_.gpusMoved;
    if (returns_.land(id)) {
      ++result_.gpusMovedWhileWaiting;
    }
  }

  Status schedule(SimMs now) {
    if (config_.queue == QueueDiscipline::EasyBackfill ||
        config_.queue == QueueDiscipline::SlackBackfill) {
      return scheduleEasy(now);
    }
    if (config_.queue == QueueDiscipline::Fcfs) {
      while (!queue_.empty()) {
        const std::uint32_t head = queue_.front();
        if (head == failedHead_) {
          break;  // nothing was released since it last failed: it still cannot fit
        }
        auto placed = tryPlace(head, now);
        if (!placed) {
          return placed.error();
        }
        if (!*placed) {
          failedHead_ = head;
          break;
        }
        queue_.pop_front();
      }
      return okStatus();
    }
    // Greedy backfill (beyond the paper). A request at least as large as one that failed in
    // this pass fails too (feasibility is monotone in cpu, memory and GPUs), so skip it.
    // A model filter only narrows the GPUs, so a failed unconstrained request also dominates
    // constrained ones; a failed constrained one dominates only requests with its filter.
    // A gang is dominated by a failed request with no more members (a pod: one member).
    std::vector<std::tuple<alloc::PodRequest, std::uint32_t, std::uint32_t>> failed;
    for (auto it = queue_.begin(); it != queue_.end();) {
      const alloc::PodRequest pod = podOf(trace_.jobs[*it]);
      const std::uint32_t filter = trace_.jobs[*it].gpuSpec;
      const std::uint32_t members = trace_.jobs[*it].members;
      const bool dominated = std::any_of(failed.begin(), failed.end(), [&](const auto& fail) {
        const auto& [f, ff, fm] = fail;
        return (filters_[ff].acceptsAny() || ff == filter) && members >= fm &&
               pod.cpuMilli >= f.cpuMilli && pod.memoryMiB >= f.memoryMiB && pod.gpus >= f.gpus;
      });
      if (dominated) {
        ++it;
        continue;
      }
      auto placed = tryPlace(*it, now);
      if (!placed) {
        return placed.error();
      }
      if (*placed) {
        it = queue_.erase(it);
      } else {
        failed.emplace_back(pod, filter, members);
        ++it;
      }
    }
    return okStatus();
  }

  // EASY / slack backfill: one alloc::QueuePass (libcore/alloc/queue_pass.hpp, the pass
  // kubecomp-sched runs too) over the queue; the engine places what it starts (tryPlace).
  class EasyHost : public alloc::QueueHost {
   public:
    EasyHost(Engine& e, SimMs now) : e_(e), now_(now) {
      for (std::size_t p = 0; p < e.inflight_.size(); ++p) {
        landing_.push_back(e.inflight_[p].active ? e.inflight_[p].lands : 0);
      }
    }
    std::size_t waiting() const override { return e_.queue_.size(); }
    alloc::QueuedPod queued(std::size_t i) const override {
      const std::uint32_t j = e_.queue_[i];
      const Job& job = e_.trace_.jobs[j];
      return alloc::QueuedPod{j, podOf(job), &e_.filters_[job.gpuSpec], job.gpuSpec, job.duration};
    }
    alloc::QueueView view() const override {
      if (!built_) {
        running_.reserve(e_.running_.size());
        for (std::uint32_t r : e_.running_) {
          running_.push_back(runningOf(r));
        }
        built_ = true;
      }
      return alloc::QueueView{&e_.state_, running_, e_.fabric_.clock(), landing_};
    }
    alloc::SplitMix64 placementRng() const override { return e_.rng_; }
    Result<bool> start(std::size_t i, bool tested) override {
      const std::uint32_t j = e_.queue_[i];
      auto placed = e_.tryPlace(j, now_);
      if (!placed) {
        return placed.error();
      }
      if (!*placed && tested) {
        return makeError(kc::errc::kInternal, "simulator: job " + quoteInput(e_.trace_.jobs[j].id) +
                                                  " passed the backfill test but did not fit");
      }
      if (*placed && built_) {
        running_.push_back(runningOf(j));
      }
      return *placed;
    }

   private:
    alloc::RunningPod runningOf(std::uint32_t j) const {
      return alloc::RunningPod{e_.result_.jobs[j].node, podOf(e_.trace_.jobs[j]),
                               e_.runningGpus_[j], e_.result_.jobs[j].end};
    }
    Engine& e_;
    SimMs now_;
    std::vector<SimMs> landing_;
    mutable std::vector<alloc::RunningPod> running_;  // built on first view, then appended
    mutable bool built_ = false;
  };

  Status scheduleEasy(SimMs now) {
    EasyHost host(*this, now);
    const alloc::PlacementRules rules{config_.mode, config_.nodePolicy, config_.gpuPolicy,
                                      config_.moveTime, config_.moves};
    auto pass = easyPass_.run(host, rules, now);
    if (!pass) {
      return internal("queue pass", pass.error());
    }
    result_.placementAttempts += pass->tested;
    if (pass->head && config_.onReserve) {
      for (SimMs start : pass->reservedStarts) {
        config_.onReserve(queue_[*pass->head], start, now);
      }
    }
    std::deque<std::uint32_t> left;
    for (std::size_t i = 0; i < queue_.size(); ++i) {
      if (pass->verdicts[i] == alloc::QueueVerdict::kNeverFits) {
        // The head was runnable on the empty cluster, so it fits once everything has ended.
        const std::string id = quoteInput(trace_.jobs[queue_[i]].id);
        return makeError(kc::errc::kInternal, "simulator: job " + id + " found no reservation");
      }
      if (pass->verdicts[i] != alloc::QueueVerdict::kStarted) {
        left.push_back(queue_[i]);
      }
    }
    queue_ = std::move(left);
    return okStatus();
  }

  // Idle-time recomposition after a scheduling pass: marks the background moves in flight as
  // paid while a pod waits when one does, then starts the first planned move of every pool
  // whose fabric is idle. `arrivalsLeft`: jobs are still to arrive (only then is it worth
  // preparing ahead of demand).
  Status recompose(SimMs now, bool arrivalsLeft) {
    if (config_.recompose == alloc::RecomposeKind::None ||
        config_.mode != alloc::Composability::Composable) {
      return okStatus();
    }
    const bool waiting = !queue_.empty() || startsPending_ > 0;
    bool anyIdle = false;
    for (std::size_t p = 0; p < inflight_.size(); ++p) {
      if (inflight_[p].active && waiting) {
        inflight_[p].waited = true;
      }
      // On the serial fabric a pool is idle when nothing is booked; in parallel a chassis may be.
      anyIdle = anyIdle || (!inflight_[p].active && (config_.moves != alloc::kSerialMoves ||
                                                     fabric_.clock().busyUntil[p] <= now));
    }
    if (!anyIdle || (queue_.empty() && !arrivalsLeft)) {
      return okStatus();
    }
    std::vector<alloc::RunningPod> running;
    alloc::PodRequest head{};
    alloc::RecomposeInput in;
    if (!queue_.empty()) {
      running.reserve(running_.size());
      for (std::uint32_t r : running_) {
        appendRunning(running, r);
      }
      head = podOf(trace_.jobs[queue_.front()]);
      in.head = &head;
      in.headModels = filters_[trace_.jobs[queue_.front()].gpuSpec];
    }
    const std::vector<alloc::PodRequest> recent(recent_.begin(), recent_.end());
    in.running = running;
    in.fabric = fabric_.clock();
    in.recent = recent;
    const alloc::PlacementRules rules{config_.mode, config_.nodePolicy, config_.gpuPolicy,
                                      config_.moveTime, config_.moves};
    auto plan = alloc::planIdleMoves(state_, in, rules, now);
    if (!plan) {
      return internal("planIdleMoves", plan.error());
    }
    for (const alloc::IdleMove& m : *plan) {
      const alloc::PoolIndex pool = state_.node(m.to).pool;
      if (inflight_[pool].active) {
        continue;  // one background move at a time per pool; the rest waits for the next plan
      }
      // It starts only if the schedule lets it start now: its chassis (and the pool) has room.
      const alloc::GpuIndex one[] = {m.gpu};
      auto slot = fabric_.slots(pool, one, config_.moveTime, now);
      if (!slot || slot->front().end > kMaxSimMs) {
        return okStatus();  // nothing can land within the simulated-time limit
      }
      if (slot->front().start > now) {
        continue;  // its chassis or pool is busy: the planner runs again at the next event
      }
      const SimMs lands = slot->front().end;
      if (auto s = state_.detachGpu(m.gpu); !s) {
        return internal("detachGpu (background)", s.error());
      }
      if (auto s = state_.attachGpu(m.gpu, m.to); !s) {
        return internal("attachGpu (background)", s.error());
      }
      fabric_.book(pool, one, *slot);
      gpuLands_[m.gpu] = lands;
      inflight_[pool] = InFlight{true, waiting, lands, m.gpu};
      events_.push(Event{lands, kLanding, pool});
      becameIdle(m.gpu, lands);
    }
    return okStatus();
  }

  void landed(std::uint32_t pool) {
    InFlight& f = inflight_[pool];
    ++result_.idleMoves;
    ++result_.gpusMoved;
    if (f.waited) {
      ++result_.gpusMovedWhileWaiting;
    }
    f = InFlight{};
  }

  // alloc::selectNode's choice. A node of a pool holding fewer than req free GPUs fails
  // selectNode's filter (PoolShort, or NodeShort when preconfigured: a node never has more
  // free GPUs than its pool), so when some pools are short the same decision is taken by
  // alloc::selectNodeAmong over the other pools' nodes, which saves most of the O(nodes) scan
  // on a busy multi-pool cluster. Tested against selectNode in both places.
  Result<alloc::NodeChoice> chooseNode(const alloc::ClusterState& st, const alloc::PodRequest& pod,
                                       const alloc::GpuModelFilter& models) {
    if (config_.offer != alloc::DeviceOffer::Pool) {  // stock DRA: one pass over every node
      return alloc::selectNodeOffered(st, pod, models, config_.nodePolicy, config_.mode,
                                      config_.offer);
    }
    if (pod.gpus == 0) {
      return alloc::selectNode(st, pod, config_.nodePolicy, config_.mode);
    }
    if (!models.acceptsAny()) {
      return alloc::selectNodeForModels(st, pod, models, config_.nodePolicy, config_.mode);
    }
    candidates_.clear();
    bool allPools = true;
    for (alloc::PoolIndex p = 0; p < poolNodes_.size(); ++p) {
      if (st.pool(p).freeGpus >= pod.gpus) {
        candidates_.insert(candidates_.end(), poolNodes_[p].begin(), poolNodes_[p].end());
      } else {
        allPools = false;
      }
    }
    if (allPools) {
      return alloc::selectNode(st, pod, config_.nodePolicy, config_.mode);
    }
    if (candidates_.empty()) {
      return makeError(kc::errc::kUnschedulable, "no pool holds enough free GPUs");
    }
    return alloc::selectNodeAmong(st, pod, config_.nodePolicy, config_.mode, candidates_);
  }

  // Whether moving `gpus` into `pool` lands later (at `ready`) because of the background move
  // in flight there. On the serial fabric any background move in flight delays it; in parallel
  // only one that holds a chassis (or the pool's place) these moves need.
  bool waitedForBackground(alloc::PoolIndex pool, std::span<const alloc::GpuIndex> gpus,
                           SimMs ready, SimMs now) const {
    const InFlight& bg = inflight_[pool];
    if (!bg.active || bg.lands <= now) {
      return false;
    }
    if (config_.moves == alloc::kSerialMoves) {
      return true;
    }
    auto slots = fabric_.slotsWithout(pool, gpus, config_.moveTime, now, bg.gpu, bg.lands);
    return slots && lastEnd(*slots, now) < ready;
  }

  // One pod (a job of one pod) on `st`: the node the policies choose, the GPUs moved to it
  // (detached and attached there at once), `job.gpus` free GPUs of an accepted model allocated
  // and appended to `mine`, CPU and memory reserved. nullopt when no node fits now (`st`
  // unchanged). A gang's members take the same steps inside alloc::planGangWith (planGang).
  struct MemberPick {
    alloc::NodeIndex node = alloc::kNoNode;
    std::uint32_t deficit = 0;
    std::vector<alloc::GpuIndex> moved;
  };
  Result<std::optional<MemberPick>> applyMember(alloc::ClusterState& st, alloc::SplitMix64& rng,
                                                const Job& job, const alloc::GpuModelFilter& models,
                                                std::vector<alloc::GpuIndex>& mine) {
    const alloc::PodRequest pod = podOf(job);
    auto choice = chooseNode(st, pod, models);
    if (!choice) {
      if (choice.error().code == kc::errc::kUnschedulable) {
        return std::optional<MemberPick>();
      }
      return internal("selectNode", choice.error());
    }
    MemberPick pick{choice->node, choice->deficit, {}};
    if (pick.deficit > 0) {
      auto moves = alloc::chooseGpus(st, pick.node, pick.deficit, config_.gpuPolicy, &rng, models);
      if (!moves) {
        return internal("chooseGpus", moves.error());
      }
      pick.moved = std::move(*moves);
      for (alloc::GpuIndex g : pick.moved) {
        if (auto s = st.detachGpu(g); !s) {
          return internal("detachGpu", s.error());
        }
        if (auto s = st.attachGpu(g, pick.node); !s) {
          return internal("attachGpu", s.error());
        }
      }
    }
    const std::size_t first = mine.size();
    for (alloc::GpuIndex g : st.nodeGpus(pick.node)) {
      if (mine.size() - first == job.gpus) {
        break;
      }
      if (st.gpu(g).free() && models.accepts(st.gpu(g).model)) {
        mine.push_back(g);
      }
    }
    if (mine.size() - first != job.gpus) {
      return makeError(kc::errc::kInternal, "simulator: node '" + st.node(pick.node).name +
                                                "' lacks the GPUs selectNode promised");
    }
    for (std::size_t i = first; i < mine.size(); ++i) {
      if (auto s = st.allocateGpu(mine[i]); !s) {
        return internal("allocateGpu", s.error());
      }
    }
    if (auto s = st.reserve(pick.node, pod.cpuMilli, pod.memoryMiB); !s) {
      return internal("reserve", s.error());
    }
    return std::optional<MemberPick>(std::move(pick));
  }

  // The simulator's side of the gang rule (alloc::planGangWith, the loop kubecomp-sched runs
  // too): a member's node chosen as a single pod's is (chooseNode: the configured node policy
  // and device offer), its CPU and memory reserved in the model once placed.
  class SimGangSite final : public alloc::GangSite {
   public:
    SimGangSite(Engine& e, const Job& job, const alloc::GpuModelFilter& models)
        : e_(e), pod_(podOf(job)), models_(models) {}
    Result<alloc::NodeChoice> chooseNode(std::size_t, const alloc::ClusterState& st) override {
      return e_.chooseNode(st, pod_, models_);
    }
    Status placed(std::size_t, alloc::NodeIndex node, alloc::ClusterState& st) override {
      if (auto s = st.reserve(node, pod_.cpuMilli, pod_.memoryMiB); !s) {
        return internal("reserve", s.error());
      }
      return okStatus();
    }

   private:
    Engine& e_;
    alloc::PodRequest pod_;
    const alloc::GpuModelFilter& models_;
  };

  // Gang j (with the GPU model filter f) planned by the gang rule on `st` and left applied there
  // (GPUs moved, allocated, CPU and memory reserved); nullopt when it does not fit whole now
  // (`st` then half changed: plan on a copy first, gangFits).
  Result<std::optional<alloc::GangPlan>> planGang(alloc::ClusterState& st, std::uint32_t j,
                                                  std::uint32_t f, alloc::SplitMix64& rng) {
    const Job& job = trace_.jobs[j];
    const std::vector<alloc::GangMember> members(job.members,
                                                 alloc::GangMember{job.gpus, &filters_[f]});
    SimGangSite site(*this, job, filters_[f]);
    alloc::GangOptions options;
    options.gpuPolicy = config_.gpuPolicy;
    options.timeline = false;  // the moves are booked on the simulator's fabric (bookMember)
    auto plan = alloc::planGangWith(members, site, st, options, &rng);
    if (!plan) {
      if (plan.error().code == kc::errc::kUnschedulable) {
        return std::optional<alloc::GangPlan>();
      }
      return internal("gang plan", plan.error());
    }
    return std::optional<alloc::GangPlan>(std::move(*plan));
  }

  // Whether gang j fits whole on `base` as it is: the gang rule on a copy, with a copy of the GPU
  // choice's random state, so the real placement that follows makes the same choices.
  Result<bool> gangFits(const alloc::ClusterState& base, std::uint32_t j, std::uint32_t f) {
    trial_.assignFrom(base);
    alloc::SplitMix64 rng = rng_;
    auto plan = planGang(trial_, j, f, rng);
    if (!plan) {
      return plan.error();
    }
    return plan->has_value();
  }

  // One pod of job j placed on the live cluster now: applyMember, then its GPU moves booked on
  // the fabric. Returns when its GPUs are all there (nullopt: no node fits now).
  Result<std::optional<SimMs>> placeMember(std::uint32_t j, SimMs now, MemberPick& placed) {
    const Job& job = trace_.jobs[j];
    const alloc::GpuModelFilter& models = filters_[job.gpuSpec];
    ++result_.placementAttempts;
    std::vector<alloc::GpuIndex>& mine = runningGpus_[j];
    const std::size_t first = mine.size();
    auto pick = applyMember(state_, rng_, job, models, mine);
    if (!pick || !*pick) {
      return pick ? Result<std::optional<SimMs>>(std::optional<SimMs>()) : pick.error();
    }
    placed = std::move(**pick);
    auto ready = bookMember(j, now, placed, first);
    if (!ready) {
      return ready.error();
    }
    return std::optional<SimMs>(*ready);
  }

  // The pod of job j just placed (`placed`; its GPUs are runningGpus_[j] from `first` on): its
  // GPU moves booked on the fabric. Returns when its GPUs are all there.
  Result<SimMs> bookMember(std::uint32_t j, SimMs now, const MemberPick& placed,
                           std::size_t first) {
    const Job& job = trace_.jobs[j];
    const std::vector<alloc::GpuIndex>& mine = runningGpus_[j];
    SimMs ready = now;
    bool interrupted = false;
    if (placed.deficit > 0) {
      const alloc::PoolIndex pool = state_.node(placed.node).pool;
      auto slots = fabric_.slots(pool, placed.moved, config_.moveTime, now);
      if (!slots || lastEnd(*slots, now) > kMaxSimMs) {
        return pastTimeLimit(job);
      }
      ready = lastEnd(*slots, now);
      interrupted = waitedForBackground(pool, placed.moved, ready, now);
      if (interrupted) {
        ++result_.idleMovesInterrupted;  // it waits for the background move in flight
      }
      fabric_.book(pool, placed.moved, *slots);
      result_.gpusMoved += placed.deficit;
      result_.gpusMovedWhileWaiting += placed.deficit;
    }
    allocated_ += mine.size() - first;
    for (std::size_t i = first; i < mine.size(); ++i) {
      if (gpuLands_[mine[i]] > ready) {
        ready = gpuLands_[mine[i]];  // a GPU moved there in the background has not landed yet
        if (!interrupted) {
          ++result_.idleMovesInterrupted;
          interrupted = true;
        }
      }
    }
    if (config_.onPlace) {
      const std::vector<alloc::GpuIndex> own(mine.begin() + static_cast<std::ptrdiff_t>(first),
                                             mine.end());
      config_.onPlace(j, placed.node, placed.moved, own);
    }
    return ready;
  }

  // Job j (every member) starts at `ready`, ends a duration later.
  Status commitStart(std::uint32_t j, SimMs ready, SimMs now) {
    const Job& job = trace_.jobs[j];
    if (config_.queue == QueueDiscipline::EasyBackfill ||
        config_.queue == QueueDiscipline::SlackBackfill ||
        config_.recompose != alloc::RecomposeKind::None) {
      running_.insert(j);
    }
    JobOutcome& out = result_.jobs[j];
    out.start = ready;
    if (__builtin_add_overflow(ready, job.duration, &out.end) || out.end > kMaxSimMs) {
      return pastTimeLimit(job);
    }
    if (ready > now) {
      events_.push(Event{ready, kStart, j});
      ++startsPending_;
    } else {
      usage_.add(static_cast<std::uint32_t>(job.totalGpus()));
    }
    events_.push(Event{out.end, kEnd, j});
    return okStatus();
  }

  // Places the job now if the policies find a node (for a gang: a node for every member, all
  // at once); false if it does not fit at the moment.
  Result<bool> tryPlace(std::uint32_t j, SimMs now) {
    if (trace_.jobs[j].members > 1) {
      return tryPlaceGang(j, now);
    }
    MemberPick placed;
    auto ready = placeMember(j, now, placed);
    if (!ready || !*ready) {
      return ready ? Result<bool>(false) : ready.error();
    }
    if (placed.deficit > 0) {
      ++result_.jobsWithMoves;
    }
    result_.jobs[j].node = placed.node;
    result_.jobs[j].gpusMoved = placed.deficit;
    if (auto s = commitStart(j, **ready, now); !s) {
      return s.error();
    }
    return true;
  }

  // A gang: nothing is taken unless the gang rule places every member (gangFits); then the
  // plan is made on the live cluster (the same choices) and each member's moves booked in turn;
  // all start when the last one's GPUs have landed.
  Result<bool> tryPlaceGang(std::uint32_t j, SimMs now) {
    const Job& job = trace_.jobs[j];
    auto fits = gangFits(state_, j, job.gpuSpec);
    if (!fits || !*fits) {
      return fits;
    }
    auto plan = planGang(state_, j, job.gpuSpec, rng_);
    if (!plan) {
      return plan.error();
    }
    if (!*plan) {
      return makeError(kc::errc::kInternal, "simulator: gang " + quoteInput(job.id) +
                                                " did not fit after the gang's trial did");
    }
    std::vector<alloc::NodeIndex> nodes;
    SimMs ready = now;
    std::uint32_t moved = 0;
    for (const alloc::GangMemberPlacement& at : (*plan)->placements) {
      ++result_.placementAttempts;
      MemberPick placed{at.node, at.deficit, {}};
      for (const alloc::GangMove& m : (*plan)->moves) {
        if (m.member == at.member) {
          placed.moved.push_back(m.gpu);
        }
      }
      std::vector<alloc::GpuIndex>& mine = runningGpus_[j];
      const std::size_t first = mine.size();
      mine.insert(mine.end(), at.allocated.begin(), at.allocated.end());
      auto booked = bookMember(j, now, placed, first);
      if (!booked) {
        return booked.error();
      }
      ready = std::max(ready, *booked);
      moved += at.deficit;
      nodes.push_back(at.node);
    }
    result_.jobsWithMoves += moved > 0 ? 1 : 0;
    result_.jobs[j].node = nodes.front();
    result_.jobs[j].gpusMoved = moved;
    memberNodes_[j] = std::move(nodes);
    --gangsWaiting_;
    if (auto s = commitStart(j, ready, now); !s) {
      return s.error();
    }
    return true;
  }

  // The running pods of job j (one per gang member), for the planners.
  void appendRunning(std::vector<alloc::RunningPod>& out, std::uint32_t j) const {
    const Job& job = trace_.jobs[j];
    const JobOutcome& o = result_.jobs[j];
    if (job.members <= 1) {
      out.push_back(alloc::RunningPod{o.node, podOf(job), runningGpus_[j], o.end});
      return;
    }
    const auto& nodes = memberNodes_.at(j);
    const auto& gpus = runningGpus_[j];
    for (std::size_t k = 0; k < nodes.size(); ++k) {
      const auto from = gpus.begin() + static_cast<std::ptrdiff_t>(k * job.gpus);
      out.push_back(alloc::RunningPod{nodes[k], podOf(job), {from, from + job.gpus}, o.end});
    }
  }

  const alloc::ClusterState& initial_;  // the cluster as given (outlives the engine)
  alloc::ClusterState state_;
  const Trace& trace_;
  const SimConfig& config_;
  alloc::SplitMix64 rng_;
  UsageAccumulator usage_;
  RunnableCheck runnable_;
  SimFabric fabric_;  // the moves booked per pool, charged by the move schedule
  // Idle-time recomposition: the background move in flight per pool (at most one), when each
  // GPU's last background move lands, the recent unconstrained GPU arrivals, and how many
  // placed jobs wait for their GPUs.
  struct InFlight {
    bool active = false;
    bool waited = false;  // some job was queued or waiting for GPUs during its flight
    SimMs lands = 0;
    alloc::GpuIndex gpu = 0;  // the GPU moving
  };
  std::vector<InFlight> inflight_;
  std::vector<SimMs> gpuLands_;
  IdleReturns returns_;               // idle-timeout only
  std::vector<alloc::GpuIndex> due_;  // GPUs whose idle check is due now
  std::deque<alloc::PodRequest> recent_;
  std::uint64_t startsPending_ = 0;
  std::vector<std::vector<alloc::GpuIndex>> runningGpus_;  // a gang's: member after member
  std::unordered_map<std::uint32_t, std::vector<alloc::NodeIndex>> memberNodes_;  // gangs placed
  alloc::ClusterState trial_;       // a gang's trial plan (gangFits)
  std::uint64_t gangsWaiting_ = 0;  // gangs in the queue
  std::uint64_t allocated_ = 0;     // GPUs allocated to jobs (placed, moving or running)
  SimMs lastTick_ = 0;              // the previous event (stranded GPU time)
  std::vector<std::vector<alloc::NodeIndex>> poolNodes_;  // nodes of each pool, index order
  std::vector<alloc::NodeIndex> candidates_;              // scratch of chooseNode
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::deque<std::uint32_t> queue_;
  std::set<std::uint32_t> running_;  // easy-backfill only: jobs placed and not ended
  std::uint32_t failedHead_ = kNone;
  std::uint64_t finished_ = 0;  // jobs ended or rejected
  std::uint64_t progressEvery_ = 1;
  alloc::QueuePass easyPass_;  // easy- and slack-backfill (slack keeps its head's bound)
  std::vector<alloc::GpuModelFilter> filters_;  // per Trace::gpuSpecs entry; [0] accepts any
  SimResult result_;
};

}  // namespace

SimConfig defaultSimConfig() {
  SimConfig c;
  c.nodePolicy = *alloc::findNodePolicy(alloc::kDefaultNodePolicy);
  c.gpuPolicy = *alloc::findGpuPolicy(alloc::kDefaultGpuPolicy);
  return c;
}

Result<SimResult> simulate(const alloc::ClusterState& cluster, const Trace& trace,
                           const SimConfig& config) {
  if (trace.jobs.size() >= 0xFFFFFFFFu) {
    return makeError(kc::errc::kInvalid, "trace too large (at most 2^32-2 jobs)");
  }
  Engine engine(cluster, trace, config);
  if (auto s = engine.validate(); !s) {
    return s.error();
  }
  return engine.run();
}

}  // namespace kc::sim
