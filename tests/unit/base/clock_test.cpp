// kc::Clock: the system clock's contract, and the FakeClock every timing test relies on (time
// moves only on advance(); waiters wake exactly at their deadline or on their own condition).
#include "libcore/base/clock.hpp"

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "tests/support/fakes/fake_clock.hpp"

using kc::testing::FakeClock;
using namespace std::chrono_literals;

TEST_CASE("system clock: waitUntil returns at once when woken, false at a past deadline",
          "[base][clock]") {
  kc::Clock& clock = kc::systemClock();
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock<std::mutex> lock(mu);
  CHECK(clock.waitUntil(lock, cv, clock.now() + 1h, [] { return true; }));
  CHECK_FALSE(clock.waitUntil(lock, cv, clock.now() - 1s, [] { return false; }));
  CHECK(&kc::clockOr(nullptr) == &kc::systemClock());
}

TEST_CASE("fake clock: time moves only on advance, wall and steady together", "[base][clock]") {
  FakeClock clock;
  const auto t0 = clock.now();
  const auto w0 = clock.wallNow();
  CHECK(clock.now() == t0);
  clock.advance(1500ms);
  CHECK(clock.now() - t0 == 1500ms);
  CHECK(clock.wallNow() - w0 == 1500ms);
}

TEST_CASE("fake clock: sleepFor ends exactly at its deadline", "[base][clock]") {
  FakeClock clock;
  std::atomic<bool> done{false};
  std::thread t([&] {
    clock.sleepFor(2s);
    done = true;
  });
  REQUIRE(clock.awaitWait(1));
  CHECK(clock.nextWaitLeft() == std::optional<std::chrono::nanoseconds>(2s));
  clock.advance(1999ms);
  CHECK_FALSE(done.load());  // cannot end before the fake time reaches the deadline
  clock.advance(1ms);
  t.join();
  CHECK(done.load());
  CHECK(clock.requestedWaits() == std::vector<std::chrono::nanoseconds>{2s});
}

TEST_CASE("fake clock: waitUntil wakes on its condition or at the deadline", "[base][clock]") {
  FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::atomic<int> result{-1};
  auto waiter = [&] {
    std::unique_lock<std::mutex> lock(mu);
    result = clock.waitFor(lock, cv, 10s, [&] { return stop; }) ? 1 : 0;
  };
  SECTION("condition") {
    std::thread t(waiter);
    REQUIRE(clock.awaitWait(1));
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    t.join();
    CHECK(result == 1);
    CHECK(clock.waiters() == 0);
  }
  SECTION("deadline, reached in two steps") {
    std::thread t(waiter);
    REQUIRE(clock.awaitWait(1));
    clock.advance(5s);
    CHECK(result == -1);
    REQUIRE(clock.advanceToNextDeadline());
    t.join();
    CHECK(result == 0);
    CHECK_FALSE(clock.advanceToNextDeadline());
  }
}

TEST_CASE("fake clock: auto-advance turns sleeps into recorded time steps", "[base][clock]") {
  FakeClock clock;
  clock.setAutoAdvance(true);
  const auto t0 = clock.now();
  clock.sleepFor(300ms);  // returns at once on this thread, time has moved
  clock.sleepFor(0ms);
  clock.sleepFor(2s);
  CHECK(clock.now() - t0 == 2300ms);
  CHECK(clock.requestedWaits() == std::vector<std::chrono::nanoseconds>{300ms, 0ms, 2s});
  CHECK(clock.waiters() == 0);
}

TEST_CASE("fake clock: awaitWaiting says when every loop thread has finished its round",
          "[base][clock]") {
  FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::atomic<int> rounds{0};
  auto loop = [&] {
    std::unique_lock<std::mutex> lock(mu);
    while (!clock.waitFor(lock, cv, 100ms, [&] { return stop; })) {
      ++rounds;
    }
  };
  std::thread a(loop);
  std::thread b(loop);
  REQUIRE(clock.awaitWaiting(2, 2));
  CHECK(rounds == 0);
  CHECK_FALSE(clock.awaitWaiting(3, 2, 50ms));  // nobody has gone round yet
  clock.advance(100ms);
  REQUIRE(clock.awaitWaiting(4, 2));  // both woke, counted a round and wait again
  CHECK(rounds == 2);
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  cv.notify_all();
  a.join();
  b.join();
  CHECK(clock.waiters() == 0);
}
