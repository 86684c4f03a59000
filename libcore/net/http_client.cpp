// HttpClient on Boost.Beast. Blocking API over asynchronous operations: every connection owns
// a small io_context that the calling thread runs until the current operation completes, with
// a steady_timer that closes the socket when the deadline passes (Beast's synchronous calls
// cannot time out). One connection serves one call at a time, so the client is thread-safe
// without locks on the I/O path; idle keep-alive connections wait in a pool.

#include "libcore/net/http_client.hpp"

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <chrono>
#include <limits>
#include <optional>
#include <vector>

#include "libcore/net/detail/asio.hpp"
#include "libcore/net/http_client_connection.hpp"
#include "libcore/net/http_client_redirect.hpp"

namespace kc::net {

using namespace detail;
using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------
void CancelToken::cancel() {
  std::lock_guard lock(mutex_);
  cancelled_ = true;
  if (hook_) {
    hook_();  // under the lock: clearHook() must not return while the hook runs
  }
}

void CancelToken::setHook(std::function<void()> hook) {
  std::lock_guard lock(mutex_);
  hook_ = std::move(hook);
  if (cancelled_ && hook_) {
    hook_();
  }
}

void CancelToken::clearHook() {
  std::lock_guard lock(mutex_);
  hook_ = nullptr;
}

namespace {

constexpr std::size_t kStreamBuffer = 64 * 1024;
constexpr std::uint32_t kHeaderLimit = 256 * 1024;
// "No limit". NOT boost::none: Beast 1.74's basic_parser compares `len_ > body_limit_` against
// the optional, and any Content-Length is greater than an empty optional (always body_limit).
constexpr std::uint64_t kNoBodyLimit = std::numeric_limits<std::uint64_t>::max();

bool isIpLiteral(const std::string& host) {
  error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

bool idempotent(std::string_view method) {
  return method == "GET" || method == "HEAD" || method == "PUT" || method == "DELETE" ||
         method == "OPTIONS";
}

bool headerSafe(const Header& h) {
  return !h.name.empty() && h.name.find_first_of("\r\n: \t") == std::string::npos &&
         h.value.find_first_of("\r\n") == std::string::npos;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
class HttpClient::Impl {
 public:
  ClientOptions options;
  Url url;
  std::string hostHeader;
  std::string caDescription;  // for error messages: which CA we trusted
  std::optional<asio::ssl::context> ssl;

  std::mutex poolMutex;
  std::vector<std::unique_ptr<Connection>> idle;  // guarded by poolMutex

  std::unique_ptr<Connection> acquire() {
    {
      std::lock_guard lock(poolMutex);
      while (!idle.empty()) {
        auto c = std::move(idle.back());
        idle.pop_back();
        if (c->stillUsable()) {
          c->reused = true;
          return c;
        }
      }
    }
    return std::make_unique<Connection>(ssl ? &*ssl : nullptr);
  }

  void release(std::unique_ptr<Connection> c) {
    if (!options.keepAlive) {
      return;
    }
    std::lock_guard lock(poolMutex);
    if (idle.size() < options.maxIdleConnections) {
      c->buffer.consume(c->buffer.size());
      idle.push_back(std::move(c));
    }
  }

  Error translate(const OpResult& r, std::string_view what, CancelToken* cancel) const {
    if (cancel != nullptr && cancel->cancelled()) {
      return makeError(kc::errc::kCancelled,
                       std::string(what) + " " + url.authority() + " cancelled");
    }
    if (r.timedOut) {
      return makeError(kc::errc::kTimeout,
                       std::string(what) + " " + url.authority() + " timed out");
    }
    return makeError(kc::errc::kUnavailable,
                     std::string(what) + " " + url.authority() + " failed: " + r.ec.message());
  }

  Status connect(Connection& c, Clock::time_point deadline, CancelToken* cancel) {
    const auto connectDeadline = std::min(deadline, Clock::now() + options.connectTimeout);
    std::vector<tcp::endpoint> endpoints;
    error_code ec;
    const auto address = asio::ip::make_address(url.host, ec);
    if (!ec) {
      endpoints.emplace_back(address, url.port);
    } else {
      tcp::resolver resolver(c.ioc);
      tcp::resolver::results_type results;
      OpResult r = runOp(c, connectDeadline, [&](auto handler) {
        resolver.async_resolve(
            url.host, std::to_string(url.port),
            [&results, handler](error_code rec, tcp::resolver::results_type res) mutable {
              results = std::move(res);
              handler(rec);
            });
      });
      if (r.timedOut) {
        resolver.cancel();
      }
      if (r.ec || r.timedOut) {
        return translate(r, "resolving", cancel);
      }
      for (const auto& e : results) {
        endpoints.push_back(e.endpoint());
      }
    }
    OpResult r = runOp(c, connectDeadline, [&](auto handler) {
      asio::async_connect(
          c.socket(), endpoints,
          [handler](error_code cec, const tcp::endpoint&) mutable { handler(cec); });
    });
    if (r.ec || r.timedOut || (cancel != nullptr && cancel->cancelled())) {
      return translate(r, "connecting to", cancel);
    }
    c.socket().set_option(tcp::no_delay(true), ec);
    if (!c.tls) {
      return okStatus();
    }
    return handshake(c, connectDeadline, cancel);
  }

  Status handshake(Connection& c, Clock::time_point deadline, CancelToken* cancel) {
    SSL* native = c.tls->native_handle();
    const std::string& name = options.tls.serverName.empty() ? url.host : options.tls.serverName;
    const bool ip = isIpLiteral(name);
    if (!ip) {
      SSL_set_tlsext_host_name(native, name.c_str());
    }
    if (!options.tls.insecureSkipVerify) {
      X509_VERIFY_PARAM* param = SSL_get0_param(native);
      X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      const int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str())
                        : X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size());
      if (ok != 1) {
        return makeError(kc::errc::kTls, "cannot set the name to verify ('" + name + "')");
      }
    }
    OpResult r = runOp(c, deadline, [&](auto handler) {
      c.tls->async_handshake(asio::ssl::stream_base::client, handler);
    });
    if (cancel != nullptr && cancel->cancelled()) {
      return translate(r, "TLS handshake with", cancel);
    }
    if (r.timedOut) {
      return makeError(kc::errc::kTimeout, "TLS handshake with " + url.authority() + " timed out");
    }
    if (r.ec) {
      const long verify = SSL_get_verify_result(native);
      if (verify != X509_V_OK) {
        return makeError(kc::errc::kTls, "TLS certificate verification of " + url.authority() +
                                             " (name '" + name +
                                             "') failed: " + X509_verify_cert_error_string(verify) +
                                             "; trusted CA: " + caDescription);
      }
      return makeError(kc::errc::kTls,
                       "TLS handshake with " + url.authority() + " failed: " + r.ec.message());
    }
    return okStatus();
  }

  Result<http::request<http::string_body>> buildRequest(std::string_view method,
                                                        std::string_view target, std::string body,
                                                        Headers headers) const {
    if (method.empty() || method.find_first_of(" \r\n\t") != std::string_view::npos) {
      return makeError(kc::errc::kInvalid, "bad HTTP method '" + std::string(method) + "'");
    }
    if (target.empty() || target.front() != '/' ||
        target.find_first_of(" \r\n\t") != std::string_view::npos) {
      return makeError(kc::errc::kInvalid,
                       "request target must start with '/' and contain no spaces: '" +
                           std::string(target) + "'");
    }
    Headers merged = options.defaultHeaders;
    if (options.headerProvider) {
      for (auto& h : options.headerProvider()) {
        setHeader(merged, h.name, h.value);
      }
    }
    for (auto& h : headers) {
      setHeader(merged, h.name, h.value);
    }
    http::request<http::string_body> req;
    req.method_string(beast::string_view(method.data(), method.size()));
    req.target(url.basePath + std::string(target));
    req.version(11);
    req.set(http::field::host, hostHeader);
    req.set(http::field::user_agent, options.userAgent);
    for (const auto& h : merged) {
      if (!headerSafe(h)) {
        return makeError(kc::errc::kInvalid,
                         "header '" + h.name + "' contains characters not allowed in HTTP");
      }
      if (iequals(h.name, "Content-Length") || iequals(h.name, "Transfer-Encoding") ||
          iequals(h.name, "Connection")) {
        continue;
      }
      req.set(beast::string_view(h.name.data(), h.name.size()),
              beast::string_view(h.value.data(), h.value.size()));
    }
    const bool hasBody = !body.empty() || method == "POST" || method == "PUT" || method == "PATCH";
    req.body() = std::move(body);
    if (hasBody) {
      req.content_length(req.body().size());
    }
    req.keep_alive(options.keepAlive);
    return req;
  }

  // Connects `c` unless it is a reused keep-alive connection, then writes the request. A
  // reused connection that turns out dead yields the internal code "stale" (retry once fresh).
  Status send(Connection& c, http::request<http::string_body>& req, Clock::time_point deadline,
              CancelToken* cancel) {
    if (cancel != nullptr && cancel->cancelled()) {
      return makeError(kc::errc::kCancelled, "request to " + url.authority() + " cancelled");
    }
    if (!c.reused) {
      if (auto st = connect(c, deadline, cancel); !st) {
        return st;
      }
    }
    OpResult r = runOp(c, deadline, [&](auto handler) {
      withStream(c, [&](auto& s) { http::async_write(s, req, handler); });
    });
    if (r.ec || r.timedOut) {
      Error e = translate(r, "sending request to", cancel);
      if (c.reused && !r.timedOut && e.code == kc::errc::kUnavailable) {
        e.code = kc::errc::kStale;
      }
      return e;
    }
    return okStatus();
  }

  std::unique_ptr<Connection> connectionFor(bool allowReuse) {
    return allowReuse ? acquire() : std::make_unique<Connection>(ssl ? &*ssl : nullptr);
  }

  Result<Response> request(std::string_view method, std::string_view target, std::string body,
                           Headers headers, const RequestOptions& ro) {
    const auto timeout = ro.timeout.count() > 0 ? ro.timeout : options.requestTimeout;
    const auto deadline = Clock::now() + timeout;
    auto req = buildRequest(method, target, std::move(body), std::move(headers));
    if (!req) {
      return std::move(req).error();
    }
    std::string currentMethod(method);
    std::string currentTarget(req->target());
    for (std::uint32_t hop = 0;; ++hop) {
      auto result = exchangeOnce(*req, currentMethod, deadline, ro.cancel);
      if (!result || !isRedirect(result->status) || options.maxRedirects == 0) {
        return result;
      }
      const auto location = result->header("Location");
      if (!location) {
        return result;  // nothing to follow: the caller sees the 3xx
      }
      const std::string what = currentMethod + " " + currentTarget + " (HTTP " +
                               std::to_string(result->status) + " to '" + location->substr(0, 200) +
                               "')";
      if (hop >= options.maxRedirects) {
        return makeError(kc::errc::kRedirect, what + ": more than " +
                                                  std::to_string(options.maxRedirects) +
                                                  " redirects from " + url.authority());
      }
      auto next = redirectTarget(url, currentTarget, *location);
      if (!next) {
        return makeError(next.error().code, what + ": " + next.error().message);
      }
      const unsigned st = result->status;
      const bool toGet = (st == 303 && currentMethod != "HEAD") ||
                         ((st == 301 || st == 302) && currentMethod == "POST");
      if (toGet) {
        currentMethod = "GET";
        req->method(http::verb::get);
        req->body().clear();
        req->erase(http::field::content_length);
        req->erase(http::field::content_type);
      }
      currentTarget = *next;
      req->target(currentTarget);
    }
  }

  // One exchange, retried once on a fresh connection when a pooled one turned out dead.
  Result<Response> exchangeOnce(http::request<http::string_body>& req, std::string_view method,
                                Clock::time_point deadline, CancelToken* cancel) {
    for (int attempt = 0;; ++attempt) {
      auto result = exchange(req, method, deadline, cancel, attempt == 0);
      if (!result && result.error().code == kc::errc::kStale && attempt == 0) {
        continue;
      }
      if (!result && result.error().code == kc::errc::kStale) {
        return makeError(kc::errc::kUnavailable, result.error().message);
      }
      return result;
    }
  }

  Result<Response> exchange(http::request<http::string_body>& req, std::string_view method,
                            Clock::time_point deadline, CancelToken* cancel, bool allowReuse) {
    auto c = connectionFor(allowReuse);
    HookGuard guard(cancel, *c);  // declared after c: cleared before c can be destroyed
    if (auto st = send(*c, req, deadline, cancel); !st) {
      return std::move(st).error();
    }
    http::response_parser<http::string_body> parser;
    parser.header_limit(kHeaderLimit);
    if (options.responseBodyLimit == 0) {
      parser.body_limit(kNoBodyLimit);
    } else {
      parser.body_limit(options.responseBodyLimit);
    }
    if (method == "HEAD") {
      parser.skip(true);
    }
    // Header first: Beast 1.74 does not reliably apply body_limit to a Content-Length body when
    // reading through async_read (verified: a 3 MB body passes a 1 MB limit), so check it here.
    OpResult r = runOp(*c, deadline, [&](auto handler) {
      withStream(*c, [&](auto& s) { http::async_read_header(s, c->buffer, parser, handler); });
    });
    if (!r.ec && !r.timedOut && options.responseBodyLimit != 0) {
      if (const auto len = parser.content_length(); len && *len > options.responseBodyLimit) {
        r.ec = http::error::body_limit;
      }
    }
    if (!r.ec && !r.timedOut && !parser.is_done()) {
      r = runOp(*c, deadline, [&](auto handler) {
        withStream(*c, [&](auto& s) { http::async_read(s, c->buffer, parser, handler); });
      });
    }
    if (r.ec == http::error::body_limit) {
      return makeError(kc::errc::kTooLarge,
                       "response from " + url.authority() + " exceeds the limit of " +
                           std::to_string(options.responseBodyLimit) + " bytes");
    }
    if (r.ec || r.timedOut) {
      Error e = translate(r, "reading response from", cancel);
      const bool nothingRead = !parser.got_some();
      if (c->reused && nothingRead && !r.timedOut && e.code == kc::errc::kUnavailable &&
          idempotent(method)) {
        e.code = kc::errc::kStale;
      } else if (r.ec.category() == make_error_code(http::error::bad_target).category() &&
                 r.ec != http::error::end_of_stream && r.ec != http::error::partial_message) {
        e = makeError(kc::errc::kProtocol,
                      "malformed HTTP response from " + url.authority() + ": " + r.ec.message());
      }
      return e;
    }
    auto msg = parser.release();
    Response out;
    out.status = msg.result_int();
    for (const auto& f : msg) {
      out.headers.push_back(Header{std::string(f.name_string()), std::string(f.value())});
    }
    out.body = std::move(msg.body());
    guard.clear();
    // A cancel that raced with the end of the exchange may have queued a close: do not pool.
    if (msg.keep_alive() && !parser.need_eof() && !(cancel != nullptr && cancel->cancelled())) {
      release(std::move(c));
    }
    return out;
  }

  Status stream(std::string_view method, std::string_view target, std::string body, Headers headers,
                const StreamCallbacks& cb, const StreamOptions& so) {
    const auto headerTimeout =
        so.headerTimeout.count() > 0 ? so.headerTimeout : options.requestTimeout;
    const auto deadline = Clock::now() + headerTimeout;
    auto req = buildRequest(method, target, std::move(body), std::move(headers));
    if (!req) {
      return std::move(req).error();
    }
    Status st = okStatus();
    for (int attempt = 0;; ++attempt) {
      st = streamOnce(*req, method, deadline, cb, so, attempt == 0);
      if (!st && st.error().code == kc::errc::kStale && attempt == 0) {
        continue;
      }
      break;
    }
    if (!st && st.error().code == kc::errc::kStale) {
      return makeError(kc::errc::kUnavailable, st.error().message);
    }
    return st;
  }

  Status streamOnce(http::request<http::string_body>& req, std::string_view method,
                    Clock::time_point deadline, const StreamCallbacks& cb, const StreamOptions& so,
                    bool allowReuse) {
    auto c = connectionFor(allowReuse);
    HookGuard guard(so.cancel, *c);
    if (auto st = send(*c, req, deadline, so.cancel); !st) {
      return st;
    }
    http::response_parser<http::buffer_body> parser;
    parser.header_limit(kHeaderLimit);
    parser.body_limit(kNoBodyLimit);
    if (method == "HEAD") {
      parser.skip(true);
    }
    OpResult r = runOp(*c, deadline, [&](auto handler) {
      withStream(*c, [&](auto& s) { http::async_read_header(s, c->buffer, parser, handler); });
    });
    if (r.ec || r.timedOut) {
      Error e = translate(r, "reading response from", so.cancel);
      if (c->reused && !parser.got_some() && !r.timedOut && e.code == kc::errc::kUnavailable &&
          idempotent(method)) {
        e.code = kc::errc::kStale;
      }
      return e;
    }
    {
      const auto& head = parser.get();
      Headers hs;
      for (const auto& f : head) {
        hs.push_back(Header{std::string(f.name_string()), std::string(f.value())});
      }
      if (cb.onHeaders && !cb.onHeaders(head.result_int(), hs)) {
        c->close();
        return okStatus();
      }
    }
    std::vector<char> buf(kStreamBuffer);
    while (!parser.is_done()) {
      parser.get().body().data = buf.data();
      parser.get().body().size = buf.size();
      std::optional<Clock::time_point> idleDeadline;
      if (so.idleTimeout.count() > 0) {
        idleDeadline = Clock::now() + so.idleTimeout;
      }
      r = runOp(*c, idleDeadline, [&](auto handler) {
        withStream(*c, [&](auto& s) { http::async_read_some(s, c->buffer, parser, handler); });
      });
      const std::size_t got = buf.size() - parser.get().body().size;
      if (got > 0 && cb.onData && !cb.onData(std::string_view(buf.data(), got))) {
        c->close();
        return okStatus();
      }
      if (r.ec == http::error::need_buffer) {
        continue;
      }
      if (r.ec || r.timedOut) {
        if (so.cancel != nullptr && so.cancel->cancelled()) {
          return makeError(kc::errc::kCancelled, "stream from " + url.authority() + " cancelled");
        }
        if (r.timedOut) {
          return makeError(kc::errc::kTimeout, "stream from " + url.authority() +
                                                   " idle for longer than " +
                                                   std::to_string(so.idleTimeout.count()) + " ms");
        }
        return makeError(kc::errc::kUnavailable,
                         "stream from " + url.authority() + " broke: " + r.ec.message());
      }
    }
    guard.clear();
    if (parser.get().keep_alive() && !parser.need_eof() &&
        !(so.cancel != nullptr && so.cancel->cancelled())) {
      release(std::move(c));
    }
    return okStatus();
  }
};

// ---------------------------------------------------------------------------------------------
Result<std::unique_ptr<HttpClient>> HttpClient::create(ClientOptions options) {
  auto impl = std::make_unique<Impl>();
  auto url = parseUrl(options.baseUrl);
  if (!url) {
    return std::move(url).error();
  }
  impl->url = *url;
  const bool v6 = url->host.find(':') != std::string::npos;
  impl->hostHeader = v6 ? "[" + url->host + "]" : url->host;
  if (url->port != (url->isTls() ? 443 : 80)) {
    impl->hostHeader += ":" + std::to_string(url->port);
  }
  if (options.requestTimeout.count() <= 0 || options.connectTimeout.count() <= 0) {
    return makeError(kc::errc::kInvalid, "client timeouts must be positive");
  }
  if (url->isTls()) {
    try {
      impl->ssl.emplace(asio::ssl::context::tls_client);
      auto& ctx = *impl->ssl;
      ctx.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                      asio::ssl::context::no_sslv3);
      SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_2_VERSION);
      const auto& tls = options.tls;
      if (tls.insecureSkipVerify) {
        ctx.set_verify_mode(asio::ssl::verify_none);
        impl->caDescription = "none (insecureSkipVerify)";
      } else {
        ctx.set_verify_mode(asio::ssl::verify_peer);
        if (!tls.caPem.empty()) {
          ctx.add_certificate_authority(asio::buffer(tls.caPem));
          impl->caDescription = "inline CA data";
        } else if (!tls.caFile.empty()) {
          ctx.load_verify_file(tls.caFile);
          impl->caDescription = "CA file " + tls.caFile;
        } else {
          ctx.set_default_verify_paths();
          impl->caDescription = "system trust store";
        }
      }
      if (!tls.certPem.empty()) {
        ctx.use_certificate_chain(asio::buffer(tls.certPem));
      } else if (!tls.certFile.empty()) {
        ctx.use_certificate_chain_file(tls.certFile);
      }
      if (!tls.keyPem.empty()) {
        ctx.use_private_key(asio::buffer(tls.keyPem), asio::ssl::context::pem);
      } else if (!tls.keyFile.empty()) {
        ctx.use_private_key_file(tls.keyFile, asio::ssl::context::pem);
      }
      const bool hasCert = !tls.certPem.empty() || !tls.certFile.empty();
      const bool hasKey = !tls.keyPem.empty() || !tls.keyFile.empty();
      if (hasCert != hasKey) {
        return makeError(kc::errc::kInvalid, "client certificate and key must be given together");
      }
      if (hasCert && SSL_CTX_check_private_key(ctx.native_handle()) != 1) {
        return makeError(kc::errc::kTls,
                         "client private key does not match the client certificate");
      }
    } catch (const boost::system::system_error& e) {
      return makeError(kc::errc::kTls, std::string("cannot load TLS material for ") +
                                           options.baseUrl + ": " + e.what());
    }
  }
  impl->options = std::move(options);
  return std::unique_ptr<HttpClient>(new HttpClient(std::move(impl)));
}

HttpClient::HttpClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpClient::~HttpClient() = default;

Result<Response> HttpClient::request(std::string_view method, std::string_view target,
                                     std::string body, Headers headers, RequestOptions options) {
  return impl_->request(method, target, std::move(body), std::move(headers), options);
}

Status HttpClient::stream(std::string_view method, std::string_view target, std::string body,
                          Headers headers, const StreamCallbacks& callbacks,
                          StreamOptions options) {
  return impl_->stream(method, target, std::move(body), std::move(headers), callbacks, options);
}

const Url& HttpClient::baseUrl() const {
  return impl_->url;
}

void HttpClient::closeIdleConnections() {
  std::lock_guard lock(impl_->poolMutex);
  impl_->idle.clear();
}

}  // namespace kc::net
