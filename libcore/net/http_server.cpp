// HttpServer on Boost.Beast. Structure follows the usual Asio server shape: an acceptor, and
// one self-owning Session per connection (http_server_session.cpp). This unit holds the
// server's lifecycle: TLS set-up, start (bind, listen, io threads), the registry of open
// sessions, and the graceful stop. Routing is in http_server_routes.cpp, the ResponseStream of
// stream handlers in http_server_stream.cpp.

#include "libcore/net/http_server.hpp"

#include <openssl/ssl.h>

#include <mutex>
#include <shared_mutex>

#include "libcore/net/http_server_internal.hpp"

namespace kc::net {

using namespace detail;

std::string detail::endpointText(const tcp::endpoint& ep) {
  const auto addr = ep.address();
  if (addr.is_v6()) {
    return "[" + addr.to_string() + "]:" + std::to_string(ep.port());
  }
  return addr.to_string() + ":" + std::to_string(ep.port());
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

HttpServer::HttpServer(ServerOptions options) : impl_(std::make_shared<Impl>(std::move(options))) {}

HttpServer::~HttpServer() {
  stop(std::chrono::milliseconds(0));
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
