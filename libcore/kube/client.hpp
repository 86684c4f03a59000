#pragma once
// KubeClient: REST access to a Kubernetes API server, generic over group-version-resource
// (built-ins and CRDs alike). Objects are nlohmann::json; errors are typed ApiError values.
//
// Every request: waits for the client-side token bucket (qps/burst), sends the current bearer
// token (re-read from the token file about every minute), and is retried with jittered
// backoff on 429 (honouring Retry-After) and 5xx, and on transport failures for requests that
// are safe to repeat (GET, PUT with a resourceVersion, DELETE). Writes that are not safe to
// repeat (POST, PATCH, unconditional PUT) are retried on 429, and on 5xx only when the answer
// carried a Retry-After HTTP header (as client-go; details.retryAfterSeconds alone does not
// count). A DELETE retried after a lost reply that then gets 404 is reported as success (the
// object is gone). 409/410/4xx are never retried here: they go back to the caller, who knows
// whether to re-read and try again.
//
// Thread-safe: one client serves every informer, recorder and elector of a daemon.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "libcore/kube/api_error.hpp"
#include "libcore/kube/backoff.hpp"
#include "libcore/kube/config.hpp"
#include "libcore/kube/resource.hpp"

namespace kc::net {
class HttpClient;
class CancelToken;
}  // namespace kc::net

namespace kc::kube {

struct KubeClientOptions {
  double qps = 50;  // client-side rate limit; <= 0 disables it
  std::uint32_t burst = 100;
  int maxRetries = 5;  // extra attempts on 429/5xx/transport errors
  BackoffParams retryBackoff{std::chrono::milliseconds(200), std::chrono::milliseconds(10'000), 2.0,
                             0.2};
  std::chrono::milliseconds requestTimeout{30'000};
  std::chrono::milliseconds connectTimeout{10'000};
  std::string userAgent = "kubecomp/0.1";
  std::chrono::steady_clock::duration tokenRefreshPeriod = std::chrono::minutes(1);
  // Time of everything the client does (retry and QPS waits, call deadlines, token re-reads),
  // and the default clock of the informers, electors and recorders built on it. Not owned;
  // null = kc::systemClock().
  kc::Clock* clock = nullptr;
};

// Per-call limits, for callers that must not wait longer than they can afford (the leader
// elector). Defaults change nothing.
struct CallOptions {
  // Absolute limit for the whole call including retries and their waits; an attempt gets at
  // most the time left (and never more than requestTimeout). Passed: the call fails with a
  // transport error of reason "timeout" without being sent. Default (epoch): none.
  std::chrono::steady_clock::time_point deadline{};
  int maxRetries = -1;           // < 0: KubeClientOptions::maxRetries
  bool bypassRateLimit = false;  // do not wait for the client-side token bucket
};

// One page of a LIST.
struct ObjectList {
  std::vector<nlohmann::json> items;
  std::string resourceVersion;  // the list's RV (watch from here)
  std::string continueToken;    // non-empty: more pages
  std::string kind;             // "PodList", ...
};

struct ListMeta {
  std::string resourceVersion;
  std::string continueToken;
  std::size_t itemCount = 0;
};

struct WatchEvent {
  std::string type;  // ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
  nlohmann::json object;
};

enum class PatchType { kMerge, kJson, kStrategicMerge };
const char* patchContentType(PatchType t);

struct DeleteOptions {
  std::optional<std::string> preconditionUid;
  std::optional<std::string> preconditionResourceVersion;
  std::string propagationPolicy;  // "", "Orphan", "Background", "Foreground"
  std::optional<std::int64_t> gracePeriodSeconds;
};

class KubeClient {
 public:
  // Builds the HTTP client from the config (TLS material, token source). Errors: "invalid"
  // or "tls" (bad certificate data), never later on first use.
  static kc::Result<std::unique_ptr<KubeClient>> create(const ClusterConfig& config,
                                                        KubeClientOptions options = {});
  ~KubeClient();
  KubeClient(const KubeClient&) = delete;
  KubeClient& operator=(const KubeClient&) = delete;

  const std::string& defaultNamespace() const { return config_.defaultNamespace; }
  const ClusterConfig& config() const { return config_; }
  kc::Clock& clock() const { return clock_; }

  ApiResult<nlohmann::json> get(const GroupVersionResource& r, const std::string& ns,
                                const std::string& name, const std::string& subresource = {},
                                const CallOptions& call = {});
  // One page (opts.limit / opts.continueToken).
  ApiResult<ObjectList> list(const GroupVersionResource& r, const std::string& ns,
                             const ListOptions& opts = {});
  // Every page, following continue tokens (opts.limit = page size, 0 = one request).
  ApiResult<ObjectList> listAll(const GroupVersionResource& r, const std::string& ns,
                                ListOptions opts = {});
  // One page, each item handed to onItem as soon as it is parsed (the body is never held
  // whole). Not retried once items have been delivered.
  ApiResult<ListMeta> listEach(const GroupVersionResource& r, const std::string& ns,
                               const ListOptions& opts,
                               const std::function<void(nlohmann::json&&)>& onItem,
                               net::CancelToken* cancel = nullptr);

  ApiResult<nlohmann::json> create(const GroupVersionResource& r, const std::string& ns,
                                   const nlohmann::json& obj, const std::string& subresource = {},
                                   const CallOptions& call = {});
  // PUT of the whole object; metadata.resourceVersion makes it conditional (409 Conflict).
  ApiResult<nlohmann::json> update(const GroupVersionResource& r, const std::string& ns,
                                   const nlohmann::json& obj, const CallOptions& call = {});
  ApiResult<nlohmann::json> updateStatus(const GroupVersionResource& r, const std::string& ns,
                                         const nlohmann::json& obj);
  ApiResult<nlohmann::json> patch(const GroupVersionResource& r, const std::string& ns,
                                  const std::string& name, PatchType type,
                                  const nlohmann::json& patch, const std::string& subresource = {});
  // The server's answer: the object (pods, objects with finalizers) or a Status.
  ApiResult<nlohmann::json> remove(const GroupVersionResource& r, const std::string& ns,
                                   const std::string& name, const DeleteOptions& opts = {});
  // POST pods/NAME/binding with the pod UID as precondition when given.
  ApiStatus bindPod(const std::string& ns, const std::string& podName, const std::string& nodeName,
                    const std::string& podUid = {});

  // WATCH from opts.resourceVersion; calls onEvent per event (return false to stop). Returns
  // ok when the server ended the stream (timeoutSeconds) or onEvent stopped; an ApiError
  // for a non-200 answer (e.g. 410) or a broken connection. Not retried: informers decide.
  ApiStatus watch(const GroupVersionResource& r, const std::string& ns, ListOptions opts,
                  const std::function<bool(WatchEvent&&)>& onEvent,
                  net::CancelToken* cancel = nullptr,
                  std::chrono::milliseconds idleTimeout = std::chrono::milliseconds(0));

  // Raw request for anything not covered above (discovery, /version).
  ApiResult<nlohmann::json> call(const std::string& method, const std::string& target,
                                 const std::string& body = {}, const std::string& contentType = {});

  struct Stats {
    std::uint64_t requests = 0;
    std::uint64_t retries = 0;
    std::uint64_t throttledWaits = 0;
  };
  Stats stats() const;

 private:
  KubeClient(ClusterConfig config, KubeClientOptions options);
  struct Reply {
    int status = 0;
    std::string body;
  };
  ApiResult<Reply> send(const std::string& method, const std::string& target,
                        const std::string& body, const std::string& contentType, bool idempotent,
                        const CallOptions& call = {});
  ApiResult<nlohmann::json> sendJson(const std::string& method, const std::string& target,
                                     const std::string& body, const std::string& contentType,
                                     bool idempotent, const CallOptions& call = {});
  void throttle();

  struct State;
  ClusterConfig config_;
  KubeClientOptions options_;
  kc::Clock& clock_;
  std::unique_ptr<State> state_;
};

}  // namespace kc::kube
