#pragma once
// Publishes which of this node's GPUs are in use, and which draining GPUs are confirmed
// withdrawn, on the Node (annotation kubecomp.io/gpu-usage) for reconfig-mgr. "In use" comes
// from kubelet's PodResources API (never from exec into pods), plus every device Allocate
// handed out after the PodResources read began (kubelet may be starting that pod right now).
//
// A draining GPU is reported withdrawn only when (1) every open ListAndWatch stream has been
// sent a list without it and (2) the PodResources read behind `inUse` started after that.
// reconfig-mgr detaches a GPU only when it is withdrawn and not in use: a pod admitted in the
// window before kubelet saw the withdrawal is always seen.
//
// The loop waits through the kc::Clock of its options on a condition variable that stop() and
// the service's change listener notify: a change wakes it at once, the poll and retry
// intervals are deadlines on the clock (a FakeClock in tests).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "libcore/base/clock.hpp"
#include "libcore/base/result.hpp"
#include "services/disaggpu-devplugin/device_state.hpp"

namespace kc::devplugin {

class DevicePluginService;

// Devices of one resource in use on the node: device id -> "namespace/pod" list.
using DeviceUse = std::map<std::string, std::vector<std::string>>;

// Where "in use" comes from (kubelet's PodResources API; a fake in tests).
class PodResourcesSource {
 public:
  virtual ~PodResourcesSource() = default;
  virtual Result<DeviceUse> devicesInUse(const std::string& resourceName) = 0;
};

// Where the report goes (the Node's annotations; a fake in tests).
class UsagePublisher {
 public:
  virtual ~UsagePublisher() = default;
  virtual Status publish(const UsageReport& report) = 0;
};

// PodResources v1 List over a unix socket, with a deadline per call.
std::unique_ptr<PodResourcesSource> makePodResourcesClient(std::string socketPath,
                                                           std::chrono::milliseconds timeout);

struct UsageReporterOptions {
  std::string resourceName{api::kGpuResource};
  std::chrono::milliseconds pollInterval{1000};   // PodResources read without any change
  std::chrono::milliseconds retryInterval{1000};  // after a failed read or publish
  kc::Clock* clock = nullptr;                     // not owned; null: kc::systemClock()
  // Called on every decided report before it is compared and published (the host actions:
  // hot-remove before withdrawal, rescan).
  std::function<void(UsageReport&, const NodeInventory&)> adjust;
};

class UsageReporter {
 public:
  UsageReporter(UsageReporterOptions options, DevicePluginService& service,
                PodResourcesSource& source, UsagePublisher& publisher,
                std::function<bool()> registered);
  ~UsageReporter();
  UsageReporter(const UsageReporter&) = delete;
  UsageReporter& operator=(const UsageReporter&) = delete;

  // start() takes the service's change listener (one per service) until stop().
  void start();
  void stop();

  // One round: read, decide, publish if changed. What the thread does; tests call it directly.
  // Returns the report it decided on (published or not).
  UsageReport runOnce();

  std::optional<UsageReport> lastPublished() const;
  std::string lastError() const;

  // Pure: the report from one consistent reading.
  struct Reading {
    NodeInventory inventory;
    std::vector<Advertised> advertised;
    bool listDelivered = false;      // every stream has the current list (read BEFORE `inUse`)
    std::optional<DeviceUse> inUse;  // nullopt: PodResources failed
    std::set<std::string> allocatedSince;  // Allocate calls after the read began
    bool registered = false;
  };
  static UsageReport decide(const Reading& reading, const std::optional<UsageReport>& previous);

 private:
  void loop();

  UsageReporterOptions opts_;
  kc::Clock& clock_;
  DevicePluginService& service_;
  PodResourcesSource& source_;
  UsagePublisher& publisher_;
  std::function<bool()> registered_;
  std::atomic<bool> stopping_{false};  // set under waitMu_, so the loop's wait cannot miss it
  std::thread thread_;
  std::mutex waitMu_;  // what the loop waits under (with wake_); see loop()
  std::condition_variable wake_;
  std::uint64_t previousSeq_ = 0;  // allocation sequence at the start of the previous round
  mutable std::mutex mu_;          // guards published_, lastError_
  std::optional<UsageReport> published_;
  std::string lastError_;
};

}  // namespace kc::devplugin
