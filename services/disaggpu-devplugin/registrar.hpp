#pragma once
// The plugin's side of kubelet's device-plugin directory: serve the DevicePlugin service on our
// socket there, register with kubelet (Registration/Register on kubelet.sock, only once our
// socket listens), and do both again whenever kubelet restarts. A restarting kubelet deletes
// every socket in the directory and creates a new kubelet.sock; we notice either through
// inotify at once, and through a cheap stat of both sockets every `checkInterval` where
// inotify is unavailable (some overlay and network filesystems), so well within 1 s.
//
// The loop reads time and waits through the kc::Clock of its options: it sleeps on a condition
// variable until the next check or retry is due, woken early by stop() and by a small thread
// that blocks on the inotify descriptor. Tests pass a FakeClock and move the retries by hand.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "libcore/api/names.hpp"
#include "libcore/base/clock.hpp"
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
  kc::Clock* clock = nullptr;                 // not owned; null: kc::systemClock()
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
  void watchDirectory();
  Status registerOnce();
  bool kubeletSocketIdentity(dev_t& dev, ino_t& ino) const;
  // Until `deadline` on the clock, a change in the directory (inotify) or stop().
  void waitForChange(kc::Clock::time_point deadline);

  RegistrarOptions opts_;
  kc::Clock& clock_;
  grpc::Service& service_;
  RegistrarHooks hooks_;
  grpcx::UnixServer server_;
  std::atomic<bool> registered_{false};
  std::atomic<std::uint64_t> registrations_{0};
  std::atomic<std::uint64_t> restarts_{0};
  std::atomic<bool> stopping_{false};  // set under waitMu_, so the loop's wait cannot miss it
  int inotifyFd_ = -1;
  int wakeFd_ = -1;  // eventfd: stop() wakes the directory watcher out of poll()
  std::thread thread_;
  std::thread watcher_;  // only with inotify: turns its events into dirChanged_
  std::mutex waitMu_;    // guards dirChanged_ (with wake_)
  std::condition_variable wake_;
  bool dirChanged_ = false;
  mutable std::mutex mu_;  // guards lastError_
  std::string lastError_;
};

}  // namespace kc::devplugin
