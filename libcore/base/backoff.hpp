#pragma once
// Exponential backoff, the one implementation: the Kubernetes client (retried requests,
// informer relists and reconnects) and the fabric drivers (retried chassis calls) both pace
// their retries with it. The schedule itself is pure: BackoffParams::base(n) is the delay
// before retry n without jitter; Backoff walks it and adds the jitter. Randomness is injected;
// nothing here reads a clock or sleeps (waiting is the kc::Clock's job).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <random>
#include <utility>

namespace kc {

struct BackoffParams {
  std::chrono::milliseconds initial{800};
  std::chrono::milliseconds max{30000};
  double factor = 2.0;
  double jitter = 0.2;  // each delay is base * (1 + jitter * U[0,1)), capped at max

  // Delay before retry n (0 = the first retry): initial * factor^n, capped at max. Total: any
  // n, factor or initial gives a value in [0, max] (no overflow: growth stops at the cap).
  std::chrono::milliseconds base(std::uint32_t n) const {
    const std::chrono::milliseconds top = std::max(max, std::chrono::milliseconds{0});
    const double cap = static_cast<double>(top.count());
    double b = static_cast<double>(std::max<std::int64_t>(0, initial.count()));
    if (factor > 1.0) {
      for (std::uint32_t i = 0; i < n && b < cap; ++i) {
        b *= factor;
      }
    }
    // Compared in double, converted only below the cap (a double near INT64_MAX may not fit).
    return b >= cap ? top : std::chrono::milliseconds(static_cast<std::int64_t>(b));
  }
};

class Backoff {
 public:
  using Params = BackoffParams;
  // rand01 returns a value in [0,1); default: a per-object PRNG seeded by std::random_device.
  explicit Backoff(Params p = {}, std::function<double()> rand01 = {})
      : p_(p), rand01_(std::move(rand01)) {
    if (!rand01_) {
      rand01_ = [gen = std::mt19937_64(std::random_device{}()),
                 dist = std::uniform_real_distribution<double>(0.0, 1.0)]() mutable {
        return dist(gen);
      };
    }
  }

  // The next delay: base(retries so far) with jitter, never above max.
  std::chrono::milliseconds next() {
    const auto b = p_.base(retries_);
    if (retries_ < UINT32_MAX) {
      ++retries_;
    }
    const double r = std::clamp(rand01_(), 0.0, 1.0);
    const std::chrono::milliseconds top = std::max(p_.max, std::chrono::milliseconds{0});
    const double jittered = static_cast<double>(b.count()) * (1.0 + p_.jitter * r);
    if (!(jittered < static_cast<double>(top.count()))) {
      return top;
    }
    return std::chrono::milliseconds(static_cast<std::int64_t>(std::max(0.0, jittered)));
  }
  void reset() { retries_ = 0; }
  std::chrono::milliseconds currentBase() const { return p_.base(retries_); }

 private:
  Params p_;
  std::function<double()> rand01_;
  std::uint32_t retries_ = 0;
};

}  // namespace kc
