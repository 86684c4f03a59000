#include "services/rt-kubelet-shim/shim_annotations.hpp"

#include <cstdio>

namespace kc::rtshim {

using alloc::RtReservation;

std::string formatReservation(const RtReservation& r) {
  return std::to_string(r.runtimeUs) + "/" + std::to_string(r.periodUs) + "/" +
         std::to_string(r.cpus);
}

std::optional<RtReservation> parseReservation(const std::string& s) {
  RtReservation r;
  unsigned long long a = 0, b = 0, c = 0;
  char tail = 0;
  if (std::sscanf(s.c_str(), "%llu/%llu/%llu%c", &a, &b, &c, &tail) != 3) {
    return std::nullopt;
  }
  r.runtimeUs = a;
  r.periodUs = b;
  r.cpus = static_cast<std::uint32_t>(c);
  if (c > alloc::kMaxRtCpus || !alloc::validateReservation(r)) {
    return std::nullopt;
  }
  return r;
}

}  // namespace kc::rtshim
