#include "services/reconfig-mgr/pool_worker.hpp"

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

namespace kc::reconfig {

using detail::gpusLabel;
using detail::secondsBuckets;
using detail::secondsSince;

std::optional<api::UsageReport> PoolWorker::usage(const std::string& node) {
  auto n = sh_.nodes->get("", node);
  if (!n) {
    return std::nullopt;
  }
  const json& meta = (*n)["metadata"];
  const auto a = meta.find("annotations");
  if (a == meta.end() || !a->is_object()) {
    return std::nullopt;
  }
  const auto u = a->find(std::string(api::kUsageAnnotation));
  if (u == a->end() || !u->is_string()) {
    return std::nullopt;
  }
  auto r = api::parseUsageReport(u->get<std::string>());
  if (!r) {
    return std::nullopt;
  }
  return *r;
}

bool PoolWorker::podWaiting(const Move& m) {
  if (m.forClaim()) {
    return claimWaiting(m);
  }
  auto obj = sh_.pods->get(m.podNamespace, m.podName);
  if (!obj) {
    return false;
  }
  auto p = parsePodInfo(*obj);
  return p && (m.podUid.empty() || p->uid == m.podUid) && p->waiting() && p->dstNode == m.toNode;
}

std::optional<std::string> PoolWorker::cancelBackground(const Move& m) {
  const auto pods = kubecompPods();
  const auto view = currentView();
  if (!view || !spec_) {
    return std::nullopt;
  }
  return backgroundCancelReason(demandPlan(*view, pods), *view, pods, m);
}

void PoolWorker::quarantine(const std::string& gpu, const std::string& reason) {
  quarantine_[gpu] = reason;
  spdlog::warn("pool {}: GPU {} quarantined: {}", name_, gpu, reason);
  if (sh_.metrics) {
    sh_.metrics->failure("quarantine");
  }
}

void PoolWorker::unsupported(const std::string& message) {
  if (sh_.metrics) {
    sh_.metrics->failure("unsupported");
  }
  const auto reprobe = movesGate_.reprobeInterval();
  const std::string next =
      reprobe.count() > 0 ? "the next move is tried after " + std::to_string(reprobe.count()) + " s"
                          : "no move is tried again until the pool's chassis list changes";
  if (movesGate_.refused(message, clock_.now()) == MovesGate::Transition::kNone) {
    // A re-probe that found the same: the condition stays, no second Event.
    spdlog::warn("pool {}: the fabric still cannot move GPUs: {}; {}", name_, message, next);
    return;
  }
  spdlog::error("pool {}: the fabric cannot move GPUs: {}; {}", name_, message, next);
  poolEvent(true, "MovesUnsupported", "the fabric cannot move GPUs: " + message + "; " + next);
}

void PoolWorker::phaseEnded(const Move& m, MovePhase phase, double seconds) {
  lastEndedPhase_ = phase;
  if (sh_.metrics) {
    sh_.metrics->movePhases.Add({{"phase", std::string(toString(phase))}}, secondsBuckets())
        .Observe(seconds);
  }
  if (m.background() || m.forClaim()) {
    return;  // no pod request to time
  }
  auto& t = timing(m.podKey());
  if (phase != MovePhase::kSucceeded && phase != MovePhase::kFailed) {
    t.reallocation += seconds;
  }
}

void PoolWorker::moveFinished(const Move& m) {
  const bool ok = m.phase == MovePhase::kSucceeded;
  const bool cancelledInBackground = m.background() && m.cancelled;
  if (sh_.metrics) {
    (ok ? sh_.metrics->movesOk : sh_.metrics->movesFailed).Increment();
    if (!ok && !cancelledInBackground) {
      sh_.metrics->failure("move");
    }
    if (m.background()) {
      (ok                      ? sh_.metrics->backgroundOk
       : cancelledInBackground ? sh_.metrics->backgroundCancelled
                               : sh_.metrics->backgroundFailed)
          .Increment();
    }
  }
  spdlog::info("pool {}: move of GPU {} to {} for {}: {} ({})", name_, m.gpu, m.toNode,
               m.requester(), toString(m.phase), m.message);
  if (ok && movesGate_.moved() == MovesGate::Transition::kSupported) {
    spdlog::info("pool {}: the fabric moved GPU {} after a refusal: moves are supported again",
                 name_, m.gpu);
    poolEvent(false, "MovesSupported",
              "the fabric moved GPU " + m.gpu + " to " + m.toNode +
                  " after refusing moves as unsupported; moves go on");
  }
  if (!m.forClaim() && !m.background()) {
    moveFailed(m);  // (or succeeded: the backoff of its GPU and chassis ends)
  }
  if (m.forClaim()) {
    if (!ok && !m.cancelled) {
      claimMoveFailed(m);  // on success the next wake reports Attached (nextAttachStep)
    }
    return;
  }
  if (m.background()) {
    if (!ok && !cancelledInBackground && spec_) {
      // A background move that failed is not tried again at once (no retry storm on a
      // sick chassis): the next one waits for a poll interval.
      idlePauseUntil_ = clock_.now() + std::chrono::seconds(spec_->pollIntervalSeconds);
    }
    return;
  }
  if (ok) {
    auto& t = timing(m.podKey());
    t.gpusMoved += 1;
    t.lastMoveDone = clock_.now();
  }
}

void PoolWorker::poolEvent(bool warning, const std::string& reason, const std::string& message) {
  kube::ObjectReference ref;
  ref.kind = std::string(api::kGpuPoolKind);
  ref.apiVersion = std::string(api::kGpuPoolApiVersion);
  ref.name = name_;
  if (auto obj = poolObject()) {
    ref.uid = (*obj)["metadata"].value("uid", "");
  }
  auto r = sh_.recorder->record(ref, warning ? "Warning" : "Normal", reason, message);
  if (!r) {
    spdlog::debug("event {} on GPUPool {}: {}", reason, name_, r.error().toError().message);
  }
}

void PoolWorker::run() {
  // An unexpected exception (a bug: the parsers return errors) must not take the daemon and
  // every other pool down: it is logged, the worker reloads its journal from the GPUPool, and
  // starts over after a pause. The journal is what was persisted, so nothing is lost.
  while (!stoppingNow()) {
    try {
      loop();
      break;
    } catch (const std::exception& e) {
      spdlog::error("pool {}: internal error, the worker starts over in 1 s: {}", name_, e.what());
      if (sh_.metrics) {
        sh_.metrics->failure("internal");
      }
      reload_ = true;
      waitUntil(clock_.now() + std::chrono::seconds(1));
    }
  }
  if (sh_.metrics) {
    sh_.metrics->forgetPool(name_);  // gone, or no longer ours: no stale gauges
  }
  exited_ = true;
}

void PoolWorker::loop() {
  const std::string where = "pool " + name_;
  bool loaded = false;
  while (true) {
    {
      std::unique_lock lock(mu_);
      if (stopping_) {
        break;
      }
      dirty_ = false;
    }
    auto obj = poolObject();
    if (!obj) {
      syncSlices(json::object(), true);
      break;  // the GPUPool is gone
    }
    if (!loaded || reload_) {
      auto fresh = sh_.client->get(api::gvr::gpuPools(), "", name_);
      if (!fresh) {
        if (fresh.error().isNotFound()) {
          break;
        }
        waitFor(std::chrono::seconds(1));
        continue;
      }
      loadFromObject(*fresh);
      resourceVersion_ = (*fresh)["metadata"].value("resourceVersion", "");
      lastWriteGeneration_ = (*fresh)["metadata"].value("generation", 0);
      loaded = true;
      reload_ = false;
    }
    auto spec = parsePoolSpec(*obj, sh_.opts.secretNamespace);
    if (!spec) {
      specError_ = spec.error().message;
      spec_.reset();
      (void)writeStatus(false);
      waitFor(std::chrono::seconds(30));
      continue;
    }
    specError_.reset();
    spec_ = *spec;
    // A fabric call still running keeps the driver it was made with.
    if ((!driver_ || !driverSpec_.sameFabric(*spec_)) && !runner_.fabricBusy()) {
      if (auto s = buildDriver(); !s) {
        inventoryError_ = s.error().message;
        spdlog::warn("{}: {}", where, s.error().message);
        (void)writeStatus(false);
        waitFor(std::chrono::seconds(5));
        continue;
      }
      if (movesGate_.reset() == MovesGate::Transition::kSupported) {
        poolEvent(false, "MovesSupported", "the pool's chassis changed; moves are tried again");
      }
      inventory_.reset();
    }
    const auto poll = std::chrono::seconds(spec_->pollIntervalSeconds);
    // While a move's fabric call runs, its chassis answers nothing else: the moves' own reads
    // keep the inventory (gpuMoved, inventoryRead) and the poll waits.
    const bool busy = runner_.fabricBusy();
    if (!busy && (!inventory_ || clock_.now() - lastRead_ >= poll)) {
      readInventory();
    }
    SteadyTime wakeAt = busy ? clock_.now() + poll : lastRead_ + poll;
    driveClaims();  // claims first: reports, and the next attach when no move is in flight
    // The move in flight, as far as it can go now.
    for (int i = 0; i < 64 && !stoppingNow(); ++i) {
      auto out = runner_.step(journal_);
      if (out.kind == MoveRunner::Outcome::Kind::kProgressed) {
        continue;
      }
      if (out.kind == MoveRunner::Outcome::Kind::kWaiting) {
        wakeAt = std::min(wakeAt, out.wakeAt);
      }
      // Plan: start what may start beside the moves in flight (nothing while the pool has no
      // room: the paper's serial schedule plans only when no move is in flight).
      const auto perPool = runner_.concurrencyNow().perPool;
      if (perPool != 0 && journal_.active.size() >= perPool) {
        break;
      }
      const auto pods = kubecompPods();
      trackRequests(pods);
      driveClaims();
      const std::size_t before = journal_.active.size();
      planAndStart(pods);
      if (journal_.active.size() == before) {
        break;
      }
    }
    if (const auto reprobe = movesGate_.reprobeAt(); reprobe && *reprobe > clock_.now()) {
      wakeAt = std::min(wakeAt, *reprobe);  // moves refused as unsupported: plan again then
    }
    (void)writeStatus(false);
    if (const auto due = draDrainDue()) {
      wakeAt = std::min(wakeAt, *due);
    }
    waitUntil(wakeAt);
  }
}

void PoolWorker::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
  runner_.joinCalls();  // before the driver they use goes away
}

void PoolWorker::wake() {
  {
    std::lock_guard lock(mu_);
    dirty_ = true;
  }
  cv_.notify_all();
}

}  // namespace kc::reconfig
