#include "libcore/kube/client_setup.hpp"

namespace kc::kube {

kc::Result<std::unique_ptr<KubeClient>> setUpClient(const std::string& kubeconfig,
                                                    KubeClientOptions options, const EnvLookup& env,
                                                    std::string_view configStep) {
  auto config = kubeconfig.empty() ? loadDefaultConfig(env) : loadKubeconfig({kubeconfig});
  if (!config) {
    return kc::makeError(config.error().code,
                         std::string(configStep) + ": " + config.error().message);
  }
  auto client = KubeClient::create(*config, std::move(options));
  if (!client) {
    return kc::makeError(client.error().code, "API client: " + client.error().message);
  }
  return client;
}

}  // namespace kc::kube
