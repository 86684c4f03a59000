#pragma once
// EventRecorder: core/v1 Events for people (kubectl describe), with client-go-style
// aggregation: an event with the same involved object, type, reason and message as one this
// recorder already wrote is not created again; the existing Event gets count+1 and a new
// lastTimestamp by PATCH. If that Event is gone (expired by the server's TTL) a new one is
// created. The memory of written events is bounded (LRU).

#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>

#include "libcore/kube/client.hpp"

namespace kc::kube {

struct ObjectReference {
  std::string kind;        // "Pod"
  std::string apiVersion;  // "v1"
  std::string ns;
  std::string name;
  std::string uid;
  std::string resourceVersion;
  std::string fieldPath;

  // From an object as the apiserver returned it (kind/apiVersion may be missing on LIST
  // items; pass them in `kind`/`apiVersion` then).
  static ObjectReference of(const nlohmann::json& obj, const std::string& kind = {},
                            const std::string& apiVersion = {});
  nlohmann::json toJson() const;
};

class EventRecorder {
 public:
  // component: source.component / reportingComponent (e.g. "kubecomp-sched");
  // instance: source.host / reportingInstance (e.g. the pod or host name).
  EventRecorder(KubeClient& client, std::string component, std::string instance,
                std::size_t maxRemembered = 4096);

  // type: "Normal" or "Warning". Returns the Event as written (created or patched).
  ApiResult<nlohmann::json> record(const ObjectReference& regarding, const std::string& type,
                                   const std::string& reason, const std::string& message);

 private:
  struct Written {
    std::string ns;
    std::string name;
    std::int64_t count = 1;
    std::list<std::string>::iterator lru;
  };
  void rememberLocked(const std::string& key, Written w);

  KubeClient& client_;
  std::string component_;
  std::string instance_;
  std::size_t maxRemembered_;
  std::mutex mu_;  // guards written_ and lru_ (requests run outside it)
  std::unordered_map<std::string, Written> written_;
  std::list<std::string> lru_;  // most recent first
  std::uint64_t seq_ = 0;
  // One lock per key being recorded, so concurrent repeats of the same event are counted one
  // after the other (N+1, N+2) instead of both patching N+1. Entries live while in use.
  struct KeyLock {
    std::mutex m;
    int users = 0;
  };
  std::unordered_map<std::string, std::unique_ptr<KeyLock>> keyLocks_;  // guarded by mu_
  ApiResult<nlohmann::json> recordKey(const ObjectReference& regarding, const std::string& ns,
                                      const std::string& key, const std::string& type,
                                      const std::string& reason, const std::string& msg);
};

}  // namespace kc::kube
