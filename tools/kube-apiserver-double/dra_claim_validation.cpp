// ResourceClaim / ResourceClaimTemplate defaulting and validation, and the claim status
// rules the status subresource enforces (pkg/apis/resource/validation, re-stated).

#include <algorithm>
#include <set>
#include <string>

#include "tools/kube-apiserver-double/dra_validation.hpp"
#include "tools/kube-apiserver-double/json_access.hpp"

namespace kc::apiserver::dra {

using nlohmann::json;

namespace {

std::string at(const std::string& path, std::size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

void defaultAllocationMode(json& request) {
  if (!request.is_object()) {
    return;
  }
  if (text(request, "allocationMode").empty()) {
    request["allocationMode"] = "ExactCount";
  }
  const json& count = member(request, "count");
  if (text(request, "allocationMode") == "ExactCount" &&
      (count.is_null() || (count.is_number_integer() && count.get<std::int64_t>() == 0))) {
    request["count"] = 1;
  }
  if (request.contains("tolerations") && request["tolerations"].is_array()) {
    for (auto& t : request["tolerations"]) {
      if (t.is_object() && text(t, "operator").empty()) {
        t["operator"] = "Equal";
      }
    }
  }
}

void defaultClaimSpec(json& spec) {
  if (!spec.is_object() || !spec.contains("devices") || !spec["devices"].is_object()) {
    return;
  }
  json& requests = spec["devices"]["requests"];
  if (!requests.is_array()) {
    return;
  }
  for (auto& r : requests) {
    if (!r.is_object()) {
      continue;
    }
    if (r.contains("exactly")) {
      defaultAllocationMode(r["exactly"]);
    }
    if (r.contains("firstAvailable") && r["firstAvailable"].is_array()) {
      for (auto& sub : r["firstAvailable"]) {
        defaultAllocationMode(sub);
      }
    }
  }
}

RequestNames requestNamesOf(const json& spec) {
  RequestNames names;
  const json& requests = member(member(spec, "devices"), "requests");
  if (!requests.is_array()) {
    return names;
  }
  for (const auto& r : requests) {
    auto& subs = names[text(r, "name")];
    const json& first = member(r, "firstAvailable");
    if (first.is_array()) {
      for (const auto& s : first) {
        subs.insert(text(s, "name"));
      }
    }
  }
  return names;
}

void checkAllocationMode(FieldErrors& errs, const std::string& p, const json& request) {
  const std::string mode = text(request, "allocationMode");
  const json& count = member(request, "count");
  const std::int64_t n = count.is_number_integer() ? count.get<std::int64_t>() : 0;
  if (mode == "All") {
    if (n != 0) {
      errs.invalid(p + ".count", n, "must not be specified when allocationMode is 'All'");
    }
  } else if (mode == "ExactCount") {
    if (n <= 0) {
      errs.invalid(p + ".count", n, "must be greater than zero");
    }
  } else {
    errs.notSupported(p + ".allocationMode", mode, {"All", "ExactCount"});
  }
}

void checkTolerations(FieldErrors& errs, const std::string& p, const json& request) {
  const json* tolerations = listAt(errs, request, "tolerations", p + ".tolerations");
  if (!tolerations) {
    return;
  }
  if (tolerations->size() > kDeviceTolerationsMaxLength) {
    errs.tooMany(p + ".tolerations", tolerations->size(), kDeviceTolerationsMaxLength);
    return;
  }
  for (std::size_t i = 0; i < tolerations->size(); ++i) {
    const json& t = (*tolerations)[i];
    const std::string tp = at(p + ".tolerations", i);
    if (!text(t, "key").empty()) {
      checkLabelName(errs, tp + ".key", member(t, "key"));
    }
    const std::string op = text(t, "operator");
    if (op == "Exists" && !text(t, "value").empty()) {
      errs.invalid(tp + ".value", text(t, "value"), "must be empty for operator `Exists`");
    } else if (op.empty()) {
      errs.required(tp + ".operator");
    } else if (op != "Exists" && op != "Equal") {
      errs.notSupported(tp + ".operator", op, {"Equal", "Exists"});
    }
    const std::string effect = text(t, "effect");
    if (!effect.empty() && effect != "NoExecute" && effect != "NoSchedule" && effect != "None") {
      errs.notSupported(tp + ".effect", effect, {"NoExecute", "NoSchedule", "None"});
    }
  }
}

// ExactDeviceRequest and DeviceSubRequest share these fields.
void checkClassRequest(FieldErrors& errs, const std::string& p, const json& request) {
  const json& cls = member(request, "deviceClassName");
  if (cls.is_null() || (cls.is_string() && cls.get<std::string>().empty())) {
    errs.required(p + ".deviceClassName");
  } else {
    checkDnsSubdomain(errs, p + ".deviceClassName", cls);
  }
  checkSelectors(errs, p, request);
  checkAllocationMode(errs, p, request);
  checkTolerations(errs, p, request);
}

void checkFirstAvailable(FieldErrors& errs, const std::string& p, const json& subs) {
  if (subs.size() > kFirstAvailableDeviceRequestMaxSize) {
    errs.tooMany(p, subs.size(), kFirstAvailableDeviceRequestMaxSize);
    return;
  }
  std::set<std::string> names;
  for (std::size_t j = 0; j < subs.size(); ++j) {
    checkDnsLabel(errs, at(p, j) + ".name", member(subs[j], "name"));
    checkClassRequest(errs, at(p, j), subs[j]);
  }
  for (std::size_t j = 0; j < subs.size(); ++j) {
    if (!names.insert(text(subs[j], "name")).second) {
      errs.duplicate(at(p, j), text(subs[j], "name"));
    }
  }
}

void checkRequest(FieldErrors& errs, const std::string& p, const json& request) {
  checkDnsLabel(errs, p + ".name", member(request, "name"));
  const json& exactly = member(request, "exactly");
  const json& first = member(request, "firstAvailable");
  const bool hasFirst = first.is_array() && !first.empty();
  const bool hasExactly = !exactly.is_null();
  if (!hasFirst && !hasExactly) {
    errs.required(p, "exactly one of `exactly` or `firstAvailable` is required");
  } else if (hasFirst && hasExactly) {
    errs.invalid(p, nullptr,
                 "exactly one of `exactly` or `firstAvailable` is required, but multiple fields "
                 "are set");
  } else if (hasFirst) {
    checkFirstAvailable(errs, p + ".firstAvailable", first);
  } else {
    checkClassRequest(errs, p + ".exactly", exactly);
  }
}

void checkConstraints(FieldErrors& errs, const std::string& path, const json& devices,
                      const RequestNames& names) {
  const json* constraints = listAt(errs, devices, "constraints", path);
  if (!constraints) {
    return;
  }
  if (constraints->size() > kDeviceConstraintsMaxSize) {
    errs.tooMany(path, constraints->size(), kDeviceConstraintsMaxSize);
    return;
  }
  for (std::size_t i = 0; i < constraints->size(); ++i) {
    const json& c = (*constraints)[i];
    const std::string p = at(path, i);
    checkRequestRefs(errs, p, c, names);
    if (const json& m = member(c, "matchAttribute"); m.is_string()) {
      checkQualifiedName(errs, p + ".matchAttribute", m.get<std::string>(), true);
    } else if (const json& d = member(c, "distinctAttribute"); d.is_string()) {
      checkQualifiedName(errs, p + ".distinctAttribute", d.get<std::string>(), true);
    } else {
      errs.required(p + ".matchAttribute");
    }
  }
}

// A claim's spec, under `prefix` ("spec" for a claim, "spec.spec" for a template).
void checkClaimSpec(FieldErrors& errs, const std::string& prefix, const json& spec) {
  const json& devices = member(spec, "devices");
  const std::string path = prefix + ".devices";
  const RequestNames names = requestNamesOf(spec);
  if (const json* requests = listAt(errs, devices, "requests", path + ".requests")) {
    if (requests->size() > kDeviceRequestsMaxSize) {
      errs.tooMany(path + ".requests", requests->size(), kDeviceRequestsMaxSize);
    } else {
      std::set<std::string> seen;
      for (std::size_t i = 0; i < requests->size(); ++i) {
        checkRequest(errs, at(path + ".requests", i), (*requests)[i]);
      }
      for (std::size_t i = 0; i < requests->size(); ++i) {
        if (!seen.insert(text((*requests)[i], "name")).second) {
          errs.duplicate(at(path + ".requests", i), text((*requests)[i], "name"));
        }
      }
    }
  }
  checkConstraints(errs, path + ".constraints", devices, names);
  if (const json* config = listAt(errs, devices, "config", path + ".config")) {
    if (config->size() > kDeviceConfigMaxSize) {
      errs.tooMany(path + ".config", config->size(), kDeviceConfigMaxSize);
    } else {
      for (std::size_t i = 0; i < config->size(); ++i) {
        checkRequestRefs(errs, at(path + ".config", i), (*config)[i], names);
        checkDeviceConfiguration(errs, at(path + ".config", i), (*config)[i]);
      }
    }
  }
}

void checkReservedFor(FieldErrors& errs, const json& status) {
  const json* reserved = listAt(errs, status, "reservedFor", "status.reservedFor");
  if (!reserved) {
    return;
  }
  if (reserved->size() > kResourceClaimReservedForMaxSize) {
    errs.tooMany("status.reservedFor", reserved->size(), kResourceClaimReservedForMaxSize);
    return;
  }
  std::set<std::string> uids;
  for (std::size_t i = 0; i < reserved->size(); ++i) {
    const std::string p = at("status.reservedFor", i);
    for (const char* key : {"resource", "name", "uid"}) {
      if (text((*reserved)[i], key).empty()) {
        errs.required(p + "." + key);
      }
    }
  }
  for (std::size_t i = 0; i < reserved->size(); ++i) {
    const std::string uid = text((*reserved)[i], "uid");
    if (!uids.insert(uid).second) {
      errs.duplicate(at("status.reservedFor", i), uid);
    }
  }
}

void checkAllocation(FieldErrors& errs, const json& allocation, const RequestNames& names) {
  const std::string path = "status.allocation.devices";
  const json& devices = member(allocation, "devices");
  if (const json* results = listAt(errs, devices, "results", path + ".results")) {
    if (results->size() > kAllocationResultsMaxSize) {
      errs.tooMany(path + ".results", results->size(), kAllocationResultsMaxSize);
    } else {
      for (std::size_t i = 0; i < results->size(); ++i) {
        const json& r = (*results)[i];
        const std::string p = at(path + ".results", i);
        checkRequestRef(errs, p + ".request", text(r, "request"), names);
        checkDriverName(errs, p + ".driver", member(r, "driver"));
        checkPoolName(errs, p + ".pool", member(r, "pool"));
        checkDnsLabel(errs, p + ".device", member(r, "device"));
        checkBindingConditions(errs, p, r);
      }
    }
  }
  if (const json* config = listAt(errs, devices, "config", path + ".config")) {
    // Class and claim configuration together.
    if (config->size() > 2 * kDeviceConfigMaxSize) {
      errs.tooMany(path + ".config", config->size(), 2 * kDeviceConfigMaxSize);
      return;
    }
    for (std::size_t i = 0; i < config->size(); ++i) {
      const std::string p = at(path + ".config", i);
      const std::string source = text((*config)[i], "source");
      if (source.empty()) {
        errs.required(p + ".source");
      } else if (source != "FromClaim" && source != "FromClass") {
        errs.notSupported(p + ".source", source, {"FromClaim", "FromClass"});
      }
      checkRequestRefs(errs, p, (*config)[i], names);
      checkDeviceConfiguration(errs, p, (*config)[i]);
    }
  }
}

// status.devices[]: each entry reports on an allocated device, once.
void checkDeviceStatuses(FieldErrors& errs, const json& status) {
  const json* devices = listAt(errs, status, "devices", "status.devices");
  if (!devices) {
    return;
  }
  std::set<std::string> allocated;
  const json& results = member(member(member(status, "allocation"), "devices"), "results");
  if (results.is_array()) {
    for (const auto& r : results) {
      allocated.insert(text(r, "driver") + "/" + text(r, "pool") + "/" + text(r, "device"));
    }
  }
  std::set<std::string> seen;
  for (std::size_t i = 0; i < devices->size(); ++i) {
    const json& d = (*devices)[i];
    const std::string p = at("status.devices", i);
    checkDriverName(errs, p + ".driver", member(d, "driver"));
    checkPoolName(errs, p + ".pool", member(d, "pool"));
    checkDnsLabel(errs, p + ".device", member(d, "device"));
    const std::string id = text(d, "driver") + "/" + text(d, "pool") + "/" + text(d, "device");
    if (!allocated.count(id)) {
      errs.invalid(p, id, "must be an allocated device in the claim");
    }
    const json& conditions = member(d, "conditions");
    if (conditions.is_array() && conditions.size() > kAllocatedDeviceStatusMaxConditions) {
      errs.tooMany(p + ".conditions", conditions.size(), kAllocatedDeviceStatusMaxConditions);
    }
    if (!seen.insert(id).second) {
      errs.duplicate(p, id);
    }
  }
}

}  // namespace

void applyDefaults(const std::string& resource, json& object) {
  if (resource == "resourceclaims" && object.contains("spec")) {
    defaultClaimSpec(object["spec"]);
  } else if (resource == "resourceclaimtemplates" && object.contains("spec") &&
             object["spec"].is_object() && object["spec"].contains("spec")) {
    defaultClaimSpec(object["spec"]["spec"]);
  }
}

FieldErrors validateResourceClaim(const json& claim, const json* old) {
  FieldErrors errs;
  if (old) {
    // The spec is immutable; an update is checked for that alone (as upstream).
    if (member(claim, "spec") != member(*old, "spec")) {
      errs.immutable("spec", member(claim, "spec"));
    }
    return errs;
  }
  checkClaimSpec(errs, "spec", member(claim, "spec"));
  return errs;
}

FieldErrors validateResourceClaimStatus(const json& claim, const json& old) {
  FieldErrors errs;
  const json& status = member(claim, "status");
  const json& oldStatus = member(old, "status");
  checkReservedFor(errs, status);
  checkDeviceStatuses(errs, status);
  const json& reserved = member(status, "reservedFor");
  const json& allocation = member(status, "allocation");
  const json& oldAllocation = member(oldStatus, "allocation");
  if (reserved.is_array() && !reserved.empty()) {
    if (allocation.is_null()) {
      errs.forbidden("status.reservedFor", "may not be specified when `allocated` is not set");
    } else if (!member(member(claim, "metadata"), "deletionTimestamp").is_null()) {
      // A claim being deleted may lose consumers, never gain them.
      const json& before = member(oldStatus, "reservedFor");
      for (const auto& r : reserved) {
        const bool known =
            before.is_array() && std::find(before.begin(), before.end(), r) != before.end();
        if (!known) {
          errs.forbidden("status.reservedFor",
                         "new entries may not be added while `deallocationRequested` or "
                         "`deletionTimestamp` are set");
          break;
        }
      }
    }
  }
  if (!oldAllocation.is_null() && !allocation.is_null()) {
    if (allocation != oldAllocation) {
      errs.immutable("status.allocation", allocation);
    }
  } else if (!allocation.is_null()) {
    checkAllocation(errs, allocation, requestNamesOf(member(claim, "spec")));
  }
  return errs;
}

FieldErrors validateResourceClaimTemplate(const json& claimTemplate, const json* old) {
  FieldErrors errs;
  if (old) {
    if (member(claimTemplate, "spec") != member(*old, "spec")) {
      errs.immutable("spec", member(claimTemplate, "spec"));
    }
    return errs;
  }
  checkClaimSpec(errs, "spec.spec", member(member(claimTemplate, "spec"), "spec"));
  return errs;
}

}  // namespace kc::apiserver::dra
