#pragma once
// The API calls kubectl-kubecomp makes, behind an interface so that the golden tests run every
// command on recorded objects (FakeCluster in tests/unit/kubectl) and the binary on a real API
// server (KubeCluster, over libcore/kube's client). Errors are the API's own (kube::ApiError).

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "libcore/base/result.hpp"
#include "libcore/kube/client.hpp"
#include "libcore/kube/config.hpp"

namespace kc::kubectl {

class Cluster {
 public:
  virtual ~Cluster() = default;
  // Every item (all pages). ns "" on a namespaced resource: all namespaces.
  virtual kube::ApiResult<kube::ObjectList> list(const kube::GroupVersionResource& r,
                                                 const std::string& ns,
                                                 const kube::ListOptions& opts = {}) = 0;
  virtual kube::ApiResult<nlohmann::json> get(const kube::GroupVersionResource& r,
                                              const std::string& ns, const std::string& name) = 0;
  // PUT .../status of the whole object (metadata.resourceVersion makes it conditional).
  virtual kube::ApiResult<nlohmann::json> updateStatus(const kube::GroupVersionResource& r,
                                                       const nlohmann::json& obj) = 0;
  virtual kube::ApiResult<nlohmann::json> create(const kube::GroupVersionResource& r,
                                                 const std::string& ns,
                                                 const nlohmann::json& obj) = 0;
  // WATCH from opts.resourceVersion until the server ends the stream (opts.timeoutSeconds) or
  // onEvent returns false.
  virtual kube::ApiStatus watch(const kube::GroupVersionResource& r, const std::string& ns,
                                const kube::ListOptions& opts,
                                const std::function<bool(kube::WatchEvent&&)>& onEvent) = 0;
  // Where the calls go, for messages ("https://127.0.0.1:6443").
  virtual std::string server() const = 0;
  // The namespace of the kubeconfig context ("default" when it names none).
  virtual std::string defaultNamespace() const = 0;
};

// The connection flags as kubectl spells them (kubectl passes none of its own to a plugin).
struct ConnectionOptions {
  std::string kubeconfig;  // --kubeconfig: this file only
  std::string context;     // --context: instead of current-context
  std::chrono::milliseconds requestTimeout{30'000};
};

// --kubeconfig FILE: that file. Otherwise in-cluster when KUBERNETES_SERVICE_HOST is set and no
// --context is given (as every binary of the suite, libcore/kube/client_setup.hpp), else the
// files of $KUBECONFIG merged as kubectl merges them, else ~/.kube/config. Errors say which
// file or setting failed.
Result<kube::ClusterConfig> loadConnection(const ConnectionOptions& opts,
                                           const kube::EnvLookup& env);

Result<std::unique_ptr<Cluster>> connect(const ConnectionOptions& opts, const kube::EnvLookup& env);

}  // namespace kc::kubectl
