#include "tools/kube-apiserver-double/object_store.hpp"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <regex>

namespace kc::apiserver {

namespace {

using nlohmann::json;

std::string quote(const std::string& s) { return json(s).dump(); }

std::string base64Encode(const std::string& in) {
  static const char* kChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  int val = 0;
  int bits = -6;
  for (unsigned char c : in) {
    val = (val << 8) + c;
    bits += 8;
    while (bits >= 0) {
      out.push_back(kChars[(val >> bits) & 0x3F]);
      bits -= 6;
    }
  }
  if (bits > -6) {
    out.push_back(kChars[((val << 8) >> (bits + 8)) & 0x3F]);
  }
  while (out.size() % 4) {
    out.push_back('=');
  }
  return out;
}

std::optional<std::string> base64Decode(const std::string& in) {
  std::string out;
  int val = 0;
  int bits = -8;
  for (unsigned char c : in) {
    if (c == '=') {
      break;
    }
    int d;
    if (c >= 'A' && c <= 'Z') {
      d = c - 'A';
    } else if (c >= 'a' && c <= 'z') {
      d = c - 'a' + 26;
    } else if (c >= '0' && c <= '9') {
      d = c - '0' + 52;
    } else if (c == '+' || c == '-') {
      d = 62;
    } else if (c == '/' || c == '_') {
      d = 63;
    } else {
      return std::nullopt;
    }
    val = (val << 6) + d;
    bits += 6;
    if (bits >= 0) {
      out.push_back(static_cast<char>((val >> bits) & 0xFF));
      bits -= 8;
    }
  }
  return out;
}

const json& metaOf(const json& obj) {
  static const json kEmpty = json::object();
  auto it = obj.find("metadata");
  return (it != obj.end() && it->is_object()) ? *it : kEmpty;
}

std::string str(const json& obj, const char* key) {
  auto it = obj.find(key);
  return (it != obj.end() && it->is_string()) ? it->get<std::string>() : "";
}

bool isDnsSubdomain(const std::string& s) {
  static const std::regex kRe("[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*");
  return !s.empty() && s.size() <= 253 && std::regex_match(s, kRe);
}

bool isDnsLabel(const std::string& s) {
  static const std::regex kRe("[a-z0-9]([-a-z0-9]*[a-z0-9])?");
  return !s.empty() && s.size() <= 63 && std::regex_match(s, kRe);
}

const char* kSubdomainMsg =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const char* kLabelMsg =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end "
    "with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

// Everything but metadata/status/kind/apiVersion: what bumps metadata.generation.
bool specChanged(const json& a, const json& b) {
  auto strip = [](const json& o) {
    json c = json::object();
    if (o.is_object()) {
      for (auto it = o.begin(); it != o.end(); ++it) {
        if (it.key() != "metadata" && it.key() != "status" && it.key() != "kind" && it.key() != "apiVersion") {
          c[it.key()] = *it;
        }
      }
    }
    return c;
  };
  return strip(a) != strip(b);
}

std::string podQosClass(const json& spec) {
  bool any = false;
  bool guaranteed = true;
  auto containers = spec.value("containers", json::array());
  for (const auto& c : containers) {
    json req = c.contains("resources") ? c["resources"].value("requests", json::object()) : json::object();
    json lim = c.contains("resources") ? c["resources"].value("limits", json::object()) : json::object();
    if (!req.empty() || !lim.empty()) {
      any = true;
    }
    for (const char* r : {"cpu", "memory"}) {
      if (!lim.contains(r) || (req.contains(r) && req[r] != lim[r])) {
        guaranteed = false;
      }
    }
  }
  if (!any) {
    return "BestEffort";
  }
  return guaranteed ? "Guaranteed" : "Burstable";
}

void defaultPod(json& pod) {
  json& spec = pod["spec"];
  if (!spec.is_object()) {
    spec = json::object();
  }
  auto setDefault = [](json& o, const char* k, json v) {
    if (!o.contains(k) || o[k].is_null()) {
      o[k] = std::move(v);
    }
  };
  setDefault(spec, "schedulerName", "default-scheduler");
  setDefault(spec, "restartPolicy", "Always");
  setDefault(spec, "dnsPolicy", "ClusterFirst");
  setDefault(spec, "terminationGracePeriodSeconds", 30);
  setDefault(spec, "securityContext", json::object());
  setDefault(spec, "enableServiceLinks", true);
  setDefault(spec, "priority", 0);
  for (const char* list : {"containers", "initContainers"}) {
    if (!spec.contains(list) || !spec[list].is_array()) {
      continue;
    }
    for (auto& c : spec[list]) {
      if (!c.is_object()) {
        continue;
      }
      std::string image = str(c, "image");
      bool latest = image.find(':') == std::string::npos || image.size() < 7 ||
                    image.substr(image.size() - 7) == ":latest";
      setDefault(c, "imagePullPolicy", latest ? "Always" : "IfNotPresent");
      setDefault(c, "terminationMessagePath", "/dev/termination-log");
      setDefault(c, "terminationMessagePolicy", "File");
      setDefault(c, "resources", json::object());
    }
  }
  pod["status"] = {{"phase", "Pending"}, {"qosClass", podQosClass(spec)}};
}

void defaultDeployment(json& d) {
  json& spec = d["spec"];
  if (!spec.is_object()) {
    spec = json::object();
  }
  if (!spec.contains("replicas")) {
    spec["replicas"] = 1;
  }
  if (!spec.contains("revisionHistoryLimit")) {
    spec["revisionHistoryLimit"] = 10;
  }
  if (!spec.contains("progressDeadlineSeconds")) {
    spec["progressDeadlineSeconds"] = 600;
  }
  if (!spec.contains("strategy")) {
    spec["strategy"] = {{"type", "RollingUpdate"}, {"rollingUpdate", {{"maxUnavailable", "25%"}, {"maxSurge", "25%"}}}};
  }
}

}  // namespace

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

std::string formatTimestamp(std::chrono::system_clock::time_point t) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

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

namespace {
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

std::vector<std::string> ownerUids(const json& obj) {
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

std::vector<std::string> finalizersOf(const json& obj) {
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

bool hasDeletionTimestamp(const json& obj) {
  const json& m = metaOf(obj);
  return m.contains("deletionTimestamp") && !m["deletionTimestamp"].is_null();
}

DeleteOptions policyOnly(const char* policy) {
  DeleteOptions o;
  o.propagationPolicy = policy;
  return o;
}

std::string errorLine(const ApiError& e) {
  return std::string("{\"type\":\"ERROR\",\"object\":") + e.toStatus().dump() + "}\n";
}
}  // namespace

ObjectStore::ObjectStore(StoreOptions options)
    : options_(std::move(options)), registry_(ResourceRegistry::withBuiltins()), rng_(options_.seed) {
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
    createLocked(*ns, "", {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}});
  }
}

ObjectStore::Table& ObjectStore::table(const std::string& key) { return tables_[key]; }

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
                static_cast<unsigned>(b >> 48), static_cast<unsigned long long>(b & 0xFFFFFFFFFFFFull));
  return buf;
}

std::string ObjectStore::timestamp() const { return formatTimestamp(options_.clock()); }

std::uint64_t ObjectStore::parseRv(const std::string& rv) const {
  if (rv.empty() || rv.size() > 19 || !std::all_of(rv.begin(), rv.end(), [](unsigned char c) { return std::isdigit(c); })) {
    throw ApiError(400, "BadRequest", "resourceVersion: Invalid value: " + quote(rv) + ": invalid resource version");
  }
  return std::stoull(rv);
}

std::optional<ResourceInfo> ObjectStore::findResource(const std::string& group, const std::string& version,
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
std::optional<nlohmann::json> ObjectStore::resourceList(const std::string& group, const std::string& version) const {
  std::lock_guard lock(mu_);
  return registry_.resourceList(group, version);
}

nlohmann::json ObjectStore::openApiV3Root() const {
  std::lock_guard lock(mu_);
  return registry_.openApiV3Root();
}
std::optional<nlohmann::json> ObjectStore::openApiV3(const std::string& group, const std::string& version) const {
  std::lock_guard lock(mu_);
  return registry_.openApiV3(group, version);
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

void ObjectStore::setWatchFaults(bool expiredAsEvent, std::uint64_t dropAfter, double dropProbability) {
  std::lock_guard lock(mu_);
  options_.expiredAsEvent = expiredAsEvent;
  options_.dropWatchAfterEvents = dropAfter;
  options_.dropWatchProbability = dropProbability;
}

// ---------------------------------------------------------------- reads

ObjectPtr ObjectStore::getLocked(const ResourceInfo& res, const std::string& ns, const std::string& name) const {
  const Table* t = findTable(res.tableKey());
  if (t) {
    auto it = t->objects.find(objectKey(res, ns, name));
    if (it != t->objects.end()) {
      return it->second;
    }
  }
  throw notFound(res.group, res.resource, name);
}

ObjectPtr ObjectStore::get(const ResourceInfo& res, const std::string& ns, const std::string& name) const {
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
    throw badRequest("limit: Invalid value: " + std::to_string(opt.limit) + ": must be greater than or equal to 0");
  }
  std::lock_guard lock(mu_);
  std::uint64_t listRv = rv_;
  std::string startAfter;
  bool haveStart = false;
  const bool rvSet = opt.resourceVersion.has_value() && !opt.resourceVersion->empty();
  if (!opt.resourceVersionMatch.empty()) {
    if (!rvSet) {
      throw badRequest("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided");
    }
    if (opt.resourceVersionMatch != "Exact" && opt.resourceVersionMatch != "NotOlderThan") {
      throw badRequest("resourceVersionMatch: Unsupported value: " + quote(opt.resourceVersionMatch) +
                       ": supported values: \"Exact\", \"NotOlderThan\"");
    }
  }
  if (!opt.continueToken.empty()) {
    if (rvSet && *opt.resourceVersion != "0") {
      throw badRequest("specifying resource version is not allowed when using continue");
    }
    auto raw = base64Decode(opt.continueToken);
    json tok = raw ? json::parse(*raw, nullptr, false) : json();
    if (!tok.is_object() || !tok.contains("rv") || !tok["rv"].is_number_unsigned() || !tok.contains("start") ||
        !tok["start"].is_string()) {
      throw badRequest("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)");
    }
    listRv = tok["rv"].get<std::uint64_t>();
    startAfter = tok["start"].get<std::string>();
    haveStart = true;
    if (listRv < compactedRv_) {
      throw expired(
          "The provided continue parameter is too old to display a consistent list result. You can start a new list "
          "without the continue parameter, or use the continue token in this response to retrieve the remainder of "
          "the results. Continuing with the provided token results in an inconsistent list - objects that were "
          "created, modified, or deleted between the time the first chunk was returned and now may show up in the "
          "list.");
    }
  } else if (rvSet && *opt.resourceVersion != "0") {
    std::uint64_t v = parseRv(*opt.resourceVersion);
    bool exact = opt.resourceVersionMatch == "Exact" || (opt.resourceVersionMatch.empty() && opt.limit > 0);
    if (v > rv_) {
      throw ApiError(504, "Timeout", "Too large resource version: " + std::to_string(v) + ", current: " +
                                         std::to_string(rv_),
                     json{{"causes", {{{"reason", "ResourceVersionTooLarge"},
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

// ---------------------------------------------------------------- commit + watch delivery

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
  return result;
}

void ObjectStore::deliver(Watcher& w, const Event& e) {
  if (w.ended) {
    return;
  }
  const bool newMatch = w.matches(*e.object);
  const bool oldMatch = e.previous && w.matches(*e.previous);
  const char* type = nullptr;
  switch (e.type) {
    case Event::Type::kAdded:
      type = newMatch ? "ADDED" : nullptr;
      break;
    case Event::Type::kModified:
      type = newMatch ? (oldMatch ? "MODIFIED" : "ADDED") : (oldMatch ? "DELETED" : nullptr);
      break;
    case Event::Type::kDeleted:
      type = (newMatch || oldMatch) ? "DELETED" : nullptr;
      break;
  }
  if (!type) {
    return;
  }
  std::string cacheKey = std::string(type) + "|" + w.apiVersion;
  auto& lines = const_cast<Event&>(e).lines;  // guarded by mu_, a cache only
  auto cached = std::find_if(lines.begin(), lines.end(), [&](const auto& p) { return p.first == cacheKey; });
  if (cached == lines.end()) {
    std::string line = std::string("{\"type\":\"") + type + "\",\"object\":" + e.object->fullJson(w.apiVersion, w.kind) +
                       "}\n";
    lines.emplace_back(cacheKey, std::move(line));
    cached = std::prev(lines.end());
  }
  writeTo(w, cached->second, true);
}

void ObjectStore::writeTo(Watcher& w, const std::string& line, bool countsAsEvent) {
  if (w.ended) {
    return;
  }
  if (w.sink->closed() || !w.sink->write(line)) {
    w.ended = true;
    return;
  }
  if (!countsAsEvent) {
    return;
  }
  ++w.eventsSent;
  if (options_.dropWatchAfterEvents > 0 && w.eventsSent >= options_.dropWatchAfterEvents) {
    endWatcher(w);
    return;
  }
  if (options_.dropWatchProbability > 0) {
    std::uniform_real_distribution<double> d(0.0, 1.0);
    if (d(rng_) < options_.dropWatchProbability) {
      endWatcher(w);
    }
  }
}

void ObjectStore::endWatcher(Watcher& w) {
  if (!w.ended) {
    w.ended = true;
    w.sink->end();
  }
}

std::string ObjectStore::bookmarkLine(const Watcher& w) const {
  return "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":" + quote(w.kind) + ",\"apiVersion\":" + quote(w.apiVersion) +
         ",\"metadata\":{\"resourceVersion\":\"" + std::to_string(rv_) + "\"}}}\n";
}

void ObjectStore::checkWatchable(const std::optional<std::string>& rv) const {
  if (!rv || rv->empty() || *rv == "0") {
    return;
  }
  std::lock_guard lock(mu_);
  std::uint64_t v = parseRv(*rv);
  if (v < compactedRv_ && !options_.expiredAsEvent) {
    throw expired("too old resource version: " + std::to_string(v) + " (" + std::to_string(compactedRv_ + 1) + ")");
  }
}

std::uint64_t ObjectStore::watch(const ResourceInfo& res, const WatchOptions& opt, std::shared_ptr<WatchSink> sink) {
  auto labels = LabelSelector::parse(opt.labelSelector);
  if (!labels) {
    throw badRequest(labels.error().message);
  }
  auto fields = FieldSelector::parse(opt.fieldSelector, res.fieldLabels);
  if (!fields) {
    throw badRequest(fields.error().message);
  }
  std::lock_guard lock(mu_);
  auto w = std::make_shared<Watcher>();
  w->tableKey = res.tableKey();
  w->apiVersion = res.apiVersion(res.versions.front());
  w->kind = res.kind;
  w->ns = res.namespaced ? opt.ns : "";
  w->labels = std::move(labels.value());
  w->fields = std::move(fields.value());
  w->bookmarks = opt.allowBookmarks;
  w->deadline = opt.deadline;
  w->lastBookmark = std::chrono::steady_clock::now();
  w->sink = std::move(sink);
  const bool fromRv = opt.resourceVersion && !opt.resourceVersion->empty() && *opt.resourceVersion != "0";
  if (fromRv) {
    std::uint64_t v = parseRv(*opt.resourceVersion);
    if (v < compactedRv_) {
      auto err = expired("too old resource version: " + std::to_string(v) + " (" + std::to_string(compactedRv_ + 1) +
                         ")");
      if (!options_.expiredAsEvent) {
        throw err;
      }
      w->sink->write(errorLine(err));
      w->sink->end();
      return 0;
    }
    for (const auto& e : history_) {
      if (e->rv > v && e->tableKey == w->tableKey) {
        deliver(*w, *e);
      }
    }
  } else {
    const Table* t = findTable(w->tableKey);
    if (t) {
      const std::string prefix = w->ns.empty() ? "" : w->ns + "/";
      for (auto it = t->objects.lower_bound(prefix); it != t->objects.end(); ++it) {
        if (!prefix.empty() && it->first.compare(0, prefix.size(), prefix) != 0) {
          break;
        }
        if (w->matches(*it->second)) {
          writeTo(*w, "{\"type\":\"ADDED\",\"object\":" + it->second->fullJson(w->apiVersion, w->kind) + "}\n", true);
        }
      }
    }
    if (opt.sendInitialEvents && w->bookmarks) {
      writeTo(*w,
              "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":" + quote(w->kind) + ",\"apiVersion\":" +
                  quote(w->apiVersion) + ",\"metadata\":{\"resourceVersion\":\"" + std::to_string(rv_) +
                  "\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}\n",
              false);
    }
  }
  if (w->ended) {
    return 0;
  }
  w->id = nextWatcherId_++;
  watchers_[w->id] = w;
  table(w->tableKey).watchers.push_back(w);
  return w->id;
}

void ObjectStore::stopWatch(std::uint64_t id) {
  std::lock_guard lock(mu_);
  auto it = watchers_.find(id);
  if (it != watchers_.end()) {
    endWatcher(*it->second);
    watchers_.erase(it);
  }
}

void ObjectStore::tick(std::chrono::steady_clock::time_point now) {
  std::lock_guard lock(mu_);
  for (auto it = watchers_.begin(); it != watchers_.end();) {
    Watcher& w = *it->second;
    if (!w.ended && w.sink->closed()) {
      w.ended = true;
    }
    if (!w.ended && w.deadline && now >= *w.deadline) {
      endWatcher(w);
    }
    if (!w.ended && w.bookmarks && now - w.lastBookmark >= options_.bookmarkInterval) {
      writeTo(w, bookmarkLine(w), false);
      w.lastBookmark = now;
    }
    it = w.ended ? watchers_.erase(it) : std::next(it);
  }
  for (auto& [key, t] : tables_) {
    std::erase_if(t.watchers, [](const auto& w) { return w->ended; });
  }
}

void ObjectStore::compact() {
  std::lock_guard lock(mu_);
  if (!history_.empty()) {
    compactedRv_ = history_.back()->rv;
  }
  compactedRv_ = std::max(compactedRv_, rv_);
  history_.clear();
}

// ---------------------------------------------------------------- writes

ObjectPtr ObjectStore::create(const ResourceInfo& res, const std::string& ns, nlohmann::json body) {
  std::lock_guard lock(mu_);
  return createLocked(res, ns, std::move(body));
}

ObjectPtr ObjectStore::createLocked(const ResourceInfo& res, const std::string& ns, nlohmann::json body) {
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
      throw badRequest("the API version in the data (" + av + ") does not match the expected API version (" +
                       wantApiVersion + ")");
    }
  } else {
    body["apiVersion"] = wantApiVersion;
  }
  if (auto k = str(body, "kind"); !k.empty() && k != res.kind) {
    throw badRequest("the kind in the data (" + k + ") does not match the expected kind (" + res.kind + ")");
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
      throw badRequest("the namespace of the provided object does not match the namespace sent on the request");
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
      throw invalid(res.group, groupKind, "", "metadata.name", "Required value: name or generateName is required");
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
  if (res.hasStatus || res.custom) {
    meta["generation"] = 1;
  } else {
    meta.erase("generation");
  }
  if (res.hasStatus && res.resource != "nodes") {
    body.erase("status");
  }
  // Type-specific defaulting and validation (the parts our clients observe).
  if (res.group.empty() && res.resource == "pods") {
    if (!body.contains("spec") || !body["spec"].is_object() || !body["spec"].contains("containers") ||
        !body["spec"]["containers"].is_array() || body["spec"]["containers"].empty()) {
      throw invalid("", "Pod", name, "spec.containers", "Required value");
    }
    defaultPod(body);
  } else if (res.group.empty() && res.resource == "namespaces") {
    body["spec"] = {{"finalizers", {"kubernetes"}}};
    body["status"] = {{"phase", "Active"}};
    meta["labels"]["kubernetes.io/metadata.name"] = name;
  } else if (res.group == "apps" && res.resource == "deployments") {
    defaultDeployment(body);
  } else if (res.group == "events.k8s.io") {
    for (const char* f : {"eventTime", "reportingController", "reportingInstance", "action", "reason"}) {
      if (str(body, f).empty()) {
        throw invalid(res.group, "Event", name, f, "Required value");
      }
    }
    std::string type = str(body, "type");
    if (type != "Normal" && type != "Warning") {
      throw invalid(res.group, "Event", name, "type",
                    "Unsupported value: " + quote(type) + ": supported values: \"Normal\", \"Warning\"");
    }
  } else if (res.group == "apiextensions.k8s.io" && res.resource == "customresourcedefinitions") {
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
      throw crdInvalid("metadata.name", "Invalid value: " + quote(name) + ": must be spec.names.plural+\".\"+spec.group");
    }
    const std::string scope = str(spec, "scope");
    if (scope != "Namespaced" && scope != "Cluster") {
      throw crdInvalid("spec.scope", "Unsupported value: " + quote(scope) + ": supported values: \"Cluster\", \"Namespaced\"");
    }
    const json versions = spec.value("versions", json::array());
    int storage = 0;
    for (const auto& v : versions) {
      storage += v.value("storage", false) ? 1 : 0;
    }
    if (!versions.is_array() || versions.empty()) {
      throw crdInvalid("spec.versions", "Invalid value: must have exactly one version marked as storage version");
    }
    if (storage != 1) {
      throw crdInvalid("spec.versions", "Invalid value: must have exactly one version marked as storage version");
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
    body["status"] = {
        {"conditions",
         {{{"type", "NamesAccepted"}, {"status", "True"}, {"reason", "NoConflicts"}, {"message", "no conflicts found"},
           {"lastTransitionTime", now}},
          {{"type", "Established"}, {"status", "True"}, {"reason", "InitialNamesAccepted"},
           {"message", "the initial names have been accepted"}, {"lastTransitionTime", now}}}},
        {"acceptedNames", accepted},
        {"storedVersions", {storageVersion}}};
  }
  ObjectPtr created = commit(res, key, nullptr, std::move(body));
  if (res.group == "apiextensions.k8s.io" && res.resource == "customresourcedefinitions") {
    onCrdChanged(&created->object, nullptr);
  }
  collectIfOwnersMissing(res, created);
  return created;
}

ObjectPtr ObjectStore::update(const ResourceInfo& res, const std::string& ns, const std::string& name,
                              nlohmann::json body, Subresource sub) {
  std::lock_guard lock(mu_);
  ObjectPtr current = getLocked(res, ns, name);
  if (!body.is_object()) {
    throw badRequest("the body of the request must be a JSON object");
  }
  const json& meta = metaOf(body);
  if (auto n = str(meta, "name"); n != name) {
    throw badRequest("the name of the object (" + n + ") does not match the name on the URL (" + name + ")");
  }
  return updateLocked(res, current, std::move(body), sub, true);
}

ObjectPtr ObjectStore::patch(const ResourceInfo& res, const std::string& ns, const std::string& name,
                             const std::function<nlohmann::json(const nlohmann::json&)>& patchFn, Subresource sub) {
  std::lock_guard lock(mu_);
  ObjectPtr current = getLocked(res, ns, name);
  json desired = patchFn(current->object);
  if (!desired.is_object()) {
    throw badRequest("the patched object is not a JSON object");
  }
  if (str(metaOf(desired), "name") != name) {
    throw badRequest("metadata.name: Invalid value: the patch may not change the name of the object");
  }
  return updateLocked(res, current, std::move(desired), sub, false);
}

ObjectPtr ObjectStore::updateLocked(const ResourceInfo& res, ObjectPtr current, nlohmann::json desired,
                                    Subresource sub, bool requireRv) {
  if (!desired.contains("metadata") || !desired["metadata"].is_object()) {
    throw badRequest("metadata must be an object");
  }
  const json& oldObj = current->object;  // current is held by value: stays alive
  const json& oldMeta = metaOf(oldObj);
  if (res.namespaced) {
    std::string n = str(desired["metadata"], "namespace");
    if (!n.empty() && n != current->ns) {
      throw badRequest("the namespace of the provided object does not match the namespace sent on the request");
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
    for (const char* k : {"uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"}) {
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
    if (res.group.empty() && res.resource == "pods") {
      auto nodeOf = [](const json& o) { return o.contains("spec") ? str(o["spec"], "nodeName") : std::string(); };
      if (nodeOf(next) != nodeOf(oldObj)) {
        throw invalid("", "Pod", current->name, "spec",
                      "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
                      "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only "
                      "additions to existing tolerations), `spec.terminationGracePeriodSeconds` (allow it to be set "
                      "to 1 if it was previously negative)");
      }
    }
    if (hasDeletionTimestamp(oldObj)) {
      for (const auto& f : finalizersOf(next)) {
        auto old = finalizersOf(oldObj);
        if (std::find(old.begin(), old.end(), f) == old.end()) {
          throw invalid(res.group, res.kind, current->name, "metadata.finalizers",
                        "Forbidden: no new finalizers can be added if the object is being deleted, found new "
                        "finalizers []string{" + quote(f) + "}");
        }
      }
    }
  }
  next["kind"] = oldObj.value("kind", res.kind);
  next["apiVersion"] = oldObj.value("apiVersion", res.apiVersion(res.versions.front()));
  next["metadata"]["resourceVersion"] = oldMeta.value("resourceVersion", "");
  if (next["metadata"].contains("generation") && specChanged(oldObj, next)) {
    next["metadata"]["generation"] = oldMeta.value("generation", 0) + 1;
  }
  if (next == oldObj) {
    return current;  // no-op updates do not create a new resourceVersion
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

// ---------------------------------------------------------------- delete, GC, namespaces, CRDs

DeleteResult ObjectStore::remove(const ResourceInfo& res, const std::string& ns, const std::string& name,
                                 const DeleteOptions& options) {
  std::lock_guard lock(mu_);
  ObjectPtr current = getLocked(res, ns, name);
  return removeLocked(res, current, options);
}

DeleteResult ObjectStore::removeLocked(const ResourceInfo& res, ObjectPtr current, const DeleteOptions& opt) {
  if (opt.preconditionUid && *opt.preconditionUid != current->uid) {
    throw conflict(res.group, res.resource, current->name,
                   "Precondition failed: UID in precondition: " + *opt.preconditionUid +
                       ", UID in object meta: " + current->uid);
  }
  if (opt.preconditionResourceVersion &&
      *opt.preconditionResourceVersion != std::to_string(current->resourceVersion)) {
    throw conflict(res.group, res.resource, current->name,
                   "Precondition failed: ResourceVersion in precondition: " + *opt.preconditionResourceVersion +
                       ", ResourceVersion in object meta: " + std::to_string(current->resourceVersion));
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
    auto deps = dependents_.count(current->uid) ? dependents_[current->uid] : std::set<std::pair<std::string, std::string>>{};
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
  if (foreground && std::find(finalizers.begin(), finalizers.end(), "foregroundDeletion") == finalizers.end()) {
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
    auto deps = std::vector<std::pair<std::string, std::string>>(d->second.begin(), d->second.end());
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
    for (auto it = t.objects.lower_bound(prefix); it != t.objects.end() && it->first.rfind(prefix, 0) == 0; ++it) {
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
      if (v.contains("subresources") && v["subresources"].is_object() && v["subresources"].contains("status")) {
        r.hasStatus = true;
      }
    }
    r.versions = versions;
    return r;
  };
  std::optional<ResourceInfo> oldRes = previous ? std::optional(resourceOf(*previous)) : std::nullopt;
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

void ObjectStore::bindPod(const std::string& ns, const std::string& name, const nlohmann::json& binding) {
  std::lock_guard lock(mu_);
  const ResourceInfo* pods = registry_.find("", "v1", "pods");
  ObjectPtr current = getLocked(*pods, ns, name);
  if (!binding.is_object()) {
    throw badRequest("the body of the request must be a JSON object");
  }
  const json target = binding.value("target", json::object());
  const std::string node = target.is_object() ? str(target, "name") : "";
  if (node.empty()) {
    throw invalid("", "Binding", name, "target.name", "Required value");
  }
  if (auto k = str(target, "kind"); !k.empty() && k != "Node") {
    throw invalid("", "Binding", name, "target.kind", "Invalid value: " + quote(k) + ": must be empty or 'Node'");
  }
  const json& bmeta = metaOf(binding);
  if (auto uid = str(bmeta, "uid"); !uid.empty() && uid != current->uid) {
    throw conflict("", "pods/binding", name,
                   "Precondition failed: UID in precondition: " + uid + ", UID in object meta: " + current->uid);
  }
  if (hasDeletionTimestamp(current->object)) {
    throw conflict("", "pods/binding", name, "pod " + name + " is being deleted, cannot be assigned to a host");
  }
  const json& spec = current->object.value("spec", json::object());
  if (auto assigned = str(spec, "nodeName"); !assigned.empty()) {
    throw conflict("", "pods/binding", name, "pod " + name + " is already assigned to node " + quote(assigned));
  }
  json next = current->object;
  next["spec"]["nodeName"] = node;
  if (bmeta.contains("annotations") && bmeta["annotations"].is_object()) {
    for (auto it = bmeta["annotations"].begin(); it != bmeta["annotations"].end(); ++it) {
      next["metadata"]["annotations"][it.key()] = *it;
    }
  }
  json& status = next["status"];
  if (!status.is_object()) {
    status = json::object();
  }
  json conditions = status.value("conditions", json::array());
  json scheduled = {{"type", "PodScheduled"}, {"status", "True"}, {"lastProbeTime", nullptr},
                    {"lastTransitionTime", timestamp()}};
  bool replaced = false;
  for (auto& c : conditions) {
    if (c.value("type", "") == "PodScheduled") {
      c = scheduled;
      replaced = true;
    }
  }
  if (!replaced) {
    conditions.push_back(scheduled);
  }
  status["conditions"] = conditions;
  commit(*pods, objectKey(*pods, ns, name), current, std::move(next));
}

}  // namespace kc::apiserver
