#include "libcore/net/pki.hpp"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>

namespace kc::net {
namespace {

struct Free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(BIGNUM* p) const { BN_free(p); }
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
};
template <class T>
using Owned = std::unique_ptr<T, Free>;

Error opensslError(const std::string& what) {
  std::string detail;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    detail += detail.empty() ? "" : "; ";
    detail += buf;
  }
  return makeError(kc::errc::kInternal, what + (detail.empty() ? "" : ": " + detail));
}

Owned<EVP_PKEY> newKey() {
  return Owned<EVP_PKEY>(EVP_EC_gen("P-256"));
}

Result<std::string> keyPem(EVP_PKEY* key) {
  Owned<BIO> bio(BIO_new(BIO_s_mem()));
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return opensslError("cannot write private key");
  }
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

Result<std::string> certPem(X509* cert) {
  Owned<BIO> bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) {
    return opensslError("cannot write certificate");
  }
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

bool addExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  Owned<X509_EXTENSION> ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  return ext && X509_add_ext(cert, ext.get(), -1) == 1;
}

bool setName(X509_NAME* name, const std::string& cn, const std::vector<std::string>& orgs) {
  for (const auto& o : orgs) {
    if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                                   reinterpret_cast<const unsigned char*>(o.c_str()), -1, -1,
                                   0) != 1) {
      return false;
    }
  }
  return X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                    reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                    0) == 1;
}

// Fills version, random serial, validity, subject and public key.
bool prepare(X509* cert, EVP_PKEY* key, const std::string& cn, const std::vector<std::string>& orgs,
             std::chrono::hours validity) {
  unsigned char serialBytes[16];
  if (RAND_bytes(serialBytes, sizeof serialBytes) != 1) {
    return false;
  }
  serialBytes[0] &= 0x7F;  // positive
  Owned<BIGNUM> serial(BN_bin2bn(serialBytes, sizeof serialBytes, nullptr));
  const long seconds =
      static_cast<long>(std::chrono::duration_cast<std::chrono::seconds>(validity).count());
  return serial && X509_set_version(cert, 2) == 1 &&
         BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert)) &&
         X509_gmtime_adj(X509_getm_notBefore(cert), -3600) &&
         X509_gmtime_adj(X509_getm_notAfter(cert), seconds) &&
         setName(X509_get_subject_name(cert), cn, orgs) && X509_set_pubkey(cert, key) == 1;
}

bool validIp(const std::string& ip) {
  unsigned char buf[16];
  return ::inet_pton(AF_INET, ip.c_str(), buf) == 1 || ::inet_pton(AF_INET6, ip.c_str(), buf) == 1;
}

}  // namespace

Result<CertAndKey> makeSelfSignedCa(const std::string& commonName, std::chrono::hours validity) {
  auto key = newKey();
  Owned<X509> cert(X509_new());
  if (!key || !cert) {
    return opensslError("cannot create CA key");
  }
  if (!prepare(cert.get(), key.get(), commonName, {}, validity) ||
      X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get())) != 1 ||
      !addExtension(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE") ||
      !addExtension(cert.get(), cert.get(), NID_key_usage,
                    "critical,keyCertSign,cRLSign,digitalSignature") ||
      !addExtension(cert.get(), cert.get(), NID_subject_key_identifier, "hash") ||
      X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) {
    return opensslError("cannot build CA certificate");
  }
  auto c = certPem(cert.get());
  auto k = keyPem(key.get());
  if (!c) {
    return std::move(c).error();
  }
  if (!k) {
    return std::move(k).error();
  }
  return CertAndKey{std::move(*c), std::move(*k)};
}

Result<CertAndKey> issueCertificate(const CertAndKey& ca, const CertRequest& request) {
  for (const auto& ip : request.ipAddresses) {
    if (!validIp(ip)) {
      return makeError(kc::errc::kInvalid, "not an IP address: '" + ip + "'");
    }
  }
  for (const auto& dns : request.dnsNames) {
    if (dns.empty() || dns.find_first_of(", \t\r\n") != std::string::npos) {
      return makeError(kc::errc::kInvalid, "not a DNS name: '" + dns + "'");
    }
  }
  Owned<BIO> caCertBio(BIO_new_mem_buf(ca.certPem.data(), static_cast<int>(ca.certPem.size())));
  Owned<X509> caCert(PEM_read_bio_X509(caCertBio.get(), nullptr, nullptr, nullptr));
  Owned<BIO> caKeyBio(BIO_new_mem_buf(ca.keyPem.data(), static_cast<int>(ca.keyPem.size())));
  Owned<EVP_PKEY> caKey(PEM_read_bio_PrivateKey(caKeyBio.get(), nullptr, nullptr, nullptr));
  if (!caCert || !caKey) {
    ERR_clear_error();
    return makeError(kc::errc::kInvalid, "cannot read the CA certificate or key PEM");
  }
  auto key = newKey();
  Owned<X509> cert(X509_new());
  if (!key || !cert) {
    return opensslError("cannot create key");
  }
  std::string san;
  auto addSan = [&san](std::string_view kind, const std::string& value) {
    if (!san.empty()) {
      san.push_back(',');
    }
    san.append(kind);
    san.append(value);
  };
  for (const auto& d : request.dnsNames) {
    addSan("DNS:", d);
  }
  for (const auto& ip : request.ipAddresses) {
    addSan("IP:", ip);
  }
  std::string eku;
  if (request.serverAuth) {
    eku = "serverAuth";
  }
  if (request.clientAuth) {
    eku += eku.empty() ? "clientAuth" : ",clientAuth";
  }
  bool ok =
      prepare(cert.get(), key.get(), request.commonName, request.organizations, request.validity) &&
      X509_set_issuer_name(cert.get(), X509_get_subject_name(caCert.get())) == 1 &&
      addExtension(cert.get(), caCert.get(), NID_basic_constraints, "critical,CA:FALSE") &&
      addExtension(cert.get(), caCert.get(), NID_key_usage,
                   "critical,digitalSignature,keyEncipherment") &&
      addExtension(cert.get(), caCert.get(), NID_authority_key_identifier, "keyid:always");
  if (ok && !eku.empty()) {
    ok = addExtension(cert.get(), caCert.get(), NID_ext_key_usage, eku);
  }
  if (ok && !san.empty()) {
    ok = addExtension(cert.get(), caCert.get(), NID_subject_alt_name, san);
  }
  if (!ok || X509_sign(cert.get(), caKey.get(), EVP_sha256()) == 0) {
    return opensslError("cannot build certificate for '" + request.commonName + "'");
  }
  auto c = certPem(cert.get());
  auto k = keyPem(key.get());
  if (!c) {
    return std::move(c).error();
  }
  if (!k) {
    return std::move(k).error();
  }
  return CertAndKey{std::move(*c), std::move(*k)};
}

}  // namespace kc::net
