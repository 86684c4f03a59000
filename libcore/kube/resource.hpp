#pragma once
// Group-version-resource addressing and LIST/WATCH query encoding (api-concepts URL layout):
// core group under /api/v1, named groups under /apis/GROUP/VERSION; namespaced collections
// under namespaces/NS; optional object name and subresource.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "libcore/base/result.hpp"

namespace kc::kube {

struct GroupVersionResource {
  std::string group;     // "" for the core group
  std::string version;   // "v1"
  std::string resource;  // plural, lower case: "pods", "leases", "gpupools"
  bool namespaced = true;

  friend bool operator==(const GroupVersionResource&, const GroupVersionResource&) = default;
  std::string apiVersion() const { return group.empty() ? version : group + "/" + version; }
};

namespace gvr {
inline GroupVersionResource pods() {
  return {"", "v1", "pods", true};
}
inline GroupVersionResource nodes() {
  return {"", "v1", "nodes", false};
}
inline GroupVersionResource namespaces() {
  return {"", "v1", "namespaces", false};
}
inline GroupVersionResource events() {
  return {"", "v1", "events", true};
}
inline GroupVersionResource configMaps() {
  return {"", "v1", "configmaps", true};
}
inline GroupVersionResource leases() {
  return {"coordination.k8s.io", "v1", "leases", true};
}
}  // namespace gvr

// A path segment the apiserver would accept as a name or namespace: non-empty, no '/',
// not "." or "..", no '%' (we never double-encode), at most 253 characters.
bool isValidPathSegment(std::string_view s);

// /api/v1[/namespaces/NS]/RESOURCE[/NAME[/SUBRESOURCE]]. An empty namespace on a namespaced
// resource addresses all namespaces (only meaningful for collections). Errors on invalid
// segments, on a subresource without a name, and on a namespace for a cluster resource.
kc::Result<std::string> resourcePath(const GroupVersionResource& r, std::string_view ns,
                                     std::string_view name = {}, std::string_view subresource = {});

struct ListOptions {
  std::string labelSelector;
  std::string fieldSelector;
  std::int64_t limit = 0;  // 0: unset
  std::string continueToken;
  std::optional<std::string> resourceVersion;  // unset, "0" or a specific version
  std::string resourceVersionMatch;            // "", "NotOlderThan", "Exact"
  bool watch = false;
  bool allowWatchBookmarks = false;
  std::optional<int> timeoutSeconds;
};

// "?k=v&..." in a fixed order, or "" when nothing is set.
std::string encodeQuery(const ListOptions& o);

}  // namespace kc::kube
