#include "services/rt-kubelet-shim/shim.hpp"

#include <prometheus/registry.h>

#include "libcore/obs/health.hpp"
#include "services/rt-kubelet-shim/shim_metrics.hpp"

namespace kc::rtshim {

RtShim::RtShim(ShimOptions options, RtSupport support, RtCgroupOptions cgroups,
               kube::KubeClient* client, obs::Metrics* metrics)
    : o_(std::move(options)),
      support_(std::move(support)),
      tree_(std::move(cgroups)),
      client_(client) {
  auto p = alloc::findRtPacking(o_.packing);
  packing_ = p ? *p : alloc::rtPackings()[0];
  if (support_.capable) {
    auto n = alloc::RtNodeState::create(support_.info);
    if (n) {
      node_ = std::move(*n);
    } else {
      support_.capable = false;
      support_.reason = n.error().message;
    }
  }
  if (metrics != nullptr) {
    metrics_ = std::make_unique<Metrics>(metrics->registry());
    metrics_->bound.Set(support_.capable ? static_cast<double>(node_->cores().boundPpb()) / 1e9
                                         : 0.0);
  }
  if (client_ != nullptr) {
    publisher_ = std::thread([this] { publisherLoop(); });
  }
}

RtShim::~RtShim() {
  stop();
}

Status RtShim::validate(const ShimOptions& o) {
  if (auto p = alloc::findRtPacking(o.packing); !p) {
    return makeError(kc::errc::kInvalid, "--packing: " + p.error().message);
  }
  return okStatus();
}

void RtShim::stop() {
  {
    std::lock_guard lock(pubMu_);
    pubStop_ = true;
  }
  pubCv_.notify_all();
  if (publisher_.joinable()) {
    publisher_.join();
  }
}

void RtShim::observeCall(const std::string& method, grpc::StatusCode code, double seconds) {
  if (!metrics_) {
    return;
  }
  static const prometheus::Histogram::BucketBoundaries kBuckets{
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5};
  metrics_->calls
      .Add({{"method", method}, {"code", std::to_string(static_cast<int>(code))}}, kBuckets)
      .Observe(seconds);
}

std::vector<RtShim::Held> RtShim::held() const {
  std::lock_guard lock(mu_);
  std::vector<Held> out;
  for (const auto& [id, e] : entries_) {
    auto p = containerCgroupPath(e.cgroupParent, id);
    out.push_back(Held{id, e.sandboxId, e.container, e.pod, p ? *p : "", e.reservation, e.cpus});
  }
  return out;
}

void RtShim::updateGauges() {
  if (!metrics_ || !node_) {
    return;
  }
  std::lock_guard lock(mu_);
  metrics_->reservations.Set(static_cast<double>(entries_.size()));
  metrics_->groupUsed.Set(static_cast<double>(node_->groupUsedPpb()) / 1e9);
  const auto& cores = node_->cores();
  for (std::size_t i = 0; i < cores.coreCount(); ++i) {
    metrics_->coreUsed.Add({{"cpu", std::to_string(cores.cpuId(i))}})
        .Set(static_cast<double>(cores.usedPpb(i)) / 1e9);
  }
}

}  // namespace kc::rtshim
