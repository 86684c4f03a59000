#include "services/bridge-pod/backend.hpp"

namespace kc::bridge::pod {

bool isTransient(const Error& e) {
  return e.code == errc::kUnavailable || e.code == errc::kTimeout || e.code == errc::kServerError ||
         e.code == errc::kThrottled || e.code == errc::kUnauthorized || e.code == errc::kStale;
}

std::string excerpt(const std::string& body) {
  std::string s = body.substr(0, 200);
  for (char& c : s) {
    if (c == '\n' || c == '\r') {
      c = ' ';
    }
  }
  return s;
}

Error httpError(const std::string& what, unsigned status, const std::string& body) {
  const std::string text = what + ": HTTP " + std::to_string(status) + " " + excerpt(body);
  if (status == 401) {
    return makeError(errc::kUnauthorized, text);
  }
  if (status == 403) {
    return makeError(errc::kForbidden, text);
  }
  if (status == 404) {
    return makeError(errc::kNotFound, text);
  }
  if (status == 429) {
    return makeError(errc::kThrottled, text);
  }
  if (status >= 500) {
    return makeError(errc::kServerError, text);
  }
  return makeError(errc::kInvalid, text);
}

Result<std::unique_ptr<kc::net::HttpClient>> backendHttpClient(const std::string& resourceUrl,
                                                               const std::string& caFile,
                                                               std::chrono::milliseconds timeout) {
  std::string base = resourceUrl;
  while (!base.empty() && base.back() == '/') {
    base.pop_back();
  }
  kc::net::ClientOptions co;
  co.baseUrl = base;
  co.tls.caFile = caFile;
  co.requestTimeout = timeout;
  co.defaultHeaders = {{"Accept", "application/json"}};
  auto http = kc::net::HttpClient::create(std::move(co));
  if (!http.ok()) {
    return makeError(errc::kInvalid, "resourceURL: " + http.error().message);
  }
  return std::move(http).value();
}

}  // namespace kc::bridge::pod
