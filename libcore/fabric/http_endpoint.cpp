#include "libcore/fabric/http_endpoint.hpp"

#include "libcore/fabric/json_guard.hpp"
#include "libcore/fabric/types.hpp"

namespace kc::fabric::detail {

Result<Endpoint> makeEndpoint(const std::string& baseUrl, const net::ClientTlsOptions& tls,
                              std::chrono::milliseconds connectTimeout) {
  auto url = net::parseUrl(baseUrl);
  if (!url) {
    return makeError(errc::kInvalid,
                     "chassis endpoint \"" + baseUrl + "\": " + url.error().message);
  }
  net::ClientOptions options;
  options.baseUrl = url->scheme + "://" + url->authority();
  options.tls = tls;
  options.connectTimeout = connectTimeout;
  options.responseBodyLimit = kMaxReplyBytes;
  options.keepAlive = true;
  options.userAgent = "kubecomp-fabric/0.1";
  auto client = net::HttpClient::create(std::move(options));
  if (!client) {
    return makeError(errc::kInvalid,
                     "chassis endpoint \"" + baseUrl + "\": " + client.error().message);
  }
  return Endpoint{std::move(client).value(), url->basePath};
}

Error transportError(const Error& error, const std::string& what) {
  std::string code = errc::kUnavailable;
  if (error.code == "timeout") {
    code = errc::kTimeout;
  } else if (error.code == "too_large" || error.code == "protocol") {
    code = errc::kProtocol;
  } else if (error.code == "invalid") {
    code = errc::kInvalid;
  }
  return makeError(code, what + ": " + error.message);
}

std::string basicAuthorization(const Credentials& credentials) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const std::string in = credentials.username + ":" + credentials.password;
  std::string out = "Basic ";
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const auto n = (static_cast<unsigned char>(in[i]) << 16) |
                   (static_cast<unsigned char>(in[i + 1]) << 8) |
                   static_cast<unsigned char>(in[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += kAlphabet[n & 63];
  }
  if (i + 1 == in.size()) {
    const auto n = static_cast<unsigned char>(in[i]) << 16;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    const auto n =
        (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += '=';
  }
  return out;
}

bool retryable(const Error& error) {
  return error.code == errc::kTimeout || error.code == errc::kUnavailable ||
         error.code == errc::kProtocol;
}

}  // namespace kc::fabric::detail
