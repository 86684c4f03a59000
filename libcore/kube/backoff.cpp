#include "libcore/kube/backoff.hpp"

#include <algorithm>

namespace kc::kube {

TokenBucket::TokenBucket(double qps, std::uint32_t burst, kc::Clock* clock)
    : qps_(qps),
      burst_(std::max<double>(1.0, burst)),
      clock_(kc::clockOr(clock)),
      tokens_(burst_),
      last_(clock_.now()) {}

std::chrono::nanoseconds TokenBucket::reserve() {
  if (qps_ <= 0) {
    return std::chrono::nanoseconds{0};
  }
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = clock_.now();
  const double elapsed = std::chrono::duration<double>(now - last_).count();
  last_ = now;
  tokens_ = std::min(burst_, tokens_ + std::max(0.0, elapsed) * qps_);
  tokens_ -= 1.0;  // may go negative: later callers queue behind earlier reservations
  if (tokens_ >= 0) {
    return std::chrono::nanoseconds{0};
  }
  return std::chrono::nanoseconds(static_cast<std::int64_t>(-tokens_ / qps_ * 1e9));
}

}  // namespace kc::kube
