#include "tools/kube-apiserver-double/resourceclaim_controller.hpp"

#include <algorithm>

#include "tools/kube-apiserver-double/dra_validation.hpp"
#include "tools/kube-apiserver-double/json_access.hpp"

namespace kc::apiserver::claimctl {

using nlohmann::json;

namespace {

const json& metaOf(const json& obj) {
  return member(obj, "metadata");
}

// resourceclaim.Name of k8s.io/dynamic-resource-allocation: which claim a pod claim means.
struct ClaimRef {
  enum class State {
    kNamed,       // `name` (checkOwner: generated from a template, must be owned by the pod)
    kNotNeeded,   // the status records that no claim is needed
    kNotCreated,  // a template claim not generated yet
    kUnknown,     // neither resourceClaimName nor resourceClaimTemplateName (a newer API?)
  };
  State state = State::kUnknown;
  std::string name;
  bool checkOwner = false;
};

ClaimRef claimRefOf(const json& pod, const json& podClaim) {
  using S = ClaimRef::State;
  if (auto name = text(podClaim, "resourceClaimName"); !name.empty()) {
    return {S::kNamed, name, false};
  }
  if (text(podClaim, "resourceClaimTemplateName").empty()) {
    return {S::kUnknown, "", false};
  }
  const json& statuses = member(member(pod, "status"), "resourceClaimStatuses");
  if (statuses.is_array()) {
    for (const auto& s : statuses) {
      if (text(s, "name") == text(podClaim, "name")) {
        const std::string name = text(s, "resourceClaimName");
        return name.empty() ? ClaimRef{S::kNotNeeded, "", false} : ClaimRef{S::kNamed, name, true};
      }
    }
  }
  return {S::kNotCreated, "", true};
}

// resourceclaim.IsForPod: some ownerReference names the pod's uid.
bool ownedBy(const json& claim, const std::string& podUid) {
  const json& refs = member(metaOf(claim), "ownerReferences");
  return refs.is_array() && std::any_of(refs.begin(), refs.end(),
                                        [&](const json& r) { return text(r, "uid") == podUid; });
}

bool reservedFor(const json& claim, const std::string& podUid) {
  const json& reserved = member(member(claim, "status"), "reservedFor");
  return reserved.is_array() && std::any_of(reserved.begin(), reserved.end(), [&](const json& r) {
           return text(r, "uid") == podUid;
         });
}

std::size_t reservationCount(const json& claim) {
  const json& reserved = member(member(claim, "status"), "reservedFor");
  return reserved.is_array() ? reserved.size() : 0;
}

// The claim the pod owns for pod claim `podClaimName` (upstream findPodResourceClaim).
const json* ownedClaimFor(const std::string& podUid, const std::string& podClaimName,
                          const ClaimWorld& world) {
  for (const json* c : world.claimsOwnedBy(podUid)) {
    const json& annotation = member(member(metaOf(*c), "annotations"), kPodClaimNameAnnotation);
    if (annotation.is_string() && annotation == podClaimName) {
      return c;
    }
  }
  return nullptr;
}

void dropFinalizer(json& claim) {
  json& meta = claim["metadata"];
  if (!meta.contains("finalizers") || !meta["finalizers"].is_array()) {
    return;
  }
  json kept = json::array();
  for (const auto& f : meta["finalizers"]) {
    if (f != kDeleteProtectionFinalizer) {
      kept.push_back(f);
    }
  }
  if (kept.empty()) {
    meta.erase("finalizers");
  } else {
    meta["finalizers"] = kept;
  }
}

bool hasDeleteProtection(const json& claim) {
  const json& finalizers = member(metaOf(claim), "finalizers");
  return finalizers.is_array() && std::find(finalizers.begin(), finalizers.end(),
                                            json(kDeleteProtectionFinalizer)) != finalizers.end();
}

void deallocate(json& claim) {
  if (claim.contains("status") && claim["status"].is_object()) {
    claim["status"].erase("allocation");
    claim["status"].erase("devices");  // entries of deallocated devices go with them
  }
}

}  // namespace

std::pair<std::string, std::string> owningPod(const json& claim) {
  const json& refs = member(metaOf(claim), "ownerReferences");
  if (refs.is_array()) {
    for (const auto& r : refs) {
      if (member(r, "controller") == true && text(r, "apiVersion") == "v1" &&
          text(r, "kind") == "Pod") {
        return {text(r, "name"), text(r, "uid")};
      }
    }
  }
  return {"", ""};
}

std::string generateNameFor(const std::string& podName, const std::string& podClaimName) {
  const std::string base = podName + "-" + podClaimName + "-";
  const std::size_t maxBaseLen = 57;  // room for the 5 random characters in 63
  if (base.size() <= maxBaseLen) {
    return base;
  }
  return podName.substr(0, podName.size() * maxBaseLen / base.size()) + "-" +
         podClaimName.substr(0, podClaimName.size() * maxBaseLen / base.size());
}

json claimFromTemplate(const json& pod, const std::string& podClaimName,
                       const json& claimTemplate) {
  const json& meta = metaOf(pod);
  const json& templateMeta = member(member(claimTemplate, "spec"), "metadata");
  json annotations = member(templateMeta, "annotations").is_object()
                         ? member(templateMeta, "annotations")
                         : json::object();
  annotations[kPodClaimNameAnnotation] = podClaimName;
  json claimMeta = {{"generateName", generateNameFor(text(meta, "name"), podClaimName)},
                    {"namespace", text(meta, "namespace")},
                    {"ownerReferences", json::array({{{"apiVersion", "v1"},
                                                      {"kind", "Pod"},
                                                      {"name", text(meta, "name")},
                                                      {"uid", text(meta, "uid")},
                                                      {"controller", true},
                                                      {"blockOwnerDeletion", true}}})},
                    {"annotations", annotations}};
  if (const json& labels = member(templateMeta, "labels"); labels.is_object() && !labels.empty()) {
    claimMeta["labels"] = labels;
  }
  const json& spec = member(member(claimTemplate, "spec"), "spec");
  return {{"apiVersion", std::string(dra::kGroup) + "/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", claimMeta},
          {"spec", spec.is_object() ? spec : json::object()}};
}

PodClaimPlan planPodClaims(const json& pod, const ClaimWorld& world) {
  using S = ClaimRef::State;
  PodClaimPlan plan;
  const json& podClaims = member(member(pod, "spec"), "resourceClaims");
  if (!member(metaOf(pod), "deletionTimestamp").is_null() || !podClaims.is_array()) {
    return plan;  // nothing to do for a pod being deleted
  }
  const std::string uid = text(metaOf(pod), "uid");
  const bool scheduled = !text(member(pod, "spec"), "nodeName").empty();
  for (const auto& podClaim : podClaims) {
    const std::string podClaimName = text(podClaim, "name");
    const ClaimRef ref = claimRefOf(pod, podClaim);
    if (ref.state == S::kNotNeeded || ref.state == S::kUnknown) {
      continue;
    }
    const json* claim = ref.state == S::kNamed ? world.claim(ref.name) : nullptr;
    if (claim && ref.checkOwner && !ownedBy(*claim, uid)) {
      claim = nullptr;  // recorded, but no longer the pod's: make a new one
    }
    if (!claim && !ref.checkOwner) {
      continue;  // a claim by name: its user has to create it
    }
    if (!claim) {
      // Adopt a claim made earlier whose name never reached the pod status, else create.
      if (const json* orphan = ownedClaimFor(uid, podClaimName, world)) {
        claim = orphan;
        plan.adopt[podClaimName] = text(metaOf(*orphan), "name");
      } else {
        const std::string templateName = text(podClaim, "resourceClaimTemplateName");
        if (const json* t = world.claimTemplate(templateName)) {
          plan.create.push_back({podClaimName, claimFromTemplate(pod, podClaimName, *t)});
        } else {
          plan.failures[podClaimName] =
              "PodResourceClaim " + podClaimName + ": resource claim template \"" + templateName +
              "\": resourceclaimtemplate.resource.k8s.io \"" + templateName + "\" not found";
        }
        continue;
      }
    }
    // A pod bound without the scheduler: reserve its allocated claims (the scheduler does
    // that for the pods it binds).
    if (scheduled && !member(member(*claim, "status"), "allocation").is_null() &&
        !reservedFor(*claim, uid) &&
        reservationCount(*claim) < dra::kResourceClaimReservedForMaxSize) {
      plan.reserve.push_back(text(metaOf(*claim), "name"));
    }
  }
  return plan;
}

json withClaimStatuses(const json& pod, const std::map<std::string, std::string>& claims) {
  json next = pod;
  json& status = next["status"];
  if (!status.is_object()) {
    status = json::object();
  }
  json statuses = member(status, "resourceClaimStatuses").is_array()
                      ? status["resourceClaimStatuses"]
                      : json::array();
  for (const auto& [podClaimName, claimName] : claims) {
    auto it = std::find_if(statuses.begin(), statuses.end(),
                           [&](const json& s) { return text(s, "name") == podClaimName; });
    json entry = {{"name", podClaimName}, {"resourceClaimName", claimName}};
    if (it != statuses.end()) {
      *it = entry;
    } else {
      statuses.push_back(entry);
    }
  }
  status["resourceClaimStatuses"] = statuses;
  return next;
}

std::vector<std::string> claimNamesOf(const json& pod) {
  std::vector<std::string> names;
  const json& podClaims = member(member(pod, "spec"), "resourceClaims");
  if (podClaims.is_array()) {
    for (const auto& podClaim : podClaims) {
      const ClaimRef ref = claimRefOf(pod, podClaim);
      if (ref.state == ClaimRef::State::kNamed) {
        names.push_back(ref.name);
      }
    }
  }
  return names;
}

bool isPodDone(const json& pod) {
  const std::string phase = text(member(pod, "status"), "phase");
  return phase == "Succeeded" || phase == "Failed" ||
         (!member(metaOf(pod), "deletionTimestamp").is_null() &&
          text(member(pod, "spec"), "nodeName").empty());
}

ClaimCleanup planClaimCleanup(const json& claim, const ClaimWorld& world) {
  ClaimCleanup out;
  const json& reserved = member(member(claim, "status"), "reservedFor");
  const std::size_t before = reserved.is_array() ? reserved.size() : 0;
  json valid = json::array();
  for (std::size_t i = 0; i < before; ++i) {
    const json& r = reserved[i];
    if (!text(r, "apiGroup").empty() || text(r, "resource") != "pods") {
      valid.push_back(r);  // not a pod: upstream cannot check it either, keep it
      continue;
    }
    const json* pod = world.pod(text(r, "name"));
    if (pod && text(metaOf(*pod), "uid") == text(r, "uid") && !isPodDone(*pod)) {
      valid.push_back(r);
    }
  }
  const bool protectedClaim = hasDeleteProtection(claim);
  out.claim = claim;
  if (valid.size() < before) {
    out.changed = true;
    if (valid.empty()) {
      out.claim["status"].erase("reservedFor");
      if (protectedClaim) {
        deallocate(out.claim);  // the last consumer is gone: free the devices
      }
    } else {
      out.claim["status"]["reservedFor"] = valid;
    }
    if (protectedClaim && member(out.claim["status"], "allocation").is_null()) {
      dropFinalizer(out.claim);
    }
  } else if (protectedClaim && valid.empty() &&
             !member(metaOf(claim), "deletionTimestamp").is_null()) {
    out.changed = true;  // deleted while unused: unblock the removal
    deallocate(out.claim);
    dropFinalizer(out.claim);
  }
  if (out.claim.contains("status") && out.claim["status"].is_object() &&
      out.claim["status"].empty()) {
    out.claim.erase("status");
  }
  if (valid.empty()) {
    // Generated for a pod that will not run (any more): the claim goes. A pod that is gone
    // entirely is left to the garbage collector, as upstream.
    const auto [podName, podUid] = owningPod(claim);
    const json* pod = podName.empty() ? nullptr : world.pod(podName);
    out.deleteClaim = pod && (text(metaOf(*pod), "uid") != podUid || isPodDone(*pod));
  }
  return out;
}

json reservedForPod(const json& claim, const json& pod) {
  json next = claim;
  json& status = next["status"];
  if (!status.is_object()) {
    status = json::object();
  }
  if (!status.contains("reservedFor") || !status["reservedFor"].is_array()) {
    status["reservedFor"] = json::array();
  }
  status["reservedFor"].push_back({{"resource", "pods"},
                                   {"name", text(metaOf(pod), "name")},
                                   {"uid", text(metaOf(pod), "uid")}});
  return next;
}

}  // namespace kc::apiserver::claimctl
