// Shared DRA checks, DeviceClass and ResourceSlice validation (pkg/apis/resource/validation,
// re-stated). Error texts and field paths follow the real server's, so a client sees the
// same 422 from the double as from kube-apiserver.

#include "tools/kube-apiserver-double/dra_validation.hpp"

#include <algorithm>
#include <cctype>
#include <regex>
#include <vector>

#include "tools/kube-apiserver-double/json_access.hpp"
#include "tools/kube-apiserver-double/object_defaults.hpp"

namespace kc::apiserver::dra {

using nlohmann::json;

namespace {

const char* const kQualifiedNameMsg =
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const char* const kCIdentifierMsg =
    "a valid C identifier must start with alphabetic character or '_', followed by a string of "
    "alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for "
    "validation is '[A-Za-z_][A-Za-z0-9_]*')";
const char* const kRequestRefMsg =
    "must be the name of a request in the claim or the name of a request and a subrequest "
    "separated by '/'";
const char* const kSliceNodeFields =
    "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required";
const char* const kDeviceNodeFields =
    "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when "
    "`perDeviceNodeSelection` is set to true in the ResourceSlice spec";

std::string at(const std::string& path, std::size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

std::string textOf(const json& v) {
  return v.is_string() ? v.get<std::string>() : "";
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t pos; (pos = s.find(sep, start)) != std::string::npos; start = pos + 1) {
    out.push_back(s.substr(start, pos - start));
  }
  out.push_back(s.substr(start));
  return out;
}

void checkCIdentifier(FieldErrors& errs, const std::string& field, const std::string& id) {
  static const std::regex kRe("[A-Za-z_][A-Za-z0-9_]*");
  if (id.size() > kDeviceMaxIDLength) {
    errs.tooLong(field, kDeviceMaxIDLength);
  }
  if (!std::regex_match(id, kRe)) {
    errs.invalid(field, id, kCIdentifierMsg);
  }
}

// A device attribute: exactly one of int, bool, string, version (the list forms are an alpha
// feature the double does not serve).
void checkAttributeValue(FieldErrors& errs, const std::string& field, const json& attribute) {
  static const std::regex kSemver(
      "(0|[1-9]\\d*)\\.(0|[1-9]\\d*)\\.(0|[1-9]\\d*)"
      "(-(0|[1-9]\\d*|\\d*[a-zA-Z-][0-9a-zA-Z-]*)(\\.(0|[1-9]\\d*|\\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
      "(\\+[0-9a-zA-Z-]+(\\.[0-9a-zA-Z-]+)*)?");
  int set = 0;
  for (const char* k : {"int", "bool", "string", "version"}) {
    set += member(attribute, k).is_null() ? 0 : 1;
  }
  if (const json& s = member(attribute, "string"); s.is_string()) {
    if (s.get<std::string>().size() > kDeviceAttributeMaxValueLength) {
      errs.tooLong(field + ".string", kDeviceAttributeMaxValueLength);
    }
  }
  if (const json& v = member(attribute, "version"); !v.is_null()) {
    if (!std::regex_match(textOf(v), kSemver)) {
      errs.invalid(field + ".version", v, "must be a string compatible with semver.org spec 2.0.0");
    }
    if (textOf(v).size() > kDeviceAttributeMaxValueLength) {
      errs.tooLong(field + ".version", kDeviceAttributeMaxValueLength);
    }
  }
  if (set != 1) {
    errs.invalid(field, set == 0 ? json("") : attribute, "exactly one value must be specified");
  }
}

void checkTaints(FieldErrors& errs, const std::string& device, const json& d) {
  const json* taints = listAt(errs, d, "taints", device + ".taints");
  if (!taints) {
    return;
  }
  if (taints->size() > kDeviceTaintsMaxLength) {
    errs.tooMany(device + ".taints", taints->size(), kDeviceTaintsMaxLength);
    return;
  }
  for (std::size_t i = 0; i < taints->size(); ++i) {
    const std::string p = at(device + ".taints", i);
    checkLabelName(errs, p + ".key", member((*taints)[i], "key"));
    const std::string effect = text((*taints)[i], "effect");
    if (effect.empty()) {
      errs.required(p + ".effect");
    } else if (effect != "NoExecute" && effect != "NoSchedule" && effect != "None") {
      errs.notSupported(p + ".effect", effect, {"NoExecute", "NoSchedule", "None"});
    }
  }
}

// A device's own nodeName / nodeSelector / allNodes: exactly one when the slice says
// perDeviceNodeSelection, none otherwise.
void checkDeviceNodeSelection(FieldErrors& errs, const std::string& p, const json& d,
                              bool perDevice) {
  const json& nodeName = member(d, "nodeName");
  const json& allNodes = member(d, "allNodes");
  const bool hasSelector = !member(d, "nodeSelector").is_null();
  if (!perDevice) {
    if (!nodeName.is_null() || hasSelector || !allNodes.is_null()) {
      errs.invalid(p, nullptr,
                   "`nodeName`, `nodeSelector` and `allNodes` can only be set if "
                   "`perDeviceNodeSelection` is set to true in the ResourceSlice spec");
    }
    return;
  }
  std::vector<std::string> set;
  if (!nodeName.is_null()) {
    if (textOf(nodeName).empty()) {
      errs.invalid(p + ".nodeName", nodeName, "must not be empty");
    } else {
      set.push_back("`nodeName`");
      checkDnsSubdomain(errs, p + ".nodeName", nodeName);
    }
  }
  if (hasSelector) {
    set.push_back("`nodeSelector`");
  }
  if (!allNodes.is_null()) {
    if (allNodes == true) {
      set.push_back("`allNodes`");
    } else {
      errs.invalid(p + ".allNodes", allNodes, "must be either unset or set to true");
    }
  }
  if (set.empty()) {
    errs.required(p, kDeviceNodeFields);
  } else if (set.size() > 1) {
    std::string joined;
    for (const auto& s : set) {
      joined += (joined.empty() ? "" : ", ") + s;
    }
    errs.invalid(p, "{" + joined + "}", kDeviceNodeFields);
  }
}

void checkDevice(FieldErrors& errs, const std::string& p, const json& d, bool perDevice) {
  checkDnsLabel(errs, p + ".name", member(d, "name"));
  const json& attributes = member(d, "attributes");
  const json& capacity = member(d, "capacity");
  const std::size_t entries = (attributes.is_object() ? attributes.size() : 0) +
                              (capacity.is_object() ? capacity.size() : 0);
  if (entries > kResourceSliceMaxAttributesAndCapacitiesPerDevice) {
    errs.invalid(p, entries,
                 "the total number of attributes and capacities must not exceed " +
                     std::to_string(kResourceSliceMaxAttributesAndCapacitiesPerDevice));
  }
  if (attributes.is_object()) {
    for (const auto& [key, value] : attributes.items()) {
      const std::string kp = p + ".attributes[" + key + "]";
      checkQualifiedName(errs, kp, key, false);
      checkAttributeValue(errs, kp, value);
    }
  }
  if (capacity.is_object()) {
    for (const auto& [key, value] : capacity.items()) {
      const std::string kp = p + ".capacity[" + key + "]";
      checkQualifiedName(errs, kp, key, false);
      if (member(value, "value").is_null()) {
        errs.required(kp + ".value");
      }
    }
  }
  checkTaints(errs, p, d);
  checkDeviceNodeSelection(errs, p, d, perDevice);
  checkBindingConditions(errs, p, d);
}

// The slice's node selection: exactly one of nodeName, nodeSelector (one term), allNodes,
// perDeviceNodeSelection; a false boolean or an empty node name counts as a mistake.
void checkSliceNodeSelection(FieldErrors& errs, const json& spec) {
  std::vector<std::string> set;
  if (const json& nodeName = member(spec, "nodeName"); !nodeName.is_null()) {
    if (textOf(nodeName).empty()) {
      errs.invalid("spec.nodeName", nodeName, "must be either unset or set to a non-empty string");
    } else {
      set.push_back("`nodeName`");
      checkDnsSubdomain(errs, "spec.nodeName", nodeName);
    }
  }
  if (const json& selector = member(spec, "nodeSelector"); !selector.is_null()) {
    set.push_back("`nodeSelector`");
    const json& terms = member(selector, "nodeSelectorTerms");
    const std::size_t n = terms.is_array() ? terms.size() : 0;
    if (n == 0) {
      errs.required("spec.nodeSelector.nodeSelectorTerms",
                    "must have at least one node selector term");
    }
    if (n != 1) {
      errs.invalid("spec.nodeSelector.nodeSelectorTerms", terms,
                   "must have exactly one node selector term");
    }
  }
  for (const char* flag : {"allNodes", "perDeviceNodeSelection"}) {
    const json& v = member(spec, flag);
    if (v == true) {
      set.push_back(std::string("`") + flag + "`");
    } else if (!v.is_null()) {
      errs.invalid(std::string("spec.") + flag, v, "must be either unset or set to true");
    }
  }
  if (set.empty()) {
    errs.required("spec", kSliceNodeFields);
  } else if (set.size() > 1) {
    std::string joined;
    for (const auto& s : set) {
      joined += (joined.empty() ? "" : ", ") + s;
    }
    errs.invalid("spec", "{" + joined + "}",
                 std::string(kSliceNodeFields) + ", but multiple fields are set");
  }
}

void checkSliceDevices(FieldErrors& errs, const json& spec) {
  const json* devices = listAt(errs, spec, "devices", "spec.devices");
  if (!devices) {
    return;
  }
  // Taints or counter consumption make each device costlier to handle: a lower cap.
  const bool advanced = std::any_of(devices->begin(), devices->end(), [](const json& d) {
    const json& t = member(d, "taints");
    const json& c = member(d, "consumesCounters");
    return (t.is_array() && !t.empty()) || (c.is_array() && !c.empty());
  });
  const std::size_t max =
      advanced ? kResourceSliceMaxDevicesWithTaintsOrConsumesCounters : kResourceSliceMaxDevices;
  if (devices->size() > max) {
    errs.tooMany("spec.devices", devices->size(), max);
    return;  // the size check short-circuits, as upstream (DoS protection)
  }
  const bool perDevice = member(spec, "perDeviceNodeSelection") == true;
  for (std::size_t i = 0; i < devices->size(); ++i) {
    checkDevice(errs, at("spec.devices", i), (*devices)[i], perDevice);
  }
  std::set<std::string> names;
  for (std::size_t i = 0; i < devices->size(); ++i) {
    const std::string name = text((*devices)[i], "name");
    if (!names.insert(name).second) {
      errs.duplicate(at("spec.devices", i), name);
    }
  }
}

void checkSharedCounters(FieldErrors& errs, const json& spec) {
  const json* sets = listAt(errs, spec, "sharedCounters", "spec.sharedCounters");
  if (!sets) {
    return;
  }
  if (sets->size() > kResourceSliceMaxCounterSets) {
    errs.tooMany("spec.sharedCounters", sets->size(), kResourceSliceMaxCounterSets);
    return;
  }
  std::set<std::string> names;
  for (std::size_t i = 0; i < sets->size(); ++i) {
    const std::string p = at("spec.sharedCounters", i);
    const std::string name = text((*sets)[i], "name");
    if (name.empty()) {
      errs.required(p + ".name");
    } else {
      checkDnsLabel(errs, p + ".name", name);
    }
    const json& counters = member((*sets)[i], "counters");
    if (!counters.is_object() || counters.empty()) {
      errs.required(p + ".counters");
    }
    if (!names.insert(name).second) {
      errs.duplicate(p, name);
    }
  }
}

}  // namespace

const json* listAt(FieldErrors& errs, const json& obj, const char* key, const std::string& field) {
  const json& v = member(obj, key);
  if (v.is_null()) {
    return nullptr;
  }
  if (!v.is_array()) {
    errs.invalid(field, v, "must be a list");
    return nullptr;
  }
  return &v;
}

// ValidateCSIDriverName: the DNS subdomain rules on the lower-cased name, at most 63 bytes.
void checkDriverName(FieldErrors& errs, const std::string& field, const json& value) {
  const std::string s = textOf(value);
  if (s.empty()) {
    errs.required(field);
    return;
  }
  if (s.size() > kDriverNameMaxLength) {
    errs.tooLong(field, kDriverNameMaxLength);
  }
  std::string lower = s;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (!isDnsSubdomain(lower)) {
    errs.invalid(field, s, kSubdomainMsg);
  }
}

// One or more DNS subdomains separated by slashes, at most 253 bytes.
void checkPoolName(FieldErrors& errs, const std::string& field, const json& value) {
  const std::string s = textOf(value);
  if (s.empty()) {
    errs.required(field);
    return;
  }
  if (s.size() > kPoolNameMaxLength) {
    errs.tooLong(field, kPoolNameMaxLength);
  }
  for (const auto& part : split(s, '/')) {
    if (!isDnsSubdomain(part)) {
      errs.invalid(field, part, kSubdomainMsg);
    }
  }
}

void checkDnsLabel(FieldErrors& errs, const std::string& field, const json& value) {
  const std::string s = textOf(value);
  if (!isDnsLabel(s)) {
    errs.invalid(field, s, s.size() > 63 ? "must be no more than 63 characters" : kLabelMsg);
  }
}

void checkDnsSubdomain(FieldErrors& errs, const std::string& field, const json& value) {
  const std::string s = textOf(value);
  if (!isDnsSubdomain(s)) {
    errs.invalid(field, s, s.size() > 253 ? "must be no more than 253 characters" : kSubdomainMsg);
  }
}

void checkLabelName(FieldErrors& errs, const std::string& field, const json& value) {
  static const std::regex kName("([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]");
  const std::string s = textOf(value);
  const auto slash = s.find('/');
  const std::string name = slash == std::string::npos ? s : s.substr(slash + 1);
  if (slash != std::string::npos) {
    const std::string prefix = s.substr(0, slash);
    if (prefix.empty()) {
      errs.invalid(field, s, "prefix part must be non-empty");
    } else if (!isDnsSubdomain(prefix)) {
      errs.invalid(field, s, std::string("prefix part ") + kSubdomainMsg);
    }
  }
  if (name.empty()) {
    errs.invalid(field, s, "name part must be non-empty");
  } else if (name.size() > 63) {
    errs.invalid(field, s, "name part must be no more than 63 characters");
  } else if (!std::regex_match(name, kName)) {
    errs.invalid(field, s, kQualifiedNameMsg);
  }
}

void checkQualifiedName(FieldErrors& errs, const std::string& field, const std::string& name,
                        bool requireDomain) {
  const auto slash = name.find('/');
  if (slash == std::string::npos) {
    checkCIdentifier(errs, field, name);
    if (requireDomain) {
      errs.invalid(field, name,
                   "a fully qualified name must be a domain and a name separated by a slash");
    }
    return;
  }
  const std::string domain = name.substr(0, slash);
  const std::string id = name.substr(slash + 1);
  if (domain.empty()) {
    errs.invalid(field, "", "the domain must not be empty");
  } else {
    checkDriverName(errs, field, domain);
  }
  if (id.empty()) {
    errs.invalid(field, "", "the name must not be empty");
  } else {
    checkCIdentifier(errs, field, id);
  }
}

// validateDeviceBindingParameters: at most 4 of each, label-name syntax, no duplicates, no
// condition in both lists, and one list only together with the other.
void checkBindingConditions(FieldErrors& errs, const std::string& field, const json& holder) {
  const std::string bcPath = field + ".bindingConditions";
  const std::string bfPath = field + ".bindingFailureConditions";
  const json* bc = listAt(errs, holder, "bindingConditions", bcPath);
  const json* bf = listAt(errs, holder, "bindingFailureConditions", bfPath);
  const json none = json::array();
  const json& conditions = bc ? *bc : none;
  const json& failures = bf ? *bf : none;
  for (const auto& [list, path, max] :
       {std::tuple{&conditions, bcPath, kBindingConditionsMaxSize},
        std::tuple{&failures, bfPath, kBindingFailureConditionsMaxSize}}) {
    if (list->size() > max) {
      errs.tooMany(path, list->size(), max);
      continue;
    }
    for (std::size_t i = 0; i < list->size(); ++i) {
      checkLabelName(errs, at(path, i), (*list)[i]);
    }
  }
  std::set<json> seen;
  for (std::size_t i = 0; i < conditions.size(); ++i) {
    if (!seen.insert(conditions[i]).second) {
      errs.duplicate(at(bcPath, i), conditions[i]);
    }
  }
  std::set<json> seenFailures;
  for (std::size_t i = 0; i < failures.size(); ++i) {
    if (!seenFailures.insert(failures[i]).second) {
      errs.duplicate(at(bfPath, i), failures[i]);
    }
    if (seen.count(failures[i])) {
      errs.invalid(at(bfPath, i), failures[i],
                   "bindingFailureConditions must not overlap with bindingConditions");
    }
  }
  if (conditions.empty() && !failures.empty()) {
    errs.invalid(bcPath, nullptr, "bindingConditions are required to use bindingFailureConditions");
  }
  if (failures.empty() && !conditions.empty()) {
    errs.invalid(bfPath, nullptr, "bindingFailureConditions are required to use bindingConditions");
  }
}

void checkSelectors(FieldErrors& errs, const std::string& field, const json& holder) {
  const std::string path = field + ".selectors";
  const json* selectors = listAt(errs, holder, "selectors", path);
  if (!selectors) {
    return;
  }
  if (selectors->size() > kDeviceSelectorsMaxSize) {
    errs.tooMany(path, selectors->size(), kDeviceSelectorsMaxSize);
    return;
  }
  for (std::size_t i = 0; i < selectors->size(); ++i) {
    const json& cel = member((*selectors)[i], "cel");
    const std::string p = at(path, i) + ".cel";
    if (!cel.is_object()) {
      errs.required(p);
    } else if (text(cel, "expression").empty()) {
      errs.required(p + ".expression");
    } else if (text(cel, "expression").size() > kCELSelectorExpressionMaxLength) {
      errs.tooLong(p + ".expression", kCELSelectorExpressionMaxLength);
    }
  }
}

void checkDeviceConfiguration(FieldErrors& errs, const std::string& field, const json& config) {
  const json& opaque = member(config, "opaque");
  if (!opaque.is_object()) {
    errs.required(field + ".opaque");
    return;
  }
  checkDriverName(errs, field + ".opaque.driver", member(opaque, "driver"));
  const json& parameters = member(opaque, "parameters");
  const std::string p = field + ".opaque.parameters";
  if (parameters.is_null()) {
    errs.required(p);
  } else if (parameters.dump().size() > kOpaqueParametersMaxLength) {
    errs.tooLong(p, kOpaqueParametersMaxLength);
  } else if (!parameters.is_object()) {
    errs.invalid(p, "<value omitted>", "must be a valid JSON object");
  }
}

void checkRequestRefs(FieldErrors& errs, const std::string& field, const json& holder,
                      const RequestNames& names) {
  const std::string path = field + ".requests";
  const json* refs = listAt(errs, holder, "requests", path);
  if (!refs) {
    return;
  }
  if (refs->size() > kDeviceRequestsMaxSize) {
    errs.tooMany(path, refs->size(), kDeviceRequestsMaxSize);
    return;
  }
  std::set<std::string> seen;
  for (std::size_t i = 0; i < refs->size(); ++i) {
    const std::string ref = textOf((*refs)[i]);
    checkRequestRef(errs, at(path, i), ref, names);
    if (!seen.insert(ref).second) {
      errs.duplicate(at(path, i), ref);
    }
  }
}

void checkRequestRef(FieldErrors& errs, const std::string& field, const std::string& ref,
                     const RequestNames& names) {
  const auto segments = split(ref, '/');
  if (segments.size() > 2) {
    errs.invalid(field, ref, kRequestRefMsg);
    return;
  }
  for (const auto& s : segments) {
    checkDnsLabel(errs, field, s);
  }
  auto it = names.find(segments[0]);
  const bool known = it != names.end() && (segments.size() == 1 || it->second.count(segments[1]));
  if (!known) {
    errs.invalid(field, ref, kRequestRefMsg);
  }
}

FieldErrors validateDeviceClass(const json& deviceClass) {
  FieldErrors errs;
  const json& spec = member(deviceClass, "spec");
  checkSelectors(errs, "spec", spec);
  if (const json* config = listAt(errs, spec, "config", "spec.config")) {
    if (config->size() > kDeviceConfigMaxSize) {
      errs.tooMany("spec.config", config->size(), kDeviceConfigMaxSize);
    } else {
      for (std::size_t i = 0; i < config->size(); ++i) {
        checkDeviceConfiguration(errs, at("spec.config", i), (*config)[i]);
      }
    }
  }
  return errs;
}

FieldErrors validateResourceSlice(const json& slice, const json* old) {
  FieldErrors errs;
  const json& spec = member(slice, "spec");
  checkDriverName(errs, "spec.driver", member(spec, "driver"));
  const json& pool = member(spec, "pool");
  checkPoolName(errs, "spec.pool.name", member(pool, "name"));
  const json& count = member(pool, "resourceSliceCount");
  if (!count.is_number_integer() || count.get<std::int64_t>() <= 0) {
    errs.invalid("spec.pool.resourceSliceCount", count.is_null() ? json(0) : count,
                 "must be greater than zero");
  }
  const json& generation = member(pool, "generation");
  if (!generation.is_null() &&
      (!generation.is_number_integer() || generation.get<std::int64_t>() < 0)) {
    errs.invalid("spec.pool.generation", generation, "must be greater than or equal to zero");
  }
  if (old) {
    const json& oldSpec = member(*old, "spec");
    if (member(pool, "name") != member(member(oldSpec, "pool"), "name")) {
      errs.immutable("spec.pool.name", member(pool, "name"));
    }
    for (const char* key : {"driver", "nodeName"}) {
      if (member(spec, key) != member(oldSpec, key)) {
        errs.immutable(std::string("spec.") + key, member(spec, key));
      }
    }
  }
  checkSliceNodeSelection(errs, spec);
  if (!member(spec, "sharedCounters").is_null() && !member(spec, "devices").is_null()) {
    errs.invalid("spec", "", "only one of `sharedCounters` or `devices` is allowed");
  }
  checkSliceDevices(errs, spec);
  checkSharedCounters(errs, spec);
  return errs;
}

void admit(const std::string& resource, const std::string& name, const json& object,
           const json* old, bool statusUpdate) {
  FieldErrors errs;
  std::string kind;
  if (resource == "deviceclasses") {
    kind = "DeviceClass";
    errs = validateDeviceClass(object);
  } else if (resource == "resourceslices") {
    kind = "ResourceSlice";
    errs = validateResourceSlice(object, old);
  } else if (resource == "resourceclaims") {
    kind = "ResourceClaim";
    errs = statusUpdate && old ? validateResourceClaimStatus(object, *old)
                               : validateResourceClaim(object, old);
  } else if (resource == "resourceclaimtemplates") {
    kind = "ResourceClaimTemplate";
    errs = validateResourceClaimTemplate(object, old);
  }
  if (!errs.empty()) {
    throw invalidObject(kGroup, kind, name, errs);
  }
}

}  // namespace kc::apiserver::dra
