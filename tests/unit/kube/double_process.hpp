#pragma once
// Runs tools/kube-apiserver-double as a child process for client tests and the benchmark:
// TLS on an ephemeral port, bearer token, a kubeconfig written into a temp dir. Killed and
// reaped on destruction.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "libcore/kube/config.hpp"

namespace kc::kube::testing {

class DoubleProcess {
 public:
  // `exe`: path of kube-apiserver-double; `dir`: where its kubeconfig goes; `extraArgs`:
  // fault switches.
  DoubleProcess(const std::string& exe, const std::string& dir, const std::vector<std::string>& extraArgs = {}) {
    kubeconfig_ = dir + "/kubeconfig";
    // A fresh bearer token per instance; the double writes it into the kubeconfig.
    std::random_device rd;
    token_ = "kc-test-" + std::to_string(rd()) + std::to_string(rd());
    std::vector<std::string> args = {exe, "--port", "0", "--kubeconfig-out", kubeconfig_, "--token", token_};
    args.insert(args.end(), extraArgs.begin(), extraArgs.end());
    pid_ = ::fork();
    if (pid_ < 0) {
      throw std::runtime_error("fork failed");
    }
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (auto& a : args) {
        argv.push_back(a.data());
      }
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("kube-apiserver-double exited during start-up (" + exe + ")");
      }
      if (auto cfg = loadKubeconfig({kubeconfig_}); cfg.ok()) {
        config_ = std::move(cfg).value();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    stop();
    throw std::runtime_error("kube-apiserver-double did not write " + kubeconfig_ + " within 20 s");
  }
  ~DoubleProcess() { stop(); }
  DoubleProcess(const DoubleProcess&) = delete;
  DoubleProcess& operator=(const DoubleProcess&) = delete;

  const ClusterConfig& config() const { return config_; }
  const std::string& kubeconfigPath() const { return kubeconfig_; }
  const std::string& token() const { return token_; }

  void stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      for (int i = 0; i < 200; ++i) {
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
          pid_ = -1;
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
    }
  }

 private:
  pid_t pid_ = -1;
  std::string kubeconfig_;
  std::string token_;
  ClusterConfig config_;
};

}  // namespace kc::kube::testing
