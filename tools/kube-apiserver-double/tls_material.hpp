#pragma once
// Self-signed TLS material for the API test double: a throw-away CA and a serving
// certificate for 127.0.0.1 / ::1 / localhost, generated at start with OpenSSL, plus the
// kubeconfig a client needs to trust it (certificate-authority-data) and authenticate
// (bearer token). Not a PKI: keys live only as long as the double runs.

#include "libcore/base/result.hpp"

#include <string>
#include <vector>

namespace kc::apiserver {

struct TlsMaterial {
  std::string caCertPem;
  std::string certPem;  // serving certificate, signed by the CA
  std::string keyPem;   // serving key
};

Result<TlsMaterial> generateTlsMaterial(const std::vector<std::string>& dnsNames, const std::vector<std::string>& ips);

// A kubeconfig (YAML) for `server` with the CA inline and a bearer token (empty: none).
std::string renderKubeconfig(const std::string& server, const std::string& caCertPem, const std::string& token);

std::string base64(const std::string& data);

}  // namespace kc::apiserver
