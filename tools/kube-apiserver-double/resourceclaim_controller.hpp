#pragma once
// The resourceclaim controller of kube-controller-manager (pkg/controller/resourceclaim), as
// pure decisions over the stored JSON: the double runs it in-process (store_resourceclaims.cpp
// applies the decisions after every write of a pod, claim or claim template), so a pod that
// names a ResourceClaimTemplate gets its claim the way it does on a real cluster.
//
// What it decides, as upstream:
// - for a pod's spec.resourceClaims[] entry with resourceClaimTemplateName, a ResourceClaim
//   created from the template (generateName "<pod>-<claim>-", ownerReference to the pod with
//   controller and blockOwnerDeletion, annotation resource.kubernetes.io/pod-claim-name),
//   recorded in the pod's status.resourceClaimStatuses; an existing claim the pod owns for that
//   entry is adopted instead, so there is never a second one;
// - for a scheduled pod (spec.nodeName set), allocated claims not yet reserved for it get it in
//   status.reservedFor;
// - for a claim, status.reservedFor entries of pods that are gone, replaced (other uid) or done
//   are removed; a claim left without consumers that carries the delete-protection finalizer is
//   deallocated and loses the finalizer; a claim generated for a pod that is done is deleted.

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace kc::apiserver::claimctl {

inline constexpr const char* kPodClaimNameAnnotation = "resource.kubernetes.io/pod-claim-name";
inline constexpr const char* kDeleteProtectionFinalizer =
    "resource.kubernetes.io/delete-protection";

// What the controller reads of one namespace (lookups over the store; null when absent).
struct ClaimWorld {
  std::function<const nlohmann::json*(const std::string& name)> claim;
  std::function<const nlohmann::json*(const std::string& name)> claimTemplate;
  std::function<const nlohmann::json*(const std::string& name)> pod;
  // The claims whose controlling owner is the pod with this uid.
  std::function<std::vector<const nlohmann::json*>(const std::string& podUid)> claimsOwnedBy;
};

struct ClaimCreation {
  std::string podClaimName;
  nlohmann::json claim;  // the ResourceClaim to create (metadata.generateName set)
};

struct PodClaimPlan {
  std::vector<ClaimCreation> create;
  // podClaim name -> existing claim: record in the pod status without creating anything.
  std::map<std::string, std::string> adopt;
  // podClaim name -> why no claim could be made (the FailedResourceClaimCreation event text).
  std::map<std::string, std::string> failures;
  std::vector<std::string> reserve;  // claims to reserve for the (scheduled) pod
};

// The pod's claims: which to create, adopt and reserve. Empty for a pod being deleted.
PodClaimPlan planPodClaims(const nlohmann::json& pod, const ClaimWorld& world);

// The claim the controller creates for pod claim `podClaimName` from `claimTemplate`.
nlohmann::json claimFromTemplate(const nlohmann::json& pod, const std::string& podClaimName,
                                 const nlohmann::json& claimTemplate);
// "<pod>-<claim>-", or, past 57 characters, both names cut in proportion to their lengths
// and joined by "-" (upstream's rule, which then has no trailing hyphen).
std::string generateNameFor(const std::string& podName, const std::string& podClaimName);

// The pod with status.resourceClaimStatuses updated by name (other entries kept).
nlohmann::json withClaimStatuses(const nlohmann::json& pod,
                                 const std::map<std::string, std::string>& claims);

// The claim names a pod uses (spec.resourceClaims resolved through its status), for the
// claims to re-check when the pod goes away or finishes.
std::vector<std::string> claimNamesOf(const nlohmann::json& pod);

// The pod that controls a claim (ownerReference v1 Pod with controller: true): name and uid,
// empty when the claim was not generated for a pod.
std::pair<std::string, std::string> owningPod(const nlohmann::json& claim);

// The pod will not run (again): terminal phase, or deleted before it was scheduled.
bool isPodDone(const nlohmann::json& pod);

struct ClaimCleanup {
  bool changed = false;      // write the claim (status and/or finalizers)
  nlohmann::json claim;      // the claim to write when changed
  bool deleteClaim = false;  // generated for a pod that is done
};

// What the controller does with one claim (upstream syncClaim).
ClaimCleanup planClaimCleanup(const nlohmann::json& claim, const ClaimWorld& world);

// status.reservedFor with the pod appended (upstream reserveForPod).
nlohmann::json reservedForPod(const nlohmann::json& claim, const nlohmann::json& pod);

}  // namespace kc::apiserver::claimctl
