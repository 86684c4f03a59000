// libcore/net/pki: the CA and leaf certificates the API test double serves with. Checked with
// OpenSSL's own chain verification (an oracle independent of the issuing code).

#include "libcore/net/pki.hpp"

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <catch2/catch.hpp>
#include <memory>
#include <string>

namespace {

struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};
using X509Ptr = std::unique_ptr<X509, X509Free>;

X509Ptr readCert(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  return X509Ptr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

// X509_V_OK when `leaf` chains to `ca` for `purpose` (and matches `host` / `ip` when given).
int verify(const std::string& caPem, const std::string& leafPem, int purpose,
           const std::string& host = "", const std::string& ip = "") {
  X509Ptr ca = readCert(caPem);
  X509Ptr leaf = readCert(leafPem);
  REQUIRE(ca);
  REQUIRE(leaf);
  std::unique_ptr<X509_STORE, decltype(&X509_STORE_free)> store(X509_STORE_new(), X509_STORE_free);
  X509_STORE_add_cert(store.get(), ca.get());
  std::unique_ptr<X509_STORE_CTX, decltype(&X509_STORE_CTX_free)> ctx(X509_STORE_CTX_new(),
                                                                      X509_STORE_CTX_free);
  X509_STORE_CTX_init(ctx.get(), store.get(), leaf.get(), nullptr);
  X509_STORE_CTX_set_purpose(ctx.get(), purpose);
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx.get());
  if (!host.empty()) {
    X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size());
  }
  if (!ip.empty()) {
    X509_VERIFY_PARAM_set1_ip_asc(param, ip.c_str());
  }
  X509_verify_cert(ctx.get());
  return X509_STORE_CTX_get_error(ctx.get());
}

}  // namespace

TEST_CASE("pki: a leaf issued by the CA verifies for its names and purpose only", "[pki]") {
  auto ca = kc::net::makeSelfSignedCa("test-ca");
  REQUIRE(ca.ok());
  kc::net::CertRequest req;
  req.commonName = "kube-apiserver-double";
  req.dnsNames = {"localhost", "kubernetes.default.svc"};
  req.ipAddresses = {"127.0.0.1", "::1"};
  auto leaf = kc::net::issueCertificate(*ca, req);
  REQUIRE(leaf.ok());
  CHECK(leaf->keyPem.find("PRIVATE KEY") != std::string::npos);

  CHECK(verify(ca->certPem, leaf->certPem, X509_PURPOSE_SSL_SERVER, "localhost") == X509_V_OK);
  CHECK(verify(ca->certPem, leaf->certPem, X509_PURPOSE_SSL_SERVER, "kubernetes.default.svc") ==
        X509_V_OK);
  CHECK(verify(ca->certPem, leaf->certPem, X509_PURPOSE_SSL_SERVER, "", "::1") == X509_V_OK);
  CHECK(verify(ca->certPem, leaf->certPem, X509_PURPOSE_SSL_SERVER, "example.com") ==
        X509_V_ERR_HOSTNAME_MISMATCH);
  CHECK(verify(ca->certPem, leaf->certPem, X509_PURPOSE_SSL_SERVER, "", "10.0.0.1") ==
        X509_V_ERR_IP_ADDRESS_MISMATCH);
  // serverAuth only: not a client certificate.
  CHECK(verify(ca->certPem, leaf->certPem, X509_PURPOSE_SSL_CLIENT) == X509_V_ERR_INVALID_PURPOSE);

  // Another CA does not vouch for it.
  auto other = kc::net::makeSelfSignedCa("other-ca");
  REQUIRE(other.ok());
  CHECK(verify(other->certPem, leaf->certPem, X509_PURPOSE_SSL_SERVER) != X509_V_OK);
}

TEST_CASE("pki: client certificates carry the organizations as O= (Kubernetes groups)", "[pki]") {
  auto ca = kc::net::makeSelfSignedCa("test-ca");
  REQUIRE(ca.ok());
  kc::net::CertRequest req;
  req.commonName = "system:node:n1";
  req.organizations = {"system:nodes"};
  req.serverAuth = false;
  req.clientAuth = true;
  auto leaf = kc::net::issueCertificate(*ca, req);
  REQUIRE(leaf.ok());
  CHECK(verify(ca->certPem, leaf->certPem, X509_PURPOSE_SSL_CLIENT) == X509_V_OK);
  X509Ptr cert = readCert(leaf->certPem);
  char buf[256];
  REQUIRE(X509_NAME_get_text_by_NID(X509_get_subject_name(cert.get()), NID_organizationName, buf,
                                    sizeof buf) > 0);
  CHECK(std::string(buf) == "system:nodes");
  REQUIRE(X509_NAME_get_text_by_NID(X509_get_subject_name(cert.get()), NID_commonName, buf,
                                    sizeof buf) > 0);
  CHECK(std::string(buf) == "system:node:n1");
}

TEST_CASE("pki: bad input is an error, not a certificate", "[pki]") {
  auto ca = kc::net::makeSelfSignedCa("test-ca");
  REQUIRE(ca.ok());
  kc::net::CertRequest badIp;
  badIp.commonName = "x";
  badIp.ipAddresses = {"300.1.1.1"};
  auto r1 = kc::net::issueCertificate(*ca, badIp);
  REQUIRE_FALSE(r1.ok());
  CHECK(r1.error().code == "invalid");
  kc::net::CertRequest badDns;
  badDns.commonName = "x";
  badDns.dnsNames = {"a,DNS:evil.example"};
  auto r2 = kc::net::issueCertificate(*ca, badDns);
  REQUIRE_FALSE(r2.ok());
  CHECK(r2.error().code == "invalid");
  auto r3 = kc::net::issueCertificate(kc::net::CertAndKey{"not a pem", "not a key"}, badDns);
  REQUIRE_FALSE(r3.ok());
  CHECK(r3.error().code == "invalid");
}
