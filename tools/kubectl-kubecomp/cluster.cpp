#include "tools/kubectl-kubecomp/cluster.hpp"

namespace kc::kubectl {

namespace {

class KubeCluster final : public Cluster {
 public:
  explicit KubeCluster(std::unique_ptr<kube::KubeClient> client) : client_(std::move(client)) {}

  kube::ApiResult<kube::ObjectList> list(const kube::GroupVersionResource& r, const std::string& ns,
                                         const kube::ListOptions& opts) override {
    kube::ListOptions o = opts;
    if (o.limit == 0) {
      o.limit = 500;  // kubectl's chunk size
    }
    return client_->listAll(r, ns, o);
  }
  kube::ApiResult<nlohmann::json> get(const kube::GroupVersionResource& r, const std::string& ns,
                                      const std::string& name) override {
    return client_->get(r, ns, name);
  }
  kube::ApiResult<nlohmann::json> updateStatus(const kube::GroupVersionResource& r,
                                               const nlohmann::json& obj) override {
    const std::string ns = obj.value("metadata", nlohmann::json::object()).value("namespace", "");
    return client_->updateStatus(r, r.namespaced ? ns : std::string(), obj);
  }
  kube::ApiResult<nlohmann::json> create(const kube::GroupVersionResource& r, const std::string& ns,
                                         const nlohmann::json& obj) override {
    return client_->create(r, ns, obj);
  }
  kube::ApiStatus watch(const kube::GroupVersionResource& r, const std::string& ns,
                        const kube::ListOptions& opts,
                        const std::function<bool(kube::WatchEvent&&)>& onEvent) override {
    return client_->watch(r, ns, opts, onEvent);
  }
  std::string server() const override { return client_->config().server; }
  std::string defaultNamespace() const override { return client_->defaultNamespace(); }

 private:
  std::unique_ptr<kube::KubeClient> client_;
};

}  // namespace

Result<kube::ClusterConfig> loadConnection(const ConnectionOptions& opts,
                                           const kube::EnvLookup& env) {
  if (!opts.kubeconfig.empty()) {
    return kube::loadKubeconfig({opts.kubeconfig}, opts.context);
  }
  if (opts.context.empty() && env("KUBERNETES_SERVICE_HOST").has_value()) {
    return kube::loadInCluster(env);
  }
  return kube::loadKubeconfig(kube::kubeconfigPaths(env), opts.context);
}

Result<std::unique_ptr<Cluster>> connect(const ConnectionOptions& opts,
                                         const kube::EnvLookup& env) {
  auto config = loadConnection(opts, env);
  if (!config) {
    return makeError(config.error().code, "cluster config: " + config.error().message);
  }
  kube::KubeClientOptions o;
  o.userAgent = "kubectl-kubecomp";
  o.requestTimeout = opts.requestTimeout;
  o.maxRetries = 2;
  o.retryBackoff.initial = std::chrono::milliseconds(200);
  o.retryBackoff.max = std::chrono::milliseconds(2'000);
  auto client = kube::KubeClient::create(*config, o);
  if (!client) {
    return makeError(client.error().code, "API client: " + client.error().message);
  }
  return std::unique_ptr<Cluster>(std::make_unique<KubeCluster>(std::move(*client)));
}

}  // namespace kc::kubectl
