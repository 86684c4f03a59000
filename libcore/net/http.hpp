#pragma once
// HTTP vocabulary shared by kc::net::HttpServer and kc::net::HttpClient.
//
// Plain structs, no Boost in sight: this header is included by every daemon, webhook, fabric
// driver and the Kubernetes client, so it stays cheap to compile (nlohmann/json is only
// forward-declared here).

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::net {

// One header field. Names keep the spelling they were received/added with; every lookup is
// case-insensitive (RFC 9110 field names are case-insensitive).
struct Header {
  std::string name{};
  std::string value{};

  friend bool operator==(const Header&, const Header&) = default;
};
using Headers = std::vector<Header>;

// Case-insensitive ASCII comparison of header names / tokens.
bool iequals(std::string_view a, std::string_view b) noexcept;

// Value of the first header called `name` (case-insensitive), or nullopt.
std::optional<std::string> findHeader(const Headers& headers, std::string_view name);

// Replaces every header called `name` by one `name: value` (appends when absent).
void setHeader(Headers& headers, std::string_view name, std::string_view value);

// A request as the server hands it to a handler (and as the client sends it).
struct Request {
  std::string method{};  // "GET", "POST", ... as received (HTTP methods are case-sensitive)
  std::string target{};  // raw request-target: "/api/v1/pods?watch=true&limit=5"
  std::string path{};    // percent-decoded path of the target: "/api/v1/pods"
  // Query parameters in order of appearance, percent-decoded ('+' decodes to a space, as
  // in Go's url.ParseQuery). Repeated keys are kept as separate entries.
  std::vector<std::pair<std::string, std::string>> query{};
  Headers headers{};
  std::string body{};
  std::string remoteAddress{};  // "127.0.0.1:53412" (server side only)
  bool tls = false;             // arrived over TLS (server side only)
  // Subject of the verified client certificate ("/CN=admin/O=system:masters"), empty when the
  // connection is plain or the client sent none (server side only).
  std::string peerCertSubject{};

  std::optional<std::string> header(std::string_view name) const {
    return findHeader(headers, name);
  }
  // First value of query parameter `name`, or nullopt when absent.
  std::optional<std::string> queryParam(std::string_view name) const;
  // Every value of query parameter `name`, in order.
  std::vector<std::string> queryParams(std::string_view name) const;
  bool hasQueryParam(std::string_view name) const { return queryParam(name).has_value(); }
};

// A complete (non-streamed) response. The server adds Content-Length, Date and Server; a
// Content-Type set here wins.
struct Response {
  unsigned status = 200;
  Headers headers{};
  std::string body{};

  std::optional<std::string> header(std::string_view name) const {
    return findHeader(headers, name);
  }
  Response& withHeader(std::string_view name, std::string_view value) {
    setHeader(headers, name, value);
    return *this;
  }

  // `body` serialised compactly, Content-Type: application/json.
  static Response json(unsigned status, const nlohmann::json& body);
  static Response text(unsigned status, std::string body,
                       std::string_view contentType = "text/plain; charset=utf-8");
  // JSON error body {"error": <short code>, "message": <for people>}, e.g.
  // error(404, "not_found", "no route for GET /x").
  static Response error(unsigned status, std::string_view code, std::string_view message);
};

// Standard reason phrase for a status code ("Not Found"); "Unknown" for unknown codes.
std::string_view reasonPhrase(unsigned status) noexcept;

// Parses "a=1&b=x%20y&flag" into ordered, decoded pairs ("flag" gets an empty value).
Result<std::vector<std::pair<std::string, std::string>>> parseQuery(std::string_view query);
// Builds "a=1&b=x%20y" from pairs (keys and values percent-encoded,
// libcore/base/percent_encoding.hpp).
std::string buildQuery(const std::vector<std::pair<std::string, std::string>>& params);

// A parsed absolute http(s) URL: "https://10.0.0.1:6443/prefix".
struct Url {
  std::string scheme{};    // "http" or "https"
  std::string host{};      // "10.0.0.1", "example.org", "::1" (IPv6 without brackets)
  std::uint16_t port = 0;  // explicit or the scheme default (80 / 443)
  std::string basePath{};  // "" or "/prefix" (no trailing '/')

  bool isTls() const { return scheme == "https"; }
  // "host:port" with IPv6 brackets, as used in a Host header.
  std::string authority() const;
};
// Errors (code "invalid"): unsupported scheme, missing host, bad port, query/fragment present.
Result<Url> parseUrl(std::string_view url);

}  // namespace kc::net
