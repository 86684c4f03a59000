#pragma once
// Clock: the one way libcore code reads time and waits (Envoy's TimeSource idea). Production
// passes nothing and gets systemClock(); tests pass a FakeClock
// (tests/support/fakes/fake_clock.hpp) and move time by hand, so nothing in a test waits on
// real time and every timeout or backoff happens exactly when the test says so.
//
// Two kinds of waiting go through the clock:
// - sleepFor(d): a plain pause with nothing to interrupt it (retry backoff of one call);
// - waitUntil(lock, cv, deadline, wake): the interruptible wait of a loop thread, which must
//   also end when another thread changes state under `lock` and notifies `cv` (stop()).

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace kc {

class Clock {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;
  using WallTime = std::chrono::system_clock::time_point;
  // So that code holding deadlines can name them as for a std clock (Clock::time_point).
  using time_point = SteadyTime;
  using duration = std::chrono::steady_clock::duration;

  virtual ~Clock() = default;

  // Monotonic time, for intervals and deadlines.
  virtual SteadyTime now() const = 0;
  // Wall-clock time, for timestamps written into objects (Lease renewTime, Event times).
  virtual WallTime wallNow() const = 0;
  // Blocks the calling thread for d (nothing can cut it short).
  virtual void sleepFor(std::chrono::nanoseconds d) = 0;
  // With `lock` held on entry and exit: waits on `cv` until wake() is true or now() >= deadline.
  // wake() is evaluated with `lock` held. Returns wake(). Whoever makes wake() true changes
  // state under the same mutex and then notifies `cv`.
  virtual bool waitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                         SteadyTime deadline, const std::function<bool()>& wake) = 0;

  bool waitFor(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
               std::chrono::nanoseconds d, const std::function<bool()>& wake) {
    return waitUntil(
        lock, cv, now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(d), wake);
  }
};

// The real clocks of the machine. Stateless, so one instance serves every thread.
class SystemClock final : public Clock {
 public:
  SteadyTime now() const override { return std::chrono::steady_clock::now(); }
  WallTime wallNow() const override { return std::chrono::system_clock::now(); }
  void sleepFor(std::chrono::nanoseconds d) override {
    if (d > std::chrono::nanoseconds::zero()) {
      std::this_thread::sleep_for(d);
    }
  }
  bool waitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                 SteadyTime deadline, const std::function<bool()>& wake) override {
    return cv.wait_until(lock, deadline, wake);
  }
};

inline Clock& systemClock() {
  static SystemClock clock;  // stateless: no order-of-destruction or thread-safety concern
  return clock;
}

// What options structs hold: a clock not owned by them (it outlives the user), or null for the
// system clock.
inline Clock& clockOr(Clock* clock) {
  return clock != nullptr ? *clock : systemClock();
}

}  // namespace kc
