#include "tools/kube-apiserver-double/tls_material.hpp"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>

namespace kc::apiserver {

namespace {

template <typename T, void (*F)(T*)>
struct Deleter {
  void operator()(T* p) const { F(p); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using CertPtr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;

KeyPtr newKey() { return KeyPtr(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256")); }

bool addExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) {
    return false;
  }
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

CertPtr newCert(EVP_PKEY* key, const std::string& cn, X509* issuer, EVP_PKEY* issuerKey, bool ca,
                const std::string& san) {
  CertPtr cert(X509_new());
  if (!cert) {
    return nullptr;
  }
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof serial);
  serial[0] &= 0x7F;
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 60L * 60 * 24 * 365);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("kubecomp test double"),
                             -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509* iss = issuer ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(iss));
  bool ok = true;
  if (ca) {
    ok = ok && addExt(cert.get(), iss, NID_basic_constraints, "critical,CA:TRUE");
    ok = ok && addExt(cert.get(), iss, NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature");
    ok = ok && addExt(cert.get(), iss, NID_subject_key_identifier, "hash");
  } else {
    ok = ok && addExt(cert.get(), iss, NID_basic_constraints, "critical,CA:FALSE");
    ok = ok && addExt(cert.get(), iss, NID_key_usage, "critical,digitalSignature,keyEncipherment");
    ok = ok && addExt(cert.get(), iss, NID_ext_key_usage, "serverAuth");
    ok = ok && addExt(cert.get(), iss, NID_subject_alt_name, san);
    ok = ok && addExt(cert.get(), iss, NID_authority_key_identifier, "keyid:always");
  }
  if (!ok || X509_sign(cert.get(), issuerKey, EVP_sha256()) == 0) {
    return nullptr;
  }
  return cert;
}

std::string certPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string keyPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

}  // namespace

Result<TlsMaterial> generateTlsMaterial(const std::vector<std::string>& dnsNames, const std::vector<std::string>& ips) {
  KeyPtr caKey = newKey();
  KeyPtr key = newKey();
  if (!caKey || !key) {
    return makeError("internal", "OpenSSL could not generate an EC P-256 key");
  }
  CertPtr ca = newCert(caKey.get(), "kube-apiserver-double-ca", nullptr, caKey.get(), true, "");
  if (!ca) {
    return makeError("internal", "OpenSSL could not create the CA certificate");
  }
  std::string san;
  auto addSan = [&san](const char* type, const std::string& value) {
    if (!san.empty()) {
      san.push_back(',');
    }
    san.append(type);
    san.append(value);
  };
  for (const auto& d : dnsNames) {
    addSan("DNS:", d);
  }
  for (const auto& ip : ips) {
    addSan("IP:", ip);
  }
  CertPtr cert = newCert(key.get(), "kube-apiserver-double", ca.get(), caKey.get(), false, san);
  if (!cert) {
    return makeError("internal", "OpenSSL could not create the serving certificate");
  }
  return TlsMaterial{certPem(ca.get()), certPem(cert.get()), keyPem(key.get())};
}

std::string base64(const std::string& data) {
  std::string out(4 * ((data.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(data.data()), static_cast<int>(data.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string renderKubeconfig(const std::string& server, const std::string& caCertPem, const std::string& token) {
  std::string y;
  y += "# Written by kube-apiserver-double, an in-memory Kubernetes API TEST DOUBLE (not a real cluster).\n";
  y += "apiVersion: v1\nkind: Config\ncurrent-context: kube-apiserver-double\n";
  y += "clusters:\n- name: kube-apiserver-double\n  cluster:\n    server: " + server + "\n";
  if (!caCertPem.empty()) {
    y += "    certificate-authority-data: " + base64(caCertPem) + "\n";
  }
  y += "users:\n- name: kube-apiserver-double\n  user:\n";
  y += token.empty() ? "    {}\n" : "    token: " + token + "\n";
  y += "contexts:\n- name: kube-apiserver-double\n  context:\n    cluster: kube-apiserver-double\n"
       "    user: kube-apiserver-double\n    namespace: default\n";
  return y;
}

}  // namespace kc::apiserver
