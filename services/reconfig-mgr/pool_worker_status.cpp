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

namespace kc::reconfig {

using detail::gpusLabel;
using detail::secondsBuckets;
using detail::secondsSince;

namespace {

// What kubecomp_reconfig_pool_gpus and the move gauges show for one rendered status: each GPU
// in the first state that applies (quarantined, moving, unhealthy, in use, free).
detail::PoolGauges poolGauges(const json& status, const Journal& journal,
                              const Quarantine& quarantine) {
  detail::PoolGauges g;
  std::set<std::string> moving;
  for (const Move& m : journal.active) {
    moving.insert(m.gpu);
    g.inFlight += 1;
    if (auto t = parseRfc3339(m.startedAt)) {
      const double s = std::chrono::duration<double>(t->time_since_epoch()).count();
      g.oldestStart = g.oldestStart == 0 ? s : std::min(g.oldestStart, s);
    }
  }
  for (const api::PoolGpu& gpu : api::parsePoolGpus(json{{"status", status}}).gpus) {
    (quarantine.count(gpu.id) != 0               ? g.quarantined
     : moving.count(gpu.id) != 0 || gpu.draining ? g.moving
     : !gpu.healthy                              ? g.unhealthy
     : !gpu.inUseBy.empty()                      ? g.inUse
                                                 : g.free) += 1;
  }
  return g;
}

}  // namespace

void PoolWorker::loadFromObject(const json& obj) {
  auto parsed = parseJournal(obj);
  for (const auto& p : parsed.problems) {
    spdlog::warn("pool {}: {}", name_, p);
  }
  journal_ = std::move(parsed.journal);
  quarantine_ = parseQuarantine(obj);
  lastWrittenMoves_ = journal_.toJson();
  previousStatus_ = obj.value("status", json::object());
  for (const Move& m : journal_.active) {
    spdlog::info("pool {}: resuming move of GPU {} to {} for {} in phase {}", name_, m.gpu,
                 m.toNode, m.requester(), toString(m.phase));
  }
}

Status PoolWorker::buildDriver() {
  std::vector<std::unique_ptr<fabric::FabricDriver>> drivers;
  for (const ChassisSpec& c : spec_->chassis) {
    std::optional<fabric::Credentials> creds;
    if (!c.secretName.empty()) {
      auto secret = sh_.client->get(kube::GroupVersionResource{"", "v1", "secrets", true},
                                    c.secretNamespace, c.secretName);
      if (!secret) {
        return makeError(errc::kUnavailable, "chassis " + c.name + ": Secret " + c.secretNamespace +
                                                 "/" + c.secretName + ": " +
                                                 secret.error().toError().message);
      }
      const json data = secret->value("data", json::object());
      auto user = base64Decode(data.value("username", std::string()));
      auto pass = base64Decode(data.value("password", std::string()));
      if (!user || !pass || user->empty()) {
        return makeError(errc::kInvalid, "chassis " + c.name + ": Secret " + c.secretNamespace +
                                             "/" + c.secretName +
                                             " lacks base64 keys username and password");
      }
      creds = fabric::Credentials{*user, *pass};
    }
    // The chassis' CA bundle (Secret or ConfigMap) or its explicit insecure switch.
    const CoreObjectReader read = [this](const std::string& resource, const std::string& ns,
                                         const std::string& name) -> Result<json> {
      auto obj = sh_.client->get(kube::GroupVersionResource{"", "v1", resource, true}, ns, name);
      if (!obj) {
        return makeError(errc::kUnavailable, obj.error().toError().message);
      }
      return *obj;
    };
    auto tls = chassisTls(c, read);
    if (!tls) {
      return tls.error();
    }
    if (c.driver == "h3") {
      fabric::H3Options o;
      o.chassis = c.name;
      o.baseUrl = c.endpoint;
      o.gep = c.gep;
      o.gpuModel = c.gpuModel;
      o.policy = sh_.opts.callPolicy;
      o.credentials = creds;
      o.tls = *tls;
      auto d = fabric::H3Driver::create(std::move(o));
      if (!d) {
        return d.error();
      }
      drivers.push_back(std::move(*d));
    } else {
      fabric::RedfishOptions o;
      o.chassis = c.name;
      o.baseUrl = c.endpoint;
      o.auth = c.auth == "basic"  ? fabric::RedfishAuth::kBasic
               : c.auth == "none" ? fabric::RedfishAuth::kNone
                                  : fabric::RedfishAuth::kSession;
      o.credentials = creds;
      o.policy = sh_.opts.callPolicy;
      o.tls = *tls;
      o.style =
          c.style == "fabric" ? fabric::RedfishStyle::kFabric : fabric::RedfishStyle::kComposition;
      o.fabric = c.fabric;
      auto d = fabric::RedfishDriver::create(std::move(o));
      if (!d) {
        return d.error();
      }
      drivers.push_back(std::move(*d));
    }
  }
  auto pool = fabric::FabricPool::create(name_, std::move(drivers));
  if (!pool) {
    return pool.error();
  }
  driver_ = std::move(*pool);
  driverSpec_ = *spec_;
  return okStatus();
}

void PoolWorker::readInventory() {
  const SteadyTime t0 = clock_.now();
  auto inv = driver_->inventory();
  lastRead_ = clock_.now();
  if (inv) {
    if (!inv->skipped.empty() && (!inventory_ || inventory_->skipped != inv->skipped)) {
      for (const auto& why : inv->skipped) {
        spdlog::warn("pool {}: inventory: left out {}", name_, why);
      }
    }
    inventoryRead(*inv);
    if (sh_.metrics) {
      sh_.metrics->readsOk.Increment();
    }
  } else {
    inventoryError_ = inv.error().message;
    spdlog::warn("pool {}: inventory: {}", name_, inv.error().message);
    if (sh_.metrics) {
      sh_.metrics->readsFailed.Increment();
      sh_.metrics->failure("inventory");
    }
  }
  lastReadSeconds_ = secondsSince(t0, lastRead_);
}

UsageByNode PoolWorker::usageByNode() {
  UsageByNode out;
  for (const NodeSpec& n : spec_->nodes) {
    if (auto u = usage(n.name)) {
      out.emplace(n.name, std::move(*u));
    }
  }
  return out;
}

Status PoolWorker::writeStatus(bool journalChange) {
  auto obj = poolObject();
  if (!obj) {
    return makeError(errc::kNotFound, "GPUPool " + name_ + " is gone");
  }
  // An object of a later generation than our last write is newer than it: an operator's
  // quarantine edit there is kept (our write on its resourceVersion would otherwise undo it).
  if (obj->value("metadata", json::object()).value("generation", std::int64_t{0}) >
      lastWriteGeneration_) {
    (void)mergeOperatorQuarantine(quarantine_, parseQuarantine(json{{"status", previousStatus_}}),
                                  parseQuarantine(*obj));
  }
  const auto view = currentView();
  StatusInputs in;
  in.spec = spec_ ? &*spec_ : nullptr;
  PoolSpec empty;
  empty.name = name_;
  if (!spec_) {
    in.spec = &empty;
  }
  in.view = view ? &*view : nullptr;
  in.inventoryError = inventoryError_;
  if (inventory_) {
    in.inventorySkipped = inventory_->skipped;
  }
  for (const auto* backoffs : {&chassisBackoff_, &gpuBackoff_}) {
    for (const auto& [what, b] : *backoffs) {
      if (b.until > clock_.now()) {
        in.movesBackingOff.push_back((backoffs == &gpuBackoff_ ? "GPU " + what + " " : "") + b.why);
      }
    }
  }
  in.movesUnsupported = movesGate_.unsupported();
  in.specError = specError_;
  in.journal = &journal_;
  in.quarantine = &quarantine_;
  in.now = clock_.wallNow();
  in.lastInventoryTime = lastInventoryTime_;
  in.previousStatus = previousStatus_;
  json status = renderStatus(in);
  if (sh_.metrics) {
    sh_.metrics->poolState(name_, poolGauges(status, journal_, quarantine_));
  }
  if (!journalChange && status == previousStatus_) {
    syncSlices(status);
    return okStatus();
  }
  json body = *obj;
  if (!resourceVersion_.empty() &&
      lastWriteGeneration_ == body["metadata"].value("generation", 0)) {
    // Our own last write may not have reached the informer yet.
    body["metadata"]["resourceVersion"] = resourceVersion_;
  }
  body["status"] = status;
  std::optional<PoolView> merged;
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto r = sh_.client->updateStatus(api::gvr::gpuPools(), "", body);
    if (r) {
      previousStatus_ = status;
      lastWrittenMoves_ = status["moves"];
      resourceVersion_ = (*r)["metadata"].value("resourceVersion", "");
      lastWriteGeneration_ = (*r)["metadata"].value("generation", 0);
      syncSlices(status);
      return okStatus();
    }
    if (!r.error().isConflict()) {
      if (sh_.metrics) {
        sh_.metrics->failure("status_write");
      }
      return r.error().toError();
    }
    // Someone changed the object. If the journal there is still ours (a spec edit), write
    // again on the new version; otherwise another writer acts on this pool: stand back.
    auto fresh = sh_.client->get(api::gvr::gpuPools(), "", name_);
    if (!fresh) {
      return fresh.error().toError();
    }
    const json theirs = fresh->value("status", json::object()).value("moves", json::array());
    if (theirs != lastWrittenMoves_) {
      spdlog::warn("pool {}: the move journal was changed by another writer; reloading it", name_);
      loadFromObject(*fresh);
      reload_ = true;
      return makeError(errc::kConflict, "GPUPool " + name_ + ": journal changed by another writer");
    }
    // An operator's quarantine or release since our last write (status.quarantine): kept.
    if (mergeOperatorQuarantine(quarantine_, parseQuarantine(json{{"status", previousStatus_}}),
                                parseQuarantine(*fresh))) {
      merged = currentView();
      in.view = merged ? &*merged : nullptr;
      status = renderStatus(in);
    }
    body = *fresh;
    body["status"] = status;
  }
  return makeError(errc::kConflict, "GPUPool " + name_ + ": status kept conflicting");
}

void PoolWorker::syncSlices(const json& status, bool gone) {
  if (!gone && !spec_) {
    return;  // a spec that cannot be read changes nothing: what was published stays
  }
  const bool dra = !gone && spec_->dra;
  std::vector<std::string> nodes;
  if (spec_ && !gone) {
    for (const NodeSpec& n : spec_->nodes) {
      nodes.push_back(n.name);
    }
  }
  const auto gpus = api::parsePoolGpus(json{{"metadata", {{"name", name_}}}, {"status", status}});
  const api::HeldDevices held = dra ? heldDevices(gpus.gpus) : api::HeldDevices{};
  json inputs{{"dra", dra},
              {"nodes", nodes},
              {"gpus", status.value("gpus", json::array())},
              {"held", held}};
  if (inputs == lastSliceInputs_) {
    return;
  }
  auto r = slices_.sync(dra, nodes, gpus.gpus, held);
  if (!r) {
    spdlog::warn("pool {}: ResourceSlices: {}", name_, r.error().message);
    if (sh_.metrics) {
      sh_.metrics->failure("slice_publish");
    }
    return;  // tried again on the next status render
  }
  lastSliceInputs_ = std::move(inputs);
  if (*r) {
    spdlog::info("pool {}: ResourceSlices {}", name_, dra ? "published" : "removed");
  }
}

}  // namespace kc::reconfig
