#pragma once
// Runs the real vni-webhook binary as a child process (port 0, port file, temp database) so
// tests can talk to it over real HTTP and kill it with SIGKILL.

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace kc::vni::testing {

class WebhookProcess {
 public:
  WebhookProcess(std::string dir, std::vector<std::string> extraArgs)
      : dir_(std::move(dir)), extra_(std::move(extraArgs)) {}
  ~WebhookProcess() { kill(SIGKILL); }

  std::string db() const { return dir_ + "/vni.sqlite3"; }

  // Starts the binary and waits until it serves (its port file appears).
  std::uint16_t start() {
    const std::string portFile = dir_ + "/port";
    std::filesystem::remove(portFile);
    std::vector<std::string> args{VNI_WEBHOOK_BIN, "--listen",    "127.0.0.1", "--port", "0",
                                  "--db",          db(),          "--port-file", portFile,
                                  "--log-level",   "warn",        "--io-threads", "2"};
    args.insert(args.end(), extra_.begin(), extra_.end());
    std::vector<char*> argv;
    for (auto& a : args) {
      argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, VNI_WEBHOOK_BIN, nullptr, nullptr, argv.data(), environ) != 0) {
      throw std::runtime_error("cannot spawn " + std::string(VNI_WEBHOOK_BIN));
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(portFile);
      unsigned port = 0;
      if (in >> port && port != 0) {
        return static_cast<std::uint16_t>(port);
      }
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("vni-webhook exited during start-up");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    throw std::runtime_error("vni-webhook did not start in 20 s");
  }

  void kill(int signal) {
    if (pid_ > 0) {
      ::kill(pid_, signal);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
    }
  }

  // Sends `signal` without waiting.
  void signal(int signal) {
    if (pid_ > 0) {
      ::kill(pid_, signal);
    }
  }

  // Waits up to `limit` for the process to exit; its exit status (128 + signal when killed),
  // or -1 if it still runs (it is then left running).
  int waitExit(std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (pid_ > 0) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return -1;
  }

  // SIGTERM and the exit status (0 = graceful).
  int terminate() {
    if (pid_ <= 0) {
      return -1;
    }
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  std::string dir_;
  std::vector<std::string> extra_;
  pid_t pid_ = -1;
};

}  // namespace kc::vni::testing
