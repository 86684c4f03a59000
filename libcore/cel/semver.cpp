#include "libcore/cel/semver.hpp"

#include <algorithm>
#include <cstddef>
#include <optional>

namespace kc::cel {
namespace {

Error bad(std::string_view text, std::string_view why) {
  return makeError(errc::kInvalid, "version '" + std::string(text) + "': " + std::string(why));
}

bool allDigits(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool isIdentifierChar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-';
}

// A version number: digits, no leading zero, within uint64.
std::optional<std::uint64_t> parseNumber(std::string_view s) {
  if (s.empty() || !allDigits(s) || (s.size() > 1 && s[0] == '0')) {
    return std::nullopt;
  }
  std::uint64_t value = 0;
  for (char c : s) {
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) {
      return std::nullopt;
    }
    value = value * 10 + digit;
  }
  return value;
}

std::vector<std::string_view> splitDots(std::string_view s) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t dot = s.find('.', start);
    parts.push_back(s.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) {
      return parts;
    }
    start = dot + 1;
  }
}

// Identifiers are non-empty [0-9A-Za-z-]; numeric prerelease ones have no leading zero.
bool validIdentifiers(const std::vector<std::string_view>& ids, bool prerelease) {
  return std::all_of(ids.begin(), ids.end(), [&](std::string_view id) {
    if (id.empty() || !std::all_of(id.begin(), id.end(), isIdentifierChar)) {
      return false;
    }
    return !prerelease || !allDigits(id) || parseNumber(id).has_value();
  });
}

int compareIdentifiers(const std::string& a, const std::string& b) {
  const bool aNum = allDigits(a);
  const bool bNum = allDigits(b);
  if (aNum && bNum) {
    // No leading zeros, so the longer one is the larger number.
    if (a.size() != b.size()) {
      return a.size() < b.size() ? -1 : 1;
    }
  } else if (aNum != bNum) {
    return aNum ? -1 : 1;  // numeric identifiers sort before alphanumeric ones
  }
  const int c = a.compare(b);
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

int compareNumbers(std::uint64_t a, std::uint64_t b) {
  return a < b ? -1 : (a > b ? 1 : 0);
}

}  // namespace

Result<Version> Version::parse(std::string_view text) {
  Version v;
  std::string_view rest = text;
  const std::size_t plus = rest.find('+');
  if (plus != std::string_view::npos) {
    const auto ids = splitDots(rest.substr(plus + 1));
    if (!validIdentifiers(ids, false)) {
      return bad(text, "invalid build metadata");
    }
    v.build.assign(ids.begin(), ids.end());
    rest = rest.substr(0, plus);
  }
  const std::size_t dash = rest.find('-');
  if (dash != std::string_view::npos) {
    const auto ids = splitDots(rest.substr(dash + 1));
    if (!validIdentifiers(ids, true)) {
      return bad(text, "invalid prerelease");
    }
    v.prerelease.assign(ids.begin(), ids.end());
    rest = rest.substr(0, dash);
  }
  const auto numbers = splitDots(rest);
  if (numbers.size() != 3) {
    return bad(text, "not MAJOR.MINOR.PATCH");
  }
  const auto major = parseNumber(numbers[0]);
  const auto minor = parseNumber(numbers[1]);
  const auto patch = parseNumber(numbers[2]);
  if (!major || !minor || !patch) {
    return bad(text, "MAJOR, MINOR and PATCH must be numbers without leading zeros");
  }
  v.major = *major;
  v.minor = *minor;
  v.patch = *patch;
  return v;
}

std::string Version::toString() const {
  std::string out =
      std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  for (std::size_t i = 0; i < prerelease.size(); ++i) {
    out += (i == 0 ? "-" : ".") + prerelease[i];
  }
  for (std::size_t i = 0; i < build.size(); ++i) {
    out += (i == 0 ? "+" : ".") + build[i];
  }
  return out;
}

int compareVersions(const Version& a, const Version& b) {
  for (const auto& [x, y] :
       {std::pair{a.major, b.major}, std::pair{a.minor, b.minor}, std::pair{a.patch, b.patch}}) {
    if (const int c = compareNumbers(x, y); c != 0) {
      return c;
    }
  }
  // A version without prerelease ranks above any prerelease of it.
  if (a.prerelease.empty() || b.prerelease.empty()) {
    return a.prerelease.empty() == b.prerelease.empty() ? 0 : (a.prerelease.empty() ? 1 : -1);
  }
  const std::size_t n = std::min(a.prerelease.size(), b.prerelease.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (const int c = compareIdentifiers(a.prerelease[i], b.prerelease[i]); c != 0) {
      return c;
    }
  }
  return compareNumbers(a.prerelease.size(), b.prerelease.size());
}

}  // namespace kc::cel
