#pragma once
// Credentials of a bridge pod: files of a Secret mounted read-only (one file per key). Read
// on use, so a rotated Secret takes effect without a restart; never logged (errors name the
// file, never its content).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "libcore/base/clock.hpp"
#include "libcore/base/result.hpp"

namespace kc::bridge::pod {

// The content of `<dir>/<key>`, trailing newlines removed unless `raw` (key material). not_found
// when the file is missing, invalid when it is empty.
Result<std::string> readSecretKey(const std::string& dir, const std::string& key, bool raw = false);
bool secretKeyExists(const std::string& dir, const std::string& key);

// base64url without padding (RFC 4648 section 5), as JWTs use.
std::string base64Url(std::string_view bytes);
// HMAC-SHA256 of `data` under `key` (raw 32 bytes).
std::string hmacSha256(std::string_view key, std::string_view data);

// The most bytes jwtExpiry reads: a Slurm token is a few hundred; anything this long is not one.
inline constexpr std::size_t kMaxJwtBytes = 16 * 1024;

// The expiry a JWT carries (`exp`, RFC 7519 section 4.1.4: seconds since the epoch) in its
// payload, the second of three base64url parts (RFC 7515, no padding). The signature is not
// checked: this only tells a person when a token given as is runs out. Refused with code
// invalid, the message never quoting the token: more than kMaxJwtBytes, not three non-empty
// dot-separated parts, a payload that is not base64url or not a JSON object, no numeric `exp`,
// an `exp` outside 1970 .. 9999 (fractions are cut).
Result<std::chrono::sys_seconds> jwtExpiry(std::string_view token);

// An HS256 JWT as Slurm's auth/jwt takes it: header {"alg":"HS256","typ":"JWT"}, payload
// {"exp", "iat", "sun"} signed with the raw bytes of the cluster's jwt key.
std::string mintSlurmJwt(std::string_view key, const std::string& user, std::int64_t iat,
                         std::int64_t exp);

// Slurm's X-SLURM-USER-TOKEN: minted from the Secret key `jwtkey` when present (lifespan
// `lifespan`, re-minted once less than a fifth of it is left), else the Secret key `token`
// as given (re-read on every call: a rotated Secret is picked up).
class SlurmTokenSource {
 public:
  SlurmTokenSource(std::string credentialsDir, std::chrono::seconds lifespan,
                   kc::Clock* clock = nullptr);
  Result<std::string> user() const;
  Result<std::string> token();
  // When the token sent runs out, if anyone can know: the `exp` of the Secret key `token` (re-
  // read now). nullopt with `jwtkey` (minted tokens are renewed before they expire), and for a
  // token that is missing or whose expiry cannot be read (not a JWT: nothing is known).
  std::optional<std::chrono::sys_seconds> givenTokenExpiry() const;
  // For tests and logs: how many tokens were minted.
  int minted() const;

 private:
  std::string dir_;
  std::chrono::seconds lifespan_;
  kc::Clock& clock_;
  mutable std::mutex mu_;
  std::string cached_;
  std::chrono::system_clock::time_point expires_{};
  int minted_ = 0;
};

}  // namespace kc::bridge::pod
