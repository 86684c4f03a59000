#include "libcore/fabric/redfish_expand.hpp"

#include <nlohmann/json.hpp>

#include "libcore/base/json_guard.hpp"
#include "libcore/fabric/types.hpp"

namespace kc::fabric::redfish {
namespace {

using nlohmann::json;

bool flag(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_boolean() && it->get<bool>();
}

// The same rule as an @odata.id the codec follows: an absolute path without query or fragment.
std::optional<std::string> resourceLink(const json& obj) {
  const auto it = obj.find("@odata.id");
  if (it == obj.end() || !it->is_string()) {
    return std::nullopt;
  }
  auto link = it->get<std::string>();
  if (link.empty() || link.front() != '/' || link.size() > 2048 ||
      link.find_first_of(" \r\n\t?#") != std::string::npos) {
    return std::nullopt;
  }
  return link;
}

bool hasProperty(const json& obj) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (!it.key().empty() && it.key().front() != '@') {
      return true;
    }
  }
  return false;
}

void collect(const json& value, std::map<std::string, std::string>& out) {
  if (value.is_array()) {
    for (const auto& item : value) {
      collect(item, out);
    }
    return;
  }
  if (!value.is_object()) {
    return;
  }
  if (const auto link = resourceLink(value); link && hasProperty(value)) {
    out.emplace(*link, value.dump());  // the first copy wins; a service repeats identical ones
  }
  for (const auto& [key, child] : value.items()) {
    collect(child, out);
  }
}

}  // namespace

ExpandSupport parseExpandSupport(std::string_view serviceRootBody) {
  ExpandSupport out;
  const auto doc = json::parse(serviceRootBody, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return out;
  }
  const auto features = doc.find("ProtocolFeaturesSupported");
  if (features == doc.end() || !features->is_object()) {
    return out;
  }
  const auto expand = features->find("ExpandQuery");
  if (expand == features->end() || !expand->is_object()) {
    return out;
  }
  out.noLinks = flag(*expand, "NoLinks");
  out.expandAll = flag(*expand, "ExpandAll");
  out.levels = flag(*expand, "Levels");
  if (const auto max = expand->find("MaxLevels");
      max != expand->end() && max->is_number_integer() && max->get<std::int64_t>() >= 1) {
    out.maxLevels = std::min<std::int64_t>(max->get<std::int64_t>(), 6);
  }
  return out;
}

std::optional<std::string> expandQuery(const ExpandSupport& support, std::int64_t levels) {
  if (!support.any()) {
    return std::nullopt;
  }
  const std::string kind = support.noLinks ? "." : "*";
  if (!support.levels) {
    return "$expand=" + kind;  // one level, DSP0266's default
  }
  const std::int64_t n = std::max<std::int64_t>(1, std::min(levels, support.maxLevels));
  return "$expand=" + kind + "($levels=" + std::to_string(n) + ")";
}

std::string withQuery(const std::string& target, const std::string& query) {
  return target + (target.find('?') == std::string::npos ? "?" : "&") + query;
}

Result<std::map<std::string, std::string>> embeddedResources(std::string_view body,
                                                             std::string_view what) {
  auto doc = parseJsonGuarded(body, what);
  if (!doc) {
    return doc.error();
  }
  if (!doc->is_object()) {
    return makeError(errc::kProtocol, std::string(what) + " is not a JSON object");
  }
  std::map<std::string, std::string> out;
  // The reply itself is the collection, not one of its resources.
  for (const auto& [key, child] : doc->items()) {
    collect(child, out);
  }
  return out;
}

}  // namespace kc::fabric::redfish
