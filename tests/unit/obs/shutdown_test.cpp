// The SIGTERM sequence: readiness fails, drain, stop; once; real signals in forked children.
#include "libcore/obs/shutdown.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "libcore/obs/health.hpp"
#include "tests/unit/obs/in_child.hpp"

using namespace kc;
using namespace std::chrono_literals;

using obs::testing::inChild;
using obs::testing::readUntil;
using obs::testing::say;

TEST_CASE("shutdown: trigger runs readiness, drain, stop in order, exactly once",
          "[obs][shutdown]") {
  obs::HealthChecks health;
  std::mutex mu;
  std::vector<std::string> order;
  std::atomic<int> drains{0};
  obs::ShutdownHandler handler({&health,
                                [&] {
                                  std::lock_guard lock(mu);
                                  order.push_back(health.shuttingDown() ? "drain(not ready)"
                                                                        : "drain(ready)");
                                  ++drains;
                                },
                                [&] {
                                  std::lock_guard lock(mu);
                                  order.push_back("stop");
                                }});
  CHECK_FALSE(handler.triggered());
  CHECK(handler.reason().empty());
  CHECK_FALSE(handler.waitFor(10ms));

  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&handler, i] { handler.trigger(i == 0 ? "first" : "other"); });
  }
  for (auto& t : threads) {
    t.join();
  }
  REQUIRE(handler.waitFor(5s));
  handler.wait();  // returns at once once done
  handler.trigger("late");
  CHECK(handler.triggered());
  CHECK(drains == 1);
  CHECK(order == std::vector<std::string>{"drain(not ready)", "stop"});
  CHECK((handler.reason() == "first" || handler.reason() == "other"));
  CHECK(health.checkReady().ok == false);
  CHECK(health.checkLive().ok == true);
}

TEST_CASE("shutdown: a throwing step is logged and the sequence still completes",
          "[obs][shutdown]") {
  bool stopped = false;
  obs::ShutdownHandler handler(
      {nullptr, [] { throw std::runtime_error("drain broke"); }, [&] { stopped = true; }});
  handler.trigger("test");
  REQUIRE(handler.waitFor(5s));
  CHECK(stopped);
  CHECK(handler.reason() == "test");
}

TEST_CASE("shutdown: only one handler may be installed at a time", "[obs][shutdown]") {
  auto r = inChild(
      [](int fd) {
        auto first = std::make_unique<obs::ShutdownHandler>(obs::ShutdownHandler::Steps{});
        say(fd, first->install().ok() ? "first:ok " : "first:fail ");
        obs::ShutdownHandler second({});
        auto s = second.install();
        say(fd, s.ok() ? "second:ok " : "second:" + s.error().code + " ");
        first.reset();  // restores the dispositions and frees the slot
        say(fd, second.install().ok() ? "again:ok" : "again:fail");
      },
      [](pid_t, int, std::string&) {});
  CHECK(r.status == 0);
  CHECK(r.output == "first:ok second:unavailable again:ok");
}

TEST_CASE("shutdown: SIGTERM runs the sequence, main returns, exit 0", "[obs][shutdown]") {
  auto r = inChild(
      [](int fd) {
        obs::HealthChecks health;
        obs::ShutdownHandler handler(
            {&health, [&] { say(fd, health.shuttingDown() ? "drain " : "drain-ready "); },
             [&] { say(fd, "stop "); }});
        if (!handler.install().ok()) {
          ::_exit(2);
        }
        say(fd, "installed ");
        handler.wait();  // main() blocks here until the signal's sequence completes
        say(fd, handler.reason());
      },
      [](pid_t pid, int fd, std::string& out) {
        readUntil(fd, out, "installed ");
        ::kill(pid, SIGTERM);
      });
  CHECK(r.status == 0);
  CHECK(r.output == "installed drain stop signal SIGTERM");
}

TEST_CASE("shutdown: a second signal while draining exits at once with 128+signal",
          "[obs][shutdown]") {
  auto r = inChild(
      [](int fd) {
        obs::ShutdownHandler handler({nullptr,
                                      [&] {
                                        say(fd, "draining ");
                                        std::this_thread::sleep_for(30s);  // a drain that hangs
                                        say(fd, "drained ");
                                      },
                                      {}});
        if (!handler.install().ok()) {
          ::_exit(2);
        }
        say(fd, "installed ");
        handler.wait();
      },
      [](pid_t pid, int fd, std::string& out) {
        readUntil(fd, out, "installed ");
        ::kill(pid, SIGINT);
        readUntil(fd, out, "draining ");
        ::kill(pid, SIGTERM);
      });
  CHECK(r.status == 128 + SIGTERM);
  CHECK(r.output == "installed draining ");
}

namespace {

// A one-shot gate a step can block on (bounded: never waits more than 10 s).
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void release() {
    {
      std::lock_guard lock(mu);
      open = true;
    }
    cv.notify_all();
  }
  void pass() {
    std::unique_lock lock(mu);
    cv.wait_for(lock, 10s, [&] { return open; });
  }
};

}  // namespace

TEST_CASE("shutdown: trigger's reason and state are visible at once, waiters wake together",
          "[obs][shutdown]") {
  Gate gate;
  std::atomic<bool> draining{false};
  std::atomic<bool> stopped{false};
  obs::ShutdownHandler handler({nullptr,
                                [&] {
                                  draining = true;
                                  gate.pass();
                                },
                                [&] { stopped = true; }});
  handler.trigger("");  // an empty reason becomes "requested"
  CHECK(handler.triggered());
  CHECK(handler.reason() == "requested");
  handler.trigger("second");  // ignored: the first reason stays
  CHECK(handler.reason() == "requested");

  std::atomic<int> woke{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < 3; ++i) {
    waiters.emplace_back([&] {
      handler.wait();
      ++woke;
    });
  }
  CHECK_FALSE(handler.waitFor(20ms));  // the drain is held by the gate
  CHECK(woke == 0);
  CHECK_FALSE(stopped);
  gate.release();
  for (auto& t : waiters) {
    t.join();
  }
  CHECK(woke == 3);
  CHECK(draining);
  CHECK(stopped);
  CHECK(handler.waitFor(0ms));
}

TEST_CASE("shutdown: destruction runs nothing if never triggered, finishes a triggered sequence",
          "[obs][shutdown]") {
  std::atomic<int> steps{0};
  {
    obs::ShutdownHandler idle({nullptr, [&] { ++steps; }, [&] { ++steps; }});
    CHECK_FALSE(idle.triggered());
  }
  CHECK(steps == 0);
  {
    obs::ShutdownHandler busy({nullptr, [&] { ++steps; }, [&] { ++steps; }});
    busy.trigger("bye");
  }  // the destructor joins the watcher after the sequence ran
  CHECK(steps == 2);
}

TEST_CASE("shutdown: installing the same handler twice is refused, dispositions come back",
          "[obs][shutdown]") {
  auto r = inChild(
      [](int fd) {
        ::signal(SIGTERM, SIG_IGN);  // the previous disposition to restore
        {
          obs::ShutdownHandler handler({});
          say(fd, handler.install({SIGTERM, SIGHUP}).ok() ? "a:ok " : "a:fail ");
          auto again = handler.install();
          say(fd, again.ok() ? "b:ok " : "b:" + again.error().code + " ");
          struct sigaction now {};
          ::sigaction(SIGHUP, nullptr, &now);
          say(fd,
              now.sa_handler != SIG_DFL && now.sa_handler != SIG_IGN ? "hup:ours " : "hup:not ");
        }
        struct sigaction term {
        }, hup{};
        ::sigaction(SIGTERM, nullptr, &term);
        ::sigaction(SIGHUP, nullptr, &hup);
        say(fd, term.sa_handler == SIG_IGN ? "term:ign " : "term:other ");
        say(fd, hup.sa_handler == SIG_DFL ? "hup:dfl" : "hup:other");
      },
      [](pid_t, int, std::string&) {});
  CHECK(r.status == 0);
  CHECK(r.output == "a:ok b:unavailable hup:ours term:ign hup:dfl");
}

TEST_CASE("shutdown: the signal's name is the reason, for each installed signal",
          "[obs][shutdown]") {
  const auto [sig, name] = GENERATE(table<int, std::string>({
      {SIGTERM, "signal SIGTERM"},
      {SIGINT, "signal SIGINT"},
      {SIGHUP, "signal SIGHUP"},
  }));
  INFO(name);
  auto r = inChild(
      [sig = sig](int fd) {
        obs::ShutdownHandler handler({nullptr, {}, [&] { say(fd, "stop "); }});
        if (!handler.install({SIGTERM, SIGINT, SIGHUP}).ok()) {
          ::_exit(2);
        }
        say(fd, "installed ");
        handler.wait();
        say(fd, handler.reason());
      },
      [sig = sig](pid_t pid, int fd, std::string& out) {
        readUntil(fd, out, "installed ");
        ::kill(pid, sig);
      });
  CHECK(r.status == 0);
  CHECK(r.output == "installed stop " + name);
}

TEST_CASE("shutdown: a signal during a drain started by trigger() does not abort it",
          "[obs][shutdown]") {
  int release[2];
  REQUIRE(::pipe(release) == 0);
  auto r = inChild(
      [&](int fd) {
        ::close(release[1]);
        obs::ShutdownHandler handler({nullptr,
                                      [&] {
                                        say(fd, "draining ");
                                        char c;
                                        [[maybe_unused]] auto n =
                                            ::read(release[0], &c, 1);  // parent lets go
                                        say(fd, "drained ");
                                      },
                                      {}});
        if (!handler.install().ok()) {
          ::_exit(2);
        }
        handler.trigger("fatal: lost the lease");
        handler.wait();
        say(fd, handler.reason());
      },
      [&](pid_t pid, int fd, std::string& out) {
        ::close(release[0]);
        readUntil(fd, out, "draining ");
        // The first signal only queues a byte for the busy watcher: the drain goes on, the
        // reason stays the trigger's, and the process still exits 0.
        ::kill(pid, SIGTERM);
        [[maybe_unused]] auto n = ::write(release[1], "g", 1);
        ::close(release[1]);
      });
  CHECK(r.status == 0);
  CHECK(r.output == "draining drained fatal: lost the lease");
}
