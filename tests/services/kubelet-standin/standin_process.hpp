#pragma once
// Runs tools/kubelet-standin as a child process for tests (and for the end-to-end tests of
// the device plugin): sockets and state in a directory of the test's choosing, healthz on an
// ephemeral port (read from --port-file), debugging handlers on. Stopped with SIGTERM (then
// SIGKILL) on destruction.
//
// The command line it runs:
//   kubelet-standin --node-name <node> --kubeconfig <kubeconfig>
//     --device-plugin-dir <dir>/dp --pod-resources-socket <dir>/pr/kubelet.sock
//     --root-dir <dir>/root --plugins-registry-dir <dir>/plugins_registry
//     --healthz-port 0 --port-file <dir>/port --enable-debugging-handlers [extra args...]

#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "libcore/net/http_client.hpp"
#include "tests/support/child_process.hpp"

namespace kc::kubelet::testing {

class StandinProcess {
 public:
  StandinProcess(std::string exe, std::string kubeconfig, std::string dir, std::string node,
                 std::vector<std::string> extraArgs = {})
      : exe_(std::move(exe)),
        kubeconfig_(std::move(kubeconfig)),
        dir_(std::move(dir)),
        node_(std::move(node)),
        extra_(std::move(extraArgs)) {
    start();
  }
  ~StandinProcess() { stop(); }
  StandinProcess(const StandinProcess&) = delete;
  StandinProcess& operator=(const StandinProcess&) = delete;

  std::string pluginDir() const { return dir_ + "/dp"; }
  std::string kubeletSocket() const { return pluginDir() + "/kubelet.sock"; }
  std::string podResourcesSocket() const { return dir_ + "/pr/kubelet.sock"; }
  std::string rootDir() const { return dir_ + "/root"; }
  std::string pluginsRegistryDir() const { return dir_ + "/plugins_registry"; }
  int port() const { return port_; }

  // Starts the process (again, after stop()) and waits for its port file (20 s limit).
  void start() {
    const std::string portFile = dir_ + "/port";
    std::filesystem::remove(portFile);
    std::vector<std::string> args = {exe_,
                                     "--node-name",
                                     node_,
                                     "--kubeconfig",
                                     kubeconfig_,
                                     "--device-plugin-dir",
                                     pluginDir(),
                                     "--pod-resources-socket",
                                     podResourcesSocket(),
                                     "--root-dir",
                                     rootDir(),
                                     "--plugins-registry-dir",
                                     pluginsRegistryDir(),
                                     "--healthz-port",
                                     "0",
                                     "--port-file",
                                     portFile,
                                     "--enable-debugging-handlers"};
    args.insert(args.end(), extra_.begin(), extra_.end());
    child_ = std::make_unique<kc::testing::ChildProcess>(std::move(args));
    child_->waitUntil([&] { return kc::testing::readPortFile(portFile).has_value(); },
                      std::chrono::seconds(20), "port file " + portFile + " from " + exe_);
    port_ = *kc::testing::readPortFile(portFile);
    net::ClientOptions o;
    o.baseUrl = "http://127.0.0.1:" + std::to_string(port_);
    http_ = std::move(net::HttpClient::create(o).value());
  }

  void signal(int sig) { child_->signal(sig); }

  // SIGTERM, up to 10 s, then SIGKILL; the exit status (128 + signal when killed), -1 when
  // not running.
  int stop() {
    if (!child_) {
      return -1;
    }
    const int status = child_->terminate(std::chrono::seconds(10));
    child_.reset();
    return status;
  }

  nlohmann::json debugPods() {
    return nlohmann::json::parse(http_->request("GET", "/debug/pods")->body);
  }
  unsigned post(const std::string& path) { return http_->request("POST", path)->status; }
  std::string get(const std::string& path) { return http_->request("GET", path)->body; }

 private:
  std::string exe_;
  std::string kubeconfig_;
  std::string dir_;
  std::string node_;
  std::vector<std::string> extra_;
  std::unique_ptr<kc::testing::ChildProcess> child_;
  int port_ = 0;
  std::unique_ptr<net::HttpClient> http_;
};

}  // namespace kc::kubelet::testing
