#pragma once
// The informer's in-memory cache: objects keyed by namespace/name, with secondary indexes by
// namespace, by node (spec.nodeName) and by label key=value. Objects are immutable JSON
// shared with readers, so a handler can keep one without copying. Mutations return the
// notifications to deliver (the informer calls handlers outside the lock).
//
// Apply rules (tolerant, because watch and relist race with each other):
// ADDED of a known key is an update; MODIFIED of an unknown key is an add; DELETED of an
// unknown key is nothing. replace() (after LIST) diffs the old contents against the list:
// new keys → add, changed resourceVersion → update, missing keys → delete (deletes first,
// then adds and updates in LIST order).

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace kc::kube {

using ObjectPtr = std::shared_ptr<const nlohmann::json>;

struct Notification {
  enum class Kind { kAdd, kUpdate, kDelete };
  Kind kind;
  ObjectPtr oldObj;  // update, delete
  ObjectPtr newObj;  // add, update
};

// "ns/name", or "name" for cluster-scoped objects; empty if the object has no name.
std::string objectKey(const nlohmann::json& obj);
std::string objectResourceVersion(const nlohmann::json& obj);

class Store {
 public:
  ObjectPtr get(const std::string& ns, const std::string& name) const;
  ObjectPtr getByKey(const std::string& key) const;
  std::vector<ObjectPtr> list() const;
  std::vector<ObjectPtr> byNamespace(const std::string& ns) const;
  std::vector<ObjectPtr> byNode(const std::string& nodeName) const;  // spec.nodeName
  std::vector<ObjectPtr> byLabel(const std::string& key, const std::string& value) const;
  std::vector<std::string> keys() const;
  std::size_t size() const;

  std::optional<Notification> add(ObjectPtr obj);     // ADDED / MODIFIED
  std::optional<Notification> remove(ObjectPtr obj);  // DELETED (the final state)
  // Replaces the whole content with a LIST result; returns the diff as notifications.
  std::vector<Notification> replace(std::vector<ObjectPtr> items);

 private:
  void indexLocked(const std::string& key, const nlohmann::json& obj);
  void unindexLocked(const std::string& key, const nlohmann::json& obj);
  std::vector<ObjectPtr> lookupLocked(const std::map<std::string, std::set<std::string>>& idx,
                                      const std::string& v) const;

  mutable std::shared_mutex mu_;  // guards everything below
  std::unordered_map<std::string, ObjectPtr> objects_;
  std::map<std::string, std::set<std::string>> byNamespace_;
  std::map<std::string, std::set<std::string>> byNode_;
  std::map<std::string, std::set<std::string>> byLabel_;  // "key=value"
};

}  // namespace kc::kube
