// The Slurm codec's endpoint side (slurm_codec.hpp): the API versions it speaks, the version a
// resourceURL names or the server offers, and the request paths under a resourceURL.

#include <algorithm>
#include <array>

#include "services/bridge-pod/slurm_codec.hpp"
#include "services/bridge-pod/slurm_codec_errors.hpp"

namespace kc::bridge::slurm {

namespace {
using detail::invalid;
using detail::protocol;
using nlohmann::json;
}  // namespace

std::vector<ApiVersion> implementedVersions() {
  return {ApiVersion::kV0041, ApiVersion::kV0040, ApiVersion::kV0039, ApiVersion::kV0038};
}

std::string versionName(ApiVersion v) {
  return "v0.0." + std::to_string(static_cast<int>(v));
}

std::optional<ApiVersion> parseVersion(std::string_view name) {
  for (ApiVersion v : implementedVersions()) {
    if (name == versionName(v)) {
      return v;
    }
  }
  return std::nullopt;
}

namespace {
// "v<digits>.<digits>.<digits>" (what slurmrestd calls a plugin version).
bool isVersionName(std::string_view s) {
  if (s.size() < 6 || s.front() != 'v') {
    return false;
  }
  int dots = 0;
  bool digit = false;
  for (char c : s.substr(1)) {
    if (c == '.') {
      if (!digit) {
        return false;
      }
      ++dots;
      digit = false;
    } else if (c >= '0' && c <= '9') {
      digit = true;
    } else {
      return false;
    }
  }
  return dots == 2 && digit;
}

// (major, minor, patch) of a version name, for ordering.
std::array<long, 3> versionKey(const std::string& v) {
  std::array<long, 3> k{0, 0, 0};
  std::size_t i = 0;
  for (char c : v.substr(1)) {
    if (c == '.') {
      ++i;
    } else {
      k[i] = k[i] * 10 + (c - '0');
    }
  }
  return k;
}
}  // namespace

Result<ResourceUrl> splitResourceUrl(std::string_view url) {
  const auto scheme = url.find("://");
  if (scheme == std::string_view::npos) {
    return invalid("resourceURL '" + std::string(url) + "' has no scheme (http:// or https://)");
  }
  const auto pathStart = url.find('/', scheme + 3);
  std::string_view path =
      pathStart == std::string_view::npos ? std::string_view() : url.substr(pathStart);
  const auto at = path.find("/slurm/");
  if (at == std::string_view::npos) {
    std::string root(url);
    while (!root.empty() && root.back() == '/') {
      root.pop_back();
    }
    return ResourceUrl{root, ""};
  }
  std::string_view rest = path.substr(at + 7);
  const auto slash = rest.find('/');
  std::string_view version = rest.substr(0, slash);
  std::string_view tail = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (!isVersionName(version) || tail.find_first_not_of('/') != std::string_view::npos) {
    return invalid("resourceURL '" + std::string(url) +
                   "' must end in /slurm/v<a>.<b>.<c>/ or name no /slurm/ path at all");
  }
  std::string root(
      url.substr(0, (pathStart == std::string_view::npos ? url.size() : pathStart) + at));
  return ResourceUrl{root, std::string(version)};
}

Result<std::vector<std::string>> offeredVersions(std::string_view openapiBody) {
  json doc = json::parse(openapiBody, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return protocol("the OpenAPI document is not a JSON object");
  }
  auto paths = doc.find("paths");
  if (paths == doc.end() || !paths->is_object()) {
    return protocol("the OpenAPI document has no paths object");
  }
  std::vector<std::string> found;
  for (const auto& [path, item] : paths->items()) {
    if (path.rfind("/slurm/", 0) != 0) {
      continue;  // /slurmdb/..., /openapi/...
    }
    std::string v = path.substr(7, path.find('/', 7) - 7);
    if (isVersionName(v) && std::find(found.begin(), found.end(), v) == found.end()) {
      found.push_back(v);
    }
  }
  std::sort(found.begin(), found.end(), [](const std::string& a, const std::string& b) {
    return versionKey(a) < versionKey(b);
  });
  return found;
}

std::optional<ApiVersion> newestImplemented(const std::vector<std::string>& offered) {
  for (ApiVersion v : implementedVersions()) {
    if (std::find(offered.begin(), offered.end(), versionName(v)) != offered.end()) {
      return v;
    }
  }
  return std::nullopt;
}

std::string joinUrl(std::string_view base, std::string_view path) {
  while (!base.empty() && base.back() == '/') {
    base.remove_suffix(1);
  }
  while (!path.empty() && path.front() == '/') {
    path.remove_prefix(1);
  }
  return std::string(base) + "/" + std::string(path);
}

std::string jobPath(std::string_view resourceUrl, std::int64_t jobId) {
  return joinUrl(resourceUrl, "job/" + std::to_string(jobId));
}
std::string submitPath(std::string_view resourceUrl) {
  return joinUrl(resourceUrl, "job/submit");
}
std::string jobsPath(std::string_view resourceUrl) {
  return joinUrl(resourceUrl, "jobs");
}

}  // namespace kc::bridge::slurm
