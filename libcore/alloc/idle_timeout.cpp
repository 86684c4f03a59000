#include "libcore/alloc/idle_timeout.hpp"

#include <string>

namespace kc::alloc {

bool idleExpired(const ClusterState& state, GpuIndex g, std::int64_t idleSince, std::int64_t now,
                 std::int64_t timeout) {
  if (g >= state.gpuCount() || timeout < 0 || now < idleSince) {
    return false;
  }
  const GpuState& gpu = state.gpu(g);
  if (!gpu.attached() || !gpu.free()) {
    return false;
  }
  std::int64_t idle = 0;
  if (__builtin_sub_overflow(now, idleSince, &idle)) {
    return true;  // now >= idleSince, so only a span beyond int64 overflows: longer than any T
  }
  return idle >= timeout;
}

Result<std::vector<GpuIndex>> expiredIdleGpus(const ClusterState& state,
                                              std::span<const std::int64_t> idleSince,
                                              std::int64_t now, std::int64_t timeout) {
  if (idleSince.size() != state.gpuCount()) {
    return makeError(kc::errc::kInvalid, "idle clock has " + std::to_string(idleSince.size()) +
                                             " GPUs, the cluster " +
                                             std::to_string(state.gpuCount()));
  }
  std::vector<GpuIndex> out;
  for (GpuIndex g = 0; g < state.gpuCount(); ++g) {
    if (idleExpired(state, g, idleSince[g], now, timeout)) {
      out.push_back(g);
    }
  }
  return out;
}

}  // namespace kc::alloc
