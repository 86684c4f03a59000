#pragma once
// Graceful shutdown on SIGTERM / SIGINT (what kubelet sends before SIGKILL when a pod stops):
//   1. readiness fails at once (HealthChecks::failReadiness), so Services stop routing to us;
//   2. the `drain` step runs (finish in-flight work, release the leader Lease, ...);
//   3. the `stop` step runs (stop servers, informers; make main() return);
//   4. wait() returns in main().
// A second signal while the sequence runs exits the process at once with status 128+signal
// (the operator insisted).
//
// Globals: a POSIX signal handler can only reach static storage, so two atomics are global:
// the write end of the installed handler's self-pipe (writing to it is async-signal-safe) and
// a count of signals seen (for the second-signal exit). Only one ShutdownHandler may be
// installed at a time; install() fails otherwise. Everything else lives
// in the object; the sequence runs on its own watcher thread, never in the signal handler.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::obs {

class HealthChecks;

class ShutdownHandler {
 public:
  struct Steps {
    HealthChecks* health = nullptr;  // optional; readiness is failed first
    std::function<void()> drain{};   // optional
    std::function<void()> stop{};    // optional
  };

  explicit ShutdownHandler(Steps steps);
  // Restores the previous signal dispositions and joins the watcher thread (without running
  // the sequence if it never triggered).
  ~ShutdownHandler();
  ShutdownHandler(const ShutdownHandler&) = delete;
  ShutdownHandler& operator=(const ShutdownHandler&) = delete;

  // Installs handlers for `signals` (default SIGTERM and SIGINT) and starts the watcher
  // thread. Error "unavailable" if another ShutdownHandler is installed.
  Status install(std::vector<int> signals = {});

  // Starts the sequence as if a signal had arrived (from any thread; idempotent). Works
  // without install() too (the sequence then runs on a thread started on first use).
  void trigger(std::string reason);

  // Blocks until the sequence has completed.
  void wait();
  // As wait(), with a limit; true when the sequence has completed.
  bool waitFor(std::chrono::milliseconds timeout);

  // True once trigger() has returned or a signal has been picked up by the watcher.
  bool triggered() const;
  // "signal SIGTERM" or the reason given to the first trigger(); empty before.
  std::string reason() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace kc::obs
