#pragma once
// Private to the HttpClient units: one connection with its own io_context, and runOp, which
// runs one asynchronous operation on it to completion on the calling thread, under a deadline.

#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <optional>

#include "libcore/net/detail/asio.hpp"
#include "libcore/net/http_client.hpp"

namespace kc::net::detail {

struct Connection {
  explicit Connection(asio::ssl::context* ssl) : timer(ioc) {
    if (ssl != nullptr) {
      tls.emplace(ioc, *ssl);
    } else {
      plain.emplace(ioc);
    }
  }

  tcp::socket& socket() { return tls ? tls->next_layer() : *plain; }
  void close() {
    error_code ec;
    socket().shutdown(tcp::socket::shutdown_both, ec);
    socket().close(ec);
  }

  // A pooled connection the server may have closed meanwhile: peek without blocking.
  bool stillUsable() {
    if (!socket().is_open()) {
      return false;
    }
    char byte = 0;
    const auto n = ::recv(socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }

  asio::io_context ioc{1};
  asio::steady_timer timer;
  std::optional<tcp::socket> plain;
  std::optional<asio::ssl::stream<tcp::socket>> tls;
  beast::flat_buffer buffer;
  bool reused = false;
};

// Routes CancelToken::cancel() to one connection for the guard's lifetime: the hook posts a
// socket close onto the connection's io_context, which the calling thread is running.
class HookGuard {
 public:
  HookGuard(CancelToken* token, Connection& c) : token_(token) {
    if (token_ != nullptr) {
      token_->setHook([conn = &c] { asio::post(conn->ioc, [conn] { conn->close(); }); });
    }
  }
  ~HookGuard() { clear(); }
  HookGuard(const HookGuard&) = delete;
  HookGuard& operator=(const HookGuard&) = delete;
  void clear() {
    if (token_ != nullptr) {
      token_->clearHook();
      token_ = nullptr;
    }
  }

 private:
  CancelToken* token_;
};

struct OpResult {
  error_code ec;
  bool timedOut = false;
};

// Runs one asynchronous operation to completion on the calling thread, closing the socket if
// `deadline` passes first.
template <class Initiate>
OpResult runOp(Connection& c, std::optional<std::chrono::steady_clock::time_point> deadline,
               Initiate&& initiate) {
  OpResult r;
  bool done = false;
  bool timerPending = false;
  initiate([&](error_code ec, auto&&...) {
    r.ec = ec;
    done = true;
  });
  if (deadline) {
    timerPending = true;
    c.timer.expires_at(*deadline);
    c.timer.async_wait([&](error_code ec) {
      timerPending = false;
      if (!ec && !done) {
        r.timedOut = true;
        c.close();
      }
    });
  }
  c.ioc.restart();
  while (!done) {
    if (c.ioc.run_one() == 0) {
      r.ec = asio::error::interrupted;  // cannot happen with an operation pending; be safe
      break;
    }
  }
  if (timerPending) {
    c.timer.cancel();
    while (timerPending) {
      if (c.ioc.run_one() == 0) {
        break;
      }
    }
  }
  return r;
}

template <class F>
decltype(auto) withStream(Connection& c, F&& f) {
  if (c.tls) {
    return f(*c.tls);
  }
  return f(*c.plain);
}

}  // namespace kc::net::detail
