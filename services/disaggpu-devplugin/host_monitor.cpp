#include "services/disaggpu-devplugin/host_monitor.hpp"

#include <spdlog/spdlog.h>

#include <set>
#include <utility>

#include "libcore/node/host_scan.hpp"

namespace kc::devplugin {

HostMonitor::HostMonitor(HostMonitorOptions options, std::function<void()> onChange)
    : opts_(std::move(options)), onChange_(std::move(onChange)) {}

HostMonitor::~HostMonitor() {
  stop();
}

void HostMonitor::start() {
  scanNow();
  std::lock_guard lock(mu_);
  if (!thread_.joinable() && !stopping_) {
    thread_ = std::thread([this] { loop(); });
  }
}

void HostMonitor::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

node::HostView HostMonitor::scanNow() {
  node::HostView next = node::scanHost(opts_.roots);
  bool changed = false;
  {
    std::lock_guard lock(mu_);
    changed = !scanned_ || next != view_;
    if (changed) {
      // Problems are logged once each, when they first appear.
      const std::set<std::string> old(view_.problems.begin(), view_.problems.end());
      for (const std::string& p : next.problems) {
        if (old.count(p) == 0) {
          spdlog::warn("host view: {}", p);
        }
      }
      view_ = next;
    }
    scanned_ = true;
  }
  if (changed && onChange_) {
    onChange_();
  }
  return next;
}

node::HostView HostMonitor::view() const {
  std::lock_guard lock(mu_);
  return view_;
}

void HostMonitor::loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, opts_.interval, [this] { return stopping_; });
    if (stopping_) {
      break;
    }
    lock.unlock();
    scanNow();
    lock.lock();
  }
}

}  // namespace kc::devplugin
