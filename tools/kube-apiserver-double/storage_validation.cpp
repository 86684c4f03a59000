// PersistentVolume, PersistentVolumeClaim and StorageClass defaulting and validation
// (storage_validation.hpp), error texts and field paths as kube-apiserver words them.

#include "tools/kube-apiserver-double/storage_validation.hpp"

#include <algorithm>
#include <regex>
#include <set>
#include <vector>

#include "tools/kube-apiserver-double/dra_validation.hpp"
#include "tools/kube-apiserver-double/field_errors.hpp"
#include "tools/kube-apiserver-double/json_access.hpp"

namespace kc::apiserver::storage {

using nlohmann::json;

namespace {

const std::vector<std::string> kAccessModes = {"ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce",
                                               "ReadWriteOncePod"};
const std::vector<std::string> kVolumeModes = {"Block", "Filesystem"};
// The volume sources a PV may name (exactly one).
const std::vector<std::string> kVolumeSources = {"awsElasticBlockStore",
                                                 "azureDisk",
                                                 "azureFile",
                                                 "cephfs",
                                                 "cinder",
                                                 "csi",
                                                 "fc",
                                                 "flexVolume",
                                                 "flocker",
                                                 "gcePersistentDisk",
                                                 "glusterfs",
                                                 "hostPath",
                                                 "iscsi",
                                                 "local",
                                                 "nfs",
                                                 "photonPersistentDisk",
                                                 "portworxVolume",
                                                 "quobyte",
                                                 "rbd",
                                                 "scaleIO",
                                                 "storageos",
                                                 "vsphereVolume"};

bool isQuantity(const json& v) {
  static const std::regex kRe("^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$");
  if (v.is_number()) {
    return v.get<double>() >= 0;
  }
  return v.is_string() && std::regex_match(v.get<std::string>(), kRe) &&
         v.get<std::string>()[0] != '-';
}

void setDefault(json& obj, const char* key, const json& value) {
  if (!obj.contains(key) || obj[key].is_null()) {
    obj[key] = value;
  }
}

void checkAccessModes(FieldErrors& errs, const json& spec) {
  const json& modes = member(spec, "accessModes");
  if (!modes.is_array() || modes.empty()) {
    errs.required("spec.accessModes");
    return;
  }
  bool rwop = false;
  for (const auto& m : modes) {
    const std::string mode = m.is_string() ? m.get<std::string>() : "";
    rwop = rwop || mode == "ReadWriteOncePod";
    if (std::find(kAccessModes.begin(), kAccessModes.end(), mode) == kAccessModes.end()) {
      errs.notSupported("spec.accessModes", m, kAccessModes);
    }
  }
  if (rwop && modes.size() > 1) {
    errs.forbidden("spec.accessModes", "may not use ReadWriteOncePod with other access modes");
  }
}

void checkVolumeMode(FieldErrors& errs, const json& spec) {
  const json& mode = member(spec, "volumeMode");
  if (!mode.is_null() &&
      (!mode.is_string() || std::find(kVolumeModes.begin(), kVolumeModes.end(),
                                      mode.get<std::string>()) == kVolumeModes.end())) {
    errs.notSupported("spec.volumeMode", mode, kVolumeModes);
  }
}

void checkStorageClassName(FieldErrors& errs, const json& spec) {
  const json& cls = member(spec, "storageClassName");
  if (cls.is_string() && !cls.get<std::string>().empty()) {
    dra::checkDnsSubdomain(errs, "spec.storageClassName", cls);
  }
}

void checkNodeSelectorTerms(FieldErrors& errs, const std::string& field, const json& required) {
  const json& terms = member(required, "nodeSelectorTerms");
  if (!terms.is_array() || terms.empty()) {
    errs.required(field + ".nodeSelectorTerms", "must have at least one node selector term");
    return;
  }
  const std::vector<std::string> ops = {"DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn"};
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const std::string t = field + ".nodeSelectorTerms[" + std::to_string(i) + "]";
    for (const char* list : {"matchExpressions", "matchFields"}) {
      const json& reqs = member(terms[i], list);
      for (std::size_t j = 0; reqs.is_array() && j < reqs.size(); ++j) {
        const std::string r = t + "." + list + "[" + std::to_string(j) + "]";
        const std::string op = text(reqs[j], "operator");
        const json& values = member(reqs[j], "values");
        const std::size_t n = values.is_array() ? values.size() : 0;
        if (std::string(list) == "matchFields" && text(reqs[j], "key") != "metadata.name") {
          errs.invalid(r + ".key", text(reqs[j], "key"), "not a valid field selector key");
        } else if (std::string(list) == "matchExpressions") {
          dra::checkLabelName(errs, r + ".key", member(reqs[j], "key"));
        }
        if (std::find(ops.begin(), ops.end(), op) == ops.end()) {
          errs.notSupported(r + ".operator", op, ops);
        } else if ((op == "In" || op == "NotIn") && n == 0) {
          errs.required(r + ".values", "must be specified when `operator` is 'In' or 'NotIn'");
        } else if ((op == "Exists" || op == "DoesNotExist") && n > 0) {
          errs.forbidden(r + ".values",
                         "may not be specified when `operator` is 'Exists' or 'DoesNotExist'");
        } else if ((op == "Gt" || op == "Lt") && n != 1) {
          errs.required(r + ".values",
                        "must be specified single value when `operator` is 'Lt' or 'Gt'");
        }
      }
    }
  }
}

FieldErrors validateVolume(const json& pv, const json* old) {
  FieldErrors errs;
  const json& spec = member(pv, "spec");
  checkAccessModes(errs, spec);
  const json& capacity = member(spec, "capacity");
  if (!capacity.is_object() || capacity.empty()) {
    errs.required("spec.capacity");
  } else if (!capacity.contains("storage") || capacity.size() != 1) {
    errs.notSupported("spec.capacity", capacity.begin().key(), {"storage"});
  } else if (!isQuantity(capacity["storage"])) {
    errs.invalid("spec.capacity[storage]", capacity["storage"],
                 "quantities must match the regular expression "
                 "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'");
  }
  std::size_t sources = 0;
  for (const auto& s : kVolumeSources) {
    sources += member(spec, s.c_str()).is_null() ? 0 : 1;
  }
  if (sources == 0) {
    errs.required("spec", "must specify a volume type");
  } else if (sources > 1) {
    errs.forbidden("spec", "may not specify more than 1 volume type");
  }
  const json& affinity = member(spec, "nodeAffinity");
  if (!member(spec, "local").is_null() && member(affinity, "required").is_null()) {
    errs.required("spec.nodeAffinity", "Local volume requires node affinity");
  }
  if (!member(affinity, "required").is_null()) {
    checkNodeSelectorTerms(errs, "spec.nodeAffinity.required", affinity["required"]);
  }
  checkVolumeMode(errs, spec);
  checkStorageClassName(errs, spec);
  const json& policy = member(spec, "persistentVolumeReclaimPolicy");
  const std::vector<std::string> policies = {"Delete", "Recycle", "Retain"};
  if (!policy.is_string() ||
      std::find(policies.begin(), policies.end(), policy.get<std::string>()) == policies.end()) {
    errs.notSupported("spec.persistentVolumeReclaimPolicy", policy, policies);
  }
  if (old != nullptr) {
    const json& was = member(member(*old, "spec"), "nodeAffinity");
    if (!was.is_null() && was != affinity) {
      errs.immutable("spec.nodeAffinity", affinity);
    }
    if (member(member(*old, "spec"), "volumeMode") != member(spec, "volumeMode")) {
      errs.immutable("spec.volumeMode", member(spec, "volumeMode"));
    }
  }
  return errs;
}

FieldErrors validateClaim(const json& pvc, const json* old) {
  FieldErrors errs;
  const json& spec = member(pvc, "spec");
  checkAccessModes(errs, spec);
  const json& storage = member(member(member(spec, "resources"), "requests"), "storage");
  if (storage.is_null()) {
    errs.required("spec.resources[storage]");
  } else if (!isQuantity(storage)) {
    errs.invalid("spec.resources[storage]", storage,
                 "quantities must match the regular expression "
                 "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'");
  }
  checkVolumeMode(errs, spec);
  checkStorageClassName(errs, spec);
  if (old != nullptr) {
    // The spec is fixed at creation, but for the requests (expansion) and a volumeName set
    // once (what the PV controller, or the scheduler's binding, writes).
    json before = member(*old, "spec");
    json after = spec;
    for (json* s : {&before, &after}) {
      if (s->is_object() && s->contains("resources") && (*s)["resources"].is_object()) {
        (*s)["resources"].erase("requests");
      }
    }
    if (text(before, "volumeName").empty() && after.is_object() && after.contains("volumeName")) {
      before["volumeName"] = after["volumeName"];
    }
    if (before != after) {
      errs.forbidden("spec",
                     "spec is immutable after creation except resources.requests and "
                     "volumeAttributesClassName for bound claims");
    }
  }
  return errs;
}

FieldErrors validateClass(const json& sc, const json* old) {
  FieldErrors errs;
  const json& provisioner = member(sc, "provisioner");
  if (!provisioner.is_string() || provisioner.get<std::string>().empty()) {
    errs.required("provisioner");
  } else if (provisioner.get<std::string>().size() > 63 + 253 + 1) {
    errs.tooLong("provisioner", 63);
  }
  const std::vector<std::string> policies = {"Delete", "Retain"};
  const json& policy = member(sc, "reclaimPolicy");
  if (!policy.is_string() ||
      std::find(policies.begin(), policies.end(), policy.get<std::string>()) == policies.end()) {
    errs.notSupported("reclaimPolicy", policy, policies);
  }
  const std::vector<std::string> modes = {"Immediate", "WaitForFirstConsumer"};
  const json& mode = member(sc, "volumeBindingMode");
  if (!mode.is_string() ||
      std::find(modes.begin(), modes.end(), mode.get<std::string>()) == modes.end()) {
    errs.notSupported("volumeBindingMode", mode, modes);
  }
  const json& topologies = member(sc, "allowedTopologies");
  for (std::size_t i = 0; topologies.is_array() && i < topologies.size(); ++i) {
    const std::string t = "allowedTopologies[" + std::to_string(i) + "]";
    const json& exprs = member(topologies[i], "matchLabelExpressions");
    if (!exprs.is_array() || exprs.empty()) {
      errs.required(t + ".matchLabelExpressions", "must have at least one label selector");
      continue;
    }
    std::set<std::string> keys;
    for (std::size_t j = 0; j < exprs.size(); ++j) {
      const std::string e = t + ".matchLabelExpressions[" + std::to_string(j) + "]";
      dra::checkLabelName(errs, e + ".key", member(exprs[j], "key"));
      if (!keys.insert(text(exprs[j], "key")).second) {
        errs.duplicate(e + ".key", text(exprs[j], "key"));
      }
      const json& values = member(exprs[j], "values");
      if (!values.is_array() || values.empty()) {
        errs.required(e + ".values", "must specify as least one value");
      }
    }
  }
  if (old != nullptr) {
    for (const char* f : {"parameters", "provisioner", "reclaimPolicy"}) {
      if (member(*old, f) != member(sc, f)) {
        errs.forbidden(f, std::string("updates to ") + f + " are forbidden.");
      }
    }
    if (member(*old, "volumeBindingMode") != mode) {
      errs.forbidden("volumeBindingMode", "field is immutable");
    }
  }
  return errs;
}

}  // namespace

void applyDefaults(const std::string& group, const std::string& resource, json& object,
                   bool create) {
  if (group.empty() && (resource == "persistentvolumes" || resource == "persistentvolumeclaims")) {
    json& spec = object["spec"];
    if (!spec.is_object()) {
      spec = json::object();
    }
    setDefault(spec, "volumeMode", "Filesystem");
    if (resource == "persistentvolumes") {
      setDefault(spec, "persistentVolumeReclaimPolicy", "Retain");
    }
    if (create) {
      object["status"] = {{"phase", "Pending"}};
    }
  } else if (group == "storage.k8s.io" && resource == "storageclasses") {
    setDefault(object, "reclaimPolicy", "Delete");
    setDefault(object, "volumeBindingMode", "Immediate");
  }
}

void admit(const std::string& group, const std::string& resource, const std::string& name,
           const json& object, const json* old, bool statusUpdate) {
  FieldErrors errs;
  std::string kind;
  if (group.empty() && resource == "persistentvolumes" && !statusUpdate) {
    kind = "PersistentVolume";
    errs = validateVolume(object, old);
  } else if (group.empty() && resource == "persistentvolumeclaims" && !statusUpdate) {
    kind = "PersistentVolumeClaim";
    errs = validateClaim(object, old);
  } else if (group == "storage.k8s.io" && resource == "storageclasses") {
    kind = "StorageClass";
    errs = validateClass(object, old);
  }
  if (!errs.empty()) {
    throw invalidObject(group, kind, name, errs);
  }
}

}  // namespace kc::apiserver::storage
