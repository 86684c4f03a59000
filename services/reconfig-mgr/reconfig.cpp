#include "services/reconfig-mgr/reconfig.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>

#include <set>

#include "libcore/alloc/policy_registry.hpp"
#include "libcore/alloc/sched_objects.hpp"
#include "libcore/base/base64.hpp"
#include "libcore/base/rfc3339.hpp"
#include "libcore/fabric/h3_driver.hpp"
#include "libcore/fabric/pool.hpp"
#include "libcore/fabric/redfish_driver.hpp"
#include "libcore/obs/health.hpp"
#include "services/reconfig-mgr/idle_planner.hpp"
#include "services/reconfig-mgr/move_planner.hpp"
#include "services/reconfig-mgr/moves_gate.hpp"
#include "services/reconfig-mgr/pool_view.hpp"
#include "services/reconfig-mgr/pool_worker.hpp"
#include "services/reconfig-mgr/reconfig_shared.hpp"
#include "services/reconfig-mgr/slice_publisher.hpp"

namespace kc::reconfig {

using nlohmann::json;

Status validate(const ReconfigOptions& o) {
  if (auto p = alloc::findGpuPolicy(o.gpuPolicy); !p) {
    return makeError(errc::kInvalid, "--gpu-policy: " + p.error().message);
  }
  if (auto p = alloc::findRecomposePolicy(o.recomposePolicy); !p) {
    return makeError(errc::kInvalid, "--recompose-policy: " + p.error().message);
  }
  if (o.defaultRuntime.count() < 1 ||
      o.defaultRuntime.count() > alloc::kMaxExpectedRuntimeSeconds) {
    return makeError(errc::kInvalid, "--default-runtime-seconds must be 1.." +
                                         std::to_string(alloc::kMaxExpectedRuntimeSeconds));
  }
  if (o.movesReprobeSeconds < 0 || o.movesReprobeSeconds > 7 * 86400) {
    return makeError(errc::kInvalid, "--moves-reprobe-seconds must be 0 (never) to 604800");
  }
  if (o.recomposeCooldown.count() < 0) {
    return makeError(errc::kInvalid, "--recompose-cooldown-seconds must not be negative");
  }
  if (o.identity.empty()) {
    return makeError(errc::kInvalid, "identity must not be empty");
  }
  if (o.schedulerName.empty()) {
    return makeError(errc::kInvalid, "--scheduler-name must not be empty");
  }
  if (o.runner.maxAttempts < 1) {
    return makeError(errc::kInvalid, "--max-attempts must be at least 1");
  }
  if (o.leaderElect && !(o.leaseDuration > o.renewDeadline && o.renewDeadline > o.retryPeriod)) {
    return makeError(errc::kInvalid,
                     "lease durations must satisfy lease > renew deadline > retry period");
  }
  return okStatus();
}

ReconfigManager::ReconfigManager(ReconfigOptions options, kube::KubeClient& client,
                                 obs::Metrics* metrics, obs::HealthChecks* health)
    : opts_(std::move(options)),
      client_(client),
      health_(health),
      shared_(std::make_unique<Shared>()) {
  if (metrics != nullptr) {
    metrics_ = std::make_unique<Metrics>(metrics->registry());
  }
  shared_->opts = opts_;
  shared_->client = &client_;
  shared_->metrics = metrics_.get();
  auto policy = alloc::findGpuPolicy(opts_.gpuPolicy);
  shared_->policy = policy ? *policy : *alloc::findGpuPolicy(alloc::kDefaultGpuPolicy);
  if (auto r = alloc::findRecomposePolicy(opts_.recomposePolicy)) {
    shared_->recompose = r->kind;
  }
  shared_->recorder =
      std::make_unique<kube::EventRecorder>(client_, "reconfig-mgr", opts_.identity);

  auto informer = [&](kube::GroupVersionResource r, std::string fieldSelector) {
    kube::InformerOptions io;
    io.resource = std::move(r);
    io.fieldSelector = std::move(fieldSelector);
    auto inf = std::make_unique<kube::Informer>(client_, io);
    kube::ResourceEventHandler h;
    h.onAdd = [this](const kube::ObjectPtr&) { wakeAll(); };
    h.onUpdate = [this](const kube::ObjectPtr&, const kube::ObjectPtr&) { wakeAll(); };
    h.onDelete = [this](const kube::ObjectPtr&) { wakeAll(); };
    inf->addHandler(std::move(h));
    return inf;
  };
  pools_ = informer(api::gvr::gpuPools(), "");
  nodes_ = informer(kube::gvr::nodes(), "");
  pods_ = informer(kube::gvr::pods(), "spec.schedulerName=" + opts_.schedulerName);
  shared_->pools = &pools_->store();
  shared_->nodes = &nodes_->store();
  shared_->pods = &pods_->store();
  claims_ = informer(api::gvr::resourceClaims(), "");

  if (health_ != nullptr) {
    health_->addReadinessCheck("informers", [this]() -> Status {
      if (pools_->hasSynced() && nodes_->hasSynced() && pods_->hasSynced()) {
        return okStatus();
      }
      return makeError(errc::kUnavailable,
                       "waiting for the first LIST of GPUPools, Nodes and Pods");
    });
  }
}

ReconfigManager::~ReconfigManager() {
  stop();
}

void ReconfigManager::wakeAll() {
  std::lock_guard lock(mu_);
  changed_ = true;
  for (auto& [name, w] : workers_) {
    w->wake();
  }
  cv_.notify_all();
}

void ReconfigManager::lead() {
  leading_ = true;
  if (metrics_) {
    metrics_->leader.Set(1);
  }
  spdlog::info("reconfig-mgr {} is leading", opts_.identity);
  pools_->waitForSync(std::chrono::seconds(30));
  nodes_->waitForSync(std::chrono::seconds(30));
  pods_->waitForSync(std::chrono::seconds(30));
  if (claimsStarted_) {
    claims_->waitForSync(std::chrono::seconds(30));
  }
  std::unique_lock lock(mu_);
  while (!stopLeading_) {
    changed_ = false;
    std::set<std::string> names;
    for (const auto& obj : pools_->store().list()) {
      names.insert((*obj)["metadata"].value("name", ""));
    }
    for (auto it = workers_.begin(); it != workers_.end();) {
      if (names.count(it->first) == 0 || it->second->exited()) {
        const bool gone = names.count(it->first) == 0;
        const std::string name = it->first;
        auto w = std::move(it->second);
        it = workers_.erase(it);
        lock.unlock();
        w->stop();
        if (gone) {
          // A deleted GPUPool offers nothing: its ResourceSlices go with it (docs/dra.md).
          if (auto r = SlicePublisher(*shared_->client, name).sync(false, {}, {}); !r) {
            spdlog::warn("pool {}: removing its ResourceSlices: {}", name, r.error().message);
          }
        }
        lock.lock();
      } else {
        ++it;
      }
    }
    for (const auto& name : names) {
      if (!name.empty() && workers_.count(name) == 0) {
        auto w = std::make_unique<PoolWorker>(name, *shared_);
        w->start();
        workers_.emplace(name, std::move(w));
      }
    }
    if (metrics_) {
      metrics_->pools.Set(static_cast<double>(workers_.size()));
    }
    cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stopLeading_ || changed_; });
  }
  auto workers = std::move(workers_);
  workers_.clear();
  lock.unlock();
  for (auto& [name, w] : workers) {
    w->stop();
  }
  leading_ = false;
  if (metrics_) {
    metrics_->leader.Set(0);
  }
  spdlog::info("reconfig-mgr {} stopped leading", opts_.identity);
}

Status ReconfigManager::start() {
  if (started_) {
    return okStatus();
  }
  if (auto s = validate(opts_); !s) {
    return s;
  }
  started_ = true;
  pools_->start();
  nodes_->start();
  pods_->start();
  startClaims();
  if (!opts_.leaderElect) {
    direct_ = std::thread([this] { lead(); });
    return okStatus();
  }
  kube::LeaderElectionConfig lc;
  lc.ns = opts_.leaseNamespace;
  lc.name = opts_.leaseName;
  lc.identity = opts_.identity;
  lc.leaseDuration = opts_.leaseDuration;
  lc.renewDeadline = opts_.renewDeadline;
  lc.retryPeriod = opts_.retryPeriod;
  lc.onStartedLeading = [this] {
    {
      std::lock_guard lock(mu_);
      if (stopped_) {
        return;
      }
      stopLeading_ = false;
    }
    lead();
  };
  lc.onStoppedLeading = [this] {
    std::lock_guard lock(mu_);
    stopLeading_ = true;
    cv_.notify_all();
  };
  lc.onNewLeader = [](const std::string& holder) {
    spdlog::info("reconfig-mgr leader: {}", holder);
  };
  auto e = kube::LeaderElector::create(client_, lc);
  if (!e) {
    return e.error();
  }
  elector_ = std::move(*e);
  elector_->start();
  return okStatus();
}

void ReconfigManager::stop() {
  {
    std::lock_guard lock(mu_);
    if (!started_ || stopped_) {
      return;
    }
    stopped_ = true;
    stopLeading_ = true;
  }
  cv_.notify_all();
  if (elector_) {
    elector_->stop();
  }
  if (direct_.joinable()) {
    direct_.join();
  }
  pools_->stop();
  nodes_->stop();
  pods_->stop();
  if (claimsStarted_) {
    claims_->stop();
  }
}

void ReconfigManager::startClaims() {
  // One probe: without resource.k8s.io/v1 there is no DRA path, no informer and no error spam.
  kube::ListOptions probe;
  probe.limit = 1;
  auto r = client_.list(api::gvr::resourceClaims(), "", probe);
  if (!r) {
    if (r.error().isNotFound()) {
      spdlog::info(
          "the API server serves no resource.k8s.io/v1 ResourceClaims: no attach "
          "controller");
    } else {
      spdlog::warn("probing resource.k8s.io/v1 ResourceClaims: {}; no attach controller",
                   r.error().toError().message);
    }
    return;
  }
  claims_->start();
  claimsStarted_ = true;
  shared_->claims = &claims_->store();
}

}  // namespace kc::reconfig
