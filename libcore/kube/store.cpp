#include "libcore/kube/store.hpp"

namespace kc::kube {

namespace {

const nlohmann::json* field(const nlohmann::json& obj, const char* a, const char* b) {
  auto ia = obj.find(a);
  if (ia == obj.end() || !ia->is_object()) {
    return nullptr;
  }
  auto ib = ia->find(b);
  return ib == ia->end() ? nullptr : &*ib;
}

std::string stringField(const nlohmann::json& obj, const char* a, const char* b) {
  const nlohmann::json* v = field(obj, a, b);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string{};
}

}  // namespace

std::string objectKey(const nlohmann::json& obj) {
  if (!obj.is_object()) {
    return {};
  }
  std::string name = stringField(obj, "metadata", "name");
  if (name.empty()) {
    return {};
  }
  std::string ns = stringField(obj, "metadata", "namespace");
  return ns.empty() ? name : ns + "/" + name;
}

std::string objectResourceVersion(const nlohmann::json& obj) {
  return obj.is_object() ? stringField(obj, "metadata", "resourceVersion") : std::string{};
}

void Store::indexLocked(const std::string& key, const nlohmann::json& obj) {
  byNamespace_[stringField(obj, "metadata", "namespace")].insert(key);
  if (std::string node = stringField(obj, "spec", "nodeName"); !node.empty()) {
    byNode_[node].insert(key);
  }
  if (const nlohmann::json* labels = field(obj, "metadata", "labels");
      labels != nullptr && labels->is_object()) {
    for (const auto& [k, v] : labels->items()) {
      if (v.is_string()) {
        byLabel_[k + "=" + v.get<std::string>()].insert(key);
      }
    }
  }
}

void Store::unindexLocked(const std::string& key, const nlohmann::json& obj) {
  auto drop = [&key](std::map<std::string, std::set<std::string>>& idx, const std::string& v) {
    auto it = idx.find(v);
    if (it != idx.end()) {
      it->second.erase(key);
      if (it->second.empty()) {
        idx.erase(it);
      }
    }
  };
  drop(byNamespace_, stringField(obj, "metadata", "namespace"));
  if (std::string node = stringField(obj, "spec", "nodeName"); !node.empty()) {
    drop(byNode_, node);
  }
  if (const nlohmann::json* labels = field(obj, "metadata", "labels");
      labels != nullptr && labels->is_object()) {
    for (const auto& [k, v] : labels->items()) {
      if (v.is_string()) {
        drop(byLabel_, k + "=" + v.get<std::string>());
      }
    }
  }
}

std::vector<ObjectPtr> Store::lookupLocked(const std::map<std::string, std::set<std::string>>& idx,
                                           const std::string& v) const {
  std::vector<ObjectPtr> out;
  auto it = idx.find(v);
  if (it == idx.end()) {
    return out;
  }
  out.reserve(it->second.size());
  for (const auto& key : it->second) {
    out.push_back(objects_.at(key));
  }
  return out;
}

ObjectPtr Store::get(const std::string& ns, const std::string& name) const {
  return getByKey(ns.empty() ? name : ns + "/" + name);
}

ObjectPtr Store::getByKey(const std::string& key) const {
  std::shared_lock lock(mu_);
  auto it = objects_.find(key);
  return it == objects_.end() ? nullptr : it->second;
}

std::vector<ObjectPtr> Store::list() const {
  std::shared_lock lock(mu_);
  std::vector<ObjectPtr> out;
  out.reserve(objects_.size());
  for (const auto& [k, v] : objects_) {
    out.push_back(v);
  }
  return out;
}

std::vector<std::string> Store::keys() const {
  std::shared_lock lock(mu_);
  std::vector<std::string> out;
  out.reserve(objects_.size());
  for (const auto& [k, v] : objects_) {
    out.push_back(k);
  }
  return out;
}

std::vector<ObjectPtr> Store::byNamespace(const std::string& ns) const {
  std::shared_lock lock(mu_);
  return lookupLocked(byNamespace_, ns);
}

std::vector<ObjectPtr> Store::byNode(const std::string& nodeName) const {
  std::shared_lock lock(mu_);
  return lookupLocked(byNode_, nodeName);
}

std::vector<ObjectPtr> Store::byLabel(const std::string& key, const std::string& value) const {
  std::shared_lock lock(mu_);
  return lookupLocked(byLabel_, key + "=" + value);
}

std::size_t Store::size() const {
  std::shared_lock lock(mu_);
  return objects_.size();
}

std::optional<Notification> Store::add(ObjectPtr obj) {
  std::string key = obj ? objectKey(*obj) : std::string{};
  if (key.empty()) {
    return std::nullopt;
  }
  std::unique_lock lock(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) {
    indexLocked(key, *obj);
    objects_.emplace(key, obj);
    return Notification{Notification::Kind::kAdd, nullptr, std::move(obj)};
  }
  ObjectPtr old = it->second;
  unindexLocked(key, *old);
  indexLocked(key, *obj);
  it->second = obj;
  return Notification{Notification::Kind::kUpdate, std::move(old), std::move(obj)};
}

std::optional<Notification> Store::remove(ObjectPtr obj) {
  std::string key = obj ? objectKey(*obj) : std::string{};
  std::unique_lock lock(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) {
    return std::nullopt;
  }
  ObjectPtr old = it->second;
  unindexLocked(key, *old);
  objects_.erase(it);
  // Hand out the final state the server sent (it may be newer than the cached one).
  return Notification{Notification::Kind::kDelete, obj ? std::move(obj) : std::move(old), nullptr};
}

std::vector<Notification> Store::replace(std::vector<ObjectPtr> items) {
  std::unordered_map<std::string, ObjectPtr> fresh;
  fresh.reserve(items.size());
  std::vector<const std::string*> order;  // first appearance of each key, in LIST order
  order.reserve(items.size());
  for (auto& obj : items) {
    if (std::string key = obj ? objectKey(*obj) : std::string{}; !key.empty()) {
      auto [it, inserted] = fresh.insert_or_assign(std::move(key), std::move(obj));
      if (inserted) {
        order.push_back(&it->first);
      }
    }
  }
  std::vector<Notification> out;
  std::unique_lock lock(mu_);
  for (const auto& [key, old] : objects_) {
    if (fresh.find(key) == fresh.end()) {
      out.push_back(Notification{Notification::Kind::kDelete, old, nullptr});
    }
  }
  for (const std::string* keyp : order) {
    const std::string& key = *keyp;
    const ObjectPtr& obj = fresh.find(key)->second;
    auto it = objects_.find(key);
    if (it == objects_.end()) {
      out.push_back(Notification{Notification::Kind::kAdd, nullptr, obj});
    } else if (objectResourceVersion(*it->second) != objectResourceVersion(*obj) ||
               objectResourceVersion(*obj).empty()) {
      out.push_back(Notification{Notification::Kind::kUpdate, it->second, obj});
    }
  }
  byNamespace_.clear();
  byNode_.clear();
  byLabel_.clear();
  objects_ = std::move(fresh);
  for (const auto& [key, obj] : objects_) {
    indexLocked(key, *obj);
  }
  return out;
}

}  // namespace kc::kube
