#include "tools/kubecomp-sim/engine.hpp"

#include <algorithm>
#include <deque>
#include <optional>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>

#include "libcore/alloc/device_offer.hpp"
#include "libcore/alloc/gpu_candidate.hpp"
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
      bool released = false;
      while (!events_.empty() && events_.top().time == now) {
        const Event e = events_.top();
        events_.pop();
        if (e.kind == kStart) {
          usage_.add(jobs[e.job].gpus);
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
        arrive(static_cast<std::uint32_t>(nextArrival++));
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
    usage_.remove(job.gpus);
    for (alloc::GpuIndex g : runningGpus_[j]) {
      if (auto s = state_.releaseGpu(g); !s) {
        return internal("releaseGpu", s.error());
      }
      becameIdle(g, now);
    }
    running_.erase(j);
    runningGpus_[j].clear();
    runningGpus_[j].shrink_to_fit();
    if (auto s = state_.release(result_.jobs[j].node, static_cast<std::uint64_t>(job.cpuMilli),
                                static_cast<std::uint64_t>(job.memoryMib));
        !s) {
      return internal("release", s.error());
    }
    countFinished();
    return okStatus();
  }

  // A job arrives: queued, or rejected when it could not run even on the empty cluster.
  void arrive(std::uint32_t j) {
    const Job& job = trace_.jobs[j];
    const std::uint32_t f = job.gpuSpec;
    if (config_.recompose != alloc::RecomposeKind::None && f == 0 && job.gpus > 0) {
      recent_.push_back(podOf(job));
      if (recent_.size() > alloc::kRecentArrivals) {
        recent_.pop_front();
      }
    }
    if (runnable_.runnable(podOf(job), f, filters_[f])) {
      queue_.push_back(j);
      return;
    }
    ++result_.rejected;
    if (!filters_[f].acceptsAny() && runnable_.runnable(podOf(job), 0, filters_[0])) {
      ++result_.rejectedGpuModel;
    }
    countFinished();
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
    std::vector<std::pair<alloc::PodRequest, std::uint32_t>> failed;
    for (auto it = queue_.begin(); it != queue_.end();) {
      const alloc::PodRequest pod = podOf(trace_.jobs[*it]);
      const std::uint32_t filter = trace_.jobs[*it].gpuSpec;
      const bool dominated = std::any_of(failed.begin(), failed.end(), [&](const auto& fail) {
        const alloc::PodRequest& f = fail.first;
        return (filters_[fail.second].acceptsAny() || fail.second == filter) &&
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
        failed.emplace_back(pod, filter);
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
        running.push_back(alloc::RunningPod{result_.jobs[r].node, podOf(trace_.jobs[r]),
                                            runningGpus_[r], result_.jobs[r].end});
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
  Result<alloc::NodeChoice> chooseNode(const alloc::PodRequest& pod,
                                       const alloc::GpuModelFilter& models) {
    if (config_.offer != alloc::DeviceOffer::Pool) {  // stock DRA: one pass over every node
      return alloc::selectNodeOffered(state_, pod, models, config_.nodePolicy, config_.mode,
                                      config_.offer);
    }
    if (pod.gpus == 0) {
      return alloc::selectNode(state_, pod, config_.nodePolicy, config_.mode);
    }
    if (!models.acceptsAny()) {
      return alloc::selectNodeForModels(state_, pod, models, config_.nodePolicy, config_.mode);
    }
    candidates_.clear();
    bool allPools = true;
    for (alloc::PoolIndex p = 0; p < poolNodes_.size(); ++p) {
      if (state_.pool(p).freeGpus >= pod.gpus) {
        candidates_.insert(candidates_.end(), poolNodes_[p].begin(), poolNodes_[p].end());
      } else {
        allPools = false;
      }
    }
    if (allPools) {
      return alloc::selectNode(state_, pod, config_.nodePolicy, config_.mode);
    }
    if (candidates_.empty()) {
      return makeError(kc::errc::kUnschedulable, "no pool holds enough free GPUs");
    }
    return alloc::selectNodeAmong(state_, pod, config_.nodePolicy, config_.mode, candidates_);
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

  // Places the job now if the policies find a node; false if none fits at the moment.
  Result<bool> tryPlace(std::uint32_t j, SimMs now) {
    const Job& job = trace_.jobs[j];
    const alloc::PodRequest pod = podOf(job);
    const alloc::GpuModelFilter& models = filters_[job.gpuSpec];
    ++result_.placementAttempts;
    auto choice = chooseNode(pod, models);
    if (!choice) {
      if (choice.error().code == kc::errc::kUnschedulable) {
        return false;
      }
      return internal("selectNode", choice.error());
    }
    const alloc::NodeIndex node = choice->node;
    SimMs ready = now;
    bool interrupted = false;
    std::vector<alloc::GpuIndex> moved;
    if (choice->deficit > 0) {
      auto moves =
          alloc::chooseGpus(state_, node, choice->deficit, config_.gpuPolicy, &rng_, models);
      if (!moves) {
        return internal("chooseGpus", moves.error());
      }
      const alloc::PoolIndex pool = state_.node(node).pool;
      auto slots = fabric_.slots(pool, *moves, config_.moveTime, now);
      if (!slots || lastEnd(*slots, now) > kMaxSimMs) {
        return pastTimeLimit(job);
      }
      ready = lastEnd(*slots, now);
      interrupted = waitedForBackground(pool, *moves, ready, now);
      if (interrupted) {
        ++result_.idleMovesInterrupted;  // it waits for the background move in flight
      }
      fabric_.book(pool, *moves, *slots);
      if (config_.onPlace) {
        moved = *moves;
      }
      for (alloc::GpuIndex g : *moves) {
        if (auto s = state_.detachGpu(g); !s) {
          return internal("detachGpu", s.error());
        }
        if (auto s = state_.attachGpu(g, node); !s) {
          return internal("attachGpu", s.error());
        }
      }
      result_.gpusMoved += choice->deficit;
      result_.gpusMovedWhileWaiting += choice->deficit;
      ++result_.jobsWithMoves;
    }
    std::vector<alloc::GpuIndex>& mine = runningGpus_[j];
    for (alloc::GpuIndex g : state_.nodeGpus(node)) {
      if (mine.size() == job.gpus) {
        break;
      }
      if (state_.gpu(g).free() && models.accepts(state_.gpu(g).model)) {
        mine.push_back(g);
      }
    }
    if (mine.size() != job.gpus) {
      return makeError(kc::errc::kInternal, "simulator: node '" + state_.node(node).name +
                                                "' lacks the GPUs selectNode promised");
    }
    for (alloc::GpuIndex g : mine) {
      if (auto s = state_.allocateGpu(g); !s) {
        return internal("allocateGpu", s.error());
      }
      if (gpuLands_[g] > ready) {
        ready = gpuLands_[g];  // a GPU moved there in the background has not landed yet
        if (!interrupted) {
          ++result_.idleMovesInterrupted;
          interrupted = true;
        }
      }
    }
    if (auto s = state_.reserve(node, pod.cpuMilli, pod.memoryMiB); !s) {
      return internal("reserve", s.error());
    }
    if (config_.onPlace) {
      config_.onPlace(j, node, moved, mine);
    }
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
    out.node = node;
    out.gpusMoved = choice->deficit;
    if (ready > now) {
      events_.push(Event{ready, kStart, j});
      ++startsPending_;
    } else {
      usage_.add(job.gpus);
    }
    events_.push(Event{out.end, kEnd, j});
    return true;
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
  std::vector<std::vector<alloc::GpuIndex>> runningGpus_;
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
