#include "libcore/alloc/rt_interference.hpp"

#include <algorithm>
#include <string>

namespace kc::alloc {
namespace {

__extension__ typedef unsigned __int128 U128;  // GCC/Clang; __extension__ keeps -Wpedantic quiet

std::string str(std::uint64_t v) {
  return std::to_string(v);
}

std::string describe(const RtBudget& b) {
  return str(b.runtimeUs) + " us every " + str(b.periodUs) + " us";
}

std::uint64_t saturate(U128 v) {
  return v > UINT64_MAX ? UINT64_MAX : static_cast<std::uint64_t>(v);
}

}  // namespace

std::uint64_t rtInterferenceUs(const RtBudget& b, std::uint64_t t) {
  if (b.periodUs == 0 || b.runtimeUs == 0 || t == 0) {
    return 0;
  }
  const std::uint64_t q = std::min(b.runtimeUs, b.periodUs);
  // ceil((t + P - Q) / P) * Q, the budget at the end of one period and again at each release.
  const U128 span = static_cast<U128>(t) + (b.periodUs - q);
  const U128 releases = (span + b.periodUs - 1) / b.periodUs;
  return saturate(std::min<U128>(t, releases * q));
}

std::uint64_t rtWindowDemandUs(std::span<const RtBudget> groups, std::size_t g) {
  if (g >= groups.size()) {
    return 0;
  }
  U128 demand = groups[g].runtimeUs;
  for (std::size_t h = 0; h < groups.size(); ++h) {
    if (h != g) {
      demand += rtInterferenceUs(groups[h], groups[g].periodUs);
    }
  }
  return saturate(demand);
}

Status rtSharedCoreAdmits(std::span<const RtBudget> groups) {
  for (const RtBudget& b : groups) {
    if (b.periodUs == 0 || b.runtimeUs == 0 || b.runtimeUs > b.periodUs) {
      return makeError(kc::errc::kInvalid, "bad RT budget: " + describe(b));
    }
  }
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const std::uint64_t demand = rtWindowDemandUs(groups, g);
    if (demand > groups[g].periodUs) {
      return makeError(
          kc::errc::kInsufficient,
          "the group of " + describe(groups[g]) +
              " would not get its budget in every period next " + "to the " +
              str(groups.size() - 1) + " other group(s) on the core: it may need " + str(demand) +
              " us of its " + str(groups[g].periodUs) +
              " us period (cgroup v1 RT throttling does not isolate groups on a core)");
    }
  }
  return okStatus();
}

}  // namespace kc::alloc
