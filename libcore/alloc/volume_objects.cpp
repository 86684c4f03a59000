#include "libcore/alloc/volume_objects.hpp"

#include <nlohmann/json.hpp>
#include <utility>

#include "libcore/alloc/pod_fields.hpp"
#include "libcore/alloc/quantity.hpp"

namespace kc::alloc {
namespace {

using detail::at;
using detail::invalid;
using detail::optionalString;
using detail::stringMap;
using nlohmann::json;

const std::string& stringOr(const json& v, const std::string& fallback) {
  return v.is_string() ? v.get_ref<const std::string&>() : fallback;
}

bool isDnsLabel(std::string_view s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') {
    return false;
  }
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
      return false;
    }
  }
  return true;
}

Result<std::uint8_t> accessModes(const json& spec, const std::string& field) {
  const json& list = at(spec, "accessModes");
  if (list.is_null()) {
    return std::uint8_t{0};
  }
  if (!list.is_array()) {
    return invalid(field, "not a list");
  }
  std::uint8_t out = 0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string& m = stringOr(list[i], "");
    if (m == "ReadWriteOnce") {
      out |= kReadWriteOnce;
    } else if (m == "ReadOnlyMany") {
      out |= kReadOnlyMany;
    } else if (m == "ReadWriteMany") {
      out |= kReadWriteMany;
    } else if (m == "ReadWriteOncePod") {
      out |= kReadWriteOncePod;
    } else {
      return invalid(field + "[" + std::to_string(i) + "]",
                     "'" + m +
                         "' is not one of ReadWriteOnce, ReadOnlyMany, ReadWriteMany, "
                         "ReadWriteOncePod");
    }
  }
  return out;
}

Result<bool> blockMode(const json& spec, const std::string& field) {
  const json& v = at(spec, "volumeMode");
  if (v.is_null()) {
    return false;
  }
  const std::string& m = stringOr(v, "");
  if (m != "Filesystem" && m != "Block") {
    return invalid(field, "must be Filesystem or Block");
  }
  return m == "Block";
}

// The storage quantity of a resource map (`requests` or `capacity`), bytes; 0 when absent.
Result<std::int64_t> storageOf(const json& map, const std::string& field) {
  const json& v = at(map, "storage");
  if (v.is_null()) {
    return std::int64_t{0};
  }
  if (!v.is_string() && !v.is_number_integer()) {
    return invalid(field, "not a quantity");
  }
  auto q = parseQuantity(v.is_string() ? v.get<std::string>() : v.dump());
  if (!q) {
    return invalid(field, q.error().message);
  }
  return *q;
}

// The class: the beta annotation when present (even empty), else spec.storageClassName.
Result<std::string> classOf(const StringMap& annotations, const json& spec) {
  if (auto a = annotations.find(kAnnBetaStorageClass); a != annotations.end()) {
    return a->second;
  }
  return optionalString(spec, "storageClassName", "spec.storageClassName");
}

struct Meta {
  std::string name, ns, uid, resourceVersion;
  StringMap annotations, labels;
  bool deleting = false;
};

Result<Meta> readMeta(const json& obj, const char* kind) {
  const json& m = at(obj, "metadata");
  Meta out;
  out.name = stringOr(at(m, "name"), "");
  if (out.name.empty()) {
    return invalid("metadata.name", std::string(kind) + " without a name");
  }
  out.ns = stringOr(at(m, "namespace"), "");
  out.uid = stringOr(at(m, "uid"), "");
  out.resourceVersion = stringOr(at(m, "resourceVersion"), "");
  auto ann = stringMap(at(m, "annotations"), "metadata.annotations");
  if (!ann) {
    return ann.error();
  }
  auto labels = stringMap(at(m, "labels"), "metadata.labels");
  if (!labels) {
    return labels.error();
  }
  out.annotations = std::move(*ann);
  out.labels = std::move(*labels);
  out.deleting = !at(m, "deletionTimestamp").is_null();
  return out;
}

std::string controllerUid(const json& obj) {
  const json& refs = at(at(obj, "metadata"), "ownerReferences");
  if (!refs.is_array()) {
    return {};
  }
  for (const auto& r : refs) {
    if (at(r, "controller").is_boolean() && at(r, "controller").get<bool>()) {
      return stringOr(at(r, "uid"), "");
    }
  }
  return {};
}

Status readClaimSpec(const json& spec, VolumeClaim& out) {
  auto modes = accessModes(spec, "spec.accessModes");
  if (!modes) {
    return modes.error();
  }
  auto block = blockMode(spec, "spec.volumeMode");
  if (!block) {
    return block.error();
  }
  auto volumeName = optionalString(spec, "volumeName", "spec.volumeName");
  if (!volumeName) {
    return volumeName.error();
  }
  auto storage = storageOf(at(at(spec, "resources"), "requests"), "spec.resources.requests");
  if (!storage) {
    return storage.error();
  }
  auto selector = parseLabelSelector(at(spec, "selector"), "spec.selector");
  if (!selector) {
    return selector.error();
  }
  out.accessModes = *modes;
  out.block = *block;
  out.volumeName = std::move(*volumeName);
  out.storage = *storage;
  out.selector = std::move(*selector);
  return okStatus();
}

Result<TopologySelectorTerm> topologyTerm(const json& t, const std::string& field) {
  TopologySelectorTerm term;
  const json& exprs = at(t, "matchLabelExpressions");
  if (exprs.is_null()) {
    return term;
  }
  if (!exprs.is_array()) {
    return invalid(field + ".matchLabelExpressions", "not a list");
  }
  for (std::size_t i = 0; i < exprs.size(); ++i) {
    const std::string f = field + ".matchLabelExpressions[" + std::to_string(i) + "]";
    const std::string& key = stringOr(at(exprs[i], "key"), "");
    const json& values = at(exprs[i], "values");
    if (key.empty()) {
      return invalid(f + ".key", "must be a label name");
    }
    if (!values.is_array() || values.empty()) {
      return invalid(f + ".values", "must be a non-empty list");
    }
    std::vector<std::string> vs;
    for (const auto& v : values) {
      if (!v.is_string()) {
        return invalid(f + ".values", "not a list of strings");
      }
      vs.push_back(v.get<std::string>());
    }
    term.matchLabelExpressions.emplace_back(key, std::move(vs));
  }
  return term;
}

}  // namespace

Result<VolumeClaim> parseVolumeClaim(const json& pvc) {
  auto meta = readMeta(pvc, "PersistentVolumeClaim");
  if (!meta) {
    return meta.error();
  }
  if (meta->ns.empty()) {
    return invalid("metadata.namespace", "PersistentVolumeClaim without a namespace");
  }
  VolumeClaim out;
  out.ns = meta->ns;
  out.name = meta->name;
  out.uid = meta->uid;
  out.resourceVersion = meta->resourceVersion;
  out.deleting = meta->deleting;
  out.bindCompleted = meta->annotations.count(kAnnBindCompleted) != 0;
  if (auto s = meta->annotations.find(kAnnSelectedNode); s != meta->annotations.end()) {
    out.selectedNode = s->second;
  }
  const json& spec = at(pvc, "spec");
  if (!spec.is_object()) {
    return invalid("spec", "required");
  }
  auto cls = classOf(meta->annotations, spec);
  if (!cls) {
    return cls.error();
  }
  out.storageClass = std::move(*cls);
  if (auto s = readClaimSpec(spec, out); !s) {
    return s.error();
  }
  out.lost = stringOr(at(at(pvc, "status"), "phase"), "") == "Lost";
  out.controllerUid = controllerUid(pvc);
  return out;
}

Result<PersistentVolume> parsePersistentVolume(const json& pv) {
  auto meta = readMeta(pv, "PersistentVolume");
  if (!meta) {
    return meta.error();
  }
  PersistentVolume out;
  out.name = meta->name;
  out.resourceVersion = meta->resourceVersion;
  out.deleting = meta->deleting;
  out.labels = std::move(meta->labels);
  out.boundByController = meta->annotations.count(kAnnBoundByController) != 0;
  const json& spec = at(pv, "spec");
  if (!spec.is_object()) {
    return invalid("spec", "required");
  }
  auto cls = classOf(meta->annotations, spec);
  auto modes = accessModes(spec, "spec.accessModes");
  auto block = blockMode(spec, "spec.volumeMode");
  auto capacity = storageOf(at(spec, "capacity"), "spec.capacity");
  if (!cls || !modes || !block || !capacity) {
    return !cls ? cls.error() : !modes ? modes.error() : !block ? block.error() : capacity.error();
  }
  out.storageClass = std::move(*cls);
  out.accessModes = *modes;
  out.block = *block;
  out.capacity = *capacity;
  if (const json& ref = at(spec, "claimRef"); !ref.is_null()) {
    if (!ref.is_object()) {
      return invalid("spec.claimRef", "not an object");
    }
    out.claimRef = ClaimRef{stringOr(at(ref, "namespace"), ""), stringOr(at(ref, "name"), ""),
                            stringOr(at(ref, "uid"), "")};
  }
  if (const json& required = at(at(spec, "nodeAffinity"), "required"); !required.is_null()) {
    auto terms = parseNodeSelector(required, "spec.nodeAffinity.required");
    if (!terms) {
      return terms.error();
    }
    out.nodeAffinity = std::move(*terms);
  }
  out.phase = stringOr(at(at(pv, "status"), "phase"), "");
  return out;
}

Result<StorageClass> parseStorageClass(const json& sc) {
  auto meta = readMeta(sc, "StorageClass");
  if (!meta) {
    return meta.error();
  }
  StorageClass out;
  out.name = meta->name;
  out.provisioner = stringOr(at(sc, "provisioner"), "");
  if (out.provisioner.empty()) {
    return invalid("provisioner", "required");
  }
  const json& mode = at(sc, "volumeBindingMode");
  if (!mode.is_null()) {
    const std::string& m = stringOr(mode, "");
    if (m != "Immediate" && m != "WaitForFirstConsumer") {
      return invalid("volumeBindingMode", "must be Immediate or WaitForFirstConsumer");
    }
    out.bindingMode = m == "WaitForFirstConsumer" ? VolumeBindingMode::WaitForFirstConsumer
                                                  : VolumeBindingMode::Immediate;
  }
  const json& topologies = at(sc, "allowedTopologies");
  if (!topologies.is_null() && !topologies.is_array()) {
    return invalid("allowedTopologies", "not a list");
  }
  for (std::size_t i = 0; topologies.is_array() && i < topologies.size(); ++i) {
    auto term = topologyTerm(topologies[i], "allowedTopologies[" + std::to_string(i) + "]");
    if (!term) {
      return term.error();
    }
    out.allowedTopologies.push_back(std::move(*term));
  }
  return out;
}

Status parsePodClaimVolumes(const json& pod, SchedPod& out) {
  const json& volumes = at(at(pod, "spec"), "volumes");
  if (volumes.is_null()) {
    return okStatus();
  }
  if (!volumes.is_array()) {
    return invalid("spec.volumes", "not a list");
  }
  const std::string& podName = stringOr(at(at(pod, "metadata"), "name"), "");
  for (std::size_t i = 0; i < volumes.size(); ++i) {
    const std::string f = "spec.volumes[" + std::to_string(i) + "]";
    const std::string& name = stringOr(at(volumes[i], "name"), "");
    if (!isDnsLabel(name)) {
      return invalid(f + ".name", "'" + name + "' is not a DNS label");
    }
    if (const json& pvc = at(volumes[i], "persistentVolumeClaim"); !pvc.is_null()) {
      const std::string& claim = stringOr(at(pvc, "claimName"), "");
      if (claim.empty()) {
        return invalid(f + ".persistentVolumeClaim.claimName", "required");
      }
      out.claimVolumes.push_back(PodClaimVolume{claim, false});
    } else if (const json& eph = at(volumes[i], "ephemeral"); !eph.is_null()) {
      if (at(eph, "volumeClaimTemplate").is_null()) {
        return invalid(f + ".ephemeral.volumeClaimTemplate", "required");
      }
      out.claimVolumes.push_back(PodClaimVolume{podName + "-" + name, true});
    }
  }
  return okStatus();
}

// ---------------------------------------------------------------- the catalog

void VolumeCatalog::setClaim(VolumeClaim claim) {
  std::string key = claim.key();
  assumedClaims_.erase(key);
  claims_.insert_or_assign(std::move(key), std::move(claim));
}

void VolumeCatalog::removeClaim(const std::string& key) {
  assumedClaims_.erase(key);
  claims_.erase(key);
}

void VolumeCatalog::setVolume(PersistentVolume volume) {
  std::string name = volume.name;
  assumedVolumes_.erase(name);
  volumes_.insert_or_assign(std::move(name), std::move(volume));
}

void VolumeCatalog::removeVolume(const std::string& name) {
  assumedVolumes_.erase(name);
  volumes_.erase(name);
}

void VolumeCatalog::setClass(StorageClass storageClass) {
  std::string name = storageClass.name;
  classes_.insert_or_assign(std::move(name), std::move(storageClass));
}

void VolumeCatalog::removeClass(const std::string& name) {
  classes_.erase(name);
}

const VolumeClaim* VolumeCatalog::claim(const std::string& key) const {
  if (auto a = assumedClaims_.find(key); a != assumedClaims_.end()) {
    return &a->second;
  }
  auto c = claims_.find(key);
  return c == claims_.end() ? nullptr : &c->second;
}

const PersistentVolume* VolumeCatalog::volume(const std::string& name) const {
  if (auto a = assumedVolumes_.find(name); a != assumedVolumes_.end()) {
    return &a->second;
  }
  auto v = volumes_.find(name);
  return v == volumes_.end() ? nullptr : &v->second;
}

const StorageClass* VolumeCatalog::storageClass(const std::string& name) const {
  auto c = classes_.find(name);
  return c == classes_.end() ? nullptr : &c->second;
}

std::vector<const PersistentVolume*> VolumeCatalog::volumesOfClass(
    const std::string& storageClass) const {
  std::vector<const PersistentVolume*> out;
  for (const auto& [name, v] : volumes_) {
    const PersistentVolume* pv = volume(name);
    if (pv->storageClass == storageClass) {
      out.push_back(pv);
    }
  }
  return out;
}

void VolumeCatalog::assumeBound(const std::string& volumeName, const VolumeClaim& claim) {
  const PersistentVolume* pv = volume(volumeName);
  if (pv == nullptr) {
    return;
  }
  PersistentVolume assumed = *pv;
  if (!assumed.claimRef || assumed.claimRef->name != claim.name ||
      assumed.claimRef->ns != claim.ns) {
    assumed.boundByController = true;  // GetBindVolumeToClaim: not pre-bound by the user
  }
  assumed.claimRef = ClaimRef{claim.ns, claim.name, claim.uid};
  assumedVolumes_.insert_or_assign(volumeName, std::move(assumed));
}

void VolumeCatalog::assumeSelectedNode(const std::string& claimKey, const std::string& node) {
  const VolumeClaim* c = claim(claimKey);
  if (c == nullptr) {
    return;
  }
  VolumeClaim assumed = *c;
  assumed.selectedNode = node;
  assumedClaims_.insert_or_assign(claimKey, std::move(assumed));
}

void VolumeCatalog::restore(const std::vector<std::string>& volumes,
                            const std::vector<std::string>& claims) {
  for (const auto& v : volumes) {
    assumedVolumes_.erase(v);
  }
  for (const auto& c : claims) {
    assumedClaims_.erase(c);
  }
}

}  // namespace kc::alloc
