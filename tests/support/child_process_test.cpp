// tests/support/child_process: the launcher every process test and bench_kube use, driven
// with /bin/sh scripts so each behaviour (exit codes, signals, pipes, timeouts) is observable.
#include "tests/support/child_process.hpp"

#include <signal.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <stdexcept>

#include "tests/support/temp_dir.hpp"

using kc::testing::ChildOutput;
using kc::testing::ChildProcess;
using namespace std::chrono_literals;

namespace {

ChildProcess sh(const std::string& script, ChildOutput output = ChildOutput::kCapture) {
  return ChildProcess({"/bin/sh", "-c", script}, output);
}

}  // namespace

TEST_CASE("child process: exit codes, signals and a program that cannot run",
          "[support][process]") {
  auto [script, status] = GENERATE(table<std::string, int>({
      {"exit 0", 0},
      {"exit 3", 3},
      {"kill -9 $$", 128 + SIGKILL},
      {"kill -TERM $$", 128 + SIGTERM},
  }));
  CAPTURE(script);
  auto child = sh(script, ChildOutput::kInherit);
  CHECK(child.waitExit(10s) == status);
  CHECK_FALSE(child.running());
  REQUIRE(child.usage().has_value());
  CHECK(child.usage()->ru_maxrss > 0);

  ChildProcess missing({"/nonexistent/program"});
  CHECK(missing.waitExit(10s) == 127);
}

TEST_CASE("child process: captured lines, merged stderr, and bounded reads", "[support][process]") {
  auto child = sh("echo first; echo err >&2; echo second; exec sleep 5");
  CHECK(child.readLine(10s) == "first");
  CHECK(child.readLine(10s) == "second");
  const auto before = std::chrono::steady_clock::now();
  CHECK_FALSE(child.readLine(100ms).has_value());  // nothing more within 5 s
  CHECK(std::chrono::steady_clock::now() - before < 3s);
  CHECK(child.kill(SIGKILL) == 128 + SIGKILL);

  auto merged = sh("echo out; echo err >&2; exit 4", ChildOutput::kCaptureMerged);
  CHECK(merged.readAll() == "out\nerr\n");
  CHECK(merged.wait() == 4);
  CHECK_FALSE(merged.readLine(10ms).has_value());  // at end of file
}

TEST_CASE("child process: terminate escalates to SIGKILL when SIGTERM is ignored",
          "[support][process]") {
  auto polite = sh("trap 'exit 7' TERM; echo ready; while :; do sleep 0.05; done");
  REQUIRE(polite.readLine(10s) == "ready");
  CHECK(polite.terminate(10s) == 7);

  auto stubborn = sh("trap '' TERM; echo ready; while :; do sleep 0.05; done");
  REQUIRE(stubborn.readLine(10s) == "ready");
  CHECK(stubborn.terminate(200ms) == 128 + SIGKILL);
}

TEST_CASE("child process: waitUntil returns on readiness, fails on early exit and on timeout",
          "[support][process]") {
  kc::testing::TempDir dir;
  const std::string portFile = dir.file("port");
  auto server =
      sh("sleep 0.2; echo 4242 > '" + portFile + "'; exec sleep 30", ChildOutput::kInherit);
  std::uint16_t port = 0;
  server.waitUntil([&] { return (port = kc::testing::readPortFile(portFile).value_or(0)) != 0; },
                   20s, "port file");
  CHECK(port == 4242);

  auto quitter = sh("exit 2", ChildOutput::kInherit);
  CHECK_THROWS_WITH(quitter.waitUntil([] { return false; }, 20s, "port file"),
                    Catch::Contains("exited with status 2 before port file"));

  auto sleeper = sh("exec sleep 30", ChildOutput::kInherit);
  CHECK_THROWS_WITH(sleeper.waitUntil([] { return false; }, 100ms, "port file"),
                    Catch::Contains("no port file"));
  CHECK_FALSE(sleeper.running());  // killed by the failed wait
}

TEST_CASE("child process: destruction kills and reaps a running child", "[support][process]") {
  pid_t pid = -1;
  {
    auto child = sh("exec sleep 30", ChildOutput::kInherit);
    pid = child.pid();
    REQUIRE(::kill(pid, 0) == 0);
  }
  errno = 0;
  CHECK(::kill(pid, 0) == -1);
  CHECK(errno == ESRCH);  // reaped, not a zombie left behind
}

TEST_CASE("child process: environment entries are added, replaced and removed",
          "[support][process]") {
  ::setenv("KC_CHILD_KEEP", "kept", 1);
  ::setenv("KC_CHILD_DROP", "dropped", 1);
  ::setenv("KC_CHILD_SWAP", "old", 1);
  ChildProcess child(
      {"/bin/sh", "-c",
       "echo \"$KC_CHILD_KEEP|${KC_CHILD_DROP-unset}|$KC_CHILD_SWAP|$KC_CHILD_NEW\""},
      ChildOutput::kCapture, {"KC_CHILD_DROP", "KC_CHILD_SWAP=new", "KC_CHILD_NEW=a=b"});
  CHECK(child.readLine(10s) == "kept|unset|new|a=b");
  CHECK(child.wait() == 0);
  ::unsetenv("KC_CHILD_KEEP");
  ::unsetenv("KC_CHILD_DROP");
  ::unsetenv("KC_CHILD_SWAP");
}
