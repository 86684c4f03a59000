#pragma once
// AWS Signature Version 4 (header-based Authorization, "AWS4-HMAC-SHA256"), pure: no I/O, no
// clock. The caller passes the request's parts and the signing time; the result is every
// intermediate text (for tests and debugging) and the headers to add to the request.
// Used by the bridge pods to read scripts from and upload outputs to S3 (docs/bridge.md).

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::sigv4 {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct Credentials {
  std::string accessKeyId;
  std::string secretAccessKey;
  std::string sessionToken;  // temporary credentials: signed as x-amz-security-token when set
};

// How the path becomes the canonical URI.
enum class PathStyle {
  // S3: the path is the object key as characters ("/photos/a b.jpg"); no dot-segment or slash
  // normalisation; every byte but the RFC 3986 unreserved ones and '/' is percent-encoded once.
  // The canonical URI is then also the path to send.
  kS3,
  // Every other service: the path as sent on the wire (possibly already percent-encoded);
  // "." and ".." segments are resolved, empty segments dropped, then each segment is encoded
  // (again): a '%' already in the path becomes "%25".
  kNormalized,
};

struct Request {
  std::string method;  // "GET", "PUT", ...
  std::string path;    // see PathStyle; must start with '/'
  // Query parameters as decoded key/value pairs (a parameter without '=' has an empty value).
  std::vector<std::pair<std::string, std::string>> query;
  // Headers to sign, including "host". Names case-insensitive; a name given twice is signed as
  // one header with the values joined by ','. x-amz-date, x-amz-content-sha256 and
  // x-amz-security-token are added by the signer (given here, they must equal what it adds).
  HeaderList headers;
  std::string_view payload;  // the body, hashed unless payloadHash is set
  // Overrides the body's hash: kUnsignedPayload, or a precomputed lower-case hex SHA-256.
  std::optional<std::string> payloadHash;
};

inline constexpr const char* kUnsignedPayload = "UNSIGNED-PAYLOAD";

struct Options {
  PathStyle pathStyle = PathStyle::kS3;
  // Add (and sign) x-amz-content-sha256 with the payload hash: S3 requires it.
  bool contentSha256Header = true;
};

struct Signed {
  std::string canonicalUri;
  std::string canonicalRequest;
  std::string stringToSign;
  std::string signature;      // lower-case hex
  std::string authorization;  // the Authorization header's value
  // Headers the caller must send in addition to its own: x-amz-date, then
  // x-amz-content-sha256 and x-amz-security-token when they apply, then Authorization.
  HeaderList headersToAdd;
};

// Signs `request` at `amzDate` ("YYYYMMDDTHHMMSSZ", UTC) for `region` and `service`.
// Bad input (empty or malformed method, path, region, service or keys, header names that are
// not RFC 9110 tokens, header values with CR/LF/NUL, a payloadHash that is neither hex SHA-256
// nor UNSIGNED-PAYLOAD, a time that is not a valid UTC x-amz-date, a conflicting x-amz-* header)
// -> kc::Error "invalid", nothing signed.
Result<Signed> sign(const Request& request, const Credentials& credentials, std::string_view region,
                    std::string_view service, std::string_view amzDate,
                    const Options& options = {});

// The x-amz-date text of a UTC time point ("20150830T123600Z").
std::string amzDate(std::chrono::sys_seconds time);

// Lower-case hex SHA-256 of `bytes` (the payload hash form).
std::string sha256Hex(std::string_view bytes);

}  // namespace kc::sigv4
