#include "tools/kubelet-standin/admission.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

#include "libcore/alloc/pod_fit.hpp"
#include "libcore/alloc/quantity.hpp"
#include "libcore/alloc/sched_objects.hpp"

namespace kc::kubelet {

using kc::alloc::parseResourceAmount;
namespace {

bool isAlnum(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0;
}

// The name part of a qualified name: 1..63 of [A-Za-z0-9_.-], alphanumeric at both ends.
bool isQualifiedNamePart(std::string_view s) {
  if (s.empty() || s.size() > 63 || !isAlnum(s.front()) || !isAlnum(s.back())) {
    return false;
  }
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return isAlnum(c) || c == '-' || c == '_' || c == '.'; });
}

bool isNativeResource(std::string_view name) {
  const std::size_t slash = name.find('/');
  if (slash == std::string_view::npos) {
    return true;
  }
  const std::string_view prefix = name.substr(0, slash);
  return prefix == "kubernetes.io" ||
         (prefix.size() > 14 && prefix.substr(prefix.size() - 14) == ".kubernetes.io");
}

Status addList(ResourceList& into, const nlohmann::json& map, bool onlyMissing,
               const std::string& where) {
  if (map.is_null()) {
    return okStatus();
  }
  if (!map.is_object()) {
    return makeError(kc::errc::kInvalid, where + " is not a map");
  }
  for (const auto& [name, value] : map.items()) {
    if (onlyMissing && into.count(name) != 0) {
      continue;
    }
    std::string text;
    if (value.is_string()) {
      text = value.get<std::string>();
    } else if (value.is_number()) {
      text = value.dump();
    } else {
      return makeError(kc::errc::kInvalid, where + "." + name + " is not a quantity");
    }
    auto amount = parseResourceAmount(name, text);
    if (!amount) {
      return makeError(kc::errc::kInvalid, where + "." + name + ": " + amount.error().message);
    }
    into[name] = *amount;
  }
  return okStatus();
}

std::int64_t valueOf(const ResourceList& list, const std::string& name) {
  auto it = list.find(name);
  return it == list.end() ? 0 : it->second;
}

Rejection insufficient(const std::string& name, std::int64_t requested, std::int64_t used,
                       std::int64_t capacity) {
  return {"OutOf" + name, "Node didn't have enough resource: " + name + ", requested: " +
                              std::to_string(requested) + ", used: " + std::to_string(used) +
                              ", capacity: " + std::to_string(capacity)};
}

}  // namespace

bool isDnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) {
    return false;
  }
  std::size_t start = 0;
  while (start <= s.size()) {
    const std::size_t dot = s.find('.', start);
    const std::string_view label =
        s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (label.empty()) {
      return false;
    }
    for (char c : label) {
      if (!(std::islower(static_cast<unsigned char>(c)) ||
            std::isdigit(static_cast<unsigned char>(c)) || c == '-')) {
        return false;
      }
    }
    if (label.front() == '-' || label.back() == '-') {
      return false;
    }
    if (dot == std::string_view::npos) {
      break;
    }
    start = dot + 1;
  }
  return true;
}

bool isQualifiedName(std::string_view s) {
  const std::size_t slash = s.find('/');
  if (slash == std::string_view::npos) {
    return isQualifiedNamePart(s);
  }
  if (s.find('/', slash + 1) != std::string_view::npos) {
    return false;
  }
  return isDnsSubdomain(s.substr(0, slash)) && isQualifiedNamePart(s.substr(slash + 1));
}

bool isExtendedResourceName(std::string_view name) {
  if (isNativeResource(name) || name.rfind("requests.", 0) == 0) {
    return false;
  }
  return isQualifiedName("requests." + std::string(name));
}

Result<ResourceList> containerRequests(const nlohmann::json& container) {
  ResourceList out;
  const std::string name = container.value("name", std::string("?"));
  if (!container.contains("resources") || !container["resources"].is_object()) {
    return out;
  }
  const auto& res = container["resources"];
  if (auto s = addList(out, res.value("requests", nlohmann::json()), false,
                       "container " + name + " resources.requests");
      !s) {
    return s.error();
  }
  if (auto s = addList(out, res.value("limits", nlohmann::json()), true,
                       "container " + name + " resources.limits");
      !s) {
    return s.error();
  }
  return out;
}

Result<ResourceList> podRequests(const nlohmann::json& pod) {
  // The scheduler's computation (libcore/alloc), so the stand-in admits exactly what
  // kubecomp-sched counts, sidecar init containers included.
  auto parsed = kc::alloc::parsePod(pod);
  if (!parsed) {
    return std::move(parsed).error();
  }
  const kc::alloc::Resources r = kc::alloc::podRequests(*parsed);
  ResourceList out;
  if (r.milliCpu > 0) {
    out["cpu"] = r.milliCpu;
  }
  if (r.memory > 0) {
    out["memory"] = r.memory;
  }
  if (r.ephemeralStorage > 0) {
    out["ephemeral-storage"] = r.ephemeralStorage;
  }
  for (const auto& [name, amount] : r.scalar) {
    out[name] = amount;
  }
  return out;
}

ResourceList parseResourceMap(const nlohmann::json& map) {
  ResourceList out;
  if (!map.is_object()) {
    return out;
  }
  for (const auto& [name, value] : map.items()) {
    if (!value.is_string()) {
      continue;
    }
    if (auto amount = parseResourceAmount(name, value.get<std::string>())) {
      out[name] = *amount;
    }
  }
  return out;
}

std::optional<Rejection> checkFit(const ResourceList& podRequest, const ResourceList& allocatable,
                                  const ResourceList& used, std::int64_t activePods) {
  const std::int64_t allowedPods = valueOf(allocatable, "pods");
  if (activePods + 1 > allowedPods) {
    return insufficient("pods", 1, activePods, allowedPods);
  }
  // The fixed order first, then every other requested resource by name.
  std::vector<std::string> order = {"cpu", "memory", "ephemeral-storage"};
  for (const auto& [name, amount] : podRequest) {
    if (name != "cpu" && name != "memory" && name != "ephemeral-storage" && name != "pods") {
      order.push_back(name);
    }
  }
  for (const auto& name : order) {
    const std::int64_t want = valueOf(podRequest, name);
    if (want <= 0) {
      continue;
    }
    const std::int64_t have = valueOf(allocatable, name);
    const bool fixed = name == "cpu" || name == "memory" || name == "ephemeral-storage";
    if (!fixed) {
      if (isExtendedResourceName(name) && allocatable.count(name) == 0) {
        continue;  // removeMissingExtendedResources: absent, not 0 (0 is advertised and short)
      }
      if (!isExtendedResourceName(name) && name.rfind("hugepages-", 0) != 0) {
        continue;  // other native names are not scalar resources kubelet checks
      }
    }
    const std::int64_t inUse = valueOf(used, name);
    if (want > have - inUse) {
      return insufficient(name, want, inUse, have);
    }
  }
  return std::nullopt;
}

}  // namespace kc::kubelet
