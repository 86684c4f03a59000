#pragma once
// DoubleServer: the whole API TEST DOUBLE as one object (store + REST surface + HTTP(S)
// server + the ticker that ends timed-out watches and sends bookmarks). main() and
// in-process tests both use it.

#include <atomic>
#include <condition_variable>
#include <memory>
#include <string>
#include <thread>

#include "libcore/base/result.hpp"
#include "tools/kube-apiserver-double/api_server.hpp"
#include "tools/kube-apiserver-double/kubeconfig.hpp"
#include "tools/kube-apiserver-double/object_store.hpp"

namespace kc::net {
class HttpServer;
}

namespace kc::apiserver {

struct DoubleOptions {
  std::string bindAddress = "127.0.0.1";
  std::uint16_t port = 0;
  bool plainHttp = false;   // default is HTTPS with a generated CA
  std::string tlsCertFile;  // use these instead of generating (both or neither)
  std::string tlsKeyFile;
  std::string bearerToken;  // empty: no authentication
  std::size_t maxBodyBytes = 64u << 20;
  unsigned ioThreads = 4;
  StoreOptions store;
  Faults faults;
  std::uint64_t seed = 1;
};

class DoubleServer {
 public:
  explicit DoubleServer(DoubleOptions options);
  ~DoubleServer();
  DoubleServer(const DoubleServer&) = delete;
  DoubleServer& operator=(const DoubleServer&) = delete;

  Result<std::uint16_t> start();
  void stop();

  std::string baseUrl() const;  // https://127.0.0.1:<port>
  // CA PEM clients must trust (empty for plain HTTP or operator-supplied certificates).
  const std::string& caCertPem() const { return caPem_; }
  std::string kubeconfig() const;

  ObjectStore& store() { return *store_; }
  ApiServer& api() { return *api_; }

 private:
  DoubleOptions options_;
  std::unique_ptr<ObjectStore> store_;
  std::unique_ptr<ApiServer> api_;
  std::unique_ptr<net::HttpServer> http_;
  std::string caPem_;
  std::thread ticker_;
  std::mutex tickMu_;  // guards stopping_
  std::condition_variable tickCv_;
  bool stopping_ = false;
};

}  // namespace kc::apiserver
