#pragma once
// The kubeconfig a client of the API test double needs: the server URL, the double's
// throw-away CA inline (certificate-authority-data) and the bearer token. The CA and the
// serving certificate themselves come from libcore/net/pki (kc::net::makeSelfSignedCa,
// kc::net::issueCertificate).

#include <string>

namespace kc::apiserver {

// A kubeconfig (YAML) for `server` with the CA inline and a bearer token (empty: none).
std::string renderKubeconfig(const std::string& server, const std::string& caCertPem,
                             const std::string& token);

}  // namespace kc::apiserver
