#include "services/bridge-pod/credentials.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "libcore/base/base64.hpp"

namespace kc::bridge::pod {

Result<std::string> readSecretKey(const std::string& dir, const std::string& key, bool raw) {
  const std::string path = dir + "/" + key;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return makeError(errc::kNotFound, "credential file " + path + " cannot be read");
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string value = ss.str();
  while (!raw && !value.empty() && (value.back() == '\n' || value.back() == '\r')) {
    value.pop_back();
  }
  if (value.empty()) {
    return makeError(errc::kInvalid, "credential file " + path + " is empty");
  }
  return value;
}

bool secretKeyExists(const std::string& dir, const std::string& key) {
  struct stat st {};
  return ::stat((dir + "/" + key).c_str(), &st) == 0;
}

std::string base64Url(std::string_view bytes) {
  std::string s = kc::base64Encode(bytes);
  while (!s.empty() && s.back() == '=') {
    s.pop_back();
  }
  for (char& c : s) {
    if (c == '+') {
      c = '-';
    } else if (c == '/') {
      c = '_';
    }
  }
  return s;
}

std::string hmacSha256(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

std::string mintSlurmJwt(std::string_view key, const std::string& user, std::int64_t iat,
                         std::int64_t exp) {
  const nlohmann::json header{{"alg", "HS256"}, {"typ", "JWT"}};
  const nlohmann::json payload{{"exp", exp}, {"iat", iat}, {"sun", user}};
  const std::string signingInput = base64Url(header.dump()) + "." + base64Url(payload.dump());
  return signingInput + "." + base64Url(hmacSha256(key, signingInput));
}

SlurmTokenSource::SlurmTokenSource(std::string credentialsDir, std::chrono::seconds lifespan,
                                   kc::Clock* clock)
    : dir_(std::move(credentialsDir)), lifespan_(lifespan), clock_(kc::clockOr(clock)) {}

Result<std::string> SlurmTokenSource::user() const {
  return readSecretKey(dir_, "username");
}

Result<std::string> SlurmTokenSource::token() {
  if (!secretKeyExists(dir_, "jwtkey")) {
    return readSecretKey(dir_, "token");
  }
  std::lock_guard lock(mu_);
  const auto now = clock_.wallNow();
  if (!cached_.empty() && now + lifespan_ / 5 < expires_) {
    return cached_;
  }
  auto key = readSecretKey(dir_, "jwtkey", /*raw=*/true);
  if (!key.ok()) {
    return key.error();
  }
  auto u = user();
  if (!u.ok()) {
    return u.error();
  }
  const auto iat = std::chrono::time_point_cast<std::chrono::seconds>(now);
  const auto exp = iat + lifespan_;
  cached_ = mintSlurmJwt(*key, *u, iat.time_since_epoch().count(), exp.time_since_epoch().count());
  expires_ = exp;
  ++minted_;
  return cached_;
}

int SlurmTokenSource::minted() const {
  std::lock_guard lock(mu_);
  return minted_;
}

}  // namespace kc::bridge::pod
