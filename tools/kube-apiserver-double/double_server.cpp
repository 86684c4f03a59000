#include "tools/kube-apiserver-double/double_server.hpp"

#include "libcore/net/http_server.hpp"
#include "libcore/net/pki.hpp"

namespace kc::apiserver {

DoubleServer::DoubleServer(DoubleOptions options) : options_(std::move(options)) {
  options_.store.seed = options_.seed;
  options_.store.expiredAsEvent = options_.faults.expiredAsEvent;
  store_ = std::make_unique<ObjectStore>(options_.store);
  ApiServerOptions apiOpts;
  apiOpts.bearerToken = options_.bearerToken;
  apiOpts.seed = options_.seed;
  api_ = std::make_unique<ApiServer>(*store_, apiOpts, options_.faults);
}

DoubleServer::~DoubleServer() {
  stop();
}

Result<std::uint16_t> DoubleServer::start() {
  net::ServerOptions so;
  so.bindAddress = options_.bindAddress;
  so.port = options_.port;
  so.bodyLimit = options_.maxBodyBytes;
  so.ioThreads = options_.ioThreads;
  so.serverHeader = "kube-apiserver-double (test double)";
  // Watches are long-lived; a finished write must not be cut by the idle timer.
  so.idleTimeout = std::chrono::minutes(10);
  if (!options_.plainHttp) {
    net::ServerTlsOptions tls;
    if (!options_.tlsCertFile.empty() || !options_.tlsKeyFile.empty()) {
      if (options_.tlsCertFile.empty() || options_.tlsKeyFile.empty()) {
        return makeError(kc::errc::kInvalid,
                         "--tls-cert-file and --tls-private-key-file go together");
      }
      tls.certFile = options_.tlsCertFile;
      tls.keyFile = options_.tlsKeyFile;
    } else {
      std::vector<std::string> ips = {"127.0.0.1", "::1"};
      if (options_.bindAddress != "127.0.0.1" && options_.bindAddress != "0.0.0.0" &&
          options_.bindAddress != "::") {
        ips.push_back(options_.bindAddress);
      }
      auto ca = net::makeSelfSignedCa("kube-apiserver-double-ca");
      if (!ca) {
        return ca.error();
      }
      net::CertRequest req;
      req.commonName = "kube-apiserver-double";
      req.organizations = {"kubecomp test double"};
      req.dnsNames = {"localhost", "kubernetes", "kubernetes.default.svc"};
      req.ipAddresses = ips;
      auto serving = net::issueCertificate(*ca, req);
      if (!serving) {
        return serving.error();
      }
      caPem_ = ca->certPem;
      tls.certPem = serving->certPem;
      tls.keyPem = serving->keyPem;
    }
    so.tls = tls;
  }
  http_ = std::make_unique<net::HttpServer>(so);
  http_->setStreamFallback(
      [this](const net::Request& req, std::shared_ptr<net::ResponseStream> stream) {
        api_->serve(req, std::move(stream));
      });
  auto port = http_->start();
  if (!port) {
    return port;
  }
  ticker_ = std::thread([this] {
    std::unique_lock lock(tickMu_);
    while (!stopping_) {
      tickCv_.wait_for(lock, std::chrono::milliseconds(100));
      lock.unlock();
      store_->tick(std::chrono::steady_clock::now());
      lock.lock();
    }
  });
  return port;
}

void DoubleServer::stop() {
  {
    std::lock_guard lock(tickMu_);
    stopping_ = true;
  }
  tickCv_.notify_all();
  if (ticker_.joinable()) {
    ticker_.join();
  }
  if (http_) {
    http_->stop(std::chrono::seconds(2));
  }
}

std::string DoubleServer::baseUrl() const {
  if (!http_) {
    return "";
  }
  std::string host = options_.bindAddress == "0.0.0.0" ? "127.0.0.1" : options_.bindAddress;
  if (host == "::") {
    host = "::1";
  }
  if (host.find(':') != std::string::npos) {
    host = "[" + host + "]";
  }
  return std::string(options_.plainHttp ? "http" : "https") + "://" + host + ":" +
         std::to_string(http_->port());
}

std::string DoubleServer::kubeconfig() const {
  return renderKubeconfig(baseUrl(), caPem_, options_.bearerToken);
}

}  // namespace kc::apiserver
