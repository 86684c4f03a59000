#include "tools/kubelet-standin/dra_rules.hpp"

#include <algorithm>

#include "libcore/api/dra_claim.hpp"
#include "tools/kubelet-standin/admission.hpp"

namespace kc::kubelet {
namespace {

using nlohmann::json;

const json& member(const json& obj, const char* key) {
  static const json kNull;
  if (!obj.is_object()) {
    return kNull;
  }
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

std::string text(const json& obj, const char* key) {
  const json& v = member(obj, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

// Go's %q of a []string: ["a" "b"].
std::string goQuoted(const std::vector<std::string>& list) {
  std::string out = "[";
  for (std::size_t i = 0; i < list.size(); ++i) {
    out += (i == 0 ? "\"" : " \"") + list[i] + "\"";
  }
  return out + "]";
}

// metav1.IsControlledBy: an ownerReference with controller true and the owner's uid.
bool controlledBy(const json& claim, const std::string& ownerUid) {
  const json& refs = member(member(claim, "metadata"), "ownerReferences");
  if (!refs.is_array()) {
    return false;
  }
  return std::any_of(refs.begin(), refs.end(), [&](const json& r) {
    const json& controller = member(r, "controller");
    return controller.is_boolean() && controller.get<bool>() && text(r, "uid") == ownerUid;
  });
}

}  // namespace

std::string_view serviceName(DraService s) {
  return s == DraService::kV1 ? kDraServiceV1 : kDraServiceV1beta1;
}

Result<DraService> chooseDraService(const std::vector<std::string>& supported) {
  if (supported.empty()) {
    return makeError(errc::kInvalid,
                     "empty list of supported gRPC services (aka supported versions)");
  }
  for (const auto& s : supported) {
    if (s == kDraServiceV1) {
      return DraService::kV1;
    }
    if (s == kDraServiceV1beta1) {
      return DraService::kV1beta1;
    }
  }
  return makeError(errc::kInvalid,
                   "none of services supported by the plugin (" + goQuoted(supported) +
                       ") are supported by the kubelet (" +
                       goQuoted({std::string(kDraServiceV1), std::string(kDraServiceV1beta1)}) +
                       ")");
}

Status validateDraPlugin(const std::string& driver, const std::string& endpoint,
                         const std::vector<std::string>& supported) {
  if (auto s = chooseDraService(supported); !s) {
    return makeError(errc::kInvalid, "invalid supported gRPC versions of DRA driver plugin " +
                                         driver + " at endpoint " + endpoint + ": " +
                                         s.error().message);
  }
  if (!isDnsSubdomain(driver)) {
    return makeError(errc::kInvalid, "invalid DRA driver name \"" + driver +
                                         "\": a DRA driver name must be a DNS subdomain");
  }
  if (endpoint.empty() || endpoint.front() != '/') {
    return makeError(errc::kInvalid, "endpoint " + endpoint + " of DRA driver plugin " + driver +
                                         " is not an absolute path");
  }
  return okStatus();
}

Result<std::vector<PodClaimName>> podClaimNames(const json& pod) {
  auto refs = api::podClaimRefs(pod);
  if (!refs) {
    return refs.error();
  }
  const json& meta = member(pod, "metadata");
  std::vector<PodClaimName> out;
  for (const auto& r : *refs) {
    if (r.claimName.empty()) {
      // resourceclaim.Name with ErrClaimNotFound.
      return makeError(errc::kNotFound, "pod \"" + text(meta, "namespace") + "/" +
                                            text(meta, "name") +
                                            "\": ResourceClaim not created yet");
    }
    out.push_back({r.name, r.claimName, r.fromTemplate});
  }
  return out;
}

Result<ClaimInfo> claimForPod(const json& pod, const PodClaimName& ref, const json& claim) {
  const json& podMeta = member(pod, "metadata");
  const std::string podNs = text(podMeta, "namespace");
  const std::string podName = text(podMeta, "name");
  const std::string podUid = text(podMeta, "uid");
  auto parsed = api::parseClaim(claim);
  if (!parsed) {
    return parsed.error();
  }
  const api::Claim& c = *parsed;
  if (ref.fromTemplate && (c.ns != podNs || !controlledBy(claim, podUid))) {
    // resourceclaim.IsForPod.
    return makeError(errc::kInvalid, "ResourceClaim " + c.ns + "/" + c.name +
                                         " was not created for pod " + podNs + "/" + podName +
                                         " (pod is not owner)");
  }
  const bool reserved = std::any_of(c.reservedFor.begin(), c.reservedFor.end(),
                                    [&](const api::ClaimConsumer& r) { return r.uid == podUid; });
  if (!reserved) {
    return makeError(errc::kFailedPrecondition, "pod " + podName + " (" + podUid +
                                                    ") is not allowed to use ResourceClaim " +
                                                    ref.claim + " (" + c.uid + ")");
  }
  if (!c.allocation) {
    return makeError(errc::kFailedPrecondition, "ResourceClaim " + c.name + ": not allocated");
  }
  ClaimInfo info;
  info.ns = c.ns;
  info.name = c.name;
  info.uid = c.uid;
  for (const auto& d : c.allocation->results) {
    info.drivers[d.driver];
  }
  return info;
}

std::map<std::string, std::vector<std::string>> containerClaims(const json& pod) {
  std::map<std::string, std::string> byEntry;  // entry name -> claim name
  if (auto refs = api::podClaimRefs(pod)) {
    for (const auto& r : *refs) {
      if (!r.claimName.empty()) {
        byEntry[r.name] = r.claimName;
      }
    }
  }
  std::map<std::string, std::vector<std::string>> out;
  const json& spec = member(pod, "spec");
  for (const char* list : {"initContainers", "containers"}) {
    const json& containers = member(spec, list);
    if (!containers.is_array()) {
      continue;
    }
    for (const json& c : containers) {
      const json& claims = member(member(c, "resources"), "claims");
      if (!claims.is_array()) {
        continue;
      }
      for (const json& used : claims) {
        auto it = byEntry.find(text(used, "name"));
        if (it != byEntry.end()) {
          out[text(c, "name")].push_back(it->second);
        }
      }
    }
  }
  return out;
}

bool usesResourceClaims(const json& pod) {
  const json& claims = member(member(pod, "spec"), "resourceClaims");
  return claims.is_array() && !claims.empty();
}

}  // namespace kc::kubelet
