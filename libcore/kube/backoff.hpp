#pragma once
// Retry pacing: jittered exponential backoff (reconnects, relists, retried requests) and a
// client-side token bucket (QPS/burst) so a busy daemon cannot flood the apiserver.
// Time (kc::Clock) and randomness are injected; neither sleeps.

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>

#include "libcore/base/clock.hpp"

namespace kc::kube {

struct BackoffParams {
  std::chrono::milliseconds initial{800};
  std::chrono::milliseconds max{30000};
  double factor = 2.0;
  double jitter = 0.2;  // each delay is base * (1 + jitter * U[0,1)), capped at max
};

class Backoff {
 public:
  using Params = BackoffParams;
  // rand01 returns a value in [0,1); default: a per-object PRNG seeded from the address/time.
  explicit Backoff(Params p = {}, std::function<double()> rand01 = {});
  std::chrono::milliseconds next();
  void reset() { base_ = p_.initial; }
  std::chrono::milliseconds currentBase() const { return base_; }

 private:
  Params p_;
  std::function<double()> rand01_;
  std::chrono::milliseconds base_;
};

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
