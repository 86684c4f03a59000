#pragma once
// Internal to the drivers: one chassis HTTP endpoint on kc::net::HttpClient, and the mapping
// of transport failures onto fabric error codes.

#include <chrono>
#include <memory>
#include <string>

#include "libcore/base/result.hpp"
#include "libcore/fabric/credentials.hpp"
#include "libcore/net/http_client.hpp"

namespace kc::fabric::detail {

struct Endpoint {
  std::unique_ptr<net::HttpClient> client;  // base URL without path
  std::string basePath;                     // "" or "/prefix", prepended to dialect paths
};

// `baseUrl`: http(s)://host[:port][/prefix]. Response bodies are capped at kMaxReplyBytes.
// https with tls.insecureSkipVerify logs a warning (spdlog) naming the endpoint.
Result<Endpoint> makeEndpoint(const std::string& baseUrl, const net::ClientTlsOptions& tls,
                              std::chrono::milliseconds connectTimeout);

// A kc::net client error as a fabric error ("timeout", "unavailable", "protocol", ...). A TLS
// failure (an untrusted or mismatched certificate) keeps code "tls", which is not retried.
Error transportError(const Error& error, const std::string& what);

// "Basic <base64(user:password)>".
std::string basicAuthorization(const Credentials& credentials);

// Errors worth another attempt: the chassis may answer next time.
bool retryable(const Error& error);

}  // namespace kc::fabric::detail
