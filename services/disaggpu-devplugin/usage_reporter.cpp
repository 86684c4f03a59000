#include "services/disaggpu-devplugin/usage_reporter.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <utility>

#include "libcore/grpc/channel.hpp"
#include "libcore/grpc/status.hpp"
#include "podresources/v1/api.grpc.pb.h"
#include "services/disaggpu-devplugin/host_check.hpp"
#include "services/disaggpu-devplugin/plugin_service.hpp"

namespace kc::devplugin {
namespace {

// Shown in `inUse` for a device Allocate handed out that PodResources does not list yet.
constexpr std::string_view kAllocating = api::kAllocatingPod;

class PodResourcesClient final : public PodResourcesSource {
 public:
  PodResourcesClient(std::string path, std::chrono::milliseconds timeout)
      : path_(std::move(path)), timeout_(timeout) {}

  Result<DeviceUse> devicesInUse(const std::string& resourceName) override {
    if (!stub_) {
      stub_ = v1::PodResourcesLister::NewStub(grpcx::dialUnix(path_));
    }
    grpc::ClientContext ctx;
    grpcx::setTimeout(ctx, timeout_);
    ctx.set_wait_for_ready(false);
    v1::ListPodResourcesRequest req;
    v1::ListPodResourcesResponse resp;
    const grpc::Status st = stub_->List(&ctx, req, &resp);
    if (!st.ok()) {
      // A kubelet restart leaves the channel pointing at a dead socket for a while; dial anew.
      stub_.reset();
      return grpcx::toError(st, "PodResources List at " + path_);
    }
    DeviceUse use;
    for (const auto& pod : resp.pod_resources()) {
      const std::string key = pod.namespace_() + "/" + pod.name();
      for (const auto& c : pod.containers()) {
        for (const auto& d : c.devices()) {
          if (d.resource_name() != resourceName) {
            continue;
          }
          for (const auto& id : d.device_ids()) {
            auto& pods = use[id];
            if (std::find(pods.begin(), pods.end(), key) == pods.end()) {
              pods.push_back(key);
            }
          }
        }
      }
    }
    for (auto& [id, pods] : use) {
      std::sort(pods.begin(), pods.end());
    }
    return use;
  }

 private:
  std::string path_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<v1::PodResourcesLister::Stub> stub_;
};

}  // namespace

std::unique_ptr<PodResourcesSource> makePodResourcesClient(std::string socketPath,
                                                           std::chrono::milliseconds timeout) {
  return std::make_unique<PodResourcesClient>(std::move(socketPath), timeout);
}

UsageReporter::UsageReporter(UsageReporterOptions options, DevicePluginService& service,
                             PodResourcesSource& source, UsagePublisher& publisher,
                             std::function<bool()> registered)
    : opts_(std::move(options)),
      clock_(kc::clockOr(opts_.clock)),
      service_(service),
      source_(source),
      publisher_(publisher),
      registered_(std::move(registered)) {}

UsageReporter::~UsageReporter() {
  stop();
}

UsageReport UsageReporter::decide(const Reading& r, const std::optional<UsageReport>& previous) {
  UsageReport out;
  std::set<std::string> pools;
  for (const NodeGpu& g : r.inventory.gpus) {
    pools.insert(g.pool);
  }
  if (pools.size() == 1) {
    out.pool = *pools.begin();
  }
  for (const Advertised& a : r.advertised) {
    out.advertised.push_back(a.id);
  }
  if (r.inUse) {
    out.inUse = *r.inUse;
  } else if (previous) {
    out.inUse = previous->inUse;  // keep the last known use; withdrawals wait for a reading
  }
  for (const std::string& id : r.allocatedSince) {
    auto& pods = out.inUse[id];
    if (pods.empty()) {
      pods.emplace_back(kAllocating);
    }
  }
  if (r.listDelivered && r.inUse) {
    out.withdrawn = drainingIds(r.inventory);
  }
  out.registered = r.registered;
  if (r.inventory.hostChecked) {
    HostVerdicts v = hostVerdicts(r.inventory);
    out.hostChecked = true;
    out.hostVisible = std::move(v.visible);
    out.notVisible = std::move(v.notVisible);
  }
  return out;
}

UsageReport UsageReporter::runOnce() {
  // Order matters: the list delivery is checked BEFORE PodResources is read, so a pod kubelet
  // admitted with a device before it saw the withdrawal shows up in that read (or in
  // allocatedSince, which covers this round and the one before).
  const DevicePluginService::State st = service_.state();
  Reading r;
  r.inventory = st.inventory;
  r.advertised = st.advertised;
  r.listDelivered = service_.deliveredToAll(st.listVersion);
  auto use = source_.devicesInUse(opts_.resourceName);
  if (use) {
    r.inUse = std::move(*use);
  }
  r.allocatedSince = service_.allocatedSince(std::min(previousSeq_, st.allocationSeq));
  previousSeq_ = st.allocationSeq;
  r.registered = registered_ ? registered_() : false;

  std::optional<UsageReport> previous;
  {
    std::lock_guard lock(mu_);
    previous = published_;
    if (!use) {
      lastError_ = use.error().message;
    }
  }
  UsageReport report = decide(r, previous);
  if (opts_.adjust) {
    opts_.adjust(report, r.inventory);
  }
  if (!previous || *previous != report) {
    if (auto s = publisher_.publish(report); s) {
      std::lock_guard lock(mu_);
      published_ = report;
      if (use) {
        lastError_.clear();
      }
    } else {
      spdlog::warn("cannot publish GPU usage: {}", s.error().message);
      std::lock_guard lock(mu_);
      lastError_ = s.error().message;
    }
  }
  return report;
}

std::optional<UsageReport> UsageReporter::lastPublished() const {
  std::lock_guard lock(mu_);
  return published_;
}

std::string UsageReporter::lastError() const {
  std::lock_guard lock(mu_);
  return lastError_;
}

void UsageReporter::start() {
  service_.setChangeListener([this] {
    // The tick moved under the service's own mutex; taking waitMu_ before the notify keeps it
    // from falling between the loop's check of the tick and its wait.
    std::lock_guard lock(waitMu_);
    wake_.notify_all();
  });
  thread_ = std::thread([this] { loop(); });
}

void UsageReporter::stop() {
  {
    std::lock_guard lock(waitMu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
    service_.setChangeListener(nullptr);  // waits out a call in flight: `this` may go after
  }
}

void UsageReporter::loop() {
  while (!stopping_) {
    const std::uint64_t tick = service_.changeTick();
    runOnce();
    const bool failed = !lastError().empty();
    // Wait until something changes (inventory, a delivery, an Allocate) or the poll interval
    // passes. After a failure (API server or kubelet not answering) wait the retry interval
    // whatever changes: each change would otherwise be one more failing call.
    const kc::Clock::time_point deadline =
        clock_.now() + (failed ? opts_.retryInterval : opts_.pollInterval);
    std::unique_lock lock(waitMu_);
    clock_.waitUntil(lock, wake_, deadline, [&] {
      return stopping_.load() || (!failed && service_.changeTick() != tick);
    });
  }
}

}  // namespace kc::devplugin
