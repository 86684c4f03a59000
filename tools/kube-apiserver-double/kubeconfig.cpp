#include "tools/kube-apiserver-double/kubeconfig.hpp"

#include "libcore/base/base64.hpp"

namespace kc::apiserver {

std::string renderKubeconfig(const std::string& server, const std::string& caCertPem,
                             const std::string& token) {
  std::string y;
  y += "# Written by kube-apiserver-double, an in-memory Kubernetes API TEST DOUBLE (not a real "
       "cluster).\n";
  y += "apiVersion: v1\nkind: Config\ncurrent-context: kube-apiserver-double\n";
  y += "clusters:\n- name: kube-apiserver-double\n  cluster:\n    server: " + server + "\n";
  if (!caCertPem.empty()) {
    y += "    certificate-authority-data: " + base64Encode(caCertPem) + "\n";
  }
  y += "users:\n- name: kube-apiserver-double\n  user:\n";
  y += token.empty() ? "    {}\n" : "    token: " + token + "\n";
  y += "contexts:\n- name: kube-apiserver-double\n  context:\n    cluster: kube-apiserver-double\n"
       "    user: kube-apiserver-double\n    namespace: default\n";
  return y;
}

}  // namespace kc::apiserver
