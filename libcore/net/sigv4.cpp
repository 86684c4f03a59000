#include "libcore/net/sigv4.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "libcore/base/percent_encoding.hpp"

namespace kc::sigv4 {

namespace {

constexpr const char* kAlgorithm = "AWS4-HMAC-SHA256";

Error invalid(std::string message) {
  return makeError(errc::kInvalid, "sigv4: " + std::move(message));
}

std::string hex(const unsigned char* bytes, std::size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (std::size_t i = 0; i < size; ++i) {
    out.push_back(kDigits[bytes[i] >> 4]);
    out.push_back(kDigits[bytes[i] & 0x0f]);
  }
  return out;
}

using Mac = std::array<unsigned char, 32>;

Mac hmacSha256(std::string_view key, std::string_view data) {
  Mac out{};
  std::size_t length = 0;
  // A failure here is an OpenSSL set-up fault (no SHA-256 provider), not bad input.
  if (EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, key.data(), key.size(),
                reinterpret_cast<const unsigned char*>(data.data()), data.size(), out.data(),
                out.size(), &length) == nullptr ||
      length != out.size()) {
    throw std::runtime_error("sigv4: HMAC-SHA256 unavailable in OpenSSL");
  }
  return out;
}

std::string_view asView(const Mac& mac) {
  return {reinterpret_cast<const char*>(mac.data()), mac.size()};
}

// RFC 9110 token characters (header field names, methods).
bool isToken(std::string_view text) {
  if (text.empty()) {
    return false;
  }
  return std::all_of(text.begin(), text.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z')) {
      return true;
    }
    return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](char c) {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  });
  return out;
}

// Trims leading and trailing spaces/tabs and collapses each run of them into one space.
std::string canonicalValue(std::string_view value) {
  std::string out;
  bool pendingSpace = false;
  for (char c : value) {
    if (c == ' ' || c == '\t') {
      pendingSpace = !out.empty();
      continue;
    }
    if (pendingSpace) {
      out.push_back(' ');
      pendingSpace = false;
    }
    out.push_back(c);
  }
  return out;
}

bool isHexSha256(std::string_view text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// "YYYYMMDDTHHMMSSZ" with a real calendar date and time of day.
bool validAmzDate(std::string_view text) {
  if (text.size() != 16 || text[8] != 'T' || text[15] != 'Z') {
    return false;
  }
  for (std::size_t i : {0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14}) {
    if (text[i] < '0' || text[i] > '9') {
      return false;
    }
  }
  auto number = [&](std::size_t at, std::size_t digits) {
    int value = 0;
    for (std::size_t i = 0; i < digits; ++i) {
      value = value * 10 + (text[at + i] - '0');
    }
    return value;
  };
  const std::chrono::year_month_day day{std::chrono::year{number(0, 4)},
                                        std::chrono::month{static_cast<unsigned>(number(4, 2))},
                                        std::chrono::day{static_cast<unsigned>(number(6, 2))}};
  return day.ok() && number(9, 2) < 24 && number(11, 2) < 60 && number(13, 2) < 60;
}

// Percent-encodes every byte but the unreserved ones, keeping '/' (the S3 object key form).
std::string encodePathKeepingSlashes(std::string_view path) {
  std::string out;
  std::size_t start = 0;
  while (true) {
    const std::size_t slash = path.find('/', start);
    out += percentEncode(path.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start));
    if (slash == std::string_view::npos) {
      return out;
    }
    out.push_back('/');
    start = slash + 1;
  }
}

// RFC 3986 section 5.2.4 dot-segment removal plus dropping empty segments ("//"), keeping a
// trailing '/' when the last segment was empty, "." or "..".
std::string normalizedPath(std::string_view path) {
  std::vector<std::string_view> kept;
  std::string_view last;
  std::size_t start = 1;  // after the leading '/'
  while (start <= path.size()) {
    const std::size_t slash = path.find('/', start);
    const std::size_t end = slash == std::string_view::npos ? path.size() : slash;
    last = path.substr(start, end - start);
    if (last == "..") {
      if (!kept.empty()) {
        kept.pop_back();
      }
    } else if (!last.empty() && last != ".") {
      kept.push_back(last);
    }
    start = end + 1;
  }
  std::string out;
  for (std::string_view segment : kept) {
    out.push_back('/');
    out += percentEncode(segment);
  }
  if (out.empty() || last.empty() || last == "." || last == "..") {
    out.push_back('/');
  }
  return out;
}

// A credential scope part (region, service, access key id): non-empty, printable, no '/'.
bool validScopePart(std::string_view part) {
  return !part.empty() && std::all_of(part.begin(), part.end(),
                                      [](char c) { return c > ' ' && c < 0x7f && c != '/'; });
}

// The checks of sign()'s arguments that need no hashing, in the order sign() reports them.
Status checkSigningInput(const Request& request, const Credentials& credentials,
                         std::string_view region, std::string_view service, std::string_view date) {
  if (!isToken(request.method)) {
    return invalid("method '" + request.method + "' is not an HTTP token");
  }
  if (request.path.empty() || request.path.front() != '/') {
    return invalid("path must start with '/'");
  }
  if (!validScopePart(region) || !validScopePart(service)) {
    return invalid("region and service must be non-empty, printable and without '/'");
  }
  if (!validScopePart(credentials.accessKeyId) || credentials.secretAccessKey.empty()) {
    return invalid("access key id and secret access key are required");
  }
  if (!validAmzDate(date)) {
    return invalid("time '" + std::string(date) + "' is not a UTC x-amz-date (YYYYMMDDTHHMMSSZ)");
  }
  return okStatus();
}

// The payload's hash as signed: the override if given (checked), else the body's SHA-256.
Result<std::string> payloadHashOf(const Request& request) {
  std::string payloadHash = request.payloadHash ? *request.payloadHash : sha256Hex(request.payload);
  if (payloadHash != kUnsignedPayload && !isHexSha256(payloadHash)) {
    return invalid("payload hash must be lower-case hex SHA-256 or UNSIGNED-PAYLOAD");
  }
  return payloadHash;
}

// The headers the signer adds, each also signed.
HeaderList signerHeaders(std::string_view date, const std::string& payloadHash,
                         const Credentials& credentials, const Options& options) {
  HeaderList added{{"x-amz-date", std::string(date)}};
  if (options.contentSha256Header) {
    added.emplace_back("x-amz-content-sha256", payloadHash);
  }
  if (!credentials.sessionToken.empty()) {
    added.emplace_back("x-amz-security-token", credentials.sessionToken);
  }
  return added;
}

struct CanonicalHeaders {
  std::string text;         // "name:value\n" per header
  std::string signedNames;  // the names joined by ';'
};

// Canonical headers: lower-case names in byte order, values trimmed and joined by ','. The
// caller's headers (a host header required; one the signer adds must have its value) plus
// `added`.
Result<CanonicalHeaders> canonicalHeaders(const HeaderList& headers, const HeaderList& added) {
  std::map<std::string, std::string> canonical;
  bool hasHost = false;
  for (const auto& [name, value] : headers) {
    if (!isToken(name)) {
      return invalid("header name '" + name + "' is not an HTTP token");
    }
    if (value.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos) {
      return invalid("header '" + name + "' has a CR, LF or NUL in its value");
    }
    const std::string key = lower(name);
    hasHost = hasHost || key == "host";
    const auto own =
        std::find_if(added.begin(), added.end(), [&](const auto& h) { return h.first == key; });
    if (own != added.end()) {
      if (canonicalValue(value) != own->second) {
        return invalid("header '" + name + "' conflicts with the value the signer sets");
      }
      continue;
    }
    auto [it, inserted] = canonical.try_emplace(key, canonicalValue(value));
    if (!inserted) {
      it->second += ',' + canonicalValue(value);
    }
  }
  if (!hasHost) {
    return invalid("a host header is required");
  }
  for (const auto& [name, value] : added) {
    canonical.emplace(name, value);
  }
  CanonicalHeaders out;
  for (const auto& [name, value] : canonical) {
    out.text += name + ':' + value + '\n';
    out.signedNames += (out.signedNames.empty() ? "" : ";") + name;
  }
  return out;
}

// Canonical query: each key and value encoded, pairs sorted by encoded key, then value.
std::string canonicalQuery(const std::vector<std::pair<std::string, std::string>>& decoded) {
  std::vector<std::pair<std::string, std::string>> query;
  query.reserve(decoded.size());
  for (const auto& [key, value] : decoded) {
    query.emplace_back(percentEncode(key), percentEncode(value));
  }
  std::sort(query.begin(), query.end());
  std::string out;
  for (const auto& [key, value] : query) {
    out += (out.empty() ? "" : "&") + key + '=' + value;
  }
  return out;
}

// Signing key: HMAC chain over date, region, service and the terminator.
Mac signingKey(const std::string& secretAccessKey, std::string_view day, std::string_view region,
               std::string_view service) {
  const Mac dateKey = hmacSha256("AWS4" + secretAccessKey, day);
  const Mac regionKey = hmacSha256(asView(dateKey), region);
  const Mac serviceKey = hmacSha256(asView(regionKey), service);
  return hmacSha256(asView(serviceKey), "aws4_request");
}

}  // namespace

std::string sha256Hex(std::string_view bytes) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest.data(), &length, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("sigv4: SHA-256 unavailable in OpenSSL");
  }
  return hex(digest.data(), length);
}

std::string amzDate(std::chrono::sys_seconds time) {
  const auto day = std::chrono::floor<std::chrono::days>(time);
  const std::chrono::year_month_day date{day};
  const std::chrono::hh_mm_ss clock{time - day};
  char text[32];
  std::snprintf(text, sizeof text, "%04d%02u%02uT%02d%02d%02dZ", static_cast<int>(date.year()),
                static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
                static_cast<int>(clock.hours().count()), static_cast<int>(clock.minutes().count()),
                static_cast<int>(clock.seconds().count()));
  return text;
}

Result<Signed> sign(const Request& request, const Credentials& credentials, std::string_view region,
                    std::string_view service, std::string_view date, const Options& options) {
  if (auto s = checkSigningInput(request, credentials, region, service, date); !s) {
    return s.error();
  }
  auto payloadHash = payloadHashOf(request);
  if (!payloadHash) {
    return payloadHash.error();
  }
  HeaderList added = signerHeaders(date, *payloadHash, credentials, options);
  auto headers = canonicalHeaders(request.headers, added);
  if (!headers) {
    return headers.error();
  }

  Signed out;
  out.canonicalUri = options.pathStyle == PathStyle::kS3 ? encodePathKeepingSlashes(request.path)
                                                         : normalizedPath(request.path);
  out.canonicalRequest = request.method + '\n' + out.canonicalUri + '\n' +
                         canonicalQuery(request.query) + '\n' + headers->text + '\n' +
                         headers->signedNames + '\n' + *payloadHash;

  const std::string day(date.substr(0, 8));
  const std::string scope =
      day + '/' + std::string(region) + '/' + std::string(service) + "/aws4_request";
  out.stringToSign = std::string(kAlgorithm) + '\n' + std::string(date) + '\n' + scope + '\n' +
                     sha256Hex(out.canonicalRequest);
  const Mac key = signingKey(credentials.secretAccessKey, day, region, service);
  const Mac signature = hmacSha256(asView(key), out.stringToSign);
  out.signature = hex(signature.data(), signature.size());

  out.authorization = std::string(kAlgorithm) + " Credential=" + credentials.accessKeyId + '/' +
                      scope + ", SignedHeaders=" + headers->signedNames +
                      ", Signature=" + out.signature;
  out.headersToAdd = std::move(added);
  out.headersToAdd.emplace_back("Authorization", out.authorization);
  return out;
}

}  // namespace kc::sigv4
