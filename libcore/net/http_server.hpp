#pragma once
// HttpServer: HTTP/1.1 server (optionally TLS) on Boost.Beast, used by every daemon for
// /livez /readyz /metrics, by the webhooks, the chassis simulator and the Kubernetes API test
// double. Beast/Asio stay inside the http_server*.cpp units (pimpl).
//
// Threading model
// - `ioThreads` threads run one io_context. Each connection is served on its own strand, so
//   one connection's handlers never run concurrently with each other.
// - Ordinary handlers (`Handler`) run on an io thread and must not block for long: a blocked
//   handler holds one io thread (slow work belongs on a worker, answered through a
//   StreamHandler + ResponseStream::send from that worker).
// - StreamHandlers get a ResponseStream they may keep and use from ANY thread, later.
//
// Protocol behaviour
// - Routing: exact (method, path) routes first, then the longest matching prefix route, then
//   the fallback. A path known with another method answers 405 (with Allow); no match 404.
//   HEAD falls back to the GET route of the same path (body dropped, headers kept).
// - Limits: request headers `headerLimit` bytes, body `bodyLimit` bytes (413, connection
//   closed), malformed HTTP 400 (connection closed). All error bodies are JSON
//   {"error": <code>, "message": <text>}. `Expect: 100-continue` is honoured.
// - Timeouts: a new connection must deliver its request headers within `readTimeout`; a
//   keep-alive connection may stay idle for `idleTimeout` before its next request; a request
//   body must arrive within `readTimeout` after its headers; a response write must progress
//   within `writeTimeout`. A client that misses any of these is disconnected.
// - stop(drain): stops accepting, closes idle keep-alive connections, lets in-flight requests
//   finish (their responses carry `Connection: close`), ends open streams (terminating chunk),
//   waits up to `drain`, then closes whatever is left and joins the io threads.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "libcore/base/result.hpp"
#include "libcore/net/http.hpp"

namespace kc::net {

// Server TLS material. Each item may come from a file or inline PEM text (the *Pem field wins
// when both are set).
struct ServerTlsOptions {
  std::string certFile{};  // PEM certificate chain, leaf first
  std::string certPem{};
  std::string keyFile{};  // PEM private key
  std::string keyPem{};
  // When either is set, clients must present a certificate signed by this CA (mutual TLS);
  // the verified subject is passed to handlers as Request::peerCertSubject.
  std::string clientCaFile{};
  std::string clientCaPem{};
  // With a client CA set: false = a client certificate is optional but verified when sent.
  bool requireClientCert = true;
};

struct ServerOptions {
  std::string bindAddress = "127.0.0.1";  // IPv4 or IPv6 literal ("0.0.0.0", "::")
  std::uint16_t port = 0;                 // 0 = ephemeral, see HttpServer::port()
  std::size_t bodyLimit = 1 << 20;        // request body bytes (the API double raises it)
  std::size_t headerLimit = 16 * 1024;    // request line + header bytes
  std::chrono::milliseconds readTimeout{30'000};
  std::chrono::milliseconds idleTimeout{90'000};
  std::chrono::milliseconds writeTimeout{30'000};
  // A stream whose client does not read fast enough is closed once this many bytes are queued
  // (kube-apiserver drops slow watchers the same way).
  std::size_t streamBufferLimit = 64u << 20;
  unsigned ioThreads = 2;
  std::optional<ServerTlsOptions> tls{};
  std::string serverHeader = "kubecomp";  // value of the Server response header
};

// A response the handler produces piece by piece, possibly long after the handler returned
// (Kubernetes watch, log follow). All members are thread-safe and may be called from any
// thread. Writes are queued and sent in order on the connection's strand.
//
// Lifecycle: either send() one complete response, or begin() + write()* + end(). If every
// shared_ptr to the stream is dropped before that, the server finishes it for you: 500 when
// nothing was sent yet, the terminating chunk after begin().
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;

  // Sends the status line and headers with `Transfer-Encoding: chunked` (Content-Length in
  // `headers` is ignored). False if the client is gone or a response was already started.
  virtual bool begin(unsigned status, Headers headers) = 0;
  // Queues `data` as one chunk (empty data is ignored). False once the stream is closed (client
  // gone, buffer limit exceeded, server stopping, end() called): stop producing then.
  virtual bool write(std::string_view data) = 0;
  // Sends the terminating chunk. The connection then serves its next request (keep-alive).
  virtual void end() = 0;
  // Sends a complete response instead of a stream (e.g. 410 for a too-old watch). False if a
  // response was already started or the client is gone.
  virtual bool send(Response response) = 0;
  // True once no more data can reach the client.
  virtual bool closed() const = 0;
  // Bytes queued but not yet written to the socket.
  virtual std::size_t pendingBytes() const = 0;
  // `callback` runs exactly once when the stream closes for any reason (runs at once, on the
  // calling thread, if it already closed). It runs on an io thread: do not block in it. Only
  // one callback is kept; a second call replaces the first.
  virtual void onClose(std::function<void()> callback) = 0;
};

using Handler = std::function<Response(const Request&)>;
using StreamHandler = std::function<void(const Request&, std::shared_ptr<ResponseStream>)>;

class HttpServer {
 public:
  explicit HttpServer(ServerOptions options = {});
  ~HttpServer();  // stop(0) if still running
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Route registration is thread-safe and may also happen after start().
  // Exact path match for one method (a second registration of the same pair replaces it).
  void route(std::string method, std::string path, Handler handler);
  void routeStream(std::string method, std::string path, StreamHandler handler);
  // Prefix match ("/debug/" matches "/debug/x"); empty method = any method.
  void routePrefix(std::string method, std::string prefix, Handler handler);
  void routePrefixStream(std::string method, std::string prefix, StreamHandler handler);
  // Runs when no route matches any method of the path (instead of the 404).
  void setFallback(Handler handler);
  void setStreamFallback(StreamHandler handler);

  // Binds, listens and starts the io threads. Returns the bound port. Fails (code
  // "unavailable" / "invalid") on a bad address, a busy port or unusable TLS material.
  Result<std::uint16_t> start();
  // Graceful stop (see the header comment). Idempotent; safe to call from any thread except
  // an io thread of this server (i.e. not from inside a handler).
  void stop(std::chrono::milliseconds drainTimeout = std::chrono::seconds(5));

  bool running() const;
  std::uint16_t port() const;  // 0 before start()
  // "http://127.0.0.1:<port>" or "https://..." (IPv6 bracketed); meaningful after start().
  std::string baseUrl() const;
  // Connections currently open (for tests and metrics).
  std::size_t openConnections() const;

  class Impl;  // public only so the .cpp's helpers can name it

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace kc::net
