#include "services/bridge-pod/backend.hpp"

namespace kc::bridge::pod {

bool isTransient(const Error& e) {
  return e.code == errc::kUnavailable || e.code == errc::kTimeout || e.code == errc::kServerError ||
         e.code == errc::kThrottled || e.code == errc::kUnauthorized || e.code == errc::kStale;
}

Result<std::string> stagedFileName(const std::string& objectKey) {
  const auto slash = objectKey.rfind('/');
  const std::string name = slash == std::string::npos ? objectKey : objectKey.substr(slash + 1);
  const std::string what = "additionaldata object '" + objectKey + "'";
  if (name.empty()) {
    return makeError(errc::kInvalid, what + " has no file name (the key ends with '/')");
  }
  if (name == "." || name == "..") {
    return makeError(errc::kInvalid, what + ": '" + name + "' is not a file name");
  }
  if (name.size() > 255) {
    return makeError(errc::kInvalid, what + ": the file name is longer than 255 bytes");
  }
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) {
      return makeError(errc::kInvalid, what + ": the file name holds a control character");
    }
  }
  return name;
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
