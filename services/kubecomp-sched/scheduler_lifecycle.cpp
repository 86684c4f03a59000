// kubecomp-sched's start and stop. start() may be given up half-way by a stop() from the
// signal thread (SIGTERM before the informers have listed: no GPUPool CRD yet, an API server
// still coming up). stop() is bounded by opts.stopGrace: the writers and the Event thread
// drain what they hold through the client's rate limiter until then, and what is left after
// it is dropped, counted and logged once (Events are for people; a dropped bind or request is
// decided again by the next leader from what the API shows).

#include <spdlog/spdlog.h>

#include "services/kubecomp-sched/scheduler.hpp"

namespace kc::sched {
namespace {

// How often start()'s wait for the first LISTs looks whether stop() was called.
constexpr std::chrono::milliseconds kSyncSlice{100};

}  // namespace

Status Scheduler::start() {
  std::lock_guard<std::mutex> life(lifecycleMu_);
  if (started_ || stopRequested_) {
    return okStatus();
  }
  if (opts_.bindWorkers == 0) {
    return makeError(kc::errc::kInvalid, "bind workers must be at least 1");
  }
  if (opts_.leaderElect) {
    kube::LeaderElectionConfig lc = opts_.lease;
    lc.onStartedLeading = [this] { runLoop(); };
    lc.onStoppedLeading = [this] {
      loopStop_ = true;
      cache_.notifyAll();
    };
    lc.onNewLeader = [](const std::string& holder) { spdlog::info("leader is now {}", holder); };
    auto e = kube::LeaderElector::create(client_, std::move(lc));
    if (!e) {
      return e.error();
    }
    elector_ = std::move(*e);
  }
  started_ = true;
  {
    std::lock_guard<std::mutex> lock(drainMu_);
    writersLeft_ = opts_.bindWorkers;
    eventsLeft_ = true;
  }
  for (std::size_t i = 0; i < opts_.bindWorkers; ++i) {
    work_.push_back(std::make_unique<WorkQueue>());
  }
  for (std::size_t i = 0; i < opts_.bindWorkers; ++i) {
    workers_.emplace_back([this, i] { workerMain(i); });
  }
  eventThread_ = std::thread([this] { eventMain(); });
  pools_->start();
  nodes_->start();
  startDra();
  startVolumeInformers();
  startGangs();
  startPreemption();
  startNamespaces();
  pods_->start();
  if (!waitForInformers() && stopRequested_) {
    return okStatus();  // stop() takes it from here
  }
  if (elector_) {
    elector_->start();
  } else {
    loop_ = std::thread([this] { runLoop(); });
  }
  return okStatus();
}

bool Scheduler::waitForInformers() {
  std::vector<kube::Informer*> informers = {pools_.get(),   nodes_.get(),
                                            pods_.get(),    storageClasses_.get(),
                                            volumes_.get(), volumeClaims_.get()};
  if (draServed_) {
    informers.push_back(claims_.get());
    informers.push_back(classes_.get());
  }
  if (budgets_) {
    informers.push_back(budgets_.get());  // preemption counts the budgets from the start
  }
  if (podGroups_) {
    informers.push_back(podGroups_.get());
  }
  if (namespacesWatched_) {
    informers.push_back(namespaces_.get());
  }
  // Counted in slices (an informer's wait is in real time), each ended early by its sync.
  std::chrono::milliseconds waited{0};
  for (auto* inf : informers) {
    while (!inf->waitForSync(kSyncSlice)) {
      waited += kSyncSlice;
      if (stopRequested_) {
        return false;
      }
      if (waited >= opts_.initialSyncWait) {
        spdlog::warn("informers not synced within {} ms; scheduling waits for them",
                     opts_.initialSyncWait.count());
        return false;
      }
    }
  }
  return !stopRequested_;
}

void Scheduler::stop() {
  stopRequested_ = true;
  // A start() in progress sees the request within kSyncSlice and lets go of the lock.
  std::lock_guard<std::mutex> life(lifecycleMu_);
  if (!started_ || stopped_.exchange(true)) {
    return;
  }
  const auto deadline = clock_.now() + opts_.stopGrace;
  loopStop_ = true;
  cache_.notifyAll();
  if (elector_) {
    elector_->stop();
  }
  if (loop_.joinable()) {
    loop_.join();
  }
  const bool inTime = drainWithin(deadline);
  if (!inTime) {
    // Whoever waits in the rate limiter or a retry backoff goes on at once, sends what it
    // holds and then drops the rest.
    graceOver_ = true;
    if (opts_.clientClock != nullptr) {
      opts_.clientClock->cut();
    }
  }
  for (auto& t : workers_) {
    t.join();
  }
  eventThread_.join();
  {
    std::lock_guard<std::mutex> lock(eventMu_);
    droppedEvents_ += events_.size();  // recorded by the last writes, after the Event thread left
    events_.clear();
  }
  if (!inTime) {
    spdlog::warn(
        "stop: grace of {:.1f} s over: dropped {} pending API writes and {} Events (the next "
        "leader decides those pods again)",
        std::chrono::duration<double>(opts_.stopGrace).count(), droppedWrites_.load(),
        droppedEvents_.load());
  }
  pods_->stop();
  nodes_->stop();
  pools_->stop();
  volumeClaims_->stop();
  volumes_->stop();
  storageClasses_->stop();
  stopPreemption();
  if (draServed_) {
    claims_->stop();
    classes_->stop();
  }
  if (podGroups_) {
    podGroups_->stop();
  }
  if (namespacesWatched_) {
    namespaces_->stop();
  }
}

bool Scheduler::drainWithin(Clock::SteadyTime deadline) {
  for (auto& w : work_) {
    std::lock_guard<std::mutex> lock(w->mu);
    w->done = true;
    w->cv.notify_all();
  }
  bool inTime;
  {
    std::unique_lock<std::mutex> lock(drainMu_);
    inTime = clock_.waitUntil(lock, drainCv_, deadline, [this] { return writersLeft_ == 0; });
  }
  // The Event thread is told only now, so that the writers' last Events are still sent.
  {
    std::lock_guard<std::mutex> lock(eventMu_);
    eventsDone_ = true;
    eventCv_.notify_all();
  }
  if (!inTime) {
    return false;
  }
  std::unique_lock<std::mutex> lock(drainMu_);
  return clock_.waitUntil(lock, drainCv_, deadline, [this] { return !eventsLeft_; });
}

void Scheduler::drainerDone(bool eventThread) {
  {
    std::lock_guard<std::mutex> lock(drainMu_);
    if (eventThread) {
      eventsLeft_ = false;
    } else {
      --writersLeft_;
    }
  }
  drainCv_.notify_all();
}

}  // namespace kc::sched
