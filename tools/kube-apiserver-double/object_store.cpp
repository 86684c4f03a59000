#include "tools/kube-apiserver-double/object_store.hpp"

#include <algorithm>
#include <cctype>

#include "libcore/base/base64.hpp"
#include "libcore/base/rfc3339.hpp"
#include "tools/kube-apiserver-double/dra_validation.hpp"
#include "tools/kube-apiserver-double/object_defaults.hpp"
#include "tools/kube-apiserver-double/store_internal.hpp"

namespace kc::apiserver {

std::string StoredObject::fullJson(const std::string& apiVersion, const std::string& kind) const {
  std::string out;
  out.reserve(itemJson.size() + apiVersion.size() + kind.size() + 32);
  out += "{\"apiVersion\":";
  out += quote(apiVersion);
  out += ",\"kind\":";
  out += quote(kind);
  if (itemJson.size() > 2) {
    out += ',';
    out.append(itemJson, 1, std::string::npos);
  } else {
    out += '}';
  }
  return out;
}

std::string objectKey(const ResourceInfo& res, const std::string& ns, const std::string& name) {
  return res.namespaced ? ns + "/" + name : name;
}

ObjectPtr freeze(json obj, std::uint64_t rv) {
  auto so = std::make_shared<StoredObject>();
  obj["metadata"]["resourceVersion"] = std::to_string(rv);
  json kind;
  json apiVersion;
  if (auto it = obj.find("kind"); it != obj.end()) {
    kind = std::move(*it);
    obj.erase(it);
  }
  if (auto it = obj.find("apiVersion"); it != obj.end()) {
    apiVersion = std::move(*it);
    obj.erase(it);
  }
  so->itemJson = obj.dump();
  if (!kind.is_null()) {
    obj["kind"] = std::move(kind);
  }
  if (!apiVersion.is_null()) {
    obj["apiVersion"] = std::move(apiVersion);
  }
  const json& meta = metaOf(obj);
  so->ns = str(meta, "namespace");
  so->name = str(meta, "name");
  so->uid = str(meta, "uid");
  so->resourceVersion = rv;
  so->object = std::move(obj);
  return so;
}

ObjectStore::ObjectStore(StoreOptions options)
    : options_(std::move(options)),
      registry_(ResourceRegistry::withBuiltins()),
      rng_(options_.seed) {
  seedDefaults();
}

ObjectStore::~ObjectStore() {
  std::lock_guard lock(mu_);
  for (auto& [id, w] : watchers_) {
    if (!w->ended) {
      endWatcher(*w);
    }
  }
}

void ObjectStore::seedDefaults() {
  std::lock_guard lock(mu_);
  const ResourceInfo* ns = registry_.find("", "v1", "namespaces");
  for (const char* name : {"default", "kube-system", "kube-public", "kube-node-lease"}) {
    createLocked(*ns, "",
                 {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}});
  }
}

ObjectStore::Table& ObjectStore::table(const std::string& key) {
  return tables_[key];
}

const ObjectStore::Table* ObjectStore::findTable(const std::string& key) const {
  auto it = tables_.find(key);
  return it == tables_.end() ? nullptr : &it->second;
}

std::string ObjectStore::newUid() {
  std::uniform_int_distribution<std::uint64_t> d;
  std::uint64_t a = d(rng_);
  std::uint64_t b = d(rng_);
  a = (a & 0xFFFFFFFFFFFF0FFFull) | 0x0000000000004000ull;  // version 4
  b = (b & 0x3FFFFFFFFFFFFFFFull) | 0x8000000000000000ull;  // variant 10
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xFFFF), static_cast<unsigned>(a & 0xFFFF),
                static_cast<unsigned>(b >> 48),
                static_cast<unsigned long long>(b & 0xFFFFFFFFFFFFull));
  return buf;
}

std::string ObjectStore::timestamp() const {
  return formatRfc3339(options_.clock());
}

std::uint64_t ObjectStore::parseRv(const std::string& rv) const {
  if (rv.empty() || rv.size() > 19 ||
      !std::all_of(rv.begin(), rv.end(), [](unsigned char c) { return std::isdigit(c); })) {
    throw ApiError(400, "BadRequest",
                   "resourceVersion: Invalid value: " + quote(rv) + ": invalid resource version");
  }
  return std::stoull(rv);
}

std::optional<ResourceInfo> ObjectStore::findResource(const std::string& group,
                                                      const std::string& version,
                                                      const std::string& resource) const {
  std::lock_guard lock(mu_);
  const ResourceInfo* r = registry_.find(group, version, resource);
  return r ? std::optional<ResourceInfo>(*r) : std::nullopt;
}

nlohmann::json ObjectStore::apiVersions() const {
  std::lock_guard lock(mu_);
  return registry_.apiVersions();
}
nlohmann::json ObjectStore::apiGroupList() const {
  std::lock_guard lock(mu_);
  return registry_.apiGroupList();
}
std::optional<nlohmann::json> ObjectStore::apiGroup(const std::string& group) const {
  std::lock_guard lock(mu_);
  return registry_.apiGroup(group);
}
std::optional<nlohmann::json> ObjectStore::resourceList(const std::string& group,
                                                        const std::string& version) const {
  std::lock_guard lock(mu_);
  return registry_.resourceList(group, version);
}

nlohmann::json ObjectStore::openApiV3Root() const {
  std::lock_guard lock(mu_);
  return registry_.openApiV3Root();
}
std::optional<nlohmann::json> ObjectStore::openApiV3(const std::string& group,
                                                     const std::string& version) const {
  std::lock_guard lock(mu_);
  return registry_.openApiV3(group, version);
}

std::chrono::system_clock::time_point ObjectStore::now() const {
  std::lock_guard lock(mu_);
  return options_.clock();
}

std::function<std::chrono::system_clock::time_point()> ObjectStore::clock() const {
  std::lock_guard lock(mu_);
  return options_.clock;
}

std::uint64_t ObjectStore::currentResourceVersion() const {
  std::lock_guard lock(mu_);
  return rv_;
}

std::size_t ObjectStore::watcherCount() const {
  std::lock_guard lock(mu_);
  return static_cast<std::size_t>(std::count_if(watchers_.begin(), watchers_.end(),
                                                [](const auto& p) { return !p.second->ended; }));
}

std::size_t ObjectStore::objectCount(const ResourceInfo& res) const {
  std::lock_guard lock(mu_);
  const Table* t = findTable(res.tableKey());
  return t ? t->objects.size() : 0;
}

void ObjectStore::setWatchFaults(bool expiredAsEvent, std::uint64_t dropAfter,
                                 double dropProbability) {
  std::lock_guard lock(mu_);
  options_.expiredAsEvent = expiredAsEvent;
  options_.dropWatchAfterEvents = dropAfter;
  options_.dropWatchProbability = dropProbability;
}

// ---------------------------------------------------------------- reads

ObjectPtr ObjectStore::getLocked(const ResourceInfo& res, const std::string& ns,
                                 const std::string& name) const {
  const Table* t = findTable(res.tableKey());
  if (t) {
    auto it = t->objects.find(objectKey(res, ns, name));
    if (it != t->objects.end()) {
      return it->second;
    }
  }
  throw notFound(res.group, res.resource, name);
}

ObjectPtr ObjectStore::get(const ResourceInfo& res, const std::string& ns,
                           const std::string& name) const {
  std::lock_guard lock(mu_);
  return getLocked(res, ns, name);
}

ListResult ObjectStore::list(const ResourceInfo& res, const ListOptions& opt) const {
  auto labels = LabelSelector::parse(opt.labelSelector);
  if (!labels) {
    throw badRequest(labels.error().message);
  }
  auto fields = FieldSelector::parse(opt.fieldSelector, res.fieldLabels);
  if (!fields) {
    throw badRequest(fields.error().message);
  }
  if (opt.limit < 0) {
    throw badRequest("limit: Invalid value: " + std::to_string(opt.limit) +
                     ": must be greater than or equal to 0");
  }
  std::lock_guard lock(mu_);
  std::uint64_t listRv = rv_;
  std::string startAfter;
  bool haveStart = false;
  const bool rvSet = opt.resourceVersion.has_value() && !opt.resourceVersion->empty();
  if (!opt.resourceVersionMatch.empty()) {
    if (!rvSet) {
      throw badRequest(
          "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless "
          "resourceVersion is provided");
    }
    if (opt.resourceVersionMatch != "Exact" && opt.resourceVersionMatch != "NotOlderThan") {
      throw badRequest(
          "resourceVersionMatch: Unsupported value: " + quote(opt.resourceVersionMatch) +
          ": supported values: \"Exact\", \"NotOlderThan\"");
    }
  }
  if (!opt.continueToken.empty()) {
    if (rvSet && *opt.resourceVersion != "0") {
      throw badRequest("specifying resource version is not allowed when using continue");
    }
    auto raw = base64Decode(opt.continueToken);
    json tok = raw ? json::parse(*raw, nullptr, false) : json();
    if (!tok.is_object() || !tok.contains("rv") || !tok["rv"].is_number_unsigned() ||
        !tok.contains("start") || !tok["start"].is_string()) {
      throw badRequest(
          "continue key is not valid: incorrect encoded start resourceVersion (version "
          "meta.k8s.io/v1)");
    }
    listRv = tok["rv"].get<std::uint64_t>();
    startAfter = tok["start"].get<std::string>();
    haveStart = true;
    if (listRv < compactedRv_) {
      throw expired(
          "The provided continue parameter is too old to display a consistent list result. You can "
          "start a new list "
          "without the continue parameter, or use the continue token in this response to retrieve "
          "the remainder of "
          "the results. Continuing with the provided token results in an inconsistent list - "
          "objects that were "
          "created, modified, or deleted between the time the first chunk was returned and now may "
          "show up in the "
          "list.");
    }
  } else if (rvSet && *opt.resourceVersion != "0") {
    std::uint64_t v = parseRv(*opt.resourceVersion);
    bool exact =
        opt.resourceVersionMatch == "Exact" || (opt.resourceVersionMatch.empty() && opt.limit > 0);
    if (v > rv_) {
      throw ApiError(
          504, "Timeout",
          "Too large resource version: " + std::to_string(v) + ", current: " + std::to_string(rv_),
          json{{"causes",
                {{{"reason", "ResourceVersionTooLarge"},
                  {"message", "Too large resource version"}}}},
               {"retryAfterSeconds", 1}});
    }
    if (exact) {
      if (v < compactedRv_) {
        throw expired("The resourceVersion for the provided list is too old.");
      }
      listRv = v;
    }
  }

  // State at listRv = current state with the newer changes of this table rolled back.
  std::map<std::string, ObjectPtr> overlay;
  const std::string tableKey = res.tableKey();
  if (listRv < rv_) {
    for (auto it = history_.rbegin(); it != history_.rend() && (*it)->rv > listRv; ++it) {
      if ((*it)->tableKey == tableKey) {
        overlay[(*it)->key] = (*it)->previous;
      }
    }
  }
  static const std::map<std::string, ObjectPtr> kEmpty;
  const Table* t = findTable(tableKey);
  const auto& objects = t ? t->objects : kEmpty;
  const std::string prefix = (res.namespaced && !opt.ns.empty()) ? opt.ns + "/" : "";
  auto from = [&](const std::map<std::string, ObjectPtr>& m) {
    return haveStart ? m.upper_bound(startAfter) : m.lower_bound(prefix);
  };
  auto it = from(objects);
  auto ot = from(overlay);
  ListResult result;
  result.resourceVersion = listRv;
  std::string lastKey;
  while (it != objects.end() || ot != overlay.end()) {
    const std::string* key;
    ObjectPtr obj;
    if (ot == overlay.end() || (it != objects.end() && it->first < ot->first)) {
      key = &it->first;
      obj = it->second;
      ++it;
    } else {
      key = &ot->first;
      obj = ot->second;
      if (it != objects.end() && it->first == ot->first) {
        ++it;
      }
      ++ot;
    }
    if (!prefix.empty() && key->compare(0, prefix.size(), prefix) != 0) {
      break;
    }
    if (opt.limit > 0 && static_cast<std::int64_t>(result.items.size()) == opt.limit) {
      // More objects exist past the page: hand out a continue token.
      result.continueToken = base64Encode(json{{"rv", listRv}, {"start", lastKey}}.dump());
      break;
    }
    if (!obj) {
      continue;
    }
    lastKey = *key;
    if (!labels->empty() && !labels->matches(metaOf(obj->object).value("labels", json()))) {
      continue;
    }
    if (!fields->empty() && !fields->matches(obj->object)) {
      continue;
    }
    result.items.push_back(std::move(obj));
  }
  return result;
}

// ---------------------------------------------------------------- commit

ObjectPtr ObjectStore::commit(const ResourceInfo& res, const std::string& key, ObjectPtr previous,
                              std::optional<nlohmann::json> object) {
  const std::uint64_t rv = ++rv_;
  const std::string tableKey = res.tableKey();
  Table& t = table(tableKey);
  auto ev = std::make_shared<Event>();
  ev->rv = rv;
  ev->tableKey = tableKey;
  ev->key = key;
  ev->previous = previous;
  auto unindex = [&](const ObjectPtr& o) {
    for (const auto& owner : ownerUids(o->object)) {
      auto d = dependents_.find(owner);
      if (d != dependents_.end()) {
        d->second.erase({tableKey, key});
        if (d->second.empty()) {
          dependents_.erase(d);
        }
      }
    }
  };
  ObjectPtr result;
  if (object) {
    result = freeze(std::move(*object), rv);
    if (previous) {
      unindex(previous);
    }
    for (const auto& owner : ownerUids(result->object)) {
      dependents_[owner].insert({tableKey, key});
    }
    uids_[result->uid] = {tableKey, key};
    t.objects[key] = result;
    ev->type = previous ? Event::Type::kModified : Event::Type::kAdded;
  } else {
    result = freeze(previous->object, rv);
    unindex(previous);
    uids_.erase(previous->uid);
    t.objects.erase(key);
    ev->type = Event::Type::kDeleted;
  }
  ev->object = result;
  history_.push_back(ev);
  while (history_.size() > options_.historyWindow) {
    compactedRv_ = history_.front()->rv;
    history_.pop_front();
  }
  for (auto& w : t.watchers) {
    deliver(*w, *ev);
  }
  std::erase_if(t.watchers, [](const auto& w) { return w->ended; });
  if (res.namespaced && (tableKey == "/pods" || tableKey == "policy/poddisruptionbudgets")) {
    reconcileBudgetsLocked(result->ns);
  }
  if (res.namespaced && (tableKey == "/pods" || res.group == dra::kGroup)) {
    reconcileResourceClaimsLocked(tableKey, result, ev->type == Event::Type::kDeleted);
  }
  return result;
}

// ---------------------------------------------------------------- writes

ObjectPtr ObjectStore::create(const ResourceInfo& res, const std::string& ns, nlohmann::json body) {
  std::lock_guard lock(mu_);
  return createLocked(res, ns, std::move(body));
}

ObjectPtr ObjectStore::createLocked(const ResourceInfo& res, const std::string& ns,
                                    nlohmann::json body) {
  if (!body.is_object()) {
    throw badRequest("the body of the request must be a JSON object");
  }
  const std::string wantApiVersion = res.apiVersion(res.versions.front());
  if (auto av = str(body, "apiVersion"); !av.empty()) {
    bool served = false;
    for (const auto& v : res.versions) {
      served = served || av == res.apiVersion(v);
    }
    if (!served) {
      throw badRequest("the API version in the data (" + av +
                       ") does not match the expected API version (" + wantApiVersion + ")");
    }
  } else {
    body["apiVersion"] = wantApiVersion;
  }
  if (auto k = str(body, "kind"); !k.empty() && k != res.kind) {
    throw badRequest("the kind in the data (" + k + ") does not match the expected kind (" +
                     res.kind + ")");
  }
  body["kind"] = res.kind;
  if (!body.contains("metadata") || body["metadata"].is_null()) {
    body["metadata"] = json::object();
  }
  json& meta = body["metadata"];
  if (!meta.is_object()) {
    throw badRequest("metadata must be an object");
  }
  const std::string groupKind = res.kind;
  if (res.namespaced) {
    std::string bodyNs = str(meta, "namespace");
    if (bodyNs.empty()) {
      meta["namespace"] = ns;
    } else if (bodyNs != ns) {
      throw badRequest(
          "the namespace of the provided object does not match the namespace sent on the request");
    }
    const ResourceInfo* nsRes = registry_.find("", "v1", "namespaces");
    const Table* nsTable = findTable(nsRes->tableKey());
    auto nsIt = nsTable ? nsTable->objects.find(ns) : decltype(nsTable->objects.end()){};
    if (!nsTable || nsIt == nsTable->objects.end()) {
      throw notFound("", "namespaces", ns);
    }
    if (hasDeletionTimestamp(nsIt->second->object)) {
      throw ApiError(403, "Forbidden",
                     qualifiedResource(res.group, res.resource) + " " + quote(str(meta, "name")) +
                         " is forbidden: unable to create new content in namespace " + ns +
                         " because it is being terminated",
                     json{{"name", str(meta, "name")}, {"kind", res.resource}});
    }
  } else {
    meta.erase("namespace");
  }
  std::string name = str(meta, "name");
  if (name.empty()) {
    std::string gen = str(meta, "generateName");
    if (gen.empty()) {
      throw invalid(res.group, groupKind, "", "metadata.name",
                    "Required value: name or generateName is required");
    }
    static const char* kAlphabet = "bcdfghjklmnpqrstvwxz2456789";
    std::uniform_int_distribution<int> d(0, 26);
    name = gen;
    for (int i = 0; i < 5; ++i) {
      name += kAlphabet[d(rng_)];
    }
    meta["name"] = name;
  }
  const bool labelName = res.resource == "namespaces";
  if (labelName ? !isDnsLabel(name) : !isDnsSubdomain(name)) {
    throw invalid(res.group, groupKind, name, "metadata.name",
                  "Invalid value: " + quote(name) + ": " + (labelName ? kLabelMsg : kSubdomainMsg));
  }
  if (!str(meta, "resourceVersion").empty()) {
    throw internalError("resourceVersion should not be set on objects to be created");
  }
  const std::string key = objectKey(res, ns, name);
  Table& t = table(res.tableKey());
  if (t.objects.count(key)) {
    throw alreadyExists(res.group, res.resource, name);
  }
  meta["uid"] = newUid();
  meta["creationTimestamp"] = timestamp();
  meta.erase("deletionTimestamp");
  meta.erase("deletionGracePeriodSeconds");
  meta.erase("resourceVersion");
  if (res.hasStatus || res.custom || res.tracksGeneration) {
    meta["generation"] = 1;
  } else {
    meta.erase("generation");
  }
  if (res.hasStatus && res.resource != "nodes") {
    body.erase("status");
  }
  if (res.group == "apiextensions.k8s.io" && res.resource == "customresourcedefinitions") {
    acceptCrdLocked(res, name, body);
  } else {
    admitPriorityLocked(res, name, body);  // the Priority admission plugin (priority_admission)
    admitOnCreate(res, name, body);
  }
  ObjectPtr created = commit(res, key, nullptr, std::move(body));
  if (res.group == "apiextensions.k8s.io" && res.resource == "customresourcedefinitions") {
    onCrdChanged(&created->object, nullptr);
  }
  collectIfOwnersMissing(res, created);
  return created;
}

ObjectPtr ObjectStore::update(const ResourceInfo& res, const std::string& ns,
                              const std::string& name, nlohmann::json body, Subresource sub) {
  std::lock_guard lock(mu_);
  ObjectPtr current = getLocked(res, ns, name);
  if (!body.is_object()) {
    throw badRequest("the body of the request must be a JSON object");
  }
  const json& meta = metaOf(body);
  if (auto n = str(meta, "name"); n != name) {
    throw badRequest("the name of the object (" + n + ") does not match the name on the URL (" +
                     name + ")");
  }
  return updateLocked(res, current, std::move(body), sub, true);
}

ObjectPtr ObjectStore::patch(const ResourceInfo& res, const std::string& ns,
                             const std::string& name,
                             const std::function<nlohmann::json(const nlohmann::json&)>& patchFn,
                             Subresource sub) {
  std::lock_guard lock(mu_);
  ObjectPtr current = getLocked(res, ns, name);
  json desired = patchFn(current->object);
  if (!desired.is_object()) {
    throw badRequest("the patched object is not a JSON object");
  }
  if (str(metaOf(desired), "name") != name) {
    throw badRequest(
        "metadata.name: Invalid value: the patch may not change the name of the object");
  }
  return updateLocked(res, current, std::move(desired), sub, false);
}

ObjectPtr ObjectStore::updateLocked(const ResourceInfo& res, ObjectPtr current,
                                    nlohmann::json desired, Subresource sub, bool requireRv) {
  if (!desired.contains("metadata") || !desired["metadata"].is_object()) {
    throw badRequest("metadata must be an object");
  }
  const json& oldObj = current->object;  // current is held by value: stays alive
  const json& oldMeta = metaOf(oldObj);
  if (res.namespaced) {
    std::string n = str(desired["metadata"], "namespace");
    if (!n.empty() && n != current->ns) {
      throw badRequest(
          "the namespace of the provided object does not match the namespace sent on the request");
    }
  }
  std::string rv = str(desired["metadata"], "resourceVersion");
  if (!rv.empty()) {
    if (rv != std::to_string(current->resourceVersion)) {
      throw optimisticLockConflict(res.group, res.resource, current->name);
    }
  } else if (res.custom && requireRv) {
    throw invalid(res.group, res.kind, current->name, "metadata.resourceVersion",
                  "Invalid value: 0x0: must be specified for an update");
  }
  json next;
  if (sub == Subresource::kStatus) {
    next = oldObj;
    if (desired.contains("status") && !desired["status"].is_null()) {
      next["status"] = desired["status"];
    } else {
      next.erase("status");
    }
  } else {
    next = std::move(desired);
    json& m = next["metadata"];
    for (const char* k : {"uid", "creationTimestamp", "deletionTimestamp",
                          "deletionGracePeriodSeconds", "generation"}) {
      if (oldMeta.contains(k)) {
        m[k] = oldMeta[k];
      } else {
        m.erase(k);
      }
    }
    if (res.namespaced) {
      m["namespace"] = current->ns;
    }
    if (res.hasStatus) {
      if (oldObj.contains("status")) {
        next["status"] = oldObj["status"];
      } else {
        next.erase("status");
      }
    }
    if (hasDeletionTimestamp(oldObj)) {
      for (const auto& f : finalizersOf(next)) {
        auto old = finalizersOf(oldObj);
        if (std::find(old.begin(), old.end(), f) == old.end()) {
          throw invalid(
              res.group, res.kind, current->name, "metadata.finalizers",
              "Forbidden: no new finalizers can be added if the object is being deleted, found new "
              "finalizers []string{" +
                  quote(f) + "}");
        }
      }
    }
  }
  // Before the no-op check: defaulting makes a re-sent object equal to the stored one.
  admitOnUpdate(res, current->name, oldObj, next, sub == Subresource::kStatus);
  next["kind"] = oldObj.value("kind", res.kind);
  next["apiVersion"] = oldObj.value("apiVersion", res.apiVersion(res.versions.front()));
  next["metadata"]["resourceVersion"] = oldMeta.value("resourceVersion", "");
  if (next["metadata"].contains("generation") && specChanged(oldObj, next)) {
    next["metadata"]["generation"] = oldMeta.value("generation", 0) + 1;
  }
  if (next == oldObj) {
    return current;  // no-op updates do not create a new resourceVersion
  }
  if (res.group == "apiextensions.k8s.io" && res.resource == "customresourcedefinitions") {
    validateCrdPrinterColumns(current->name, next);
  }
  if (res.group == "policy" && res.resource == "poddisruptionbudgets" &&
      sub == Subresource::kNone) {
    validatePdb(current->name, next);
  }
  const std::string key = objectKey(res, current->ns, current->name);
  if (hasDeletionTimestamp(next) && finalizersOf(next).empty()) {
    // The last finalizer is gone: the object goes away now (one DELETED event).
    auto finalState = std::make_shared<StoredObject>(*current);
    finalState->object = std::move(next);
    return finalRemove(res, finalState);
  }
  ObjectPtr updated = commit(res, key, current, std::move(next));
  if (res.group == "apiextensions.k8s.io" && res.resource == "customresourcedefinitions") {
    onCrdChanged(&updated->object, &oldObj);
  }
  collectIfOwnersMissing(res, updated);
  return updated;
}

}  // namespace kc::apiserver
