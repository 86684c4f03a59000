// The resourceclaim controller, in-process: after a write of a pod, ResourceClaim or
// ResourceClaimTemplate the store applies claimctl's decisions (resourceclaim_controller.hpp)
// at once, under the store's lock, the way the PodDisruptionBudget status is kept current.
// Its own writes do not re-enter it (reconcilingClaims_); each decision is idempotent, so the
// next write of the same objects converges to the same state.

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "tools/kube-apiserver-double/json_access.hpp"
#include "tools/kube-apiserver-double/resourceclaim_controller.hpp"
#include "tools/kube-apiserver-double/store_internal.hpp"

namespace kc::apiserver {

namespace {
const char* const kPodTable = "/pods";
const char* const kClaimTable = "resource.k8s.io/resourceclaims";
const char* const kTemplateTable = "resource.k8s.io/resourceclaimtemplates";
const char* const kFailedCreation = "FailedResourceClaimCreation";

// A pod's spec.resourceClaims (null when it has none); read in place, never copied: this
// runs on every pod write.
const json& podClaimsOf(const json& pod) {
  return member(member(pod, "spec"), "resourceClaims");
}

bool usesTemplate(const json& pod, const std::string& templateName) {
  const json& podClaims = podClaimsOf(pod);
  return podClaims.is_array() &&
         std::any_of(podClaims.begin(), podClaims.end(), [&](const json& pc) {
           return text(pc, "resourceClaimTemplateName") == templateName;
         });
}
}  // namespace

void ObjectStore::reconcileResourceClaimsLocked(const std::string& tableKey,
                                                const ObjectPtr& changed, bool deleted) {
  if (reconcilingClaims_) {
    return;  // one of the controller's own writes
  }
  if (tableKey == kPodTable) {
    const json& podClaims = podClaimsOf(changed->object);
    if (!podClaims.is_array() || podClaims.empty()) {
      return;  // most pods: nothing to do, at no cost
    }
  } else if (tableKey != kClaimTable && tableKey != kTemplateTable) {
    return;
  }
  reconcilingClaims_ = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{reconcilingClaims_};
  const std::string& ns = changed->ns;
  if (tableKey == kPodTable) {
    // A pod that is gone or will not run releases its claims.
    if (deleted || claimctl::isPodDone(changed->object)) {
      for (const auto& claim : claimctl::claimNamesOf(changed->object)) {
        syncClaimLocked(ns, claim);
      }
    }
    if (!deleted) {
      syncPodClaimsLocked(ns, changed->name);
    }
  } else if (tableKey == kClaimTable) {
    if (!deleted) {
      syncClaimLocked(ns, changed->name);
    }
    // Its pod may want a new claim (this one was deleted) or a reservation (allocated now).
    if (auto [podName, podUid] = claimctl::owningPod(changed->object); !podName.empty()) {
      syncPodClaimsLocked(ns, podName);
    }
  } else if (!deleted) {
    // A template appeared: the pods that waited for it get their claims.
    for (const auto& pod : inNamespaceLocked(kPodTable, ns)) {
      if (usesTemplate(pod->object, changed->name)) {
        syncPodClaimsLocked(ns, pod->name);
      }
    }
  }
}

claimctl::ClaimWorld ObjectStore::claimWorldLocked(const std::string& ns) const {
  auto lookup = [this, ns](const char* tableKey) {
    return [this, ns, tableKey](const std::string& name) -> const json* {
      const Table* t = findTable(tableKey);
      auto it = t ? t->objects.find(ns + "/" + name) : decltype(t->objects.end()){};
      return t && it != t->objects.end() ? &it->second->object : nullptr;
    };
  };
  claimctl::ClaimWorld world;
  world.claim = lookup(kClaimTable);
  world.claimTemplate = lookup(kTemplateTable);
  world.pod = lookup(kPodTable);
  world.claimsOwnedBy = [this](const std::string& podUid) {
    std::vector<const json*> out;
    auto deps = dependents_.find(podUid);
    const Table* t = findTable(kClaimTable);
    if (deps == dependents_.end() || !t) {
      return out;
    }
    for (const auto& [tableKey, key] : deps->second) {
      auto it = tableKey == kClaimTable ? t->objects.find(key) : t->objects.end();
      if (it != t->objects.end() && claimctl::owningPod(it->second->object).second == podUid) {
        out.push_back(&it->second->object);
      }
    }
    return out;
  };
  return world;
}

void ObjectStore::syncPodClaimsLocked(const std::string& ns, const std::string& podName) {
  const ResourceInfo* pods = registry_.findByTable(kPodTable);
  const ResourceInfo* claims = registry_.findByTable(kClaimTable);
  const Table* podTable = findTable(kPodTable);
  auto it =
      podTable ? podTable->objects.find(ns + "/" + podName) : decltype(podTable->objects.end()){};
  if (!podTable || it == podTable->objects.end() || !claims) {
    return;
  }
  const ObjectPtr pod = it->second;
  // The plan holds copies: the writes below replace the objects the lookups pointed at.
  claimctl::PodClaimPlan plan = claimctl::planPodClaims(pod->object, claimWorldLocked(ns));
  std::map<std::string, std::string> record = plan.adopt;
  for (auto& creation : plan.create) {
    try {
      record[creation.podClaimName] = createLocked(*claims, ns, std::move(creation.claim))->name;
    } catch (const ApiError& e) {
      plan.failures[creation.podClaimName] =
          "PodResourceClaim " + creation.podClaimName + ": create ResourceClaim: " + e.what();
    }
  }
  for (const auto& [podClaim, message] : plan.failures) {
    recordClaimEventLocked(pod, message);
  }
  if (!record.empty()) {
    json next = claimctl::withClaimStatuses(pod->object, record);
    if (next != pod->object) {
      commit(*pods, objectKey(*pods, ns, podName), pod, std::move(next));
    }
  }
  for (const auto& name : plan.reserve) {
    const Table* t = findTable(kClaimTable);
    auto c = t ? t->objects.find(ns + "/" + name) : decltype(t->objects.end()){};
    if (t && c != t->objects.end()) {
      ObjectPtr claim = c->second;
      commit(*claims, claim->ns + "/" + claim->name, claim,
             claimctl::reservedForPod(claim->object, pod->object));
    }
  }
}

void ObjectStore::syncClaimLocked(const std::string& ns, const std::string& name) {
  const ResourceInfo* claims = registry_.findByTable(kClaimTable);
  const Table* t = findTable(kClaimTable);
  auto it = t ? t->objects.find(ns + "/" + name) : decltype(t->objects.end()){};
  if (!claims || !t || it == t->objects.end()) {
    return;
  }
  ObjectPtr current = it->second;
  claimctl::ClaimCleanup cleanup =
      claimctl::planClaimCleanup(current->object, claimWorldLocked(ns));
  if (cleanup.changed) {
    if (hasDeletionTimestamp(cleanup.claim) && finalizersOf(cleanup.claim).empty()) {
      // The delete-protection finalizer was the last one: the claim goes now.
      auto finalState = std::make_shared<StoredObject>(*current);
      finalState->object = std::move(cleanup.claim);
      finalRemove(*claims, finalState);
      return;
    }
    current = commit(*claims, ns + "/" + name, current, std::move(cleanup.claim));
  }
  if (cleanup.deleteClaim && !hasDeletionTimestamp(current->object)) {
    removeLocked(*claims, current, policyOnly("Background"));
  }
}

// A Warning event on the pod, as the controller's event recorder writes it (source
// resource_claim). One per pod and message: the real recorder counts repeats of a retried
// sync, the double syncs on every write and keeps the first.
void ObjectStore::recordClaimEventLocked(const ObjectPtr& pod, const std::string& message) {
  const ResourceInfo* events = registry_.find("", "v1", "events");
  for (const auto& e : inNamespaceLocked(events->tableKey(), pod->ns)) {
    const json& involved = member(e->object, "involvedObject");
    if (str(involved, "uid") == pod->uid && str(e->object, "reason") == kFailedCreation &&
        str(e->object, "message") == message) {
      return;
    }
  }
  const auto nanos =
      std::chrono::duration_cast<std::chrono::nanoseconds>(options_.clock().time_since_epoch())
          .count();
  char suffix[24];
  std::snprintf(suffix, sizeof suffix, "%llx", static_cast<unsigned long long>(nanos));
  const std::string now = timestamp();
  json event = {{"metadata", {{"name", pod->name + "." + suffix}, {"namespace", pod->ns}}},
                {"involvedObject",
                 {{"kind", "Pod"},
                  {"namespace", pod->ns},
                  {"name", pod->name},
                  {"uid", pod->uid},
                  {"apiVersion", "v1"},
                  {"resourceVersion", std::to_string(pod->resourceVersion)}}},
                {"reason", kFailedCreation},
                {"message", message},
                {"source", {{"component", "resource_claim"}}},
                {"firstTimestamp", now},
                {"lastTimestamp", now},
                {"count", 1},
                {"type", "Warning"},
                {"reportingComponent", "resource_claim"},
                {"reportingInstance", ""}};
  try {
    createLocked(*events, pod->ns, std::move(event));
  } catch (const ApiError&) {
    // A terminating namespace or a name taken in the same nanosecond: the event is a courtesy.
  }
}

}  // namespace kc::apiserver
