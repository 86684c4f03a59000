#include "libcore/alloc/volume_binding.hpp"

#include <algorithm>
#include <set>

#include "libcore/alloc/node_filter.hpp"

namespace kc::alloc {
namespace {

bool boundToClaim(const PersistentVolume& pv, const VolumeClaim& claim) {
  return pv.claimRef && pv.claimRef->name == claim.name && pv.claimRef->ns == claim.ns &&
         (pv.claimRef->uid.empty() || pv.claimRef->uid == claim.uid);
}

std::string quoted(const std::string& s) {
  return "\"" + s + "\"";
}

// podHasPVCs' checks of one volume's claim: "" when the claim may be used.
std::string claimProblem(const SchedPod& pod, const PodClaimVolume& v, const VolumeClaim* c) {
  if (c == nullptr) {
    return v.ephemeral ? "waiting for ephemeral volume controller to create the "
                         "persistentvolumeclaim " +
                             quoted(v.claim)
                       : "persistentvolumeclaim " + quoted(v.claim) + " not found";
  }
  if (c->lost) {
    return "persistentvolumeclaim " + quoted(c->name) + " bound to non-existent persistentvolume " +
           quoted(c->volumeName);
  }
  if (c->deleting) {
    return "persistentvolumeclaim " + quoted(c->name) + " is being deleted";
  }
  if (v.ephemeral && (c->controllerUid.empty() || c->controllerUid != pod.uid)) {
    return "PVC " + c->ns + "/" + c->name + " was not created for pod " + pod.ns + "/" + pod.name +
           " (pod is not owner)";
  }
  return {};
}

// FindMatchingVolume on the scheduler's path (a node given, delayed binding).
const PersistentVolume* matchingVolume(const VolumeClaim& claim,
                                       const std::vector<const PersistentVolume*>& volumes,
                                       const SchedNode& node,
                                       const std::set<std::string>& excluded) {
  const PersistentVolume* smallest = nullptr;
  for (const PersistentVolume* pv : volumes) {
    if (excluded.count(pv->name) != 0 || (pv->claimRef && !boundToClaim(*pv, claim)) ||
        pv->capacity < claim.storage || pv->block != claim.block || pv->deleting) {
      continue;
    }
    const bool reachable = volumeReachableFrom(*pv, node);
    if (boundToClaim(*pv, claim)) {
      return reachable ? pv : nullptr;  // pre-bound to this claim: this PV or none
    }
    if (pv->phase != "Available" ||
        (claim.selector && !matchesLabelSelector(*claim.selector, pv->labels)) ||
        pv->storageClass != claim.storageClass || !reachable ||
        (pv->accessModes & claim.accessModes) != claim.accessModes) {
      continue;
    }
    if (smallest == nullptr || pv->capacity < smallest->capacity) {
      smallest = pv;
    }
  }
  return smallest;
}

// checkVolumeProvisions: whether every claim can be provisioned for the node.
bool provisionable(const VolumeCatalog& catalog, const std::vector<const VolumeClaim*>& claims,
                   const SchedNode& node) {
  for (const VolumeClaim* c : claims) {
    const StorageClass* cls = catalog.storageClass(c->storageClass);
    if (cls == nullptr || cls->provisioner.empty() || cls->provisioner == kNoProvisioner ||
        !topologyAllows(cls->allowedTopologies, node.labels)) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool volumeReachableFrom(const PersistentVolume& pv, const SchedNode& node) {
  if (!pv.nodeAffinity) {
    return true;
  }
  const StringMap& labels = node.labels;
  return std::any_of(pv.nodeAffinity->begin(), pv.nodeAffinity->end(), [&](const auto& term) {
    if (term.matchExpressions.empty() && term.matchFields.empty()) {
      return false;
    }
    const bool exprs = std::all_of(
        term.matchExpressions.begin(), term.matchExpressions.end(),
        [&](const SelectorRequirement& r) { return matchesLabelRequirement(r, labels); });
    // The node checked has no name: metadata.name is "" here.
    const bool fields =
        std::all_of(term.matchFields.begin(), term.matchFields.end(), [](const auto& r) {
          const bool in = std::find(r.values.begin(), r.values.end(), "") != r.values.end();
          return r.op == SelectorOperator::In ? in : !in;
        });
    return exprs && fields;
  });
}

bool topologyAllows(const std::vector<TopologySelectorTerm>& terms, const StringMap& labels) {
  if (terms.empty()) {
    return true;
  }
  return std::any_of(terms.begin(), terms.end(), [&](const TopologySelectorTerm& t) {
    return !t.matchLabelExpressions.empty() &&
           std::all_of(
               t.matchLabelExpressions.begin(), t.matchLabelExpressions.end(), [&](const auto& e) {
                 auto l = labels.find(e.first);
                 return l != labels.end() &&
                        std::find(e.second.begin(), e.second.end(), l->second) != e.second.end();
               });
  });
}

std::optional<VolumeBindingState> prepareVolumeBinding(const SchedPod& pod,
                                                       const VolumeCatalog& catalog) {
  if (pod.claimVolumes.empty()) {
    return std::nullopt;
  }
  VolumeBindingState state;
  state.catalog = &catalog;
  for (const PodClaimVolume& v : pod.claimVolumes) {
    if (std::string why = claimProblem(pod, v, catalog.claim(pod.ns + "/" + v.claim));
        !why.empty()) {
      state.rejectAll = std::move(why);
      return state;
    }
  }
  std::set<std::string> seen;
  for (const PodClaimVolume& v : pod.claimVolumes) {
    const VolumeClaim* c = catalog.claim(pod.ns + "/" + v.claim);
    if (!seen.insert(v.claim).second) {
      continue;  // two volumes of one claim: one claim to bind
    }
    if (c->fullyBound()) {
      state.bound.push_back(c);
      continue;
    }
    const StorageClass* cls =
        c->storageClass.empty() ? nullptr : catalog.storageClass(c->storageClass);
    if (cls != nullptr && cls->bindingMode == VolumeBindingMode::WaitForFirstConsumer &&
        c->volumeName.empty()) {
      state.delayed.push_back(c);
    } else {
      state.rejectAll = std::string(kReasonUnboundImmediateClaims);
    }
  }
  return state;
}

PodVolumePlan findPodVolumes(const VolumeBindingState& state, const SchedNode& node) {
  PodVolumePlan plan;
  bool boundReachable = true;
  bool boundFound = true;
  for (const VolumeClaim* c : state.bound) {
    const PersistentVolume* pv = state.catalog->volume(c->volumeName);
    if (pv == nullptr) {
      boundFound = false;
      break;
    }
    if (!volumeReachableFrom(*pv, node)) {
      boundReachable = false;
      break;
    }
  }
  bool unboundServed = true;
  std::vector<const VolumeClaim*> toMatch;
  std::vector<const VolumeClaim*> toProvision;
  for (const VolumeClaim* c : state.delayed) {
    if (c->selectedNode) {
      if (*c->selectedNode != node.name) {
        unboundServed = false;  // being provisioned for another node
        toMatch.clear();
        toProvision.clear();
        break;
      }
      toProvision.push_back(c);
    } else {
      toMatch.push_back(c);
    }
  }
  // Smallest request first, so that each gets the smallest PV that fits.
  std::stable_sort(toMatch.begin(), toMatch.end(), [](const VolumeClaim* a, const VolumeClaim* b) {
    return a->storage < b->storage;
  });
  std::set<std::string> chosen;
  for (const VolumeClaim* c : toMatch) {
    const PersistentVolume* pv =
        matchingVolume(*c, state.catalog->volumesOfClass(c->storageClass), node, chosen);
    if (pv == nullptr) {
      unboundServed = false;
      toProvision.push_back(c);
      continue;
    }
    chosen.insert(pv->name);
    plan.bindings.push_back(StaticBinding{c->key(), pv->name});
  }
  if (!toProvision.empty()) {
    unboundServed = provisionable(*state.catalog, toProvision, node);
    for (const VolumeClaim* c : toProvision) {
      plan.provisions.push_back(c->key());
    }
  }
  if (!boundReachable) {
    plan.reasons.emplace_back(kReasonVolumeNodeConflict);
  }
  if (!unboundServed) {
    plan.reasons.emplace_back(kReasonVolumeBindConflict);
  }
  if (!boundFound) {
    plan.reasons.emplace_back(kReasonVolumePvNotExist);
  }
  if (!plan.reasons.empty()) {
    plan.bindings.clear();
    plan.provisions.clear();
  }
  return plan;
}

std::vector<std::string> volumeBindingFilter(const VolumeBindingState& state,
                                             const SchedNode& node) {
  if (!state.rejectAll.empty()) {
    return {state.rejectAll};
  }
  return findPodVolumes(state, node).reasons;
}

}  // namespace kc::alloc
