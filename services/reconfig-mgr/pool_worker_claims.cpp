// The DRA path's attach controller (docs/dra.md "Attach"): for every ResourceClaim whose
// allocation holds a device of this pool's fabric pool, api::nextAttachStep decides what
// happens next: report the binding condition (attached / attach-failed) on the claim's
// status.devices, or move the GPU to the claim's node with the journaled move (kind Claim).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>

#include "libcore/api/dra_binding.hpp"
#include "libcore/api/dra_claim.hpp"
#include "libcore/api/dra_slice.hpp"
#include "libcore/api/names.hpp"
#include "libcore/base/rfc3339.hpp"
#include "services/reconfig-mgr/pool_worker.hpp"

namespace kc::reconfig {

namespace {

// Whether `d` is a device of one of GPUPool `pool`'s DRA pools ("<pool>" or "<pool>/<node>").
bool inOurPools(const api::ClaimDevice& d, const std::string& pool) {
  return d.driver == api::kDraDriverName && api::isDraPoolOf(d.pool, pool);
}

}  // namespace

std::vector<api::Claim> PoolWorker::poolClaims() {
  std::vector<api::Claim> out;
  if (sh_.claims == nullptr) {
    return out;
  }
  for (const auto& obj : sh_.claims->list()) {
    auto c = api::parseClaim(*obj);
    if (!c || !c->allocation) {
      continue;
    }
    for (const auto& d : c->allocation->results) {
      if (inOurPools(d, name_)) {
        out.push_back(std::move(*c));
        break;
      }
    }
  }
  return out;
}

api::HeldDevices PoolWorker::heldDevices(const std::vector<api::PoolGpu>& gpus) {
  api::HeldDevices out;
  std::map<std::string, std::string> byDevice;
  for (const auto& g : gpus) {
    byDevice.emplace(api::draDeviceName(g.id), g.id);
  }
  for (const auto& c : poolClaims()) {
    for (const auto& d : c.allocation->results) {
      if (auto it = byDevice.find(d.device); inOurPools(d, name_) && it != byDevice.end()) {
        out.emplace(it->second, d.pool);
      }
    }
  }
  return out;
}

void PoolWorker::markClaimHolders(PoolView& view) {
  if (sh_.claims == nullptr || !spec_ || !spec_->dra) {
    return;
  }
  std::map<std::string, GpuView*> byDevice;
  for (auto& g : view.gpus) {
    byDevice.emplace(api::draDeviceName(g.info.id), &g);
  }
  for (const auto& obj : sh_.claims->list()) {
    auto c = api::parseClaim(*obj);
    if (!c || !c->allocation) {
      continue;
    }
    for (const auto& d : c->allocation->results) {
      auto it = byDevice.find(d.device);
      if (!inOurPools(d, name_) || it == byDevice.end()) {
        continue;
      }
      const std::string holder = api::claimHolder(c->ns, c->name);
      auto& users = it->second->inUseBy;
      if (std::find(users.begin(), users.end(), holder) == users.end()) {
        users.push_back(holder);
      }
    }
  }
}

bool PoolWorker::publishedWithheld(const std::string& gpu) const {
  // Nothing published by this process yet (a replica that resumed the move): not withheld yet.
  if (!lastSliceInputs_.is_object() || !lastSliceInputs_.contains("gpus")) {
    return false;
  }
  for (const auto& g : lastSliceInputs_["gpus"]) {
    if (g.is_object() && g.value("id", "") == gpu) {
      return g.value("draining", false);
    }
  }
  return false;
}

std::optional<SteadyTime> PoolWorker::draDrainDue() {
  if (!spec_ || !spec_->dra || !journal_.active || journal_.active->phase != MovePhase::kDraining ||
      !publishedWithheld(journal_.active->gpu)) {
    return std::nullopt;
  }
  // The slices just published withhold the draining GPU: the drain goes on once the settle
  // time has passed, not at the next poll (nothing else wakes the worker for its own write).
  if (draWithheldSince_.first != journal_.active->gpu) {
    draWithheldSince_ = {journal_.active->gpu, clock_.now()};
  }
  return draWithheldSince_.second + sh_.opts.draDrainSettle;
}

std::optional<api::UsageReport> PoolWorker::drainUsage(const Move& m) {
  if (!spec_ || !spec_->dra) {
    return usage(m.fromNode);
  }
  // A DRA pool's GPU is withdrawn once the slices published after the move started withhold it
  // (draining), and a moment has passed for an allocation made from the slice before to reach
  // the claims informer; it is in use while a claim other than the move's own holds it, or a
  // pod of the device-plugin path (a pool migrating between paths) still runs on it.
  api::UsageReport out;
  if (auto u = usage(m.fromNode)) {
    if (auto it = u->inUse.find(m.gpu); it != u->inUse.end()) {
      out.inUse[m.gpu] = it->second;
    }
  }
  if (auto view = currentView()) {
    if (const GpuView* g = view->find(m.gpu)) {
      const std::string self = m.forClaim() ? api::claimHolder(m.claimNamespace, m.claimName) : "";
      for (const auto& holder : g->inUseBy) {
        if (holder.rfind("ResourceClaim ", 0) == 0 && holder != self) {
          out.inUse[m.gpu].push_back(holder);
        }
      }
    }
  }
  const bool withheld = publishedWithheld(m.gpu);
  const SteadyTime now = clock_.now();
  if (!withheld) {
    draWithheldSince_ = {};
  } else if (draWithheldSince_.first != m.gpu) {
    draWithheldSince_ = {m.gpu, now};
  }
  if (withheld && now - draWithheldSince_.second >= sh_.opts.draDrainSettle) {
    out.withdrawn.push_back(m.gpu);
  }
  return out;
}

std::vector<api::PoolGpu> PoolWorker::statusGpus() const {
  return api::parsePoolGpus(json{{"metadata", {{"name", name_}}}, {"status", previousStatus_}})
      .gpus;
}

Status PoolWorker::setClaimCondition(const std::string& ns, const std::string& name,
                                     const std::string& uid, const api::ClaimDevice& device,
                                     api::ClaimCondition condition) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    json obj;
    if (attempt == 0) {
      auto cached = sh_.claims->get(ns, name);
      if (!cached) {
        return makeError(errc::kNotFound, "claim " + ns + "/" + name + " is gone");
      }
      obj = *cached;
    } else {
      auto fresh = sh_.client->get(api::gvr::resourceClaims(), ns, name);
      if (!fresh) {
        return fresh.error().toError();
      }
      obj = *fresh;
    }
    auto claim = api::parseClaim(obj);
    if (!claim) {
      return claim.error();
    }
    if (!uid.empty() && claim->uid != uid) {
      return makeError(errc::kNotFound, "claim " + ns + "/" + name + " was replaced");
    }
    const auto* have = claim->condition(device, condition.type);
    if (have != nullptr && have->status == condition.status &&
        have->observedGeneration == claim->generation) {
      return okStatus();  // written already (the informer was behind)
    }
    condition.observedGeneration = claim->generation;
    const auto devices = api::withDeviceCondition(claim->devices, device, condition);
    json list = json::array();
    for (const auto& d : devices) {
      list.push_back(api::toJson(d));
    }
    obj["status"]["devices"] = std::move(list);
    auto r = sh_.client->updateStatus(api::gvr::resourceClaims(), ns, obj);
    if (r) {
      spdlog::info("pool {}: claim {}/{} device {}: {}={} ({})", name_, ns, name, device.device,
                   condition.type, condition.status, condition.reason);
      return okStatus();
    }
    if (!r.error().isConflict()) {
      return r.error().toError();
    }
  }
  return makeError(errc::kConflict, "claim " + ns + "/" + name + ": status kept conflicting");
}

void PoolWorker::reportClaim(const api::Claim& claim, const api::ClaimDevice& device,
                             const api::AttachStep& step) {
  api::ClaimCondition cond;
  const bool ok = step.kind == api::AttachStep::Kind::kReportAttached;
  cond.type = std::string(ok ? api::kAttachedCondition : api::kAttachFailedCondition);
  cond.status = "True";
  cond.reason = step.reason.empty() ? (ok ? "Attached" : "AttachFailed") : step.reason;
  cond.message = step.message;
  cond.lastTransitionTime = formatRfc3339(clock_.wallNow());
  if (auto s = setClaimCondition(claim.ns, claim.name, claim.uid, device, cond); !s) {
    spdlog::warn("pool {}: claim {}/{}: writing {}: {}", name_, claim.ns, claim.name, cond.type,
                 s.error().message);
  }
}

bool PoolWorker::stillWaiting(const api::Claim& claim, const api::ClaimDevice& device) {
  // The claims informer may lag our own condition writes (a failed attach just reported): a move
  // starts only on the API server's word that the device still waits, for the same allocation.
  auto fresh = sh_.client->get(api::gvr::resourceClaims(), claim.ns, claim.name);
  if (!fresh) {
    return false;
  }
  auto c = api::parseClaim(*fresh);
  if (!c || c->uid != claim.uid || !c->allocation || c->allocation != claim.allocation) {
    return false;
  }
  return api::bindingState(*c, device) == api::BindingState::kWaiting;
}

void PoolWorker::startClaimMove(const api::Claim& claim, const api::AttachStep& step) {
  const auto view = currentView();
  if (!view || !spec_ || !movesGate_.allows(clock_.now())) {
    return;
  }
  const GpuView* g = view->find(step.gpuId);
  const auto toHost = spec_->poolHostOf(step.node, step.gpuId);
  if (g == nullptr || !toHost) {
    return;  // not in the inventory yet, or no host of the node on its chassis
  }
  Move m;
  m.kind = MoveKind::kClaim;
  m.gpu = step.gpuId;
  m.fromNode = g->attached() ? g->node : "";
  m.fromHost = g->attached() ? *g->info.hostPort : "";
  m.toNode = step.node;
  m.toHost = *toHost;
  m.claimNamespace = claim.ns;
  m.claimName = claim.name;
  m.claimUid = claim.uid;
  m.phase = g->attached() ? MovePhase::kDraining : MovePhase::kAttaching;
  if (auto s = runner_.start(journal_, m); !s) {
    spdlog::warn("pool {}: cannot start the attach of GPU {} for claim {}: {}", name_, m.gpu,
                 m.claimKey(), s.error().message);
  }
}

void PoolWorker::driveClaims() {
  if (sh_.claims == nullptr || !spec_ || !spec_->dra) {
    return;
  }
  const auto gpus = statusGpus();
  for (const auto& claim : poolClaims()) {
    for (const auto& d : claim.allocation->results) {
      if (!inOurPools(d, name_)) {
        continue;
      }
      const auto step = api::nextAttachStep(claim, d, name_, gpus);
      switch (step.kind) {
        case api::AttachStep::Kind::kReportAttached:
        case api::AttachStep::Kind::kReportFailed:
          reportClaim(claim, d, step);
          break;
        case api::AttachStep::Kind::kAttach:
          if (runner_.canStart(journal_, step.gpuId) && stillWaiting(claim, d)) {
            startClaimMove(claim, step);
          }
          break;
        case api::AttachStep::Kind::kNothing:
          break;
      }
    }
  }
}

bool PoolWorker::claimWaiting(const Move& m) {
  if (sh_.claims == nullptr) {
    return false;
  }
  auto obj = sh_.claims->get(m.claimNamespace, m.claimName);
  if (!obj) {
    return false;
  }
  auto c = api::parseClaim(*obj);
  if (!c || c->uid != m.claimUid || c->deleting || !c->allocation ||
      c->allocation->nodeName != m.toNode) {
    return false;
  }
  const std::string device = api::draDeviceName(m.gpu);
  for (const auto& d : c->allocation->results) {
    if (inOurPools(d, name_) && d.device == device) {
      return api::bindingState(*c, d) == api::BindingState::kWaiting;
    }
  }
  return false;
}

void PoolWorker::markAttachFailures(PoolView& view) {
  const SteadyTime now = clock_.now();
  for (auto it = attachFailed_.begin(); it != attachFailed_.end();) {
    it = it->second.first <= now ? attachFailed_.erase(it) : std::next(it);
  }
  for (auto& g : view.gpus) {
    if (auto f = attachFailed_.find(g.info.id); f != attachFailed_.end() && g.healthy) {
      g.healthy = false;
      g.healthDetail = "withheld after a failed attach: " + f->second.second;
    }
    const auto gb = gpuBackoff_.find(g.info.id);
    const auto cb = chassisBackoff_.find(g.info.chassis);
    const Backoff* b = gb != gpuBackoff_.end() && gb->second.until > now       ? &gb->second
                       : cb != chassisBackoff_.end() && cb->second.until > now ? &cb->second
                                                                               : nullptr;
    g.heldBack = b != nullptr;
  }
}

void PoolWorker::moveFailed(const Move& m) {
  const auto chassis = fabric::splitGpuId(m.gpu);
  const std::string chassisName = chassis ? chassis->chassis : "";
  const bool fabricFailed =
      m.phase == MovePhase::kFailed && !m.cancelled &&
      (lastEndedPhase_ == MovePhase::kDetaching || lastEndedPhase_ == MovePhase::kAttaching ||
       lastEndedPhase_ == MovePhase::kVerifying || lastEndedPhase_ == MovePhase::kRollingBack);
  if (m.phase == MovePhase::kSucceeded) {
    gpuBackoff_.erase(m.gpu);
    chassisBackoff_.erase(chassisName);
    return;
  }
  const auto base = sh_.opts.moveFailureBackoff;
  if (!fabricFailed || base.count() <= 0) {
    return;
  }
  const SteadyTime now = clock_.now();
  auto delay = [&](int n) {
    auto d = base;
    for (int i = 1; i < n && d < sh_.opts.attachFailureHoldoff; ++i) {
      d *= 2;
    }
    return std::min(d, std::max(sh_.opts.attachFailureHoldoff, base));
  };
  Backoff& g = gpuBackoff_[m.gpu];
  ++g.failures;
  const auto gd = delay(g.failures);
  g.until = now + gd;
  g.why = "held back " + std::to_string(gd.count() / 1000) + " s after " +
          std::to_string(g.failures) + " failed move(s): " + m.message;
  Backoff& c = chassisBackoff_[chassisName];
  ++c.failures;
  if (c.failures >= 2) {
    const auto cd = delay(c.failures - 1);
    c.until = now + cd;
    c.why = "chassis " + chassisName + " held back " + std::to_string(cd.count() / 1000) +
            " s after " + std::to_string(c.failures) + " failed moves in a row: " + m.message;
  }
  spdlog::warn("pool {}: {}", name_, c.failures >= 2 ? c.why : g.why);
}

void PoolWorker::claimMoveFailed(const Move& m) {
  if (spec_ && spec_->dra && sh_.opts.attachFailureHoldoff.count() > 0) {
    attachFailed_[m.gpu] = {clock_.now() + sh_.opts.attachFailureHoldoff, m.message};
  }
  if (sh_.claims == nullptr) {
    return;
  }
  auto obj = sh_.claims->get(m.claimNamespace, m.claimName);
  if (!obj) {
    return;
  }
  auto c = api::parseClaim(*obj);
  if (!c || c->uid != m.claimUid || !c->allocation) {
    return;
  }
  const std::string device = api::draDeviceName(m.gpu);
  for (const auto& d : c->allocation->results) {
    if (inOurPools(d, name_) && d.device == device) {
      api::AttachStep step;
      step.kind = api::AttachStep::Kind::kReportFailed;
      step.reason = "AttachFailed";
      step.message = m.message;
      reportClaim(*c, d, step);
      return;
    }
  }
}

void PoolWorker::claimEvent(const Move& m, bool warning, const std::string& reason,
                            const std::string& message) {
  kube::ObjectReference ref;
  ref.kind = "ResourceClaim";
  ref.apiVersion = "resource.k8s.io/v1";
  ref.ns = m.claimNamespace;
  ref.name = m.claimName;
  ref.uid = m.claimUid;
  auto r = sh_.recorder->record(ref, warning ? "Warning" : "Normal", reason, message);
  if (!r) {
    spdlog::debug("event {} on claim {}: {}", reason, m.claimKey(), r.error().toError().message);
  }
}

}  // namespace kc::reconfig
