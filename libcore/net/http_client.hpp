#pragma once
// HttpClient: blocking HTTP/1.1 client (optionally TLS) on Boost.Beast, used by the Kubernetes
// client, fabric drivers and bridge backends. Beast/Asio stay inside the http_client*.cpp units.
//
// - Thread-safe: any number of threads may call request()/stream() on one client at once;
//   each call uses its own pooled connection (keep-alive reuse when `keepAlive`).
// - Every call is bounded in time: `connectTimeout` for TCP connect + TLS handshake,
//   `requestTimeout` for the whole exchange of request(), and for stream() until the response
//   headers arrive; afterwards stream() is bounded only by StreamOptions::idleTimeout.
// - TLS verification uses OpenSSL: chain against `caFile`/`caPem` (or the system store when
//   neither is set) and the server's DNS name or IP address against the certificate's SANs.
//   A failed verification is an error (code "tls") that names the reason and the CA in use.
// - Error codes: "invalid" (bad URL/options), "unavailable" (resolve/connect/refused/reset),
//   "timeout", "tls", "too_large" (response over responseBodyLimit), "protocol" (malformed
//   HTTP from the server), "cancelled", "redirect" (a redirect request() will not follow).
// - Redirects: request() follows 301, 302, 303, 307 and 308 on the same origin (scheme, host
//   and port of the base URL), at most `maxRedirects` hops within the one request timeout.
//   307/308 repeat the method and body; 303 turns every method but HEAD into a bodiless GET;
//   301/302 keep the method, except POST, which becomes a bodiless GET (what browsers, curl
//   and Go do, and RFC 9110 15.4.2/15.4.3 allow). A redirect to another origin, or more hops
//   than allowed, is an error with code "redirect" naming the Location; a 3xx without a
//   Location is returned as is. stream() never follows redirects (watches are not redirected).
// - Response bodies of any size are parsed incrementally (Beast's 8 MB default lifted).

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "libcore/base/result.hpp"
#include "libcore/net/http.hpp"

namespace kc::net {

struct ClientTlsOptions {
  std::string caFile{};  // PEM bundle of trusted CAs; with caPem empty and this empty: system store
  std::string caPem{};
  std::string certFile{};  // client certificate (mutual TLS), PEM
  std::string certPem{};
  std::string keyFile{};  // its private key, PEM
  std::string keyPem{};
  bool insecureSkipVerify = false;  // no chain or name check (kubeconfig insecure-skip-tls-verify)
  std::string serverName{};  // name to verify and send as SNI instead of the URL host (optional)
};

struct ClientOptions {
  std::string baseUrl{};  // "http://host:port" or "https://host:port[/prefix]"
  ClientTlsOptions tls{};
  std::chrono::milliseconds connectTimeout{10'000};
  std::chrono::milliseconds requestTimeout{30'000};
  std::size_t responseBodyLimit = 256u << 20;  // request() only; 0 = unlimited
  bool keepAlive = true;
  std::size_t maxIdleConnections = 8;
  Headers defaultHeaders{};  // sent with every request (a per-call header of the same name wins)
  // Called before every request; its headers are added after defaultHeaders (e.g. a bearer
  // token re-read from a rotating file). May be empty.
  std::function<Headers()> headerProvider{};
  std::string userAgent = "kubecomp/0.1";
  // Same-origin redirects request() follows per call; 0 = return 3xx responses unfollowed.
  std::uint32_t maxRedirects = 5;
};

// Cancels a stream() (or request()) from another thread. Thread-safe; cancel() is idempotent
// and also cancels calls that start later with the same token.
class CancelToken {
 public:
  void cancel();
  bool cancelled() const noexcept { return cancelled_.load(); }

  // Used by HttpClient while a call is in progress: `hook` runs on cancel() (at once if
  // already cancelled). clearHook() returns only after a running hook finished.
  void setHook(std::function<void()> hook);
  void clearHook();

 private:
  std::atomic<bool> cancelled_{false};
  mutable std::mutex mutex_;
  std::function<void()> hook_;  // guarded by mutex_
};

struct RequestOptions {
  std::chrono::milliseconds timeout{0};  // 0 = ClientOptions::requestTimeout
  CancelToken* cancel = nullptr;         // optional, must outlive the call
};

struct StreamOptions {
  // Time allowed until the response headers arrive; 0 = ClientOptions::requestTimeout.
  std::chrono::milliseconds headerTimeout{0};
  // Maximum silence between two pieces of body data; 0 = none (rely on server-side timeouts,
  // e.g. watch timeoutSeconds, or on cancel()).
  std::chrono::milliseconds idleTimeout{0};
  CancelToken* cancel = nullptr;  // optional, must outlive the call
};

// Callbacks of stream(). They run on the calling thread.
struct StreamCallbacks {
  // Status and headers, once, before any data. Return false to abandon the body.
  std::function<bool(unsigned status, const Headers& headers)> onHeaders{};
  // Body bytes as they arrive (chunk boundaries are NOT message boundaries). Return false to
  // stop; stream() then returns ok.
  std::function<bool(std::string_view data)> onData{};
};

class HttpClient {
 public:
  // Validates the options and loads TLS material; errors are "invalid" or "tls".
  static Result<std::unique_ptr<HttpClient>> create(ClientOptions options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // One complete exchange. `target` is the path+query relative to the base URL
  // ("/api/v1/pods?limit=5"). HTTP error statuses are NOT errors here: a 404 is an ok Result
  // with status 404. Content-Length is set from `body`; a Content-Type in `headers` is sent
  // as is (none is added).
  Result<Response> request(std::string_view method, std::string_view target, std::string body = {},
                           Headers headers = {}, RequestOptions options = {});

  // Streams the response body incrementally (no size limit). Returns ok when the body ended
  // normally or a callback asked to stop; an error when the connection failed, timed out or
  // was cancelled (code "cancelled").
  Status stream(std::string_view method, std::string_view target, std::string body, Headers headers,
                const StreamCallbacks& callbacks, StreamOptions options = {});

  const Url& baseUrl() const;
  // Drops pooled idle connections (e.g. after the server certificate rotated).
  void closeIdleConnections();

  class Impl;

 private:
  explicit HttpClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kc::net
