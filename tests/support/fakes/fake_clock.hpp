#pragma once
// FakeClock: a kc::Clock whose time moves only when the test says so. Threads that wait on it
// (sleepFor, waitUntil) block until advance() carries time past their deadline, or until
// their own wake condition turns true. A test synchronises with them through events, never
// through real time: awaitWaiters(n) returns once n threads are blocked on the clock, and
// requestedWaits() tells what each of them asked for (the backoff they computed).
//
// Lock order: a waiter holds its own mutex and then takes the clock's state mutex; advance()
// takes notifyMu_, reads the waiters under the state mutex, lets go of it and only then takes
// each waiter's mutex to notify it (so a notify can never fall between a waiter's check and
// its wait). A waiter leaves the list with its own mutex released, under notifyMu_, so advance()
// never touches the mutex of a waiter that has already returned.

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "libcore/base/clock.hpp"

namespace kc::testing {

class FakeClock final : public kc::Clock {
 public:
  // Starts at an arbitrary non-zero point (an hour after the steady epoch) and at
  // 2026-01-01T00:00:00Z on the wall clock.
  FakeClock() = default;

  SteadyTime now() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return now_;
  }
  WallTime wallNow() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return kWallStart +
           std::chrono::duration_cast<std::chrono::system_clock::duration>(now_ - kStart);
  }

  // Simulated-time mode for code that sleeps on the test's own thread (a client's retry
  // waits): sleepFor(d) records d, moves time forward by d itself and returns at once.
  // waitUntil() still blocks until advance().
  void setAutoAdvance(bool on) {
    std::lock_guard<std::mutex> lock(mu_);
    autoAdvance_ = on;
  }

  void sleepFor(std::chrono::nanoseconds d) override {
    std::unique_lock<std::mutex> lock(mu_);
    const SteadyTime deadline =
        now_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(d);
    requested_.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now_));
    if (now_ >= deadline) {
      return;
    }
    if (autoAdvance_) {
      lock.unlock();
      advance(d);
      return;
    }
    const std::uint64_t id = requested_.size();
    waiters_.push_back({id, nullptr, nullptr, deadline});
    registered_.notify_all();
    sleepers_.wait(lock, [&] { return now_ >= deadline; });
    eraseLocked(id);
  }

  bool waitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                 SteadyTime deadline, const std::function<bool()>& wake) override {
    if (wake()) {
      return true;
    }
    std::uint64_t id = 0;
    {
      std::lock_guard<std::mutex> state(mu_);
      requested_.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now_));
      if (now_ >= deadline) {
        return false;
      }
      id = requested_.size();
      waiters_.push_back({id, lock.mutex(), &cv, deadline});
      registered_.notify_all();
    }
    while (!wake() && now() < deadline) {
      cv.wait(lock);
    }
    lock.unlock();
    {
      std::lock_guard<std::mutex> notifying(notifyMu_);
      std::lock_guard<std::mutex> state(mu_);
      eraseLocked(id);
    }
    lock.lock();
    return wake();
  }

  // Moves time forward and wakes every waiter whose deadline has come (the others re-check
  // and wait again).
  void advance(std::chrono::nanoseconds d) {
    std::lock_guard<std::mutex> notifying(notifyMu_);
    std::vector<Waiter> toWake;
    {
      std::lock_guard<std::mutex> state(mu_);
      now_ += std::chrono::duration_cast<std::chrono::steady_clock::duration>(d);
      toWake = waiters_;
    }
    sleepers_.notify_all();
    for (const auto& w : toWake) {
      if (w.mu != nullptr) {
        std::lock_guard<std::mutex> theirs(*w.mu);
        w.cv->notify_all();
      }
    }
  }

  // Advances to the earliest deadline of a blocked waiter; false if nobody waits.
  bool advanceToNextDeadline() {
    SteadyTime target;
    {
      std::lock_guard<std::mutex> state(mu_);
      if (waiters_.empty()) {
        return false;
      }
      target =
          std::min_element(waiters_.begin(), waiters_.end(), [](const Waiter& a, const Waiter& b) {
            return a.deadline < b.deadline;
          })->deadline;
      if (target < now_) {
        target = now_;
      }
    }
    advance(target - now());
    return true;
  }

  // Threads blocked on this clock right now.
  std::size_t waiters() const {
    std::lock_guard<std::mutex> lock(mu_);
    return waiters_.size();
  }
  // Blocks until at least n threads are blocked on this clock. `guard` is real time and only a
  // guard against a hanging test: false means the waiters never came.
  bool awaitWaiters(std::size_t n,
                    std::chrono::milliseconds guard = std::chrono::seconds(30)) const {
    std::unique_lock<std::mutex> lock(mu_);
    return registered_.wait_for(lock, guard, [&] { return waiters_.size() >= n; });
  }
  // Blocks until the n-th wait ever asked of this clock (1-based, see requestedWaits()) or a
  // later one is blocked on the clock: after advance() woke the previous one, this is how a
  // test knows that the code has gone round its loop and waits again.
  bool awaitWait(std::size_t n, std::chrono::milliseconds guard = std::chrono::seconds(30)) const {
    std::unique_lock<std::mutex> lock(mu_);
    return registered_.wait_for(lock, guard, [&] {
      return std::any_of(waiters_.begin(), waiters_.end(),
                         [n](const Waiter& w) { return w.id >= n; });
    });
  }
  // Blocks until at least `asked` waits have been asked of this clock in all and `blocked`
  // threads are blocked on it: with k loop threads that each wait once per round, "asked
  // before + k, k blocked" means every one of them has finished its round.
  bool awaitWaiting(std::size_t asked, std::size_t blocked,
                    std::chrono::milliseconds guard = std::chrono::seconds(30)) const {
    std::unique_lock<std::mutex> lock(mu_);
    return registered_.wait_for(
        lock, guard, [&] { return requested_.size() >= asked && waiters_.size() >= blocked; });
  }
  // Every wait asked of this clock so far (deadline - now at the time of asking), in order.
  std::vector<std::chrono::nanoseconds> requestedWaits() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requested_;
  }
  // Deadline of the earliest blocked waiter, relative to now.
  std::optional<std::chrono::nanoseconds> nextWaitLeft() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (waiters_.empty()) {
      return std::nullopt;
    }
    SteadyTime d = waiters_.front().deadline;
    for (const auto& w : waiters_) {
      d = std::min(d, w.deadline);
    }
    return std::chrono::duration_cast<std::chrono::nanoseconds>(d - now_);
  }

 private:
  struct Waiter {
    std::uint64_t id;             // 1-based index into requested_
    std::mutex* mu;               // null: a sleepFor() caller (woken through sleepers_)
    std::condition_variable* cv;  // the waiter's own condition variable
    SteadyTime deadline;
  };

  void eraseLocked(std::uint64_t id) {
    waiters_.erase(std::remove_if(waiters_.begin(), waiters_.end(),
                                  [id](const Waiter& w) { return w.id == id; }),
                   waiters_.end());
  }

  static constexpr SteadyTime kStart = SteadyTime{} + std::chrono::hours(1);
  static constexpr WallTime kWallStart =
      WallTime{} + std::chrono::seconds(1'767'225'600);  // 2026-01-01

  std::mutex notifyMu_;    // serialises advance() against waiters leaving (see the header comment)
  mutable std::mutex mu_;  // guards now_, waiters_, requested_, autoAdvance_
  mutable std::condition_variable registered_;
  std::condition_variable sleepers_;
  SteadyTime now_ = kStart;
  std::vector<Waiter> waiters_;
  std::vector<std::chrono::nanoseconds> requested_;
  bool autoAdvance_ = false;
};

}  // namespace kc::testing
