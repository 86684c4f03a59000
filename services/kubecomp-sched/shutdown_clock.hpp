#pragma once
// ShutdownClock: the API client's clock, which shutdown can cut. The client's rate limiter
// (--kube-api-qps) and its retry backoff pause with Clock::sleepFor, which nothing else can
// interrupt; a writer or the Event thread waiting there for its turn would hold up the stop past
// its grace. Once cut(), every such pause, now and later, ends at once (the request then goes
// out unthrottled: the process is leaving). The loop threads' waits (informers, elector) are
// interruptible already and pass through unchanged.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

#include "libcore/base/clock.hpp"

namespace kc::sched {

class ShutdownClock final : public Clock {
 public:
  // `base`: not owned; the time this clock tells and waits on.
  explicit ShutdownClock(Clock& base = systemClock()) : base_(base) {}

  SteadyTime now() const override { return base_.now(); }
  WallTime wallNow() const override { return base_.wallNow(); }

  void sleepFor(std::chrono::nanoseconds d) override {
    if (d <= std::chrono::nanoseconds::zero()) {
      return;
    }
    std::unique_lock<std::mutex> lock(mu_);
    base_.waitUntil(lock, cv_, base_.now() + std::chrono::duration_cast<duration>(d),
                    [this] { return cut_; });
  }

  bool waitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                 SteadyTime deadline, const std::function<bool()>& wake) override {
    return base_.waitUntil(lock, cv, deadline, wake);
  }

  // Ends every sleepFor now and makes later ones return at once. Idempotent.
  void cut() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      cut_ = true;
    }
    cv_.notify_all();
  }

 private:
  Clock& base_;
  std::mutex mu_;  // guards cut_
  std::condition_variable cv_;
  bool cut_ = false;
};

}  // namespace kc::sched
