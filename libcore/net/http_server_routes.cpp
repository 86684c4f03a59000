// HttpServer routing: registration (thread-safe, also after start()) and the match of one
// request: exact routes, then the longest prefix, then the fallback; 405 with Allow when the
// path is known with other methods, else 404.

#include <algorithm>
#include <mutex>
#include <shared_mutex>

#include "libcore/net/http_server_internal.hpp"

namespace kc::net {

using namespace detail;

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

}  // namespace kc::net
