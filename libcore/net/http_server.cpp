// HttpServer on Boost.Beast. Structure follows the usual Asio server shape: an acceptor, and
// one self-owning Session per connection (kept alive by its pending operations through
// shared_from_this) whose completion handlers all run on that connection's strand.
//
// Timeouts use one steady_timer per session (not beast::tcp_stream's built-in expiry): while a
// response is streamed the session has a read pending without deadline (to notice the client
// leaving) and a write pending with one, which a single shared expiry cannot express.

#include "libcore/net/http_server.hpp"

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <unordered_map>

#include "libcore/base/percent_encoding.hpp"
#include "libcore/net/detail/asio.hpp"

namespace kc::net {

using namespace detail;

namespace {

constexpr std::chrono::milliseconds kLingerTimeout{1000};
constexpr std::size_t kLingerMaxBytes = 64u << 20;

// Header names/values from handlers end up verbatim on the wire: refuse CR/LF (response
// splitting) rather than trust every caller.
bool safeHeader(const Header& h) {
  if (h.name.empty()) {
    return false;
  }
  for (char c : h.name) {
    if (c == '\r' || c == '\n' || c == ':' || c == ' ' || c == '\t') {
      return false;
    }
  }
  return h.value.find_first_of("\r\n") == std::string::npos;
}

std::string endpointText(const tcp::endpoint& ep) {
  const auto addr = ep.address();
  if (addr.is_v6()) {
    return "[" + addr.to_string() + "]:" + std::to_string(ep.port());
  }
  return addr.to_string() + ":" + std::to_string(ep.port());
}

std::string hexSize(std::size_t n) {
  char buf[24];
  const int len = std::snprintf(buf, sizeof buf, "%zx", n);
  return std::string(buf, static_cast<std::size_t>(len));
}

bool isMethodToken(std::string_view m) {
  if (m.empty()) {
    return false;
  }
  return std::all_of(m.begin(), m.end(),
                     [](char c) { return (c >= 'A' && c <= 'Z') || c == '-' || c == '_'; });
}

struct Route {
  std::string method;  // "" = any (prefix routes only)
  std::string path;
  Handler handler;
  StreamHandler stream;
};

// What dispatch decided for one request.
struct Match {
  Handler handler;
  StreamHandler stream;
  bool headAsGet = false;  // HEAD served by a GET route: drop the body
  unsigned status = 0;     // 404/405 when no handler
  std::string allow;       // for 405
};

}  // namespace

// ---------------------------------------------------------------------------------------------
class SessionBase;

class HttpServer::Impl {
 public:
  explicit Impl(ServerOptions o) : options(std::move(o)) {}

  Match match(const std::string& method, const std::string& path) const;
  void registerSession(const std::shared_ptr<SessionBase>& s);
  void unregisterSession(SessionBase* s);
  void accept();
  template <class F>
  void forEachSession(F&& f);

  const ServerOptions options;

  mutable std::shared_mutex routesMutex;
  std::vector<Route> exact;   // guarded by routesMutex
  std::vector<Route> prefix;  // guarded by routesMutex
  Handler fallback;           // guarded by routesMutex
  StreamHandler streamFallback;

  std::mutex sessionsMutex;
  std::condition_variable sessionsCv;
  std::unordered_map<SessionBase*, std::weak_ptr<SessionBase>>
      sessions;  // guarded by sessionsMutex

  // Streams post onto session strands from arbitrary threads; once the io threads are gone
  // (stop) the gate is shut so nothing posts into an io_context being torn down.
  std::shared_mutex gateMutex;
  bool gateOpen = true;  // guarded by gateMutex

  std::mutex lifecycleMutex;  // serialises start/stop
  std::atomic<bool> running{false};
  std::atomic<bool> stopping{false};
  std::atomic<std::uint16_t> boundPort{0};
  bool tlsEnabled = false;
  std::string boundHost;

  std::optional<asio::ssl::context> ssl;
  std::vector<std::thread> threads;
  // Declared last: destroyed first, while the members sessions touch on destruction live.
  asio::io_context ioc;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::optional<tcp::acceptor> acceptor;
};

// Interface the server uses to drain / kill sessions without knowing the stream type.
class SessionBase {
 public:
  virtual ~SessionBase() = default;
  virtual void drain() = 0;       // posts: finish the current exchange, then close
  virtual void forceClose() = 0;  // posts: close now
  // Stream operations, called by StreamState on any thread (they post to the strand).
  virtual void postStreamBegin(unsigned status, Headers headers) = 0;
  virtual void postStreamWrite(std::shared_ptr<const std::string> data) = 0;
  virtual void postStreamEnd() = 0;
  virtual void postSend(Response response) = 0;
  virtual void postAbandoned(bool begun) = 0;
};

namespace {

// ---------------------------------------------------------------------------------------------
// The ResponseStream given to stream handlers. Thread-safe; forwards to the session strand.
class StreamState final : public ResponseStream {
 public:
  StreamState(std::shared_ptr<SessionBase> session, HttpServer::Impl* server, std::size_t limit)
      : session_(std::move(session)), server_(server), limit_(limit) {}

  bool begin(unsigned status, Headers headers) override {
    int expected = kFresh;
    if (closed_ || !phase_.compare_exchange_strong(expected, kBegun)) {
      return false;
    }
    return post([&](SessionBase& s) { s.postStreamBegin(status, std::move(headers)); });
  }

  bool write(std::string_view data) override {
    if (closed_ || phase_.load() != kBegun) {
      return false;
    }
    if (data.empty()) {
      return true;
    }
    const std::size_t queued = pending_.fetch_add(data.size()) + data.size();
    if (queued > limit_) {
      // Slow consumer: give up on it rather than buffer without bound.
      pending_.fetch_sub(data.size());
      closed_ = true;
      post([](SessionBase& s) { s.forceClose(); });
      return false;
    }
    auto chunk = std::make_shared<const std::string>(data);
    if (!post([&](SessionBase& s) { s.postStreamWrite(std::move(chunk)); })) {
      pending_.fetch_sub(data.size());
      return false;
    }
    return true;
  }

  void end() override {
    int expected = kBegun;
    if (phase_.compare_exchange_strong(expected, kDone)) {
      post([](SessionBase& s) { s.postStreamEnd(); });
    }
  }

  bool send(Response response) override {
    int expected = kFresh;
    if (closed_ || !phase_.compare_exchange_strong(expected, kDone)) {
      return false;
    }
    return post([&](SessionBase& s) { s.postSend(std::move(response)); });
  }

  bool closed() const override { return closed_.load() || phase_.load() == kDone; }
  std::size_t pendingBytes() const override { return pending_.load(); }

  void onClose(std::function<void()> callback) override {
    {
      std::lock_guard lock(mutex_);
      if (!closeDelivered_) {
        onClose_ = std::move(callback);
        return;
      }
    }
    if (callback) {
      callback();
    }
  }

  // Session side (strand) -------------------------------------------------------------------
  void wrote(std::size_t n) { pending_.fetch_sub(n); }

  // Runs the close callback once. Called on the strand when the exchange is over for any reason.
  void markClosed() {
    closed_ = true;
    std::function<void()> cb;
    std::shared_ptr<SessionBase> session;  // released after the lock, outside it
    {
      std::lock_guard lock(mutex_);
      if (closeDelivered_) {
        return;
      }
      closeDelivered_ = true;
      cb = std::move(onClose_);
      session = std::move(session_);
    }
    if (cb) {
      try {
        cb();
      } catch (...) {  // a throwing callback must not take an io thread down
      }
    }
  }

  // The last user reference went away (see StreamHandle).
  void abandoned() {
    const int phase = phase_.exchange(kDone);
    if (phase == kDone) {
      return;
    }
    post([phase](SessionBase& s) { s.postAbandoned(phase == kBegun); });
  }

 private:
  static constexpr int kFresh = 0;
  static constexpr int kBegun = 1;
  static constexpr int kDone = 2;

  template <class F>
  bool post(F&& f) {
    std::shared_lock gate(server_->gateMutex);
    if (!server_->gateOpen) {
      return false;
    }
    std::shared_ptr<SessionBase> s;
    {
      std::lock_guard lock(mutex_);
      s = session_;
    }
    if (!s) {
      return false;
    }
    f(*s);
    return true;
  }

  // Strong while the exchange is open: a handler may answer long after it returned, when no
  // I/O operation keeps the session alive. Released in markClosed() (breaking the cycle).
  std::shared_ptr<SessionBase> session_;  // guarded by mutex_
  HttpServer::Impl* server_;
  const std::size_t limit_;
  std::atomic<int> phase_{kFresh};
  std::atomic<bool> closed_{false};
  std::atomic<std::size_t> pending_{0};
  std::mutex mutex_;
  std::function<void()> onClose_;  // guarded by mutex_
  bool closeDelivered_ = false;    // guarded by mutex_
};

// What the handler holds: forwards to the StreamState and reports abandonment when the last
// shared_ptr copy is dropped.
class StreamHandle final : public ResponseStream {
 public:
  explicit StreamHandle(std::shared_ptr<StreamState> s) : s_(std::move(s)) {}
  ~StreamHandle() override { s_->abandoned(); }
  bool begin(unsigned status, Headers headers) override {
    return s_->begin(status, std::move(headers));
  }
  bool write(std::string_view data) override { return s_->write(data); }
  void end() override { s_->end(); }
  bool send(Response response) override { return s_->send(std::move(response)); }
  bool closed() const override { return s_->closed(); }
  std::size_t pendingBytes() const override { return s_->pendingBytes(); }
  void onClose(std::function<void()> callback) override { s_->onClose(std::move(callback)); }

 private:
  std::shared_ptr<StreamState> s_;
};

// ---------------------------------------------------------------------------------------------
template <class Stream>
class Session final : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, tcp::socket>;

  Session(HttpServer::Impl& server, tcp::socket socket)
      : server_(server),
        stream_(makeStream(server, std::move(socket))),
        timer_(stream_.get_executor()) {
    error_code ec;
    const auto ep = stream_.lowest_layer().remote_endpoint(ec);
    remote_ = ec ? std::string("unknown") : endpointText(ep);
  }

  ~Session() override {
    if (stream_state_) {
      stream_state_->markClosed();
    }
    server_.unregisterSession(this);
  }

  void start() {
    auto self = this->shared_from_this();
    asio::dispatch(stream_.get_executor(), [self] { self->onStart(); });
  }

  void drain() override {
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] { self->onDrain(); });
  }
  void forceClose() override {
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] { self->closeNow(); });
  }
  void postStreamBegin(unsigned status, Headers headers) override {
    asio::post(stream_.get_executor(),
               [self = this->shared_from_this(), status, h = std::move(headers)]() mutable {
                 self->streamBegin(status, std::move(h));
               });
  }
  void postStreamWrite(std::shared_ptr<const std::string> data) override {
    asio::post(stream_.get_executor(),
               [self = this->shared_from_this(), d = std::move(data)] { self->streamWrite(d); });
  }
  void postStreamEnd() override {
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] { self->streamEnd(); });
  }
  void postSend(Response response) override {
    asio::post(stream_.get_executor(),
               [self = this->shared_from_this(), r = std::move(response)]() mutable {
                 if (self->state_ == State::kHandling) {
                   self->writeResponse(std::move(r));
                 }
               });
  }
  void postAbandoned(bool begun) override {
    asio::post(stream_.get_executor(), [self = this->shared_from_this(), begun] {
      if (!begun && self->state_ == State::kHandling) {
        self->writeResponse(
            Response::error(500, "internal", "handler finished without a response"));
      } else if (begun) {
        self->streamEnd();
      }
    });
  }

 private:
  enum class State {
    kHandshake,
    kIdle,
    kReading,
    kHandling,
    kWriting,
    kStreaming,
    kClosing,
    kClosed
  };

  static Stream makeStream(HttpServer::Impl& server, tcp::socket socket) {
    if constexpr (kTls) {
      return Stream(std::move(socket), *server.ssl);
    } else {
      return Stream(std::move(socket));
    }
  }

  tcp::socket& socket() {
    if constexpr (kTls) {
      return stream_.next_layer();
    } else {
      return stream_;
    }
  }

  // --- timer ---------------------------------------------------------------------------------
  void arm(std::chrono::milliseconds d) {
    const std::uint64_t gen = ++timerGen_;
    timer_.expires_after(d);
    timer_.async_wait([self = this->shared_from_this(), gen](error_code ec) {
      if (!ec && gen == self->timerGen_) {
        self->closeNow();  // deadline missed: the peer is too slow or silent
      }
    });
  }
  void disarm() {
    ++timerGen_;
    timer_.cancel();
  }

  // --- connection start ------------------------------------------------------------------------
  void onStart() {
    if (server_.stopping) {
      closeNow();
      return;
    }
    if constexpr (kTls) {
      state_ = State::kHandshake;
      arm(server_.options.readTimeout);
      stream_.async_handshake(
          asio::ssl::stream_base::server,
          [self = this->shared_from_this()](error_code ec) { self->onHandshake(ec); });
    } else {
      readHeader();
    }
  }

  void onHandshake(error_code ec) {
    if (ec) {
      closeNow();  // bad client certificate, plain HTTP on the TLS port, timeout, ...
      return;
    }
    if constexpr (kTls) {
      if (X509* cert = SSL_get1_peer_certificate(stream_.native_handle())) {
        char buf[512];
        X509_NAME_oneline(X509_get_subject_name(cert), buf, sizeof buf);
        peerSubject_ = buf;
        X509_free(cert);
      }
    }
    readHeader();
  }

  // --- request reading -------------------------------------------------------------------------
  void readHeader() {
    if (server_.stopping) {
      closeNow();
      return;
    }
    state_ = State::kIdle;
    parser_.emplace();
    parser_->header_limit(
        static_cast<std::uint32_t>(std::min<std::size_t>(server_.options.headerLimit, UINT32_MAX)));
    parser_->body_limit(server_.options.bodyLimit);
    arm(requests_ == 0 ? server_.options.readTimeout : server_.options.idleTimeout);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](error_code ec, std::size_t) { self->onHeader(ec); });
  }

  void onHeader(error_code ec) {
    if (ec) {
      readFailed(ec, /*headerPhase=*/true);
      return;
    }
    ++requests_;
    state_ = State::kReading;
    const auto& req = parser_->get();
    if (const auto len = parser_->content_length(); len && *len > server_.options.bodyLimit) {
      fail(413, "too_large",
           "request body of " + std::to_string(*len) + " bytes exceeds the limit of " +
               std::to_string(server_.options.bodyLimit) + " bytes");
      return;
    }
    const auto expect = req[http::field::expect];
    if (!expect.empty() &&
        iequals(std::string_view(expect.data(), expect.size()), "100-continue") &&
        !parser_->is_done()) {
      auto msg = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
      arm(server_.options.writeTimeout);
      asio::async_write(stream_, asio::buffer(*msg),
                        [self = this->shared_from_this(), msg](error_code wec, std::size_t) {
                          if (wec) {
                            self->closeNow();
                            return;
                          }
                          self->readBody();
                        });
      return;
    }
    readBody();
  }

  void readBody() {
    arm(server_.options.readTimeout);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](error_code ec, std::size_t) { self->onBody(ec); });
  }

  void onBody(error_code ec) {
    if (ec) {
      readFailed(ec, /*headerPhase=*/false);
      return;
    }
    disarm();
    dispatch();
  }

  void readFailed(error_code ec, bool headerPhase) {
    if (ec == http::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::operation_aborted || ec == asio::error::connection_reset ||
        ec == asio::ssl::error::stream_truncated || ec == http::error::partial_message) {
      closeNow();  // client went away (or our deadline closed the socket)
      return;
    }
    if (ec == http::error::body_limit) {
      fail(413, "too_large",
           "request body exceeds the limit of " + std::to_string(server_.options.bodyLimit) +
               " bytes");
      return;
    }
    if (ec == http::error::header_limit) {
      fail(431, "header_too_large",
           "request header exceeds the limit of " + std::to_string(server_.options.headerLimit) +
               " bytes");
      return;
    }
    if (ec.category() == make_error_code(http::error::bad_target).category()) {
      fail(400, "bad_request", std::string("malformed HTTP request: ") + ec.message());
      return;
    }
    (void)headerPhase;
    closeNow();
  }

  // --- dispatch --------------------------------------------------------------------------------
  void dispatch() {
    state_ = State::kHandling;
    auto msg = parser_->release();
    keepAlive_ = msg.keep_alive();

    Request req;
    req.method = std::string(msg.method_string());
    req.target = std::string(msg.target());
    req.remoteAddress = remote_;
    req.tls = kTls;
    req.peerCertSubject = peerSubject_;
    for (const auto& field : msg) {
      req.headers.push_back(Header{std::string(field.name_string()), std::string(field.value())});
    }
    req.body = std::move(msg.body());

    if (!isMethodToken(req.method)) {
      fail(400, "bad_request", "malformed method '" + req.method + "'");
      return;
    }
    std::string_view target = req.target;
    // absolute-form ("http://host/path") is legal from proxies; serve its path.
    if (const auto scheme = target.find("://");
        scheme != std::string_view::npos && target.front() != '/') {
      const auto slash = target.find('/', scheme + 3);
      target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
    }
    if (target.empty() || target.front() != '/') {
      fail(400, "bad_request", "request target must be an absolute path, got '" + req.target + "'");
      return;
    }
    const auto q = target.find('?');
    auto path = percentDecode(target.substr(0, q), false);
    if (!path) {
      fail(400, "bad_request", path.error().message);
      return;
    }
    req.path = std::move(*path);
    if (q != std::string_view::npos) {
      auto query = parseQuery(target.substr(q + 1));
      if (!query) {
        fail(400, "bad_request", query.error().message);
        return;
      }
      req.query = std::move(*query);
    }

    Match m = server_.match(req.method, req.path);
    headOnly_ = m.headAsGet || req.method == "HEAD";
    if (m.status != 0) {
      Response r =
          m.status == 405
              ? Response::error(405, "method_not_allowed",
                                "method " + req.method + " is not allowed on " + req.path)
                    .withHeader("Allow", m.allow)
              : Response::error(404, "not_found", "no route for " + req.method + " " + req.path);
      writeResponse(std::move(r));
      return;
    }
    if (m.handler) {
      Response r;
      try {
        r = m.handler(req);
      } catch (const std::exception& e) {
        r = Response::error(500, "internal", std::string("handler failed: ") + e.what());
      }
      writeResponse(std::move(r));
      return;
    }
    stream_state_ = std::make_shared<StreamState>(this->shared_from_this(), &server_,
                                                  server_.options.streamBufferLimit);
    // Our own reference keeps the handle alive across the call, so a throwing handler is
    // answered with its exception text rather than the generic "abandoned" 500.
    auto handle = std::make_shared<StreamHandle>(stream_state_);
    try {
      m.stream(req, handle);
    } catch (const std::exception& e) {
      stream_state_->send(
          Response::error(500, "internal", std::string("handler failed: ") + e.what()));
    }
    handle.reset();
  }

  // --- complete responses ----------------------------------------------------------------------
  void writeResponse(Response r) {
    if (state_ == State::kClosing || state_ == State::kClosed) {
      return;
    }
    state_ = State::kWriting;
    const bool close = !keepAlive_ || closeAfterResponse_ || server_.stopping;
    auto res = std::make_shared<http::response<http::string_body>>();
    res->result(r.status);
    res->version(11);
    res->set(http::field::server, server_.options.serverHeader);
    for (const auto& h : r.headers) {
      if (safeHeader(h) && !iequals(h.name, "Content-Length") &&
          !iequals(h.name, "Transfer-Encoding") && !iequals(h.name, "Connection")) {
        res->insert(h.name, h.value);
      }
    }
    const std::size_t bodySize = r.body.size();
    if (!headOnly_) {
      res->body() = std::move(r.body);
    }
    res->keep_alive(!close);
    if (r.status >= 200 && r.status != 204 && r.status != 304) {
      res->content_length(bodySize);
    }
    arm(server_.options.writeTimeout);
    http::async_write(stream_, *res,
                      [self = this->shared_from_this(), res, close](error_code ec, std::size_t) {
                        self->disarm();
                        if (ec || close) {
                          self->gracefulClose();
                          return;
                        }
                        self->finishExchange();
                        self->readHeader();
                      });
  }

  void finishExchange() {
    if (stream_state_) {
      stream_state_->markClosed();
      stream_state_.reset();
    }
  }

  // Error response on a request we will not read further: answer, then close lingering so the
  // client can read the answer even while still sending its body.
  void fail(unsigned status, std::string_view code, std::string message) {
    keepAlive_ = false;
    closeAfterResponse_ = true;
    lingerAfterClose_ = true;
    state_ = State::kHandling;
    headOnly_ = false;
    writeResponse(Response::error(status, code, message));
  }

  // --- streaming -------------------------------------------------------------------------------
  void streamBegin(unsigned status, Headers headers) {
    if (state_ != State::kHandling) {
      return;
    }
    state_ = State::kStreaming;
    std::string head =
        "HTTP/1.1 " + std::to_string(status) + " " + std::string(reasonPhrase(status)) + "\r\n";
    head += "Server: " + server_.options.serverHeader + "\r\n";
    for (const auto& h : headers) {
      if (safeHeader(h) && !iequals(h.name, "Content-Length") &&
          !iequals(h.name, "Transfer-Encoding") && !iequals(h.name, "Connection")) {
        head += h.name + ": " + h.value + "\r\n";
      }
    }
    // A streamed response ends its connection: the client opens a new one for the next watch.
    head += "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    enqueue(std::move(head), 0);
    watchForDisconnect();
  }

  void streamWrite(const std::shared_ptr<const std::string>& data) {
    if (state_ != State::kStreaming || streamEnding_) {
      if (stream_state_) {
        stream_state_->wrote(data->size());
      }
      return;
    }
    std::string chunk = hexSize(data->size());
    chunk += "\r\n";
    chunk += *data;
    chunk += "\r\n";
    enqueue(std::move(chunk), data->size());
  }

  void streamEnd() {
    if (state_ != State::kStreaming || streamEnding_) {
      return;
    }
    streamEnding_ = true;
    enqueue("0\r\n\r\n", 0);
  }

  // `accounted` = payload bytes StreamState counted as pending for this buffer.
  void enqueue(std::string bytes, std::size_t accounted) {
    queue_.push_back(Pending{std::move(bytes), accounted});
    if (!writing_) {
      writeNext();
    }
  }

  void writeNext() {
    if (queue_.empty()) {
      writing_ = false;
      disarm();
      if (streamEnding_) {
        gracefulClose();
      }
      return;
    }
    writing_ = true;
    // Gather everything queued into one write.
    batch_.clear();
    batchAccounted_ = 0;
    batchCount_ = queue_.size();
    for (const auto& p : queue_) {
      batch_.push_back(asio::buffer(p.bytes));
      batchAccounted_ += p.accounted;
    }
    arm(server_.options.writeTimeout);
    asio::async_write(stream_, batch_,
                      [self = this->shared_from_this()](error_code ec, std::size_t) {
                        self->onStreamWritten(ec);
                      });
  }

  void onStreamWritten(error_code ec) {
    for (std::size_t i = 0; i < batchCount_; ++i) {
      queue_.pop_front();
    }
    if (stream_state_) {
      stream_state_->wrote(batchAccounted_);
    }
    if (ec) {
      writing_ = false;
      closeNow();
      return;
    }
    writeNext();
  }

  // While streaming, a pending read notices the client closing the connection. Bytes that do
  // arrive (a pipelined request) are ignored: the connection closes after the stream.
  void watchForDisconnect() {
    stream_.async_read_some(asio::buffer(scratch_),
                            [self = this->shared_from_this()](error_code ec, std::size_t) {
                              if (ec) {
                                if (self->state_ == State::kStreaming) {
                                  self->closeNow();
                                }
                                return;
                              }
                              if (self->state_ == State::kStreaming) {
                                self->watchForDisconnect();
                              }
                            });
  }

  // --- shutdown ----------------------------------------------------------------------------------
  void onDrain() {
    closeAfterResponse_ = true;
    switch (state_) {
      case State::kHandshake:
      case State::kIdle:
        closeNow();
        break;
      case State::kStreaming:
        streamEnd();
        break;
      default:
        break;  // reading, handling or writing: the response carries Connection: close
    }
  }

  void gracefulClose() {
    if (state_ == State::kClosed) {
      return;
    }
    finishExchange();
    error_code ec;
    if (!lingerAfterClose_) {
      closeNow();
      return;
    }
    // Lingering close: stop sending, keep reading (and discarding) for a moment so the
    // client's outstanding body does not turn our error answer into a connection reset.
    state_ = State::kClosing;
    socket().shutdown(tcp::socket::shutdown_send, ec);
    arm(kLingerTimeout);
    discard();
  }

  void discard() {
    socket().async_read_some(asio::buffer(scratch_),
                             [self = this->shared_from_this()](error_code ec, std::size_t n) {
                               self->lingered_ += n;
                               if (ec || self->lingered_ > kLingerMaxBytes) {
                                 self->closeNow();
                                 return;
                               }
                               self->discard();
                             });
  }

  void closeNow() {
    if (state_ == State::kClosed) {
      return;
    }
    state_ = State::kClosed;
    disarm();
    error_code ec;
    socket().shutdown(tcp::socket::shutdown_both, ec);
    socket().close(ec);
    finishExchange();
  }

  struct Pending {
    std::string bytes;
    std::size_t accounted;
  };

  HttpServer::Impl& server_;
  Stream stream_;
  asio::steady_timer timer_;
  std::uint64_t timerGen_ = 0;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string remote_;
  std::string peerSubject_;
  State state_ = State::kIdle;
  std::uint64_t requests_ = 0;
  bool keepAlive_ = true;
  bool headOnly_ = false;
  bool closeAfterResponse_ = false;
  bool lingerAfterClose_ = false;
  std::size_t lingered_ = 0;
  std::shared_ptr<StreamState> stream_state_;
  std::deque<Pending> queue_;
  std::vector<asio::const_buffer> batch_;
  std::size_t batchCount_ = 0;
  std::size_t batchAccounted_ = 0;
  bool writing_ = false;
  bool streamEnding_ = false;
  std::array<char, 4096> scratch_{};
};

}  // namespace

// ---------------------------------------------------------------------------------------------
Match HttpServer::Impl::match(const std::string& method, const std::string& path) const {
  std::shared_lock lock(routesMutex);
  Match m;
  std::vector<std::string> allowed;
  auto consider = [&](const Route& r) -> bool {
    if (r.method.empty() || r.method == method) {
      m.handler = r.handler;
      m.stream = r.stream;
      return true;
    }
    if (method == "HEAD" && r.method == "GET" && r.handler) {
      m.handler = r.handler;
      m.headAsGet = true;
      return true;
    }
    allowed.push_back(r.method);
    return false;
  };
  for (const auto& r : exact) {
    if (r.path == path && consider(r)) {
      return m;
    }
  }
  const Route* best = nullptr;
  for (const auto& r : prefix) {
    if (path.compare(0, r.path.size(), r.path) == 0) {
      if (r.method.empty() || r.method == method ||
          (method == "HEAD" && r.method == "GET" && r.handler)) {
        if (best == nullptr || r.path.size() > best->path.size()) {
          best = &r;
        }
      } else {
        allowed.push_back(r.method);
      }
    }
  }
  if (best != nullptr && consider(*best)) {
    return m;
  }
  if (!allowed.empty()) {
    std::sort(allowed.begin(), allowed.end());
    allowed.erase(std::unique(allowed.begin(), allowed.end()), allowed.end());
    m.status = 405;
    for (const auto& a : allowed) {
      m.allow += (m.allow.empty() ? "" : ", ") + a;
    }
    return m;
  }
  if (streamFallback) {
    m.stream = streamFallback;
    return m;
  }
  if (fallback) {
    m.handler = fallback;
    return m;
  }
  m.status = 404;
  return m;
}

void HttpServer::Impl::registerSession(const std::shared_ptr<SessionBase>& s) {
  std::lock_guard lock(sessionsMutex);
  sessions.emplace(s.get(), s);
}

void HttpServer::Impl::unregisterSession(SessionBase* s) {
  {
    std::lock_guard lock(sessionsMutex);
    sessions.erase(s);
  }
  sessionsCv.notify_all();
}

template <class F>
void HttpServer::Impl::forEachSession(F&& f) {
  std::vector<std::shared_ptr<SessionBase>> live;
  {
    std::lock_guard lock(sessionsMutex);
    for (auto& [ptr, weak] : sessions) {
      if (auto s = weak.lock()) {
        live.push_back(std::move(s));
      }
    }
  }
  for (auto& s : live) {
    f(*s);
  }
}

void HttpServer::Impl::accept() {
  acceptor->async_accept(asio::make_strand(ioc), [this](error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor->is_open() || stopping) {
        return;
      }
      // EMFILE and friends: keep serving the connections we have, try again shortly.
      auto retry = std::make_shared<asio::steady_timer>(ioc, std::chrono::milliseconds(50));
      retry->async_wait([this, retry](error_code) {
        if (!stopping) {
          accept();
        }
      });
      return;
    }
    if (stopping) {
      return;
    }
    error_code nec;
    socket.set_option(tcp::no_delay(true), nec);
    std::shared_ptr<SessionBase> session;
    if (tlsEnabled) {
      auto s = std::make_shared<Session<asio::ssl::stream<tcp::socket>>>(*this, std::move(socket));
      registerSession(s);
      s->start();
    } else {
      auto s = std::make_shared<Session<tcp::socket>>(*this, std::move(socket));
      registerSession(s);
      s->start();
    }
    accept();
  });
}

// ---------------------------------------------------------------------------------------------
HttpServer::HttpServer(ServerOptions options) : impl_(std::make_shared<Impl>(std::move(options))) {}

HttpServer::~HttpServer() {
  stop(std::chrono::milliseconds(0));
}

void HttpServer::route(std::string method, std::string path, Handler handler) {
  std::unique_lock lock(impl_->routesMutex);
  auto& v = impl_->exact;
  v.erase(std::remove_if(v.begin(), v.end(),
                         [&](const Route& r) { return r.method == method && r.path == path; }),
          v.end());
  v.push_back(Route{std::move(method), std::move(path), std::move(handler), nullptr});
}

void HttpServer::routeStream(std::string method, std::string path, StreamHandler handler) {
  std::unique_lock lock(impl_->routesMutex);
  auto& v = impl_->exact;
  v.erase(std::remove_if(v.begin(), v.end(),
                         [&](const Route& r) { return r.method == method && r.path == path; }),
          v.end());
  v.push_back(Route{std::move(method), std::move(path), nullptr, std::move(handler)});
}

void HttpServer::routePrefix(std::string method, std::string prefix, Handler handler) {
  std::unique_lock lock(impl_->routesMutex);
  auto& v = impl_->prefix;
  v.erase(std::remove_if(v.begin(), v.end(),
                         [&](const Route& r) { return r.method == method && r.path == prefix; }),
          v.end());
  v.push_back(Route{std::move(method), std::move(prefix), std::move(handler), nullptr});
}

void HttpServer::routePrefixStream(std::string method, std::string prefix, StreamHandler handler) {
  std::unique_lock lock(impl_->routesMutex);
  auto& v = impl_->prefix;
  v.erase(std::remove_if(v.begin(), v.end(),
                         [&](const Route& r) { return r.method == method && r.path == prefix; }),
          v.end());
  v.push_back(Route{std::move(method), std::move(prefix), nullptr, std::move(handler)});
}

void HttpServer::setFallback(Handler handler) {
  std::unique_lock lock(impl_->routesMutex);
  impl_->fallback = std::move(handler);
  impl_->streamFallback = nullptr;
}

void HttpServer::setStreamFallback(StreamHandler handler) {
  std::unique_lock lock(impl_->routesMutex);
  impl_->streamFallback = std::move(handler);
  impl_->fallback = nullptr;
}

namespace {

Status loadServerTls(asio::ssl::context& ctx, const ServerTlsOptions& tls) {
  try {
    ctx.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                    asio::ssl::context::no_sslv3 | asio::ssl::context::single_dh_use);
    SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_2_VERSION);
    if (!tls.certPem.empty()) {
      ctx.use_certificate_chain(asio::buffer(tls.certPem));
    } else if (!tls.certFile.empty()) {
      ctx.use_certificate_chain_file(tls.certFile);
    } else {
      return makeError(kc::errc::kInvalid, "TLS server needs a certificate (certFile or certPem)");
    }
    if (!tls.keyPem.empty()) {
      ctx.use_private_key(asio::buffer(tls.keyPem), asio::ssl::context::pem);
    } else if (!tls.keyFile.empty()) {
      ctx.use_private_key_file(tls.keyFile, asio::ssl::context::pem);
    } else {
      return makeError(kc::errc::kInvalid, "TLS server needs a private key (keyFile or keyPem)");
    }
    if (SSL_CTX_check_private_key(ctx.native_handle()) != 1) {
      return makeError(kc::errc::kInvalid, "TLS private key does not match the certificate");
    }
    if (!tls.clientCaPem.empty() || !tls.clientCaFile.empty()) {
      if (!tls.clientCaPem.empty()) {
        ctx.add_certificate_authority(asio::buffer(tls.clientCaPem));
      } else {
        ctx.load_verify_file(tls.clientCaFile);
      }
      ctx.set_verify_mode(asio::ssl::verify_peer |
                          (tls.requireClientCert ? asio::ssl::verify_fail_if_no_peer_cert : 0));
    }
  } catch (const boost::system::system_error& e) {
    return makeError(kc::errc::kInvalid, std::string("cannot load TLS material: ") + e.what());
  }
  return okStatus();
}

}  // namespace

Result<std::uint16_t> HttpServer::start() {
  std::lock_guard lifecycle(impl_->lifecycleMutex);
  Impl& s = *impl_;
  if (s.running) {
    return makeError(kc::errc::kInvalid, "HttpServer already started");
  }
  if (s.stopping) {
    return makeError(kc::errc::kInvalid, "HttpServer cannot be restarted after stop()");
  }
  if (s.options.ioThreads == 0) {
    return makeError(kc::errc::kInvalid, "ServerOptions::ioThreads must be at least 1");
  }
  if (s.options.tls) {
    s.ssl.emplace(asio::ssl::context::tls_server);
    if (auto st = loadServerTls(*s.ssl, *s.options.tls); !st) {
      s.ssl.reset();
      return st.error();
    }
    s.tlsEnabled = true;
  }
  error_code ec;
  const auto address = asio::ip::make_address(s.options.bindAddress, ec);
  if (ec) {
    return makeError(kc::errc::kInvalid,
                     "bad bind address '" + s.options.bindAddress + "': " + ec.message());
  }
  const tcp::endpoint endpoint(address, s.options.port);
  tcp::acceptor acceptor(s.ioc);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) {
    acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  }
  if (!ec) {
    acceptor.bind(endpoint, ec);
  }
  if (!ec) {
    acceptor.listen(asio::socket_base::max_listen_connections, ec);
  }
  if (ec) {
    return makeError(kc::errc::kUnavailable,
                     "cannot listen on " + endpointText(endpoint) + ": " + ec.message());
  }
  s.boundPort = acceptor.local_endpoint().port();
  s.boundHost = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
  if (address.is_unspecified()) {
    s.boundHost = address.is_v6() ? "[::1]" : "127.0.0.1";
  }
  s.acceptor.emplace(std::move(acceptor));
  s.work.emplace(s.ioc.get_executor());
  s.accept();
  s.running = true;
  for (unsigned i = 0; i < s.options.ioThreads; ++i) {
    s.threads.emplace_back([&s] { s.ioc.run(); });
  }
  return s.boundPort.load();
}

void HttpServer::stop(std::chrono::milliseconds drainTimeout) {
  std::lock_guard lifecycle(impl_->lifecycleMutex);
  Impl& s = *impl_;
  if (!s.running) {
    return;
  }
  s.stopping = true;
  // 1. No new connections.
  asio::post(s.ioc, [&s] {
    error_code ec;
    s.acceptor->close(ec);
  });
  // 2. Idle connections close, busy ones finish their exchange with Connection: close, streams end.
  s.forEachSession([](SessionBase& session) { session.drain(); });
  {
    std::unique_lock lock(s.sessionsMutex);
    s.sessionsCv.wait_for(lock, drainTimeout, [&] { return s.sessions.empty(); });
  }
  // 3. Whatever is left is cut.
  s.forEachSession([](SessionBase& session) { session.forceClose(); });
  {
    std::unique_lock lock(s.sessionsMutex);
    s.sessionsCv.wait_for(lock, std::chrono::seconds(2), [&] { return s.sessions.empty(); });
  }
  // 4. Stop posting from streams, let the io threads finish.
  {
    std::unique_lock gate(s.gateMutex);
    s.gateOpen = false;
  }
  s.work.reset();
  s.ioc.stop();
  for (auto& t : s.threads) {
    t.join();
  }
  s.threads.clear();
  s.running = false;
}

bool HttpServer::running() const {
  return impl_->running && !impl_->stopping;
}
std::uint16_t HttpServer::port() const {
  return impl_->boundPort;
}

std::string HttpServer::baseUrl() const {
  return std::string(impl_->tlsEnabled ? "https://" : "http://") + impl_->boundHost + ":" +
         std::to_string(impl_->boundPort.load());
}

std::size_t HttpServer::openConnections() const {
  std::lock_guard lock(impl_->sessionsMutex);
  return impl_->sessions.size();
}

}  // namespace kc::net
