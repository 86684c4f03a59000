// CustomResourceDefinitions: validation and acceptance on create, and serving (or removing)
// the resource a CRD defines when it is created, changed or deleted.

#include <algorithm>
#include <cctype>

#include "tools/kube-apiserver-double/store_internal.hpp"

namespace kc::apiserver {

// additionalPrinterColumns are checked on create and update, as the real CRD validation does.
void validateCrdPrinterColumns(const std::string& name, const json& crd) {
  const json spec = crd.value("spec", json::object());
  const json versions = spec.value("versions", json::array());
  if (!versions.is_array()) {
    return;
  }
  for (std::size_t i = 0; i < versions.size(); ++i) {
    if (!versions[i].is_object() || !versions[i].contains("additionalPrinterColumns")) {
      continue;
    }
    const json& cols = versions[i]["additionalPrinterColumns"];
    const std::string base = "spec.versions[" + std::to_string(i) + "].additionalPrinterColumns";
    if (!cols.is_array()) {
      throw invalid("apiextensions.k8s.io", "CustomResourceDefinition", name, base,
                    "Invalid value: must be a list");
    }
    for (std::size_t j = 0; j < cols.size(); ++j) {
      auto p = parsePrinterColumn(cols[j], base + "[" + std::to_string(j) + "]");
      if (!p) {
        const std::string& m = p.error().message;
        auto colon = m.find(": ");
        throw invalid("apiextensions.k8s.io", "CustomResourceDefinition", name, m.substr(0, colon),
                      colon == std::string::npos ? m : m.substr(colon + 2));
      }
    }
  }
}

void ObjectStore::acceptCrdLocked(const ResourceInfo& res, const std::string& name, json& body) {
  validateCrdPrinterColumns(name, body);
  const json spec = body.value("spec", json::object());
  const std::string group = str(spec, "group");
  const json names = spec.value("names", json::object());
  const std::string plural = str(names, "plural");
  auto crdInvalid = [&](const std::string& field, const std::string& msg) {
    return invalid(res.group, "CustomResourceDefinition", name, field, msg);
  };
  if (group.empty()) {
    throw crdInvalid("spec.group", "Required value");
  }
  if (plural.empty() || str(names, "kind").empty()) {
    throw crdInvalid("spec.names", "Required value: plural and kind are required");
  }
  if (name != plural + "." + group) {
    throw crdInvalid("metadata.name", "Invalid value: " + quote(name) +
                                          ": must be spec.names.plural+\".\"+spec.group");
  }
  const std::string scope = str(spec, "scope");
  if (scope != "Namespaced" && scope != "Cluster") {
    throw crdInvalid("spec.scope", "Unsupported value: " + quote(scope) +
                                       ": supported values: \"Cluster\", \"Namespaced\"");
  }
  const json versions = spec.value("versions", json::array());
  int storage = 0;
  for (const auto& v : versions) {
    storage += v.value("storage", false) ? 1 : 0;
  }
  if (!versions.is_array() || versions.empty()) {
    throw crdInvalid("spec.versions",
                     "Invalid value: must have exactly one version marked as storage version");
  }
  if (storage != 1) {
    throw crdInvalid("spec.versions",
                     "Invalid value: must have exactly one version marked as storage version");
  }
  if (registry_.findByTable(group + "/" + plural) != nullptr) {
    throw alreadyExists(res.group, res.resource, name);
  }
  std::string now = timestamp();
  json accepted = names;
  if (!accepted.contains("singular")) {
    std::string s = str(names, "kind");
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    accepted["singular"] = s;
  }
  if (!accepted.contains("listKind")) {
    accepted["listKind"] = str(names, "kind") + "List";
  }
  std::string storageVersion;
  for (const auto& v : versions) {
    if (v.value("storage", false)) {
      storageVersion = str(v, "name");
    }
  }
  body["status"] = {{"conditions",
                     {{{"type", "NamesAccepted"},
                       {"status", "True"},
                       {"reason", "NoConflicts"},
                       {"message", "no conflicts found"},
                       {"lastTransitionTime", now}},
                      {{"type", "Established"},
                       {"status", "True"},
                       {"reason", "InitialNamesAccepted"},
                       {"message", "the initial names have been accepted"},
                       {"lastTransitionTime", now}}}},
                    {"acceptedNames", accepted},
                    {"storedVersions", {storageVersion}}};
}

void ObjectStore::onCrdChanged(const nlohmann::json* crd, const nlohmann::json* previous) {
  auto resourceOf = [](const json& c) {
    const json spec = c.value("spec", json::object());
    const json names = spec.value("names", json::object());
    ResourceInfo r;
    r.group = str(spec, "group");
    r.resource = str(names, "plural");
    r.kind = str(names, "kind");
    r.singular = str(names, "singular");
    if (r.singular.empty()) {
      r.singular = r.kind;
      std::transform(r.singular.begin(), r.singular.end(), r.singular.begin(),
                     [](unsigned char ch) { return std::tolower(ch); });
    }
    r.listKind = str(names, "listKind").empty() ? r.kind + "List" : str(names, "listKind");
    r.namespaced = str(spec, "scope") != "Cluster";
    r.custom = true;
    r.shortNames = names.value("shortNames", std::vector<std::string>{});
    r.categories = names.value("categories", std::vector<std::string>{});
    std::vector<std::string> versions;
    for (const auto& v : spec.value("versions", json::array())) {
      if (!v.value("served", true)) {
        continue;
      }
      std::string name = str(v, "name");
      if (v.value("storage", false)) {
        versions.insert(versions.begin(), name);
      } else {
        versions.push_back(name);
      }
      if (v.contains("subresources") && v["subresources"].is_object() &&
          v["subresources"].contains("status")) {
        r.hasStatus = true;
      }
      auto& columns = r.printerColumns[name];
      for (const auto& col : v.value("additionalPrinterColumns", json::array())) {
        if (auto p = parsePrinterColumn(col, "additionalPrinterColumns")) {
          columns.push_back(std::move(*p));
        }
      }
    }
    r.versions = versions;
    return r;
  };
  std::optional<ResourceInfo> oldRes =
      previous ? std::optional(resourceOf(*previous)) : std::nullopt;
  std::optional<ResourceInfo> newRes = crd ? std::optional(resourceOf(*crd)) : std::nullopt;
  if (oldRes && (!newRes || newRes->tableKey() != oldRes->tableKey())) {
    // The resource goes away with its objects (each gets a DELETED event).
    if (const ResourceInfo* registered = registry_.findByTable(oldRes->tableKey())) {
      ResourceInfo copy = *registered;
      auto t = tables_.find(copy.tableKey());
      if (t != tables_.end()) {
        std::vector<ObjectPtr> objs;
        for (const auto& [k, o] : t->second.objects) {
          objs.push_back(o);
        }
        for (const auto& o : objs) {
          commit(copy, objectKey(copy, o->ns, o->name), o, std::nullopt);
        }
        for (auto& w : t->second.watchers) {
          endWatcher(*w);
        }
        tables_.erase(t);
      }
      registry_.removeCustom(copy.group, copy.resource);
    }
  }
  if (newRes && !newRes->versions.empty()) {
    registry_.add(*newRes);
  }
}

}  // namespace kc::apiserver
