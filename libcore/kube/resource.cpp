#include "libcore/kube/resource.hpp"

#include "libcore/base/percent_encoding.hpp"

namespace kc::kube {

bool isValidPathSegment(std::string_view s) {
  if (s.empty() || s.size() > 253 || s == "." || s == "..") {
    return false;
  }
  for (char c : s) {
    if (c == '/' || c == '%' || c == '?' || c == '#' || static_cast<unsigned char>(c) <= 0x20 ||
        c == 0x7f) {
      return false;
    }
  }
  return true;
}

kc::Result<std::string> resourcePath(const GroupVersionResource& r, std::string_view ns,
                                     std::string_view name, std::string_view subresource) {
  if (!isValidPathSegment(r.version) || !isValidPathSegment(r.resource) ||
      (!r.group.empty() && !isValidPathSegment(r.group))) {
    return kc::makeError(kc::errc::kInvalid, "invalid group/version/resource '" + r.apiVersion() +
                                                 "/" + r.resource + "'");
  }
  if (!ns.empty() && !r.namespaced) {
    return kc::makeError(kc::errc::kInvalid,
                         "resource '" + r.resource + "' is cluster-scoped; no namespace allowed");
  }
  if (!ns.empty() && !isValidPathSegment(ns)) {
    return kc::makeError(kc::errc::kInvalid, "invalid namespace '" + std::string(ns) + "'");
  }
  if (!name.empty() && !isValidPathSegment(name)) {
    return kc::makeError(kc::errc::kInvalid, "invalid name '" + std::string(name) + "'");
  }
  if (!subresource.empty()) {
    if (name.empty()) {
      return kc::makeError(kc::errc::kInvalid,
                           "subresource '" + std::string(subresource) + "' needs an object name");
    }
    if (!isValidPathSegment(subresource)) {
      return kc::makeError(kc::errc::kInvalid,
                           "invalid subresource '" + std::string(subresource) + "'");
    }
  }
  std::string p = r.group.empty() ? "/api/" + r.version : "/apis/" + r.group + "/" + r.version;
  if (!ns.empty()) {
    p += "/namespaces/";
    p += ns;
  }
  p += "/";
  p += r.resource;
  if (!name.empty()) {
    p += "/";
    p += name;
  }
  if (!subresource.empty()) {
    p += "/";
    p += subresource;
  }
  return p;
}

std::string encodeQuery(const ListOptions& o) {
  std::string q;
  auto add = [&q](std::string_view k, std::string_view v) {
    q += q.empty() ? "?" : "&";
    q += k;
    q += "=";
    q += kc::percentEncode(v);
  };
  if (!o.labelSelector.empty()) {
    add("labelSelector", o.labelSelector);
  }
  if (!o.fieldSelector.empty()) {
    add("fieldSelector", o.fieldSelector);
  }
  if (o.limit > 0) {
    add("limit", std::to_string(o.limit));
  }
  if (!o.continueToken.empty()) {
    add("continue", o.continueToken);
  }
  if (o.resourceVersion) {
    add("resourceVersion", *o.resourceVersion);
  }
  if (!o.resourceVersionMatch.empty()) {
    add("resourceVersionMatch", o.resourceVersionMatch);
  }
  if (o.watch) {
    add("watch", "true");
  }
  if (o.allowWatchBookmarks) {
    add("allowWatchBookmarks", "true");
  }
  if (o.timeoutSeconds) {
    add("timeoutSeconds", std::to_string(*o.timeoutSeconds));
  }
  return q;
}

}  // namespace kc::kube
