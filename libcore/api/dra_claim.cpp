#include "libcore/api/dra_claim.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "libcore/api/json_read.hpp"
#include "libcore/base/error_codes.hpp"

namespace kc::api {

using detail::member;
using detail::text;
using nlohmann::json;

namespace {

Error invalid(const std::string& claim, const std::string& what) {
  return makeError(errc::kInvalid, "ResourceClaim " + claim + ": " + what);
}

const json& emptyArray() {
  static const json empty = json::array();
  return empty;
}

const json& arrayAt(const json& obj, const char* key) {
  const json* v = member(obj, key);
  return v != nullptr && v->is_array() ? *v : emptyArray();
}

std::vector<std::string> strings(const json& obj, const char* key) {
  std::vector<std::string> out;
  for (const json& v : arrayAt(obj, key)) {
    if (v.is_string()) {
      out.push_back(v.get<std::string>());
    }
  }
  return out;
}

// The one node of a node selector: matchFields metadata.name In [n] (what the allocator
// writes), or matchExpressions kubernetes.io/hostname In [n]. "" for anything else.
std::string singleNode(const json& selector) {
  const json& terms = arrayAt(selector, "nodeSelectorTerms");
  if (terms.size() != 1) {
    return {};
  }
  for (const auto& [field, key] : {std::pair{"matchFields", "metadata.name"},
                                   std::pair{"matchExpressions", "kubernetes.io/hostname"}}) {
    const json& reqs = arrayAt(terms[0], field);
    if (reqs.size() == 1 && text(reqs[0], "key") == key && text(reqs[0], "operator") == "In") {
      const auto values = strings(reqs[0], "values");
      if (values.size() == 1) {
        return values[0];
      }
    }
  }
  return {};
}

Result<ClaimAllocation> parseAllocation(const json& a, const std::string& claim) {
  ClaimAllocation out;
  const json* devices = member(a, "devices");
  const json& results =
      devices == nullptr ? arrayAt(json::object(), "") : arrayAt(*devices, "results");
  if (results.size() > kMaxAllocationResults) {
    return invalid(claim, "status.allocation.devices.results has more than 32 entries");
  }
  for (const json& r : results) {
    ClaimDevice d{text(r, "request"),
                  text(r, "driver"),
                  text(r, "pool"),
                  text(r, "device"),
                  strings(r, "bindingConditions"),
                  strings(r, "bindingFailureConditions")};
    if (d.driver.empty() || d.pool.empty() || d.device.empty()) {
      return invalid(claim, "an allocation result without driver, pool or device");
    }
    out.results.push_back(std::move(d));
  }
  if (const json* selector = member(a, "nodeSelector")) {
    out.nodeName = singleNode(*selector);
  }
  out.allocationTimestamp = text(a, "allocationTimestamp");
  return out;
}

Result<ClaimDeviceStatus> parseDeviceStatus(const json& d, const std::string& claim) {
  ClaimDeviceStatus out{text(d, "driver"), text(d, "pool"), text(d, "device"), {}};
  for (const json& c : arrayAt(d, "conditions")) {
    ClaimCondition cond{text(c, "type"),
                        text(c, "status"),
                        text(c, "reason"),
                        text(c, "message"),
                        0,
                        text(c, "lastTransitionTime")};
    if (cond.type.empty() || cond.status.empty()) {
      return invalid(claim, "a device condition without type or status");
    }
    if (const json* g = member(c, "observedGeneration"); g != nullptr && g->is_number_integer()) {
      cond.observedGeneration = g->get<std::int64_t>();
    }
    out.conditions.push_back(std::move(cond));
  }
  return out;
}

bool sameDevice(const ClaimDeviceStatus& s, const ClaimDevice& d) {
  return s.driver == d.driver && s.pool == d.pool && s.device == d.device;
}

}  // namespace

const ClaimDeviceStatus* Claim::deviceStatus(const ClaimDevice& d) const {
  auto it = std::find_if(devices.begin(), devices.end(),
                         [&](const ClaimDeviceStatus& s) { return sameDevice(s, d); });
  return it == devices.end() ? nullptr : &*it;
}

const ClaimCondition* Claim::condition(const ClaimDevice& d, std::string_view type) const {
  const ClaimDeviceStatus* s = deviceStatus(d);
  if (s == nullptr) {
    return nullptr;
  }
  auto it = std::find_if(s->conditions.begin(), s->conditions.end(),
                         [&](const ClaimCondition& c) { return c.type == type; });
  return it == s->conditions.end() ? nullptr : &*it;
}

namespace {

// resource.k8s.io/v1 DeviceRequestsMaxSize and DeviceSelectorsMaxSize.
constexpr std::size_t kMaxRequests = 32;
constexpr std::size_t kMaxSelectors = 32;

Result<ClaimRequest> parseRequest(const json& r, const std::string& claim) {
  ClaimRequest out;
  out.name = text(r, "name");
  if (out.name.empty()) {
    return invalid(claim, "spec.devices.requests[] without a name");
  }
  const json* exactly = member(r, "exactly");
  if (exactly == nullptr) {
    out.unsupported = member(r, "firstAvailable") != nullptr
                          ? "request " + out.name + " lists firstAvailable alternatives"
                          : "request " + out.name + " has no exactly";
    return out;
  }
  out.deviceClassName = text(*exactly, "deviceClassName");
  const std::string mode = text(*exactly, "allocationMode");
  if (!mode.empty() && mode != "ExactCount" && mode != "All") {
    return invalid(claim, "request " + out.name + ": allocationMode " + mode);
  }
  out.all = mode == "All";
  if (const json* n = member(*exactly, "count"); n != nullptr) {
    if (!n->is_number_integer() || n->get<std::int64_t>() < 1 || n->get<std::int64_t>() > 128) {
      return invalid(claim, "request " + out.name + ": count must be 1..128");
    }
    out.count = n->get<std::int64_t>();
  }
  const json& selectors = arrayAt(*exactly, "selectors");
  if (selectors.size() > kMaxSelectors) {
    return invalid(claim, "request " + out.name + " has more than 32 selectors");
  }
  for (const json& s : selectors) {
    const json* cel = member(s, "cel");
    const std::string expr = cel != nullptr ? text(*cel, "expression") : std::string();
    if (expr.empty()) {
      return invalid(claim, "request " + out.name + ": a selector without cel.expression");
    }
    out.selectors.push_back(expr);
  }
  if (const json* admin = member(*exactly, "adminAccess"); admin != nullptr && *admin == true) {
    out.unsupported = "request " + out.name + " asks adminAccess";
  } else if (member(*exactly, "capacity") != nullptr) {
    out.unsupported = "request " + out.name + " asks device capacity";
  } else if (!arrayAt(*exactly, "tolerations").empty()) {
    out.unsupported = "request " + out.name + " lists tolerations";
  }
  return out;
}

Status parseSpec(const json& object, Claim& c, const std::string& id) {
  const json* spec = member(object, "spec");
  const json* devices = spec != nullptr ? member(*spec, "devices") : nullptr;
  if (devices == nullptr) {
    return okStatus();
  }
  const json& requests = arrayAt(*devices, "requests");
  if (requests.size() > kMaxRequests) {
    return invalid(id, "spec.devices.requests has more than 32 entries");
  }
  for (const json& r : requests) {
    auto req = parseRequest(r, id);
    if (!req) {
      return req.error();
    }
    c.requests.push_back(std::move(*req));
  }
  if (!arrayAt(*devices, "constraints").empty()) {
    c.specUnsupported = "spec.devices.constraints (matchAttribute) are not applied";
  }
  return okStatus();
}

}  // namespace

Result<std::vector<PodClaimRef>> podClaimRefs(const json& pod) {
  std::vector<PodClaimRef> out;
  const json* spec = member(pod, "spec");
  if (spec == nullptr) {
    return out;
  }
  std::map<std::string, std::string> created;
  if (const json* status = member(pod, "status")) {
    for (const json& s : arrayAt(*status, "resourceClaimStatuses")) {
      created[text(s, "name")] = text(s, "resourceClaimName");
    }
  }
  std::set<std::string> seen;
  for (const json& e : arrayAt(*spec, "resourceClaims")) {
    PodClaimRef ref;
    ref.name = text(e, "name");
    const std::string claim = text(e, "resourceClaimName");
    const std::string tmpl = text(e, "resourceClaimTemplateName");
    if (ref.name.empty() || !seen.insert(ref.name).second) {
      return makeError(errc::kInvalid,
                       "spec.resourceClaims: an entry without a name, or a "
                       "name twice");
    }
    if (claim.empty() == tmpl.empty()) {
      return makeError(errc::kInvalid, "spec.resourceClaims[" + ref.name +
                                           "]: exactly one of resourceClaimName and "
                                           "resourceClaimTemplateName must be set");
    }
    ref.fromTemplate = !tmpl.empty();
    ref.claimName = ref.fromTemplate ? created[ref.name] : claim;
    out.push_back(std::move(ref));
  }
  return out;
}

Result<Claim> parseClaim(const json& object) {
  Claim c;
  const json* meta = member(object, "metadata");
  if (meta == nullptr || !meta->is_object()) {
    return invalid("?", "no metadata");
  }
  c.ns = text(*meta, "namespace");
  c.name = text(*meta, "name");
  c.uid = text(*meta, "uid");
  if (const json* g = member(*meta, "generation"); g != nullptr && g->is_number_integer()) {
    c.generation = g->get<std::int64_t>();
  }
  c.deleting = member(*meta, "deletionTimestamp") != nullptr;
  c.resourceVersion = text(*meta, "resourceVersion");
  const std::string id = c.ns + "/" + c.name;
  if (auto s = parseSpec(object, c, id); !s) {
    return s.error();
  }
  const json* status = member(object, "status");
  if (status == nullptr) {
    return c;
  }
  if (const json* a = member(*status, "allocation")) {
    auto allocation = parseAllocation(*a, id);
    if (!allocation) {
      return allocation.error();
    }
    c.allocation = std::move(*allocation);
  }
  const json& reserved = arrayAt(*status, "reservedFor");
  if (reserved.size() > kMaxReservedFor) {
    return invalid(id, "status.reservedFor has more than 256 entries");
  }
  for (const json& r : reserved) {
    c.reservedFor.push_back(
        {text(r, "apiGroup"), text(r, "resource"), text(r, "name"), text(r, "uid")});
  }
  for (const json& d : arrayAt(*status, "devices")) {
    auto s = parseDeviceStatus(d, id);
    if (!s) {
      return s.error();
    }
    c.devices.push_back(std::move(*s));
  }
  return c;
}

json toJson(const ClaimAllocation& a) {
  json results = json::array();
  for (const ClaimDevice& d : a.results) {
    json r{{"request", d.request}, {"driver", d.driver}, {"pool", d.pool}, {"device", d.device}};
    if (!d.bindingConditions.empty()) {
      r["bindingConditions"] = d.bindingConditions;
    }
    if (!d.bindingFailureConditions.empty()) {
      r["bindingFailureConditions"] = d.bindingFailureConditions;
    }
    results.push_back(std::move(r));
  }
  json out{{"devices", {{"results", std::move(results)}}}};
  if (!a.nodeName.empty()) {
    out["nodeSelector"] = {
        {"nodeSelectorTerms",
         json::array({{{"matchFields", json::array({{{"key", "metadata.name"},
                                                     {"operator", "In"},
                                                     {"values", {a.nodeName}}}})}}})}};
  }
  if (!a.allocationTimestamp.empty()) {
    out["allocationTimestamp"] = a.allocationTimestamp;
  }
  return out;
}

json toJson(const ClaimDeviceStatus& s) {
  json conditions = json::array();
  for (const ClaimCondition& c : s.conditions) {
    conditions.push_back({{"type", c.type},
                          {"status", c.status},
                          {"reason", c.reason},
                          {"message", c.message},
                          {"observedGeneration", c.observedGeneration},
                          {"lastTransitionTime", c.lastTransitionTime}});
  }
  return json{{"driver", s.driver},
              {"pool", s.pool},
              {"device", s.device},
              {"conditions", std::move(conditions)}};
}

std::vector<ClaimDeviceStatus> withDeviceCondition(std::vector<ClaimDeviceStatus> devices,
                                                   const ClaimDevice& device,
                                                   ClaimCondition condition) {
  auto entry = std::find_if(devices.begin(), devices.end(),
                            [&](const ClaimDeviceStatus& s) { return sameDevice(s, device); });
  if (entry == devices.end()) {
    devices.push_back({device.driver, device.pool, device.device, {}});
    entry = devices.end() - 1;
  }
  auto& conditions = entry->conditions;
  auto old = std::find_if(conditions.begin(), conditions.end(),
                          [&](const ClaimCondition& c) { return c.type == condition.type; });
  if (old == conditions.end()) {
    conditions.push_back(std::move(condition));
    return devices;
  }
  if (old->status == condition.status && !old->lastTransitionTime.empty()) {
    condition.lastTransitionTime = old->lastTransitionTime;  // no transition
  }
  *old = std::move(condition);
  return devices;
}

}  // namespace kc::api
