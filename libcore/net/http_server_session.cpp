// HttpServer's connections: the accept loop and one self-owning Session per connection (kept
// alive by its pending operations through shared_from_this) whose completion handlers all run
// on that connection's strand.
//
// Timeouts use one steady_timer per session (not beast::tcp_stream's built-in expiry): while a
// response is streamed the session has a read pending without deadline (to notice the client
// leaving) and a write pending with one, which a single shared expiry cannot express.

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <deque>

#include "libcore/base/percent_encoding.hpp"
#include "libcore/net/http_server_internal.hpp"
#include "libcore/net/http_server_stream.hpp"

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

}  // namespace kc::net
