// DELETE and what follows it: preconditions, propagation policies, finalizers, ownerReferences
// garbage collection (background and foreground) and namespace termination.

#include <algorithm>

#include "tools/kube-apiserver-double/store_internal.hpp"

namespace kc::apiserver {

DeleteResult ObjectStore::remove(const ResourceInfo& res, const std::string& ns,
                                 const std::string& name, const DeleteOptions& options) {
  std::lock_guard lock(mu_);
  ObjectPtr current = getLocked(res, ns, name);
  return removeLocked(res, current, options);
}

DeleteResult ObjectStore::removeLocked(const ResourceInfo& res, ObjectPtr current,
                                       const DeleteOptions& opt) {
  if (opt.preconditionUid && *opt.preconditionUid != current->uid) {
    throw conflict(res.group, res.resource, current->name,
                   "Precondition failed: UID in precondition: " + *opt.preconditionUid +
                       ", UID in object meta: " + current->uid);
  }
  if (opt.preconditionResourceVersion &&
      *opt.preconditionResourceVersion != std::to_string(current->resourceVersion)) {
    throw conflict(res.group, res.resource, current->name,
                   "Precondition failed: ResourceVersion in precondition: " +
                       *opt.preconditionResourceVersion + ", ResourceVersion in object meta: " +
                       std::to_string(current->resourceVersion));
  }
  const std::string& policy = opt.propagationPolicy;
  if (!policy.empty() && policy != "Background" && policy != "Foreground" && policy != "Orphan") {
    throw badRequest("propagationPolicy: Unsupported value: " + quote(policy) +
                     ": supported values: \"Foreground\", \"Background\", \"Orphan\"");
  }
  if (hasDeletionTimestamp(current->object)) {
    return {current, false};  // deletion already pending on finalizers
  }
  const std::string key = objectKey(res, current->ns, current->name);
  if (policy == "Orphan") {
    auto deps = dependents_.count(current->uid) ? dependents_[current->uid]
                                                : std::set<std::pair<std::string, std::string>>{};
    for (const auto& [tableKey, depKey] : deps) {
      const ResourceInfo* depRes = registry_.findByTable(tableKey);
      auto t = tables_.find(tableKey);
      if (!depRes || t == tables_.end() || !t->second.objects.count(depKey)) {
        continue;
      }
      ObjectPtr dep = t->second.objects[depKey];
      json next = dep->object;
      json refs = json::array();
      for (const auto& r : next["metadata"]["ownerReferences"]) {
        if (r.value("uid", "") != current->uid) {
          refs.push_back(r);
        }
      }
      if (refs.empty()) {
        next["metadata"].erase("ownerReferences");
      } else {
        next["metadata"]["ownerReferences"] = refs;
      }
      commit(*depRes, depKey, dep, std::move(next));
    }
  }
  auto finalizers = finalizersOf(current->object);
  const bool foreground = policy == "Foreground" && dependents_.count(current->uid) > 0;
  if (foreground &&
      std::find(finalizers.begin(), finalizers.end(), "foregroundDeletion") == finalizers.end()) {
    finalizers.push_back("foregroundDeletion");
  }
  const bool isNamespace = res.group.empty() && res.resource == "namespaces";
  if (!finalizers.empty() || isNamespace) {
    json next = current->object;
    next["metadata"]["deletionTimestamp"] = timestamp();
    next["metadata"]["deletionGracePeriodSeconds"] = 0;
    if (!finalizers.empty()) {
      next["metadata"]["finalizers"] = finalizers;
    }
    if (next["metadata"].contains("generation")) {
      next["metadata"]["generation"] = next["metadata"].value("generation", 0) + 1;
    }
    if (isNamespace) {
      next["status"]["phase"] = "Terminating";
    }
    ObjectPtr pending = commit(res, key, current, std::move(next));
    if (isNamespace) {
      onNamespaceTerminating(current->name);
      maybeFinishNamespace(current->name);
    }
    if (foreground) {
      auto deps = dependents_[current->uid];
      for (const auto& [tableKey, depKey] : deps) {
        const ResourceInfo* depRes = registry_.findByTable(tableKey);
        auto t = tables_.find(tableKey);
        if (depRes && t != tables_.end() && t->second.objects.count(depKey)) {
          ObjectPtr dep = t->second.objects[depKey];
          bool otherOwner = false;
          for (const auto& u : ownerUids(dep->object)) {
            otherOwner = otherOwner || (u != current->uid && uids_.count(u) > 0);
          }
          if (otherOwner) {
            collectGarbage(current->uid, {{tableKey, depKey}});
          } else {
            removeLocked(*depRes, dep, policyOnly("Foreground"));
          }
        }
      }
      maybeFinishForeground(pending);
    }
    const Table* t = findTable(res.tableKey());
    auto it = t ? t->objects.find(key) : decltype(t->objects.end()){};
    if (t && it != t->objects.end()) {
      return {it->second, false};
    }
    return {pending, true};
  }
  return {finalRemove(res, current), true};
}

ObjectPtr ObjectStore::finalRemove(const ResourceInfo& res, ObjectPtr current) {
  const std::string key = objectKey(res, current->ns, current->name);
  const std::string uid = current->uid;
  ObjectPtr deleted = commit(res, key, current, std::nullopt);
  if (res.group == "apiextensions.k8s.io" && res.resource == "customresourcedefinitions") {
    onCrdChanged(nullptr, &current->object);
  }
  if (auto d = dependents_.find(uid); d != dependents_.end()) {
    auto deps =
        std::vector<std::pair<std::string, std::string>>(d->second.begin(), d->second.end());
    collectGarbage(uid, std::move(deps));
  }
  maybeFinishForeground(deleted);
  if (res.namespaced) {
    maybeFinishNamespace(current->ns);
  }
  return deleted;
}

// Background garbage collection: a dependent whose owners are all gone is deleted; one
// that still has a live owner only loses the dangling reference.
void ObjectStore::collectGarbage(const std::string& ownerUid,
                                 std::vector<std::pair<std::string, std::string>> dependents) {
  for (const auto& [tableKey, depKey] : dependents) {
    const ResourceInfo* depRes = registry_.findByTable(tableKey);
    auto t = tables_.find(tableKey);
    if (!depRes || t == tables_.end()) {
      continue;
    }
    auto it = t->second.objects.find(depKey);
    if (it == t->second.objects.end()) {
      continue;
    }
    ObjectPtr dep = it->second;
    json refs = json::array();
    for (const auto& r : metaOf(dep->object).value("ownerReferences", json::array())) {
      std::string u = r.value("uid", "");
      if (u != ownerUid && uids_.count(u)) {
        refs.push_back(r);
      }
    }
    if (refs.empty()) {
      if (!hasDeletionTimestamp(dep->object)) {
        removeLocked(*depRes, dep, policyOnly("Background"));
      }
    } else {
      json next = dep->object;
      next["metadata"]["ownerReferences"] = refs;
      commit(*depRes, depKey, dep, std::move(next));
    }
  }
}

// The real garbage collector also acts on a dependent whose owner uid does not exist (never
// existed, or is already gone): with no live owner left it is deleted in the background,
// otherwise the dangling references are removed. The double does this right after the write
// that stored such ownerReferences (the write itself still answers with the stored object).
void ObjectStore::collectIfOwnersMissing(const ResourceInfo& res, const ObjectPtr& obj) {
  for (const auto& owner : ownerUids(obj->object)) {
    if (!uids_.count(owner)) {
      collectGarbage(owner, {{res.tableKey(), objectKey(res, obj->ns, obj->name)}});
      return;  // collectGarbage drops every reference to a missing uid at once
    }
  }
}

// An owner deleted with propagationPolicy=Foreground goes once its last dependent is gone.
void ObjectStore::maybeFinishForeground(ObjectPtr removed) {
  std::vector<std::string> owners = ownerUids(removed->object);
  owners.push_back(removed->uid);  // the object itself may be a foreground owner without dependents
  for (const auto& owner : owners) {
    if (dependents_.count(owner)) {
      continue;
    }
    auto loc = uids_.find(owner);
    if (loc == uids_.end()) {
      continue;
    }
    const ResourceInfo* ownerRes = registry_.findByTable(loc->second.first);
    auto t = tables_.find(loc->second.first);
    if (!ownerRes || t == tables_.end()) {
      continue;
    }
    auto it = t->second.objects.find(loc->second.second);
    if (it == t->second.objects.end() || !hasDeletionTimestamp(it->second->object)) {
      continue;
    }
    auto fins = finalizersOf(it->second->object);
    if (std::find(fins.begin(), fins.end(), "foregroundDeletion") == fins.end()) {
      continue;
    }
    std::erase(fins, "foregroundDeletion");
    json next = it->second->object;
    if (fins.empty()) {
      next["metadata"].erase("finalizers");
      auto finalState = std::make_shared<StoredObject>(*it->second);
      finalState->object = std::move(next);
      finalRemove(*ownerRes, finalState);
    } else {
      next["metadata"]["finalizers"] = fins;
      commit(*ownerRes, loc->second.second, it->second, std::move(next));
    }
  }
}

// Namespace deletion: what the namespace controller does, done at once. Contents are
// deleted (finalizers still hold objects back); the namespace goes when it is empty.
void ObjectStore::onNamespaceTerminating(const std::string& ns) {
  const std::string prefix = ns + "/";
  std::vector<std::pair<std::string, std::string>> victims;
  for (const auto& [tableKey, t] : tables_) {
    const ResourceInfo* r = registry_.findByTable(tableKey);
    if (!r || !r->namespaced) {
      continue;
    }
    for (auto it = t.objects.lower_bound(prefix);
         it != t.objects.end() && it->first.rfind(prefix, 0) == 0; ++it) {
      victims.emplace_back(tableKey, it->first);
    }
  }
  for (const auto& [tableKey, key] : victims) {
    const ResourceInfo* r = registry_.findByTable(tableKey);
    auto t = tables_.find(tableKey);
    if (!r || t == tables_.end()) {
      continue;
    }
    auto it = t->second.objects.find(key);
    if (it != t->second.objects.end() && !hasDeletionTimestamp(it->second->object)) {
      removeLocked(*r, it->second, policyOnly("Background"));
    }
  }
}

void ObjectStore::maybeFinishNamespace(const std::string& ns) {
  const ResourceInfo* nsRes = registry_.find("", "v1", "namespaces");
  auto nsTable = tables_.find(nsRes->tableKey());
  if (nsTable == tables_.end()) {
    return;
  }
  auto nsIt = nsTable->second.objects.find(ns);
  if (nsIt == nsTable->second.objects.end() || !hasDeletionTimestamp(nsIt->second->object)) {
    return;
  }
  const std::string prefix = ns + "/";
  for (const auto& [tableKey, t] : tables_) {
    auto it = t.objects.lower_bound(prefix);
    if (it != t.objects.end() && it->first.rfind(prefix, 0) == 0) {
      return;  // still has content
    }
  }
  ObjectPtr nsObj = nsIt->second;
  commit(*nsRes, ns, nsObj, std::nullopt);
}

}  // namespace kc::apiserver
