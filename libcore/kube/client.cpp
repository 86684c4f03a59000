#include "libcore/kube/client.hpp"

#include <atomic>
#include <ctime>
#include <thread>

#include "libcore/base/base64.hpp"
#include "libcore/kube/framing.hpp"
#include "libcore/net/http_client.hpp"

namespace kc::kube {

namespace {

bool is2xx(int s) {
  return s >= 200 && s < 300;
}

// The HTTP client's own failure words that no retry can fix.
bool permanentTransport(const kc::Error& e) {
  return e.code == kc::errc::kInvalid || e.code == kc::errc::kTls ||
         e.code == kc::errc::kCancelled || e.code == kc::errc::kTooLarge;
}

ApiError transportFrom(const kc::Error& e) {
  ApiError a = transportError(e.message);
  a.reason = e.code;  // "unavailable", "timeout", "tls", "cancelled", ...
  return a;
}

kc::Result<std::string> pathOrError(const GroupVersionResource& r, const std::string& ns,
                                    const std::string& name, const std::string& sub) {
  return resourcePath(r, r.namespaced ? ns : std::string{}, name, sub);
}

ApiError invalidArgument(const std::string& message) {
  ApiError e;
  e.httpCode = 0;
  e.reason = "InvalidArgument";
  e.message = message;
  return e;
}

std::string nameOf(const nlohmann::json& obj) {
  if (!obj.is_object()) {
    return {};
  }
  auto m = obj.find("metadata");
  if (m == obj.end() || !m->is_object()) {
    return {};
  }
  auto n = m->find("name");
  return n != m->end() && n->is_string() ? n->get<std::string>() : std::string{};
}

}  // namespace

const char* patchContentType(PatchType t) {
  switch (t) {
    case PatchType::kMerge:
      return "application/merge-patch+json";
    case PatchType::kJson:
      return "application/json-patch+json";
    case PatchType::kStrategicMerge:
      return "application/strategic-merge-patch+json";
  }
  return "application/merge-patch+json";
}

struct KubeClient::State {
  std::unique_ptr<net::HttpClient> http;
  std::shared_ptr<TokenSource> tokens;
  TokenBucket bucket;
  std::atomic<std::uint64_t> requests{0};
  std::atomic<std::uint64_t> retries{0};
  std::atomic<std::uint64_t> throttled{0};

  State(double qps, std::uint32_t burst, kc::Clock* clock) : bucket(qps, burst, clock) {}
};

KubeClient::KubeClient(ClusterConfig config, KubeClientOptions options)
    : config_(std::move(config)),
      options_(std::move(options)),
      clock_(kc::clockOr(options_.clock)) {
  state_ = std::make_unique<State>(options_.qps, options_.burst, &clock_);
}

KubeClient::~KubeClient() = default;

kc::Result<std::unique_ptr<KubeClient>> KubeClient::create(const ClusterConfig& config,
                                                           KubeClientOptions options) {
  if (config.server.empty()) {
    return kc::makeError(kc::errc::kInvalid, "kube client: no server configured");
  }
  std::unique_ptr<KubeClient> client(new KubeClient(config, std::move(options)));
  auto tokens = std::make_shared<TokenSource>(config.token, config.tokenFile, &client->clock_,
                                              client->options_.tokenRefreshPeriod);
  net::ClientOptions http;
  http.baseUrl = config.server;
  http.tls.caPem = config.caPem;
  http.tls.certPem = config.clientCertPem;
  http.tls.keyPem = config.clientKeyPem;
  http.tls.insecureSkipVerify = config.insecureSkipTlsVerify;
  http.tls.serverName = config.tlsServerName;
  http.connectTimeout = client->options_.connectTimeout;
  http.requestTimeout = client->options_.requestTimeout;
  http.responseBodyLimit = 0;  // list bodies of any size
  http.userAgent = client->options_.userAgent;
  http.defaultHeaders.push_back({"Accept", "application/json"});
  const bool hasToken = !config.token.empty() || !config.tokenFile.empty();
  if (hasToken) {
    http.headerProvider = [tokens]() {
      net::Headers h;
      if (std::string t = tokens->token(); !t.empty()) {
        h.push_back({"Authorization", "Bearer " + t});
      }
      return h;
    };
  } else if (!config.username.empty()) {
    // Basic auth: base64 of "user:password".
    http.defaultHeaders.push_back(
        {"Authorization", "Basic " + kc::base64Encode(config.username + ":" + config.password)});
  }
  auto httpClient = net::HttpClient::create(std::move(http));
  if (!httpClient) {
    return kc::makeError(httpClient.error().code, "kube client for " + config.server + " (" +
                                                      config.source +
                                                      "): " + httpClient.error().message);
  }
  client->state_->http = std::move(httpClient).value();
  client->state_->tokens = std::move(tokens);
  return client;
}

void KubeClient::throttle() {
  auto wait = state_->bucket.reserve();
  if (wait.count() > 0) {
    state_->throttled.fetch_add(1, std::memory_order_relaxed);
    clock_.sleepFor(wait);
  }
}

KubeClient::Stats KubeClient::stats() const {
  return Stats{state_->requests.load(), state_->retries.load(), state_->throttled.load()};
}

ApiResult<KubeClient::Reply> KubeClient::send(const std::string& method, const std::string& target,
                                              const std::string& body,
                                              const std::string& contentType, bool idempotent,
                                              const CallOptions& call) {
  const bool bounded = call.deadline != kc::Clock::SteadyTime{};
  const int maxRetries = call.maxRetries >= 0 ? call.maxRetries : options_.maxRetries;
  auto timedOut = [&] {
    ApiError e = transportError(method + " " + target + ": call deadline passed");
    e.reason = "timeout";
    return e;
  };
  // Sleeps d, or reports false when the call deadline would pass first.
  auto waitWithin = [&](std::chrono::nanoseconds d) {
    if (bounded && clock_.now() + d >= call.deadline) {
      return false;
    }
    clock_.sleepFor(d);
    return true;
  };
  Backoff backoff(options_.retryBackoff);
  bool reauthed = false;
  bool replyLost = false;  // an earlier attempt may have reached the server
  for (int attempt = 0;; ++attempt) {
    if (!call.bypassRateLimit) {
      throttle();
    }
    net::RequestOptions ro;
    if (bounded) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(call.deadline - clock_.now());
      if (left.count() <= 0) {
        return timedOut();
      }
      ro.timeout = std::min(left, options_.requestTimeout);
    }
    state_->requests.fetch_add(1, std::memory_order_relaxed);
    net::Headers headers;
    if (!contentType.empty()) {
      headers.push_back({"Content-Type", contentType});
    }
    auto res = state_->http->request(method, target, body, std::move(headers), ro);
    const bool canRetry = attempt < maxRetries;
    if (!res) {
      if (permanentTransport(res.error()) || !idempotent || !canRetry) {
        return transportFrom(res.error());
      }
      state_->retries.fetch_add(1, std::memory_order_relaxed);
      replyLost = true;
      if (!waitWithin(backoff.next())) {
        return transportFrom(res.error());
      }
      continue;
    }
    const int status = static_cast<int>(res->status);
    if (is2xx(status)) {
      return Reply{status, std::move(res->body)};
    }
    if (status == 404 && method == "DELETE" && replyLost) {
      // An earlier attempt whose answer was lost most likely deleted it: the object is gone,
      // which is what the caller asked for.
      nlohmann::json ok = {
          {"kind", "Status"},
          {"apiVersion", "v1"},
          {"metadata", nlohmann::json::object()},
          {"status", "Success"},
          {"message", "not found on a retry after a lost reply; treated as deleted"}};
      return Reply{200, ok.dump()};
    }
    const std::string retryAfterHeader = res->header("Retry-After").value_or("");
    ApiError err = parseStatusError(status, res->body, retryAfterHeader);
    // Like client-go, a write that is not safe to repeat is retried on 5xx only when the
    // server said so with a Retry-After HTTP header (details.retryAfterSeconds in the body
    // does not count); 429 means the request was not processed and is always retried.
    const bool headerRetryAfter =
        !retryAfterHeader.empty() &&
        parseStatusError(status, {}, retryAfterHeader).retryAfter.count() > 0;
    if (status == 401 && !reauthed && !config_.tokenFile.empty()) {
      // The token may have rotated under us: re-read the file once and repeat.
      reauthed = true;
      state_->tokens->invalidate();
      continue;
    }
    const bool retryable =
        status == 429 || ((status == 500 || status == 502 || status == 503 || status == 504) &&
                          (idempotent || headerRetryAfter));
    if (!retryable || !canRetry) {
      return err;
    }
    state_->retries.fetch_add(1, std::memory_order_relaxed);
    if (!waitWithin(err.retryAfter.count() > 0
                        ? std::chrono::duration_cast<std::chrono::nanoseconds>(err.retryAfter)
                        : std::chrono::duration_cast<std::chrono::nanoseconds>(backoff.next()))) {
      return err;
    }
  }
}

ApiResult<nlohmann::json> KubeClient::sendJson(const std::string& method, const std::string& target,
                                               const std::string& body,
                                               const std::string& contentType, bool idempotent,
                                               const CallOptions& call) {
  auto reply = send(method, target, body, contentType, idempotent, call);
  if (!reply) {
    return std::move(reply).error();
  }
  if (reply->body.empty()) {
    return nlohmann::json::object();
  }
  auto parsed = nlohmann::json::parse(reply->body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    ApiError e;
    e.httpCode = reply->status;
    e.reason = "InvalidResponse";
    e.message = method + " " + target + ": response is not JSON";
    return e;
  }
  return parsed;
}

ApiResult<nlohmann::json> KubeClient::call(const std::string& method, const std::string& target,
                                           const std::string& body,
                                           const std::string& contentType) {
  return sendJson(method, target, body, contentType, method == "GET" || method == "HEAD");
}

ApiResult<nlohmann::json> KubeClient::get(const GroupVersionResource& r, const std::string& ns,
                                          const std::string& name, const std::string& subresource,
                                          const CallOptions& call) {
  if (name.empty()) {
    return invalidArgument("get " + r.resource + ": empty name");
  }
  auto path = pathOrError(r, ns, name, subresource);
  if (!path) {
    return invalidArgument(path.error().message);
  }
  return sendJson("GET", *path, {}, {}, true, call);
}

ApiResult<ObjectList> KubeClient::list(const GroupVersionResource& r, const std::string& ns,
                                       const ListOptions& opts) {
  ObjectList out;
  auto meta = listEach(r, ns, opts,
                       [&out](nlohmann::json&& item) { out.items.push_back(std::move(item)); });
  if (!meta) {
    return std::move(meta).error();
  }
  out.resourceVersion = meta->resourceVersion;
  out.continueToken = meta->continueToken;
  return out;
}

ApiResult<ObjectList> KubeClient::listAll(const GroupVersionResource& r, const std::string& ns,
                                          ListOptions opts) {
  ObjectList all;
  opts.watch = false;
  for (;;) {
    auto meta = listEach(r, ns, opts,
                         [&all](nlohmann::json&& item) { all.items.push_back(std::move(item)); });
    if (!meta) {
      return std::move(meta).error();
    }
    if (all.resourceVersion.empty()) {
      all.resourceVersion = meta->resourceVersion;  // every page reports the first page's RV
    }
    if (meta->continueToken.empty()) {
      return all;
    }
    opts.continueToken = meta->continueToken;
    opts.resourceVersion.reset();  // a continue token carries the version; RV with it is a 400
  }
}

ApiResult<ListMeta> KubeClient::listEach(const GroupVersionResource& r, const std::string& ns,
                                         const ListOptions& opts,
                                         const std::function<void(nlohmann::json&&)>& onItem,
                                         net::CancelToken* cancel) {
  auto path = pathOrError(r, ns, {}, {});
  if (!path) {
    return invalidArgument(path.error().message);
  }
  ListOptions o = opts;
  o.watch = false;
  o.allowWatchBookmarks = false;
  const std::string target = *path + encodeQuery(o);
  Backoff backoff(options_.retryBackoff);
  for (int attempt = 0;; ++attempt) {
    throttle();
    state_->requests.fetch_add(1, std::memory_order_relaxed);
    int status = 0;
    std::string retryAfter;
    std::string errorBody;
    std::size_t delivered = 0;
    kc::Status itemError = kc::okStatus();
    ListBodyParser parser([&](nlohmann::json&& item) {
      ++delivered;
      onItem(std::move(item));
      return kc::okStatus();
    });
    kc::Status parseStatus = kc::okStatus();
    net::StreamCallbacks cb;
    cb.onHeaders = [&](unsigned s, const net::Headers& h) {
      status = static_cast<int>(s);
      retryAfter = net::findHeader(h, "Retry-After").value_or("");
      return true;
    };
    cb.onData = [&](std::string_view data) {
      if (is2xx(status)) {
        parseStatus = parser.feed(data);
        return parseStatus.ok();
      }
      if (errorBody.size() < 65536) {
        errorBody.append(data.substr(0, 65536 - errorBody.size()));
      }
      return true;
    };
    net::StreamOptions so;
    so.cancel = cancel;
    so.idleTimeout = options_.requestTimeout;
    auto st = state_->http->stream("GET", target, {}, {}, cb, so);
    const bool canRetry = attempt < options_.maxRetries && delivered == 0;
    if (!st) {
      if (permanentTransport(st.error()) || !canRetry) {
        return transportFrom(st.error());
      }
      state_->retries.fetch_add(1, std::memory_order_relaxed);
      clock_.sleepFor(backoff.next());
      continue;
    }
    if (is2xx(status)) {
      if (!parseStatus) {
        ApiError e;
        e.httpCode = status;
        e.reason = "InvalidResponse";
        e.message = "GET " + target + ": " + parseStatus.error().message;
        return e;
      }
      auto skeleton = parser.finish();
      if (!skeleton) {
        ApiError e;
        e.httpCode = status;
        e.reason = "InvalidResponse";
        e.message = "GET " + target + ": " + skeleton.error().message;
        return e;
      }
      ListMeta meta;
      meta.itemCount = parser.itemCount();
      const auto& md = (*skeleton)["metadata"];
      if (md.is_object()) {
        meta.resourceVersion = md.value("resourceVersion", "");
        meta.continueToken = md.value("continue", "");
      }
      return meta;
    }
    ApiError err = parseStatusError(status, errorBody, retryAfter);
    const bool retryable =
        status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
    if (!retryable || !canRetry) {
      return err;
    }
    state_->retries.fetch_add(1, std::memory_order_relaxed);
    clock_.sleepFor(err.retryAfter.count() > 0
                        ? std::chrono::duration_cast<std::chrono::milliseconds>(err.retryAfter)
                        : backoff.next());
  }
}

ApiResult<nlohmann::json> KubeClient::create(const GroupVersionResource& r, const std::string& ns,
                                             const nlohmann::json& obj,
                                             const std::string& subresource,
                                             const CallOptions& call) {
  if (!obj.is_object()) {
    return invalidArgument("create " + r.resource + ": object must be a JSON object");
  }
  std::string name;
  if (!subresource.empty()) {
    name = nameOf(obj);
  }
  auto path = pathOrError(r, ns, name, subresource);
  if (!path) {
    return invalidArgument(path.error().message);
  }
  return sendJson("POST", *path, obj.dump(), "application/json", false, call);
}

ApiResult<nlohmann::json> KubeClient::update(const GroupVersionResource& r, const std::string& ns,
                                             const nlohmann::json& obj, const CallOptions& call) {
  const std::string name = nameOf(obj);
  if (name.empty()) {
    return invalidArgument("update " + r.resource + ": object has no metadata.name");
  }
  auto path = pathOrError(r, ns, name, {});
  if (!path) {
    return invalidArgument(path.error().message);
  }
  const bool conditional = obj["metadata"].contains("resourceVersion");
  return sendJson("PUT", *path, obj.dump(), "application/json", conditional, call);
}

ApiResult<nlohmann::json> KubeClient::updateStatus(const GroupVersionResource& r,
                                                   const std::string& ns,
                                                   const nlohmann::json& obj) {
  const std::string name = nameOf(obj);
  if (name.empty()) {
    return invalidArgument("update status of " + r.resource + ": object has no metadata.name");
  }
  auto path = pathOrError(r, ns, name, "status");
  if (!path) {
    return invalidArgument(path.error().message);
  }
  const bool conditional = obj["metadata"].contains("resourceVersion");
  return sendJson("PUT", *path, obj.dump(), "application/json", conditional);
}

ApiResult<nlohmann::json> KubeClient::patch(const GroupVersionResource& r, const std::string& ns,
                                            const std::string& name, PatchType type,
                                            const nlohmann::json& patchBody,
                                            const std::string& subresource) {
  if (name.empty()) {
    return invalidArgument("patch " + r.resource + ": empty name");
  }
  if (type == PatchType::kJson ? !patchBody.is_array() : !patchBody.is_object()) {
    return invalidArgument(std::string("patch ") + r.resource + ": a " + patchContentType(type) +
                           " body must be a JSON " +
                           (type == PatchType::kJson ? "array" : "object"));
  }
  auto path = pathOrError(r, ns, name, subresource);
  if (!path) {
    return invalidArgument(path.error().message);
  }
  return sendJson("PATCH", *path, patchBody.dump(), patchContentType(type), false);
}

ApiResult<nlohmann::json> KubeClient::remove(const GroupVersionResource& r, const std::string& ns,
                                             const std::string& name, const DeleteOptions& opts) {
  if (name.empty()) {
    return invalidArgument("delete " + r.resource + ": empty name");
  }
  auto path = pathOrError(r, ns, name, {});
  if (!path) {
    return invalidArgument(path.error().message);
  }
  nlohmann::json body = {{"kind", "DeleteOptions"}, {"apiVersion", "v1"}};
  if (opts.preconditionUid || opts.preconditionResourceVersion) {
    nlohmann::json pre = nlohmann::json::object();
    if (opts.preconditionUid) {
      pre["uid"] = *opts.preconditionUid;
    }
    if (opts.preconditionResourceVersion) {
      pre["resourceVersion"] = *opts.preconditionResourceVersion;
    }
    body["preconditions"] = pre;
  }
  if (!opts.propagationPolicy.empty()) {
    body["propagationPolicy"] = opts.propagationPolicy;
  }
  if (opts.gracePeriodSeconds) {
    body["gracePeriodSeconds"] = *opts.gracePeriodSeconds;
  }
  return sendJson("DELETE", *path, body.dump(), "application/json", true);
}

ApiStatus KubeClient::bindPod(const std::string& ns, const std::string& podName,
                              const std::string& nodeName, const std::string& podUid) {
  if (nodeName.empty()) {
    return invalidArgument("bind " + ns + "/" + podName + ": empty node name");
  }
  nlohmann::json binding = {
      {"kind", "Binding"},
      {"apiVersion", "v1"},
      {"metadata", {{"name", podName}, {"namespace", ns}}},
      {"target", {{"kind", "Node"}, {"apiVersion", "v1"}, {"name", nodeName}}}};
  if (!podUid.empty()) {
    binding["metadata"]["uid"] = podUid;
  }
  auto res = create(gvr::pods(), ns, binding, "binding");
  if (!res) {
    return std::move(res).error();
  }
  return kc::Ok{};
}

ApiStatus KubeClient::watch(const GroupVersionResource& r, const std::string& ns, ListOptions opts,
                            const std::function<bool(WatchEvent&&)>& onEvent,
                            net::CancelToken* cancel, std::chrono::milliseconds idleTimeout) {
  auto path = pathOrError(r, ns, {}, {});
  if (!path) {
    return invalidArgument(path.error().message);
  }
  opts.watch = true;
  opts.limit = 0;
  opts.continueToken.clear();
  const std::string target = *path + encodeQuery(opts);
  throttle();
  state_->requests.fetch_add(1, std::memory_order_relaxed);
  int status = 0;
  std::string retryAfter;
  std::string errorBody;
  LineFramer framer;
  std::optional<ApiError> eventError;
  net::StreamCallbacks cb;
  cb.onHeaders = [&](unsigned s, const net::Headers& h) {
    status = static_cast<int>(s);
    retryAfter = net::findHeader(h, "Retry-After").value_or("");
    return true;
  };
  cb.onData = [&](std::string_view data) {
    if (status != 200) {
      if (errorBody.size() < 65536) {
        errorBody.append(data.substr(0, 65536 - errorBody.size()));
      }
      return true;
    }
    return framer.feed(data, [&](std::string_view line) {
      auto parsed = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (!parsed.is_object() || !parsed.contains("type") || !parsed["type"].is_string()) {
        ApiError e;
        e.httpCode = 0;
        e.reason = "InvalidResponse";
        e.message =
            "watch " + r.resource + ": malformed event: " + std::string(line.substr(0, 200));
        eventError = std::move(e);
        return false;
      }
      WatchEvent ev;
      ev.type = parsed["type"].get<std::string>();
      if (auto it = parsed.find("object"); it != parsed.end()) {
        ev.object = std::move(*it);
      }
      return onEvent(std::move(ev));
    });
  };
  net::StreamOptions so;
  so.cancel = cancel;
  so.idleTimeout = idleTimeout;
  auto st = state_->http->stream("GET", target, {}, {}, cb, so);
  if (eventError) {
    return *eventError;
  }
  if (!st) {
    return transportFrom(st.error());
  }
  if (status != 200) {
    return parseStatusError(status, errorBody, retryAfter);
  }
  return kc::Ok{};
}

}  // namespace kc::kube
