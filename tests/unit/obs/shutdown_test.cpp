// The SIGTERM sequence: readiness fails, drain, stop; once; real signals in forked children.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "libcore/obs/health.hpp"
#include "libcore/obs/shutdown.hpp"

using namespace kc;
using namespace std::chrono_literals;

namespace {

// Runs `body` in a forked child; returns the child's exit status (128 + signal when killed)
// and what it wrote to `fd` (the pipe's write end, passed to body).
struct ChildResult {
  int status = -1;
  std::string output;
};

template <typename Body, typename Parent>
ChildResult inChild(Body body, Parent parent) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    body(fds[1]);
    ::_exit(0);
  }
  ::close(fds[1]);
  ChildResult result;
  parent(pid, fds[0], result.output);
  char buf[256];
  for (;;) {
    const auto n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) {
      break;
    }
    result.output.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

void say(int fd, const std::string& s) { [[maybe_unused]] auto n = ::write(fd, s.data(), s.size()); }

// Reads from fd until `marker` was seen (appending to out) or the pipe closes.
void readUntil(int fd, std::string& out, const std::string& marker) {
  char c;
  while (out.find(marker) == std::string::npos && ::read(fd, &c, 1) == 1) {
    out.push_back(c);
  }
}

}  // namespace

TEST_CASE("shutdown: trigger runs readiness, drain, stop in order, exactly once", "[obs][shutdown]") {
  obs::HealthChecks health;
  std::mutex mu;
  std::vector<std::string> order;
  std::atomic<int> drains{0};
  obs::ShutdownHandler handler({&health,
                                [&] {
                                  std::lock_guard lock(mu);
                                  order.push_back(health.shuttingDown() ? "drain(not ready)" : "drain(ready)");
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

TEST_CASE("shutdown: a throwing step is logged and the sequence still completes", "[obs][shutdown]") {
  bool stopped = false;
  obs::ShutdownHandler handler({nullptr, [] { throw std::runtime_error("drain broke"); },
                                [&] { stopped = true; }});
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
        obs::ShutdownHandler handler({&health,
                                      [&] { say(fd, health.shuttingDown() ? "drain " : "drain-ready "); },
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

TEST_CASE("shutdown: a second signal while draining exits at once with 128+signal", "[obs][shutdown]") {
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
