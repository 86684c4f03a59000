#pragma once
// Runs tools/kube-apiserver-double as a child process for client tests and the benchmark:
// TLS on an ephemeral port, bearer token, a kubeconfig written into a temp dir. Killed and
// reaped on destruction.

#include <chrono>
#include <filesystem>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "libcore/kube/config.hpp"
#include "tests/support/child_process.hpp"

namespace kc::kube::testing {

class DoubleProcess {
 public:
  // `exe`: path of kube-apiserver-double; `dir`: where its kubeconfig goes; `extraArgs`:
  // fault switches.
  DoubleProcess(const std::string& exe, const std::string& dir,
                const std::vector<std::string>& extraArgs = {}) {
    kubeconfig_ = dir + "/kubeconfig";
    // A fresh bearer token per instance; the double writes it into the kubeconfig.
    std::random_device rd;
    token_ = "kc-test-" + std::to_string(rd()) + std::to_string(rd());
    std::vector<std::string> args = {exe,         "--port",  "0",   "--kubeconfig-out",
                                     kubeconfig_, "--token", token_};
    args.insert(args.end(), extraArgs.begin(), extraArgs.end());
    child_ = std::make_unique<kc::testing::ChildProcess>(std::move(args));
    child_->waitUntil(
        [&] {
          auto cfg = loadKubeconfig({kubeconfig_});
          if (cfg.ok()) {
            config_ = std::move(cfg).value();
          }
          return cfg.ok();
        },
        std::chrono::seconds(20), "kubeconfig " + kubeconfig_ + " from " + exe);
  }
  ~DoubleProcess() { stop(); }
  DoubleProcess(const DoubleProcess&) = delete;
  DoubleProcess& operator=(const DoubleProcess&) = delete;

  const ClusterConfig& config() const { return config_; }
  const std::string& kubeconfigPath() const { return kubeconfig_; }
  const std::string& token() const { return token_; }

  void stop() {
    if (child_) {
      child_->terminate(std::chrono::seconds(2));
    }
  }

 private:
  std::unique_ptr<kc::testing::ChildProcess> child_;
  std::string kubeconfig_;
  std::string token_;
  ClusterConfig config_;
};

}  // namespace kc::kube::testing
