#pragma once
// Minimal X.509 issuing on OpenSSL for development and tests: a self-signed CA and
// certificates it signs (server and/or client use, DNS and IP SANs). The Kubernetes API test
// double issues its CA and serving certificate with it (tools/kube-apiserver-double/
// double_server.cpp); tests/unit/apiserver/pki_test.cpp checks it. Not a production PKI: keys are
// EC P-256, serials random, no revocation.

#include <chrono>
#include <string>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::net {

struct CertAndKey {
  std::string certPem{};
  std::string keyPem{};  // PKCS#8 PEM, unencrypted
};

struct CertRequest {
  std::string commonName{};
  std::vector<std::string> organizations{};  // O= entries (Kubernetes reads groups from them)
  std::vector<std::string> dnsNames{};       // subjectAltName DNS entries
  std::vector<std::string> ipAddresses{};    // subjectAltName IP entries ("127.0.0.1", "::1")
  bool serverAuth = true;
  bool clientAuth = false;
  std::chrono::hours validity{24 * 365};
};

// A CA certificate (basicConstraints CA:TRUE, keyCertSign) signed by its own key.
Result<CertAndKey> makeSelfSignedCa(const std::string& commonName,
                                    std::chrono::hours validity = std::chrono::hours(24 * 365));

// A leaf certificate for `request`, signed by `ca`. Errors: "invalid" (bad IP text, unreadable
// CA PEM), "internal" (OpenSSL failure).
Result<CertAndKey> issueCertificate(const CertAndKey& ca, const CertRequest& request);

}  // namespace kc::net
