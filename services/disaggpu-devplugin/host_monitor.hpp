#pragma once
// Keeps the node's host view current: scans sysfs and /proc/driver/nvidia (libcore/node) at
// start and every `interval`, and calls `onChange` when what the host shows differs from the
// last scan, so a GPU that falls off the bus turns Unhealthy within one interval and one that
// comes back turns Healthy again, without restarting the plugin. sysfs gives no reliable
// change events for driver binding or /proc entries, hence the poll (a scan of 16 GPUs takes
// well under a millisecond: bench_devplugin's host_scan_ms).

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "libcore/node/host_view.hpp"

namespace kc::devplugin {

struct HostMonitorOptions {
  node::HostRoots roots;
  std::chrono::milliseconds interval{1000};
};

class HostMonitor {
 public:
  HostMonitor(HostMonitorOptions options, std::function<void()> onChange);
  ~HostMonitor();
  HostMonitor(const HostMonitor&) = delete;
  HostMonitor& operator=(const HostMonitor&) = delete;

  // The first scan happens here, before start() returns, so the first inventory is judged.
  void start();
  void stop();
  // Scans now; calls onChange (on this thread) when the view changed. Returns the new view.
  node::HostView scanNow();
  node::HostView view() const;
  const node::HostRoots& roots() const { return opts_.roots; }

 private:
  void loop();

  HostMonitorOptions opts_;
  std::function<void()> onChange_;
  mutable std::mutex mu_;  // guards view_, stopping_ (with cv_)
  std::condition_variable cv_;
  node::HostView view_;
  bool scanned_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kc::devplugin
