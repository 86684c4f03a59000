#pragma once
// Internal to the ObjectStore's translation units (object_store.cpp and store_*.cpp): the
// watcher / table / change-event records and small JSON accessors. Not the double's API.

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tools/kube-apiserver-double/object_store.hpp"

namespace kc::apiserver {

using nlohmann::json;

inline std::string quote(const std::string& s) {
  return json(s).dump();
}

inline const json& metaOf(const json& obj) {
  static const json kEmpty = json::object();
  auto it = obj.find("metadata");
  return (it != obj.end() && it->is_object()) ? *it : kEmpty;
}

inline std::string str(const json& obj, const char* key) {
  auto it = obj.find(key);
  return (it != obj.end() && it->is_string()) ? it->get<std::string>() : "";
}

inline std::vector<std::string> ownerUids(const json& obj) {
  std::vector<std::string> out;
  auto refs = metaOf(obj).value("ownerReferences", json::array());
  if (refs.is_array()) {
    for (const auto& r : refs) {
      if (r.is_object() && r.contains("uid") && r["uid"].is_string()) {
        out.push_back(r["uid"].get<std::string>());
      }
    }
  }
  return out;
}

inline std::vector<std::string> finalizersOf(const json& obj) {
  std::vector<std::string> out;
  auto f = metaOf(obj).value("finalizers", json::array());
  if (f.is_array()) {
    for (const auto& s : f) {
      if (s.is_string()) {
        out.push_back(s.get<std::string>());
      }
    }
  }
  return out;
}

inline bool hasDeletionTimestamp(const json& obj) {
  const json& m = metaOf(obj);
  return m.contains("deletionTimestamp") && !m["deletionTimestamp"].is_null();
}

inline DeleteOptions policyOnly(const char* policy) {
  DeleteOptions o;
  o.propagationPolicy = policy;
  return o;
}

inline std::string errorLine(const ApiError& e) {
  return std::string("{\"type\":\"ERROR\",\"object\":") + e.toStatus().dump() + "}\n";
}

// 422 Invalid when a PodDisruptionBudget's spec is malformed.
void validatePdb(const std::string& name, const json& pdb);

// 422 Invalid when a CRD's additionalPrinterColumns are malformed.
void validateCrdPrinterColumns(const std::string& name, const json& crd);

// One immutable stored version of `obj` at resourceVersion `rv` (serialised once).
ObjectPtr freeze(json obj, std::uint64_t rv);

struct ObjectStore::Watcher {
  std::uint64_t id = 0;
  std::string tableKey;
  std::string apiVersion;
  std::string kind;
  std::string ns;
  LabelSelector labels;
  FieldSelector fields;
  bool bookmarks = false;
  std::optional<std::chrono::steady_clock::time_point> deadline;
  std::chrono::steady_clock::time_point lastBookmark;
  std::shared_ptr<WatchSink> sink;
  std::uint64_t eventsSent = 0;
  bool ended = false;
  std::function<std::string(const StoredObject&, bool)> render;  // see WatchOptions::render

  // The object as this watcher sees it.
  std::string objectJson(const StoredObject& o) const {
    return render ? render(o, eventsSent == 0) : o.fullJson(apiVersion, kind);
  }

  bool matches(const StoredObject& o) const {
    if (!ns.empty() && o.ns != ns) {
      return false;
    }
    return labels.matches(metaOf(o.object).value("labels", json())) && fields.matches(o.object);
  }
};

struct ObjectStore::Table {
  std::map<std::string, ObjectPtr> objects;
  std::vector<std::shared_ptr<Watcher>> watchers;
};

struct ObjectStore::Event {
  enum class Type { kAdded, kModified, kDeleted };
  std::uint64_t rv = 0;
  std::string tableKey;
  std::string key;
  Type type = Type::kAdded;
  ObjectPtr object;    // new state; for a deletion the final state
  ObjectPtr previous;  // state before, null when added
  // Serialised lines shared by every watcher: (type, apiVersion) -> line.
  std::vector<std::pair<std::string, std::string>> lines;
};

}  // namespace kc::apiserver
