#include "libcore/kube/events.hpp"

#include <cstdio>

#include "libcore/base/rfc3339.hpp"

namespace kc::kube {

ObjectReference ObjectReference::of(const nlohmann::json& obj, const std::string& kind,
                                    const std::string& apiVersion) {
  ObjectReference r;
  if (!obj.is_object()) {
    return r;
  }
  r.kind = obj.value("kind", kind);
  r.apiVersion = obj.value("apiVersion", apiVersion);
  if (auto md = obj.find("metadata"); md != obj.end() && md->is_object()) {
    r.ns = md->value("namespace", "");
    r.name = md->value("name", "");
    r.uid = md->value("uid", "");
    r.resourceVersion = md->value("resourceVersion", "");
  }
  return r;
}

nlohmann::json ObjectReference::toJson() const {
  nlohmann::json j = {{"kind", kind}, {"name", name}};
  if (!apiVersion.empty())
    j["apiVersion"] = apiVersion;
  if (!ns.empty())
    j["namespace"] = ns;
  if (!uid.empty())
    j["uid"] = uid;
  if (!resourceVersion.empty())
    j["resourceVersion"] = resourceVersion;
  if (!fieldPath.empty())
    j["fieldPath"] = fieldPath;
  return j;
}

EventRecorder::EventRecorder(KubeClient& client, std::string component, std::string instance,
                             std::size_t maxRemembered)
    : client_(client),
      component_(std::move(component)),
      instance_(std::move(instance)),
      maxRemembered_(std::max<std::size_t>(1, maxRemembered)) {}

void EventRecorder::rememberLocked(const std::string& key, Written w) {
  if (auto it = written_.find(key); it != written_.end()) {
    lru_.erase(it->second.lru);
    written_.erase(it);
  }
  lru_.push_front(key);
  w.lru = lru_.begin();
  written_.emplace(key, std::move(w));
  while (written_.size() > maxRemembered_) {
    written_.erase(lru_.back());
    lru_.pop_back();
  }
}

ApiResult<nlohmann::json> EventRecorder::record(const ObjectReference& regarding,
                                                const std::string& type, const std::string& reason,
                                                const std::string& message) {
  if (regarding.name.empty() || regarding.kind.empty()) {
    ApiError e;
    e.reason = "InvalidArgument";
    e.message = "event: involved object needs kind and name";
    return e;
  }
  if (type != "Normal" && type != "Warning") {
    ApiError e;
    e.reason = "InvalidArgument";
    e.message = "event: type must be Normal or Warning, not '" + type + "'";
    return e;
  }
  // Events live in the involved object's namespace (default for cluster-scoped objects).
  const std::string ns = regarding.ns.empty() ? "default" : regarding.ns;
  const std::string msg = message.size() > 1024 ? message.substr(0, 1024) : message;
  const std::string key = regarding.kind + "\x1f" + ns + "\x1f" + regarding.name + "\x1f" +
                          regarding.uid + "\x1f" + type + "\x1f" + reason + "\x1f" + msg;
  KeyLock* kl;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = keyLocks_[key];
    if (!slot) {
      slot = std::make_unique<KeyLock>();
    }
    ++slot->users;
    kl = slot.get();
  }
  ApiResult<nlohmann::json> result = kc::kube::ApiError{};
  {
    std::lock_guard<std::mutex> keyLock(kl->m);
    result = recordKey(regarding, ns, key, type, reason, msg);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (--kl->users == 0) {
      keyLocks_.erase(key);
    }
  }
  return result;
}

ApiResult<nlohmann::json> EventRecorder::recordKey(const ObjectReference& regarding,
                                                   const std::string& ns, const std::string& key,
                                                   const std::string& type,
                                                   const std::string& reason,
                                                   const std::string& msg) {
  const std::string now = kc::formatRfc3339(client_.clock().wallNow());
  std::optional<Written> known;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = written_.find(key); it != written_.end()) {
      known = it->second;
    }
  }
  if (known) {
    nlohmann::json patch = {{"count", known->count + 1}, {"lastTimestamp", now}};
    auto patched = client_.patch(gvr::events(), known->ns, known->name, PatchType::kMerge, patch);
    if (patched) {
      std::lock_guard<std::mutex> lock(mu_);
      Written w = *known;
      w.count = patched->value("count", known->count + 1);
      rememberLocked(key, w);
      return patched;
    }
    if (!patched.error().isNotFound()) {
      return patched;
    }
    // The aggregated Event expired on the server: fall through and create a fresh one.
  }
  std::uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seq = ++seq_;
  }
  // Unique name like client-go's "<object>.<hex nanoseconds>", plus a sequence number.
  const auto nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         client_.clock().wallNow().time_since_epoch())
                         .count();
  char suffix[48];
  std::snprintf(suffix, sizeof suffix, ".%llx%llx", static_cast<unsigned long long>(nanos),
                static_cast<unsigned long long>(seq & 0xfff));
  std::string base = regarding.name.substr(0, 200);
  nlohmann::json event = {{"apiVersion", "v1"},
                          {"kind", "Event"},
                          {"metadata", {{"name", base + suffix}, {"namespace", ns}}},
                          {"involvedObject", regarding.toJson()},
                          {"reason", reason},
                          {"message", msg},
                          {"type", type},
                          {"count", 1},
                          {"firstTimestamp", now},
                          {"lastTimestamp", now},
                          {"source", {{"component", component_}, {"host", instance_}}},
                          {"reportingComponent", component_},
                          {"reportingInstance", instance_}};
  // A cluster-scoped involved object (Node) keeps an empty namespace; the Event itself lives in
  // "default", which the API server's validation accepts for such objects.
  auto created = client_.create(gvr::events(), ns, event);
  if (created) {
    std::lock_guard<std::mutex> lock(mu_);
    rememberLocked(key, Written{ns, (*created)["metadata"].value("name", base + suffix), 1, {}});
  }
  return created;
}

}  // namespace kc::kube
