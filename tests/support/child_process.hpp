#pragma once
// A program run as a child process by tests and benchmarks (the daemons, the test doubles, a
// benchmark's measuring child): fork + execve with an adjusted environment, stdout (optionally with
// stderr) on a pipe, bounded waits, signals, and reaping with the child's resource usage. A child
// still running when the object goes away is killed with SIGKILL and reaped, so no test leaks a
// process.

#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kc::testing {

enum class ChildOutput {
  kInherit,        // the child writes to the test's stdout/stderr
  kCapture,        // stdout on a pipe (readLine/readAll); stderr inherited
  kCaptureMerged,  // stdout and stderr on the same pipe
};

class ChildProcess {
 public:
  // Starts argv[0] (a path, not searched in PATH) with `argv` and this process's environment,
  // where each "NAME=value" of `env` is added or replaces NAME ("NAME" alone removes it).
  // Throws std::runtime_error when the process cannot be created; a program that cannot be
  // executed exits with status 127.
  explicit ChildProcess(std::vector<std::string> argv, ChildOutput output = ChildOutput::kInherit,
                        const std::vector<std::string>& env = {});
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const noexcept { return pid_; }
  // True until the child has exited (reaps it without blocking when it has).
  bool running();
  // Sends `signal` if the child has not been reaped yet.
  void signal(int signal);

  // Exit status: the exit code, or 128 + signal number when a signal ended it. nullopt when it
  // is still running after `limit` (it is left running).
  std::optional<int> waitExit(std::chrono::milliseconds limit);
  // Waits without limit; the exit status.
  int wait();
  // `signal`, then waits without limit; the exit status.
  int kill(int signal);
  // SIGTERM, up to `grace` to exit, then SIGKILL; the exit status.
  int terminate(std::chrono::milliseconds grace);
  // Polls `ready` every few milliseconds until it returns true. Throws std::runtime_error
  // naming `what` when the child exits first or `limit` passes (the child is then killed).
  void waitUntil(const std::function<bool()>& ready, std::chrono::milliseconds limit,
                 const std::string& what);

  // Captured output only. The next line without its '\n', or nullopt when the pipe closed or
  // nothing complete arrived within `limit`.
  std::optional<std::string> readLine(std::chrono::milliseconds limit);
  // Everything until the child closes its end (normally: until it exits).
  std::string readAll();

  // Resource usage of the reaped child (ru_maxrss in KiB on Linux); nullopt before it exited.
  const std::optional<rusage>& usage() const noexcept { return usage_; }

 private:
  // Reaps with wait4; `block` waits. True when the child has been reaped (now or before).
  bool reap(bool block);
  // Reads what is available within `limit` into buffered_; false at end of file.
  bool fill(std::chrono::milliseconds limit);

  std::string program_;
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::optional<rusage> usage_;
  int outFd_ = -1;
  bool eof_ = false;
  std::string buffered_;
};

// The TCP port a child wrote to `path` (e.g. with --port-file), once the file holds a
// non-zero decimal number; nullopt until then.
std::optional<std::uint16_t> readPortFile(const std::string& path);

}  // namespace kc::testing
