#pragma once
// A scripted HTTP server for client tests: records every request and answers from a
// handler the test sets. Real HTTP over loopback (kc::net::HttpServer on port 0).

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "libcore/kube/config.hpp"
#include "libcore/net/http_server.hpp"

namespace kc::kube::testing {

class FakeServer {
 public:
  using Handler = std::function<net::Response(const net::Request&)>;

  FakeServer() : server_(std::make_unique<net::HttpServer>()) {
    server_->setFallback([this](const net::Request& req) {
      Handler h;
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(req);
        h = handler_;
      }
      return h ? h(req) : net::Response::text(404, "no handler");
    });
  }
  ~FakeServer() { server_->stop(std::chrono::milliseconds(100)); }

  void setHandler(Handler h) {
    std::lock_guard<std::mutex> lock(mu_);
    handler_ = std::move(h);
  }
  void setStreamHandler(net::StreamHandler h) { server_->setStreamFallback(std::move(h)); }
  net::HttpServer& server() { return *server_; }

  std::string start() {
    auto port = server_->start();
    if (!port) {
      throw std::runtime_error("fake server: " + port.error().message);
    }
    return server_->baseUrl();
  }
  ClusterConfig config() {
    ClusterConfig c;
    c.server = start();
    c.source = "fake";
    return c;
  }
  std::vector<net::Request> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  std::unique_ptr<net::HttpServer> server_;
  mutable std::mutex mu_;  // guards handler_ and requests_
  Handler handler_;
  std::vector<net::Request> requests_;
};

inline net::Response statusResponse(unsigned code, const std::string& reason,
                                    const std::string& message) {
  return net::Response::json(code, {{"kind", "Status"},
                                    {"apiVersion", "v1"},
                                    {"metadata", nlohmann::json::object()},
                                    {"status", "Failure"},
                                    {"message", message},
                                    {"reason", reason},
                                    {"code", code}});
}

}  // namespace kc::kube::testing
