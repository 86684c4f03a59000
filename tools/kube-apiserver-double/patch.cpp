#include "tools/kube-apiserver-double/patch.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace kc::apiserver {

nlohmann::json applyMergePatch(const nlohmann::json& target, const nlohmann::json& patch) {
  nlohmann::json result = target;
  result.merge_patch(patch);  // nlohmann implements RFC 7386 section 2 as written
  return result;
}

Result<nlohmann::json> applyJsonPatch(const nlohmann::json& target, const nlohmann::json& patch) {
  if (!patch.is_array()) {
    return makeError(kc::errc::kBadRequest,
                     "json: cannot unmarshal object into Go value of type jsonpatch.Patch");
  }
  for (const auto& op : patch) {
    if (!op.is_object() || !op.contains("op") || !op["op"].is_string() || !op.contains("path") ||
        !op["path"].is_string()) {
      return makeError(kc::errc::kBadRequest, "invalid JSON patch operation: " + op.dump());
    }
    const std::string kind = op["op"].get<std::string>();
    if (kind != "add" && kind != "remove" && kind != "replace" && kind != "move" &&
        kind != "copy" && kind != "test") {
      return makeError(kc::errc::kBadRequest, "Unexpected kind: " + kind);
    }
  }
  try {
    return target.patch(patch);
  } catch (const nlohmann::json::exception& e) {
    std::string what = e.what();
    if (what.find("unsuccessful") != std::string::npos) {
      return makeError(kc::errc::kInvalid, "testing value failed: " + what);
    }
    return makeError(kc::errc::kInvalid, what);
  }
}

namespace {

// patchMergeKey of list fields in the core API types (struct tags in k8s.io/api).
// "ports" depends on the parent: container ports merge by containerPort, service
// ports by port.
std::string mergeKeyFor(const std::string& field, const std::string& parentField) {
  static const std::map<std::string, std::string> kKeys = {{"containers", "name"},
                                                           {"initContainers", "name"},
                                                           {"ephemeralContainers", "name"},
                                                           {"volumes", "name"},
                                                           {"env", "name"},
                                                           {"volumeMounts", "mountPath"},
                                                           {"volumeDevices", "devicePath"},
                                                           {"imagePullSecrets", "name"},
                                                           {"conditions", "type"},
                                                           {"ownerReferences", "uid"},
                                                           {"hostAliases", "ip"},
                                                           {"addresses", "type"},
                                                           {"podIPs", "ip"},
                                                           {"hostIPs", "ip"},
                                                           {"resourceClaims", "name"},
                                                           {"schedulingGates", "name"},
                                                           {"images", ""},
                                                           {"subsets", ""}};
  if (field == "ports") {
    return (parentField == "containers" || parentField == "initContainers" ||
            parentField == "ephemeralContainers")
               ? "containerPort"
               : "port";
  }
  auto it = kKeys.find(field);
  return it == kKeys.end() ? "" : it->second;
}

// Lists of scalars merged as sets (patchStrategy:"merge" on a primitive list).
bool isPrimitiveMergeList(const std::string& field) {
  return field == "finalizers";
}

const std::string kPatchKey = "$patch";
const std::string kRetainKeys = "$retainKeys";
const std::string kDeletePrimitivePrefix = "$deleteFromPrimitiveList/";
const std::string kSetOrderPrefix = "$setElementOrder/";

bool startsWith(const std::string& s, const std::string& p) {
  return s.rfind(p, 0) == 0;
}

Result<nlohmann::json> mergeMap(const nlohmann::json& original, const nlohmann::json& patch,
                                const std::string& fieldName);

Result<nlohmann::json> mergeList(const nlohmann::json& original, const nlohmann::json& patch,
                                 const std::string& field, const std::string& parentField) {
  // {"$patch":"replace"} element: the rest of the patch list replaces the original.
  for (const auto& el : patch) {
    if (el.is_object() && el.contains(kPatchKey) && el[kPatchKey] == "replace") {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& e : patch) {
        if (!(e.is_object() && e.contains(kPatchKey))) {
          out.push_back(e);
        }
      }
      return out;
    }
  }
  if (isPrimitiveMergeList(field)) {
    nlohmann::json out = original.is_array() ? original : nlohmann::json::array();
    for (const auto& e : patch) {
      if (std::find(out.begin(), out.end(), e) == out.end()) {
        out.push_back(e);
      }
    }
    return out;
  }
  std::string key = mergeKeyFor(field, parentField);
  if (key.empty()) {
    // No merge key: the list is replaced, as with a JSON merge patch.
    nlohmann::json out = nlohmann::json::array();
    for (const auto& e : patch) {
      if (!(e.is_object() && e.contains(kPatchKey))) {
        out.push_back(e);
      }
    }
    return out;
  }
  nlohmann::json out = original.is_array() ? original : nlohmann::json::array();
  for (const auto& el : patch) {
    if (!el.is_object()) {
      return makeError(kc::errc::kBadRequest, "strategic merge patch: element of list \"" + field +
                                                  "\" is not an object: " + el.dump());
    }
    auto keyIt = el.find(key);
    if (keyIt == el.end()) {
      return makeError(kc::errc::kBadRequest,
                       "map: " + el.dump() + " does not contain declared merge key: " + key);
    }
    auto match = std::find_if(out.begin(), out.end(), [&](const nlohmann::json& o) {
      return o.is_object() && o.contains(key) && o[key] == *keyIt;
    });
    std::string directive =
        el.contains(kPatchKey) && el[kPatchKey].is_string() ? el[kPatchKey].get<std::string>() : "";
    if (directive == "delete") {
      if (match != out.end()) {
        out.erase(match);
      }
      continue;
    }
    if (!directive.empty() && directive != "merge" && directive != "replace") {
      return makeError(kc::errc::kBadRequest, "Unrecognized $patch directive: " + directive);
    }
    if (match == out.end()) {
      auto added = mergeMap(nlohmann::json::object(), el, field);
      if (!added) {
        return added.error();
      }
      out.push_back(std::move(added.value()));
    } else if (directive == "replace") {
      nlohmann::json copy = el;
      copy.erase(kPatchKey);
      *match = copy;
    } else {
      auto merged = mergeMap(*match, el, field);
      if (!merged) {
        return merged.error();
      }
      *match = std::move(merged.value());
    }
  }
  return out;
}

Result<nlohmann::json> mergeMap(const nlohmann::json& original, const nlohmann::json& patch,
                                const std::string& fieldName) {
  if (!patch.is_object()) {
    return patch;
  }
  if (auto d = patch.find(kPatchKey); d != patch.end()) {
    if (*d == "replace") {
      nlohmann::json copy = patch;
      copy.erase(kPatchKey);
      return copy;
    }
    if (*d == "delete") {
      return nlohmann::json();  // caller drops the key
    }
    if (*d != "merge") {
      return makeError(kc::errc::kBadRequest, "Unrecognized $patch directive: " + d->dump());
    }
  }
  nlohmann::json result = original.is_object() ? original : nlohmann::json::object();
  if (auto rk = patch.find(kRetainKeys); rk != patch.end()) {
    if (!rk->is_array()) {
      return makeError(kc::errc::kBadRequest, "$retainKeys must be a list of strings");
    }
    for (auto it = result.begin(); it != result.end();) {
      bool keep =
          std::find(rk->begin(), rk->end(), it.key()) != rk->end() || patch.contains(it.key());
      it = keep ? std::next(it) : result.erase(it);
    }
  }
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    const std::string& k = it.key();
    if (k == kPatchKey || k == kRetainKeys || startsWith(k, kSetOrderPrefix)) {
      continue;
    }
    if (startsWith(k, kDeletePrimitivePrefix)) {
      std::string listName = k.substr(kDeletePrimitivePrefix.size());
      if (!it->is_array()) {
        return makeError(kc::errc::kBadRequest, k + " must be a list");
      }
      if (auto list = result.find(listName); list != result.end() && list->is_array()) {
        nlohmann::json kept = nlohmann::json::array();
        for (const auto& e : *list) {
          if (std::find(it->begin(), it->end(), e) == it->end()) {
            kept.push_back(e);
          }
        }
        *list = kept;
      }
      continue;
    }
    if (it->is_null()) {
      result.erase(k);
      continue;
    }
    auto existing = result.find(k);
    if (it->is_object()) {
      auto merged = mergeMap(existing == result.end() ? nlohmann::json() : *existing, *it, k);
      if (!merged) {
        return merged.error();
      }
      if (merged->is_null()) {
        result.erase(k);
      } else {
        result[k] = std::move(merged.value());
      }
    } else if (it->is_array()) {
      auto merged =
          mergeList(existing == result.end() ? nlohmann::json() : *existing, *it, k, fieldName);
      if (!merged) {
        return merged.error();
      }
      result[k] = std::move(merged.value());
    } else {
      result[k] = *it;
    }
  }
  return result;
}

}  // namespace

Result<nlohmann::json> applyStrategicMergePatch(const nlohmann::json& target,
                                                const nlohmann::json& patch) {
  if (!patch.is_object()) {
    return makeError(kc::errc::kBadRequest, "strategic merge patch must be a JSON object");
  }
  return mergeMap(target, patch, "");
}

}  // namespace kc::apiserver
