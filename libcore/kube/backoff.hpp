#pragma once
// Retry pacing of the Kubernetes client: jittered exponential backoff (reconnects, relists,
// retried requests; the one implementation in libcore/base/backoff.hpp) and a client-side token
// bucket (QPS/burst) so a busy daemon cannot flood the apiserver. Time (kc::Clock) and
// randomness are injected; neither sleeps.

#include <chrono>
#include <cstdint>
#include <mutex>

#include "libcore/base/backoff.hpp"
#include "libcore/base/clock.hpp"

namespace kc::kube {

using BackoffParams = kc::BackoffParams;
using Backoff = kc::Backoff;

// Token bucket: `qps` tokens per second, at most `burst` stored. reserve() takes one token
// and says how long the caller must wait before using it (0 if one was available).
class TokenBucket {
 public:
  // clock: not owned; null = kc::systemClock().
  TokenBucket(double qps, std::uint32_t burst, kc::Clock* clock = nullptr);
  std::chrono::nanoseconds reserve();
  bool unlimited() const { return qps_ <= 0; }

 private:
  double qps_;
  double burst_;
  kc::Clock& clock_;
  std::mutex mu_;  // guards tokens_ and last_
  double tokens_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace kc::kube
