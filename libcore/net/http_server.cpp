// Temporary placeholder so dependants can link against the API; the Beast implementation
// replaces it in the next commit.
#include "libcore/net/http_server.hpp"

namespace kc::net {

class HttpServer::Impl {
 public:
  explicit Impl(ServerOptions o) : options(std::move(o)) {}
  ServerOptions options;
};

HttpServer::HttpServer(ServerOptions options) : impl_(std::make_shared<Impl>(std::move(options))) {}
HttpServer::~HttpServer() = default;
void HttpServer::route(std::string, std::string, Handler) {}
void HttpServer::routeStream(std::string, std::string, StreamHandler) {}
void HttpServer::routePrefix(std::string, std::string, Handler) {}
void HttpServer::routePrefixStream(std::string, std::string, StreamHandler) {}
void HttpServer::setFallback(Handler) {}
void HttpServer::setStreamFallback(StreamHandler) {}
Result<std::uint16_t> HttpServer::start() { return makeError("unavailable", "HttpServer not implemented yet"); }
void HttpServer::stop(std::chrono::milliseconds) {}
bool HttpServer::running() const { return false; }
std::uint16_t HttpServer::port() const { return 0; }
std::string HttpServer::baseUrl() const { return {}; }
std::size_t HttpServer::openConnections() const { return 0; }

}  // namespace kc::net
