#include "libcore/net/http_client_redirect.hpp"

#include <vector>

namespace kc::net::detail {
namespace {

bool startsWithNoCase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

// RFC 3986 5.2.4: removes "." and ".." segments from an absolute path.
std::string removeDotSegments(std::string_view path) {
  std::vector<std::string_view> out;
  std::size_t pos = 1;  // path starts with '/'
  bool trailingSlash = false;
  while (pos <= path.size()) {
    const auto next = path.find('/', pos);
    const auto seg =
        path.substr(pos, next == std::string_view::npos ? std::string_view::npos : next - pos);
    trailingSlash = next == std::string_view::npos && (seg == "." || seg == "..");
    if (seg == "..") {
      if (!out.empty()) {
        out.pop_back();
      }
    } else if (seg != ".") {
      out.push_back(seg);
    }
    if (next == std::string_view::npos) {
      break;
    }
    pos = next + 1;
  }
  std::string joined;
  for (const auto& seg : out) {
    joined += "/";
    joined += seg;
  }
  if (joined.empty() || trailingSlash) {
    joined += "/";
  }
  return joined;
}

}  // namespace

bool isRedirect(unsigned status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

Result<std::string> redirectTarget(const Url& origin, std::string_view target,
                                   std::string_view location) {
  while (!location.empty() && (location.front() == ' ' || location.front() == '\t')) {
    location.remove_prefix(1);
  }
  while (!location.empty() && (location.back() == ' ' || location.back() == '\t')) {
    location.remove_suffix(1);
  }
  if (const auto hash = location.find('#'); hash != std::string_view::npos) {
    location = location.substr(0, hash);  // fragments are never sent
  }
  for (const char ch : location) {
    if (static_cast<unsigned char>(ch) <= 0x20 || ch == 0x7f) {
      return makeError(kc::errc::kProtocol,
                       "malformed Location header in a redirect from " + origin.authority());
    }
  }
  if (location.empty()) {
    return makeError(kc::errc::kProtocol,
                     "empty Location header in a redirect from " + origin.authority());
  }
  std::string absolute;  // "scheme://authority/path?query" when the Location names an origin
  if (startsWithNoCase(location, "http://") || startsWithNoCase(location, "https://")) {
    absolute = std::string(location);
  } else if (location.rfind("//", 0) == 0) {
    absolute = origin.scheme + ":" + std::string(location);
  }
  std::string pathAndQuery;
  if (!absolute.empty()) {
    const auto authStart = absolute.find("://") + 3;
    const auto pathStart = absolute.find_first_of("/?", authStart);
    auto there = parseUrl(absolute.substr(0, pathStart));
    if (!there) {
      return makeError(kc::errc::kProtocol, "malformed Location '" +
                                                std::string(location).substr(0, 200) +
                                                "' in a redirect from " + origin.authority());
    }
    if (!iequals(there->scheme, origin.scheme) || !iequals(there->host, origin.host) ||
        there->port != origin.port) {
      return makeError(kc::errc::kRedirect,
                       "redirect from " + origin.scheme + "://" + origin.authority() +
                           " to another origin (" + there->scheme + "://" + there->authority() +
                           ") refused: only same-origin redirects are followed; if the service "
                           "really lives there, configure that URL");
    }
    pathAndQuery = pathStart == std::string::npos ? "/" : absolute.substr(pathStart);
    if (pathAndQuery.front() == '?') {
      pathAndQuery = "/" + pathAndQuery;
    }
  } else if (location.front() == '/') {
    pathAndQuery = std::string(location);
  } else {
    // Relative reference: resolved against the directory of the current path.
    const std::string_view current = target.substr(0, target.find('?'));
    if (location.front() == '?') {
      pathAndQuery = std::string(current) + std::string(location);
    } else {
      pathAndQuery = std::string(current.substr(0, current.rfind('/') + 1)) + std::string(location);
    }
  }
  const auto q = pathAndQuery.find('?');
  std::string out = removeDotSegments(std::string_view(pathAndQuery).substr(0, q));
  if (q != std::string::npos) {
    out += pathAndQuery.substr(q);
  }
  return out;
}

}  // namespace kc::net::detail
