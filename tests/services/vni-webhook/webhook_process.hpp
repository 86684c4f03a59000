#pragma once
// Runs the real vni-webhook binary as a child process (port 0, port file, temp database) so
// tests can talk to it over real HTTP and kill it with SIGKILL. Restartable: start() after
// kill() runs a new process on the same database.

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/child_process.hpp"

namespace kc::vni::testing {

class WebhookProcess {
 public:
  WebhookProcess(std::string dir, std::vector<std::string> extraArgs)
      : dir_(std::move(dir)), extra_(std::move(extraArgs)) {}

  std::string db() const { return dir_ + "/vni.sqlite3"; }

  // Starts the binary and waits until it serves (its port file appears).
  std::uint16_t start() {
    const std::string portFile = dir_ + "/port";
    std::filesystem::remove(portFile);
    std::vector<std::string> args{VNI_WEBHOOK_BIN,
                                  "--bind-address",
                                  "127.0.0.1",
                                  "--port",
                                  "0",
                                  "--db",
                                  db(),
                                  "--port-file",
                                  portFile,
                                  "--log-level",
                                  "warn",
                                  "--io-threads",
                                  "2"};
    args.insert(args.end(), extra_.begin(), extra_.end());
    child_ = std::make_unique<kc::testing::ChildProcess>(std::move(args));
    std::uint16_t port = 0;
    child_->waitUntil([&] { return (port = kc::testing::readPortFile(portFile).value_or(0)) != 0; },
                      std::chrono::seconds(20), "port file");
    return port;
  }

  // Sends `signal` and waits for the exit.
  void kill(int signal) {
    if (child_) {
      child_->kill(signal);
    }
  }

  // Sends `signal` without waiting.
  void signal(int signal) {
    if (child_) {
      child_->signal(signal);
    }
  }

  // Waits up to `limit` for the process to exit; its exit status (128 + signal when killed),
  // or -1 if it still runs (it is then left running).
  int waitExit(std::chrono::milliseconds limit) {
    return child_ ? child_->waitExit(limit).value_or(-1) : -1;
  }

  // SIGTERM and the exit status (0 = graceful).
  int terminate() { return child_ ? child_->kill(SIGTERM) : -1; }

 private:
  std::string dir_;
  std::vector<std::string> extra_;
  std::unique_ptr<kc::testing::ChildProcess>
      child_;  // killed with SIGKILL and reaped on destruction
};

}  // namespace kc::vni::testing
