// kubecomp-sched's writes on the DRA path (docs/dra.md "kubecomp-sched"): a ResourceClaim's
// status.allocation and status.reservedFor written as kube-scheduler writes them (results with
// the devices' binding conditions, a nodeSelector for the node, allocationTimestamp; the pod as
// the consumer), through the status subresource with optimistic concurrency; and cleared again
// when the binding fails or times out, so the pod can be placed again.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "libcore/api/dra_claim.hpp"
#include "libcore/api/names.hpp"
#include "libcore/base/rfc3339.hpp"
#include "services/kubecomp-sched/scheduler.hpp"

namespace kc::sched {

using nlohmann::json;

namespace {

std::pair<std::string, std::string> split(const std::string& key) {
  const auto slash = key.find('/');
  return {key.substr(0, slash), key.substr(slash + 1)};
}

bool hasDeleteProtection(const json& obj) {
  const json& meta = obj.value("metadata", json::object());
  const json fin = meta.value("finalizers", json::array());
  return fin.is_array() &&
         std::find(fin.begin(), fin.end(),
                   json(std::string(api::kClaimDeleteProtectionFinalizer))) != fin.end();
}

// `obj` with the delete-protection finalizer put on (`on`) or taken off.
json withDeleteProtection(json obj, bool on) {
  json& meta = obj["metadata"];
  json kept = json::array();
  if (meta.contains("finalizers") && meta["finalizers"].is_array()) {
    for (const auto& f : meta["finalizers"]) {
      if (f != std::string(api::kClaimDeleteProtectionFinalizer)) {
        kept.push_back(f);
      }
    }
  }
  if (on) {
    kept.push_back(std::string(api::kClaimDeleteProtectionFinalizer));
  }
  if (kept.empty()) {
    meta.erase("finalizers");
  } else {
    meta["finalizers"] = kept;
  }
  return obj;
}

bool reservedForPod(const api::Claim& c, const std::string& uid) {
  for (const auto& r : c.reservedFor) {
    if (r.resource == "pods" && r.uid == uid) {
      return true;
    }
  }
  return false;
}

}  // namespace

void Scheduler::startDra() {
  // One probe: without resource.k8s.io/v1 there is no DRA path and no informer errors.
  kube::ListOptions probe;
  probe.limit = 1;
  auto r = client_.list(api::gvr::resourceClaims(), "", probe);
  if (!r) {
    spdlog::info("resource.k8s.io/v1 ResourceClaims not served ({}): pods with claims wait",
                 r.error().toError().message);
    return;
  }
  draServed_ = true;
  classes_->start();
  claims_->start();
}

Status Scheduler::writeAllocation(const Action& a, const std::string& claim,
                                  const std::vector<DraPick>& picks) {
  const auto [ns, name] = split(claim);
  api::ClaimAllocation allocation;
  for (const DraPick& p : picks) {
    allocation.results.push_back(p.device);
  }
  allocation.nodeName = a.node;
  allocation.allocationTimestamp = formatRfc3339(clock_.wallNow());
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto obj = client_.get(api::gvr::resourceClaims(), ns, name);
    if (!obj) {
      return obj.error().toError();
    }
    auto c = api::parseClaim(*obj);
    if (!c) {
      return c.error();
    }
    if (c->allocation) {
      if (reservedForPod(*c, a.uid) && c->allocation->results == allocation.results) {
        return okStatus();  // written already (a retry after a lost answer)
      }
      return makeError(errc::kConflict, "ResourceClaim " + claim + " was allocated meanwhile");
    }
    json body = *obj;
    if (!hasDeleteProtection(body)) {
      // As kube-scheduler: the finalizer first, so that the resourceclaim controller
      // deallocates the claim once its pods are done and nobody deletes it while allocated.
      auto u = client_.update(api::gvr::resourceClaims(), ns, withDeleteProtection(body, true));
      if (!u) {
        if (u.error().isConflict()) {
          continue;
        }
        return u.error().toError();
      }
      body = *u;
    }
    body["status"]["allocation"] = api::toJson(allocation);
    body["status"]["reservedFor"] =
        json::array({{{"resource", "pods"}, {"name", a.name}, {"uid", a.uid}}});
    auto w = client_.updateStatus(api::gvr::resourceClaims(), ns, body);
    if (w) {
      return okStatus();
    }
    if (!w.error().isConflict()) {
      return w.error().toError();
    }
  }
  return makeError(errc::kConflict, "ResourceClaim " + claim + ": status kept conflicting");
}

Status Scheduler::clearAllocation(const Action& a, const std::string& claim) {
  const auto [ns, name] = split(claim);
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto obj = client_.get(api::gvr::resourceClaims(), ns, name);
    if (!obj) {
      return obj.error().isNotFound() ? okStatus() : obj.error().toError();
    }
    auto c = api::parseClaim(*obj);
    if (!c) {
      return c.error();
    }
    if (!c->allocation) {
      return okStatus();
    }
    if (!c->reservedFor.empty() && !(c->reservedFor.size() == 1 && reservedForPod(*c, a.uid))) {
      return makeError(errc::kConflict,
                       "ResourceClaim " + claim + " is in use by another consumer");
    }
    json body = *obj;
    body["status"].erase("allocation");
    body["status"].erase("reservedFor");
    body["status"].erase("devices");
    auto w = client_.updateStatus(api::gvr::resourceClaims(), ns, body);
    if (w) {
      // Unallocated: the finalizer has nothing left to protect (as the controller drops it).
      if (hasDeleteProtection(*w)) {
        if (auto u =
                client_.update(api::gvr::resourceClaims(), ns, withDeleteProtection(*w, false));
            !u && !u.error().isNotFound()) {
          spdlog::warn("ResourceClaim {}: removing finalizer {}: {}", claim,
                       api::kClaimDeleteProtectionFinalizer, u.error().toError().message);
        }
      }
      return okStatus();
    }
    if (!w.error().isConflict()) {
      return w.error().toError();
    }
  }
  return makeError(errc::kConflict, "ResourceClaim " + claim + ": status kept conflicting");
}

void Scheduler::clearAllocations(const Action& a) {
  for (const std::string& claim : a.clearClaims) {
    if (auto s = clearAllocation(a, claim); !s) {
      spdlog::warn("pod {}: clearing the allocation of ResourceClaim {}: {}", a.key, claim,
                   s.error().message);
    }
  }
}

void Scheduler::executeAllocate(const Action& a) {
  if (!a.message.empty()) {
    // A gang member on the DRA path (sched_dra.cpp): say that it is placed without its gang.
    event(a, "Warning", std::string(kReasonGangNotCovered), a.message);
  }
  std::map<std::string, std::vector<DraPick>> byClaim;
  for (const DraPick& p : a.picks) {
    byClaim[p.claim].push_back(p);
  }
  Action undo = a;
  for (const auto& [claim, picks] : byClaim) {
    if (auto s = writeAllocation(a, claim, picks); !s) {
      spdlog::warn("pod {}: allocating ResourceClaim {}: {}", a.key, claim, s.error().message);
      clearAllocations(undo);
      cache_.allocateDone(a.key, false, clock_.now());
      noteError();
      event(a, "Warning", "FailedScheduling",
            "allocating ResourceClaim " + claim + ": " + s.error().message);
      return;
    }
    undo.clearClaims.push_back(claim);
  }
  cache_.allocateDone(a.key, true, clock_.now());
  if (a.bindNow) {
    executeBind(a);
    return;
  }
  noteReconfigRequest();
  const std::string gpus =
      std::to_string(a.deficit) + " gpu.kubecomp.io device" + (a.deficit == 1 ? "" : "s");
  event(a, "Normal", "Reconfig",
        "Pod " + a.key + " needs reconfiguration: " + gpus + " to attach to node " + a.node +
            " (ResourceClaim binding conditions)");
  setCondition(a, std::string(kReasonWaitingForReconfig),
               "waiting for " + gpus + " to be attached to node " + a.node);
}

}  // namespace kc::sched
