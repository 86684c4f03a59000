#include "services/bridge-pod/credentials.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "libcore/base/base64.hpp"

namespace kc::bridge::pod {

namespace {

// 9999-12-31T23:59:59Z: the last second RFC 3339 can write.
constexpr std::int64_t kLastExp = 253'402'300'799;

Error notReadableJwt(const std::string& why) {
  return makeError(errc::kInvalid, "the token is not a JWT with a readable expiry: " + why);
}

// base64url without padding (RFC 7515 section 2) to bytes; standard base64's '+', '/' and '='
// are not part of it.
Result<std::string> fromBase64Url(std::string_view text) {
  std::string s(text);
  for (char& c : s) {
    if (c == '+' || c == '/' || c == '=') {
      return makeError(errc::kInvalid, "not base64url");
    }
    if (c == '-') {
      c = '+';
    } else if (c == '_') {
      c = '/';
    }
  }
  return kc::base64Decode(s, {.paddingOptional = true});
}

// The claim `exp` as whole seconds since the epoch, or why not.
Result<std::int64_t> expClaim(const nlohmann::json& payload) {
  const auto exp = payload.find("exp");
  if (exp == payload.end()) {
    return notReadableJwt("its payload has no exp");
  }
  double seconds = 0;
  if (exp->is_number_unsigned()) {
    seconds = static_cast<double>(exp->get<std::uint64_t>());
  } else if (exp->is_number_integer()) {
    seconds = static_cast<double>(exp->get<std::int64_t>());
  } else if (exp->is_number_float()) {
    seconds = std::floor(exp->get<double>());
  } else {
    return notReadableJwt("its exp is not a number");
  }
  if (!(seconds >= 0 && seconds <= static_cast<double>(kLastExp))) {
    return notReadableJwt("its exp is outside 1970 .. 9999");
  }
  return static_cast<std::int64_t>(seconds);
}

}  // namespace

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

Result<std::chrono::sys_seconds> jwtExpiry(std::string_view token) {
  if (token.size() > kMaxJwtBytes) {
    return notReadableJwt(std::to_string(token.size()) + " bytes, more than " +
                          std::to_string(kMaxJwtBytes));
  }
  const auto dot1 = token.find('.');
  const auto dot2 = dot1 == std::string_view::npos ? dot1 : token.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos || token.find('.', dot2 + 1) != std::string_view::npos) {
    return notReadableJwt("not three dot-separated parts");
  }
  if (dot1 == 0 || dot2 == dot1 + 1 || dot2 + 1 == token.size()) {
    return notReadableJwt("an empty part");
  }
  auto bytes = fromBase64Url(token.substr(dot1 + 1, dot2 - dot1 - 1));
  if (!bytes.ok()) {
    return notReadableJwt("its payload is not base64url");
  }
  const auto payload = nlohmann::json::parse(*bytes, nullptr, /*allow_exceptions=*/false);
  if (!payload.is_object()) {
    return notReadableJwt("its payload is not a JSON object");
  }
  auto exp = expClaim(payload);
  if (!exp.ok()) {
    return exp.error();
  }
  return std::chrono::sys_seconds(std::chrono::seconds(*exp));
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

std::optional<std::chrono::sys_seconds> SlurmTokenSource::givenTokenExpiry() const {
  if (secretKeyExists(dir_, "jwtkey")) {
    return std::nullopt;
  }
  auto token = readSecretKey(dir_, "token");
  if (!token.ok()) {
    return std::nullopt;
  }
  auto exp = jwtExpiry(*token);
  if (!exp.ok()) {
    spdlog::debug("Secret key token: {}; its expiry is not known", exp.error().message);
    return std::nullopt;
  }
  return *exp;
}

int SlurmTokenSource::minted() const {
  std::lock_guard lock(mu_);
  return minted_;
}

}  // namespace kc::bridge::pod
