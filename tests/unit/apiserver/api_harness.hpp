#pragma once
// Calling the double's REST surface in-process: request builders, a checked call, and the
// events of a watch stream.

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tools/kube-apiserver-double/api_server.hpp"

namespace kc::apiserver::testing {

// A request as a client sends it; PATCH bodies are merge patches unless `contentType` says.
inline kc::net::Request apiRequest(std::string method, std::string path, std::string body = "",
                                   std::vector<std::pair<std::string, std::string>> query = {},
                                   std::string accept = "", std::string contentType = "") {
  kc::net::Request r;
  r.method = std::move(method);
  r.path = std::move(path);
  r.target = r.path;
  r.query = std::move(query);
  r.body = std::move(body);
  if (contentType.empty()) {
    contentType = r.method == "PATCH" ? "application/merge-patch+json" : "application/json";
  }
  r.headers.push_back({"Content-Type", contentType});
  if (!accept.empty()) {
    r.headers.push_back({"Accept", accept});
  }
  return r;
}

// Handles `r`, checks the status, returns the parsed body (discarded when not JSON).
inline nlohmann::json apiCall(ApiServer& api, const kc::net::Request& r, unsigned status) {
  auto resp = api.handle(r);
  CAPTURE(r.method, r.path, resp.body);
  CHECK(resp.status == status);
  return nlohmann::json::parse(resp.body, nullptr, false);
}

// The newline-delimited watch events of a stream body.
inline std::vector<nlohmann::json> watchEvents(const std::string& body) {
  std::vector<nlohmann::json> out;
  std::size_t start = 0;
  for (std::size_t nl; (nl = body.find('\n', start)) != std::string::npos; start = nl + 1) {
    out.push_back(nlohmann::json::parse(body.substr(start, nl - start)));
  }
  return out;
}

}  // namespace kc::apiserver::testing
