#pragma once
// Where the client connects and how it authenticates: in-cluster service-account config or a
// kubeconfig ($KUBECONFIG list merged, else ~/.kube/config). Everything file-based is read
// here once, except the bearer token file, which TokenSource re-reads (projected service
// account tokens expire and the kubelet rotates the file).

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "libcore/base/clock.hpp"
#include "libcore/base/result.hpp"

namespace kc::kube {

// Environment lookup, injectable for tests (default: getenv).
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup processEnv();

struct ClusterConfig {
  std::string server;  // "https://host:port" (http:// allowed for local doubles)
  std::string caPem;   // trusted CA certificates (PEM); empty: system trust store
  bool insecureSkipTlsVerify = false;
  std::string tlsServerName;  // SNI / verification name override
  std::string clientCertPem;  // client certificate chain (PEM), with clientKeyPem
  std::string clientKeyPem;
  std::string token;      // static bearer token
  std::string tokenFile;  // bearer token file, re-read periodically (wins over token)
  std::string username;   // basic auth (rare; kubeconfig only)
  std::string password;
  std::string defaultNamespace = "default";
  std::string source;  // "in-cluster" or the kubeconfig path(s), for messages
};

// $KUBECONFIG split on ':' (empty entries dropped), else $HOME/.kube/config.
std::vector<std::string> kubeconfigPaths(const EnvLookup& env);

// Loads and merges kubeconfig files like kubectl: for clusters, users and contexts the first
// file that defines a name wins; the first non-empty current-context wins. Missing files in an
// explicit list are skipped; no readable file at all is an error. Relative file references
// resolve against the directory of the file that names them. `context` overrides
// current-context. Unsupported credentials (exec, auth-provider) are an error, not ignored.
kc::Result<ClusterConfig> loadKubeconfig(const std::vector<std::string>& paths,
                                         const std::string& context = {});

// In-cluster config from KUBERNETES_SERVICE_HOST/PORT and the service-account directory
// (token, ca.crt, namespace). Namespace: $POD_NAMESPACE, then the namespace file, then
// "default". A missing ca.crt is tolerated (system trust store) like client-go.
kc::Result<ClusterConfig> loadInCluster(
    const EnvLookup& env,
    const std::string& serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount");

// In-cluster when KUBERNETES_SERVICE_HOST is set, else kubeconfig.
kc::Result<ClusterConfig> loadDefaultConfig(const EnvLookup& env);

kc::Result<std::string> readWholeFile(const std::string& path);

// The bearer token to send now. With a token file, re-reads it when `period` has passed
// since the last read (client-go: one minute); a failed or empty re-read keeps the previous
// token. Thread-safe.
class TokenSource {
 public:
  // clock: not owned; null = kc::systemClock().
  TokenSource(std::string staticToken, std::string tokenFile, kc::Clock* clock = nullptr,
              std::chrono::steady_clock::duration period = std::chrono::minutes(1));
  std::string token();
  // Forces the next token() to re-read (e.g. after a 401).
  void invalidate();

 private:
  std::string file_;
  kc::Clock& clock_;
  std::chrono::steady_clock::duration period_;
  std::mutex mu_;  // guards the fields below
  std::string token_;
  std::optional<std::chrono::steady_clock::time_point> lastRead_;
};

}  // namespace kc::kube
