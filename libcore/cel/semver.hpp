#pragma once
// Semantic versions (semver.org 2.0.0): the value type of a DRA "version" attribute and of CEL's
// semver("..."). Parsed and ordered as github.com/blang/semver/v4 does, which is what
// Kubernetes uses for both.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::cel {

struct Version {
  std::uint64_t major = 0;
  std::uint64_t minor = 0;
  std::uint64_t patch = 0;
  std::vector<std::string> prerelease;  // dot-separated identifiers after '-'
  std::vector<std::string> build;       // dot-separated identifiers after '+'

  // Strict MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]: no "v" prefix, no leading zeros in numbers.
  static Result<Version> parse(std::string_view text);
  std::string toString() const;

  // Structural equality (build included); precedence is compareVersions().
  friend bool operator==(const Version&, const Version&) = default;
};

// Semver precedence: -1, 0 or 1. Build metadata does not count, so "1.0.0+a" and "1.0.0+b"
// compare 0 (and CEL's == on versions is this comparison being 0).
int compareVersions(const Version& a, const Version& b);

}  // namespace kc::cel
