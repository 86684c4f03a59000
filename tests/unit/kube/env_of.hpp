#pragma once
// An EnvLookup over a fixed map, for tests of what the environment selects.

#include <map>
#include <optional>
#include <string>

#include "libcore/kube/config.hpp"

namespace kc::kube::testing {

inline EnvLookup envOf(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& k) -> std::optional<std::string> {
    auto it = vars.find(k);
    if (it == vars.end()) {
      return std::nullopt;
    }
    return it->second;
  };
}

}  // namespace kc::kube::testing
