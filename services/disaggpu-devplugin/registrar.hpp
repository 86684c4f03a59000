#pragma once
// The plugin's side of kubelet's device-plugin directory: serve the DevicePlugin service on our
// socket there, register with kubelet (Registration/Register on kubelet.sock, only once our
// socket listens), and do both again whenever kubelet restarts. A restarting kubelet deletes
// every socket in the directory and creates a new kubelet.sock; we notice either through
// inotify at once, and through a cheap stat of both sockets every `checkInterval` where
// inotify is unavailable (some overlay and network filesystems), so well within 1 s.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "libcore/api/names.hpp"
#include "libcore/base/result.hpp"
#include "libcore/grpc/unix_server.hpp"

namespace grpc {
class Service;
}

namespace kc::devplugin {

struct RegistrarOptions {
  std::string pluginDir = "/var/lib/kubelet/device-plugins";
  std::string socketName = "kubecomp-gpu.sock";  // our endpoint, relative to pluginDir
  std::string kubeletSocket;                     // default: <pluginDir>/kubelet.sock
  std::string resourceName{api::kGpuResource};
  std::chrono::milliseconds registerTimeout{5000};
  std::chrono::milliseconds checkInterval{200};
  std::chrono::milliseconds retryMin{100};
  std::chrono::milliseconds retryMax{5000};
  bool useInotify = true;
  std::chrono::milliseconds stopGrace{2000};  // in-flight calls on SIGTERM
};

// Validates the options (absolute dir that exists, socket name a plain file name, resource
// name domain-qualified). Error "invalid".
Status validate(const RegistrarOptions& options);

struct RegistrarHooks {
  std::function<void()> onRegistered;
  std::function<void(const Error&)> onRegisterFailed;
  std::function<void()> onServerRestarted;  // our socket vanished and was served anew
  std::function<void()> beforeServerStop;   // e.g. end the ListAndWatch streams
};

class Registrar {
 public:
  Registrar(RegistrarOptions options, grpc::Service& service, RegistrarHooks hooks = {});
  ~Registrar();
  Registrar(const Registrar&) = delete;
  Registrar& operator=(const Registrar&) = delete;

  // Serves on the socket (errors from the path are returned at once) and starts the loop that
  // registers and re-registers.
  Status start();
  // Stops the loop and the server (in-flight calls get stopGrace). Idempotent.
  void stop();

  bool registered() const { return registered_.load(); }
  std::uint64_t registrations() const { return registrations_.load(); }
  std::uint64_t serverRestarts() const { return restarts_.load(); }
  std::string socketPath() const;
  // The last registration error ("" when registered).
  std::string lastError() const;

 private:
  void loop();
  Status registerOnce();
  bool kubeletSocketIdentity(dev_t& dev, ino_t& ino) const;
  void waitForChange(std::chrono::milliseconds timeout);

  RegistrarOptions opts_;
  grpc::Service& service_;
  RegistrarHooks hooks_;
  grpcx::UnixServer server_;
  std::atomic<bool> registered_{false};
  std::atomic<std::uint64_t> registrations_{0};
  std::atomic<std::uint64_t> restarts_{0};
  std::atomic<bool> stopping_{false};
  int inotifyFd_ = -1;
  int wakeFd_ = -1;  // eventfd: stop() wakes the loop
  std::thread thread_;
  mutable std::mutex mu_;  // guards lastError_
  std::string lastError_;
};

}  // namespace kc::devplugin
