#include "libcore/fabric/http_endpoint.hpp"

#include <spdlog/spdlog.h>

#include "libcore/base/base64.hpp"
#include "libcore/base/json_guard.hpp"
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
  if (url->isTls() && tls.insecureSkipVerify) {
    // Allowed, never quiet: anyone on the path to the chassis can pose as it.
    spdlog::warn(
        "chassis endpoint {}: TLS certificate verification is OFF (insecureSkipVerify); "
        "configure the CA that signed its certificate instead",
        url->scheme + "://" + url->authority());
  }
  auto client = net::HttpClient::create(std::move(options));
  if (!client) {
    return makeError(errc::kInvalid,
                     "chassis endpoint \"" + baseUrl + "\": " + client.error().message);
  }
  return Endpoint{std::move(client).value(), url->basePath};
}

Error transportError(const Error& error, const std::string& what) {
  std::string code = errc::kUnavailable;
  if (error.code == kc::errc::kTimeout) {
    code = errc::kTimeout;
  } else if (error.code == kc::errc::kTooLarge || error.code == kc::errc::kProtocol ||
             error.code == kc::errc::kRedirect) {
    // "redirect": a redirect the client would not follow (another origin, too many hops).
    code = errc::kProtocol;
  } else if (error.code == kc::errc::kInvalid) {
    code = errc::kInvalid;
  } else if (error.code == kc::errc::kTls) {
    // Not retried: the certificate will not change between attempts.
    return makeError(kc::errc::kTls,
                     what + ": " + error.message +
                         " (configure the CA bundle that signed the chassis' certificate, or "
                         "insecureSkipVerify to skip verification)");
  }
  return makeError(code, what + ": " + error.message);
}

std::string basicAuthorization(const Credentials& credentials) {
  return "Basic " + base64Encode(credentials.username + ":" + credentials.password);
}

bool retryable(const Error& error) {
  return error.code == errc::kTimeout || error.code == errc::kUnavailable ||
         error.code == errc::kProtocol;
}

}  // namespace kc::fabric::detail
