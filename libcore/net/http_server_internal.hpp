#pragma once
// Private to the HttpServer units: the server state (HttpServer::Impl) shared by
//   http_server.cpp          start/stop, TLS set-up, the session registry;
//   http_server_routes.cpp   route registration and dispatch (match);
//   http_server_session.cpp  accepting connections, one Session per connection;
//   http_server_stream.cpp   the ResponseStream handed to stream handlers.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "libcore/net/detail/asio.hpp"
#include "libcore/net/http_server.hpp"

namespace kc::net {
namespace detail {

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

// "a.b.c.d:port" or "[v6]:port".
std::string endpointText(const tcp::endpoint& ep);

}  // namespace detail

class HttpServer::Impl {
 public:
  explicit Impl(ServerOptions o) : options(std::move(o)) {}

  detail::Match match(const std::string& method, const std::string& path) const;
  void registerSession(const std::shared_ptr<detail::SessionBase>& s);
  void unregisterSession(detail::SessionBase* s);
  void accept();  // http_server_session.cpp: the only user of Session
  template <class F>
  void forEachSession(F&& f);

  const ServerOptions options;

  mutable std::shared_mutex routesMutex;
  std::vector<detail::Route> exact;   // guarded by routesMutex
  std::vector<detail::Route> prefix;  // guarded by routesMutex
  Handler fallback;                   // guarded by routesMutex
  StreamHandler streamFallback;

  std::mutex sessionsMutex;
  std::condition_variable sessionsCv;
  std::unordered_map<detail::SessionBase*, std::weak_ptr<detail::SessionBase>>
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

  std::optional<detail::asio::ssl::context> ssl;
  std::vector<std::thread> threads;
  // Declared last: destroyed first, while the members sessions touch on destruction live.
  detail::asio::io_context ioc;
  std::optional<detail::asio::executor_work_guard<detail::asio::io_context::executor_type>> work;
  std::optional<detail::tcp::acceptor> acceptor;
};

}  // namespace kc::net
