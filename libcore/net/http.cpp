#include "libcore/net/http.hpp"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "libcore/base/percent_encoding.hpp"

namespace kc::net {
namespace {

char lowerAscii(char c) noexcept {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

}  // namespace

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lowerAscii(a[i]) != lowerAscii(b[i])) {
      return false;
    }
  }
  return true;
}

std::optional<std::string> findHeader(const Headers& headers, std::string_view name) {
  for (const auto& h : headers) {
    if (iequals(h.name, name)) {
      return h.value;
    }
  }
  return std::nullopt;
}

void setHeader(Headers& headers, std::string_view name, std::string_view value) {
  headers.erase(std::remove_if(headers.begin(), headers.end(),
                               [&](const Header& h) { return iequals(h.name, name); }),
                headers.end());
  headers.push_back(Header{std::string(name), std::string(value)});
}

std::optional<std::string> Request::queryParam(std::string_view name) const {
  for (const auto& [k, v] : query) {
    if (k == name) {
      return v;
    }
  }
  return std::nullopt;
}

std::vector<std::string> Request::queryParams(std::string_view name) const {
  std::vector<std::string> out;
  for (const auto& [k, v] : query) {
    if (k == name) {
      out.push_back(v);
    }
  }
  return out;
}

Response Response::json(unsigned status, const nlohmann::json& body) {
  Response r;
  r.status = status;
  r.headers.push_back(Header{"Content-Type", "application/json"});
  r.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

Response Response::text(unsigned status, std::string body, std::string_view contentType) {
  Response r;
  r.status = status;
  r.headers.push_back(Header{"Content-Type", std::string(contentType)});
  r.body = std::move(body);
  return r;
}

Response Response::error(unsigned status, std::string_view code, std::string_view message) {
  return json(status, nlohmann::json{{"error", code}, {"message", message}});
}

std::string_view reasonPhrase(unsigned status) noexcept {
  switch (status) {
    case 100:
      return "Continue";
    case 101:
      return "Switching Protocols";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 206:
      return "Partial Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 304:
      return "Not Modified";
    case 307:
      return "Temporary Redirect";
    case 308:
      return "Permanent Redirect";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 406:
      return "Not Acceptable";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 411:
      return "Length Required";
    case 412:
      return "Precondition Failed";
    case 413:
      return "Payload Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 417:
      return "Expectation Failed";
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "Unknown";
  }
}

Result<std::vector<std::pair<std::string, std::string>>> parseQuery(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (part.empty()) {
      continue;
    }
    const auto eq = part.find('=');
    auto key = percentDecode(part.substr(0, eq), true);
    if (!key) {
      return std::move(key).error();
    }
    std::string value;
    if (eq != std::string_view::npos) {
      auto v = percentDecode(part.substr(eq + 1), true);
      if (!v) {
        return std::move(v).error();
      }
      value = std::move(*v);
    }
    out.emplace_back(std::move(*key), std::move(value));
  }
  return out;
}

std::string buildQuery(const std::vector<std::pair<std::string, std::string>>& params) {
  std::string out;
  for (const auto& [k, v] : params) {
    if (!out.empty()) {
      out.push_back('&');
    }
    out += percentEncode(k);
    out.push_back('=');
    out += percentEncode(v);
  }
  return out;
}

std::string Url::authority() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<Url> parseUrl(std::string_view url) {
  Url out;
  const auto sep = url.find("://");
  if (sep == std::string_view::npos) {
    return makeError(kc::errc::kInvalid,
                     "URL '" + std::string(url) + "' has no scheme (want http:// or https://)");
  }
  for (char c : url.substr(0, sep)) {
    out.scheme.push_back(lowerAscii(c));
  }
  if (out.scheme != "http" && out.scheme != "https") {
    return makeError(kc::errc::kInvalid,
                     "URL '" + std::string(url) + "': unsupported scheme '" + out.scheme + "'");
  }
  std::string_view rest = url.substr(sep + 3);
  if (rest.find_first_of("?#") != std::string_view::npos) {
    return makeError(kc::errc::kInvalid,
                     "URL '" + std::string(url) + "' must not carry a query or fragment");
  }
  const auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) {
    return makeError(kc::errc::kInvalid,
                     "URL '" + std::string(url) + "': user info is not supported");
  }
  std::string_view portText;
  if (!authority.empty() && authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) {
      return makeError(kc::errc::kInvalid,
                       "URL '" + std::string(url) + "': unterminated IPv6 literal");
    }
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        return makeError(kc::errc::kInvalid,
                         "URL '" + std::string(url) + "': junk after IPv6 literal");
      }
      portText = after.substr(1);
    }
  } else {
    const auto colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      portText = authority.substr(colon + 1);
    }
  }
  if (out.host.empty()) {
    return makeError(kc::errc::kInvalid, "URL '" + std::string(url) + "' has no host");
  }
  if (!portText.empty()) {
    unsigned value = 0;
    const auto [ptr, ec] =
        std::from_chars(portText.data(), portText.data() + portText.size(), value);
    if (ec != std::errc{} || ptr != portText.data() + portText.size() || value == 0 ||
        value > 65535) {
      return makeError(kc::errc::kInvalid,
                       "URL '" + std::string(url) + "': bad port '" + std::string(portText) + "'");
    }
    out.port = static_cast<std::uint16_t>(value);
  } else {
    out.port = out.isTls() ? 443 : 80;
  }
  while (!path.empty() && path.back() == '/') {
    path.remove_suffix(1);
  }
  out.basePath = std::string(path);
  return out;
}

}  // namespace kc::net
