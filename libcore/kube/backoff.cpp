#include "libcore/kube/backoff.hpp"

#include <algorithm>
#include <random>

namespace kc::kube {

Backoff::Backoff(Params p, std::function<double()> rand01) : p_(p), rand01_(std::move(rand01)), base_(p.initial) {
  if (!rand01_) {
    auto seed = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                reinterpret_cast<std::uintptr_t>(this);
    rand01_ = [gen = std::mt19937_64(seed), dist = std::uniform_real_distribution<double>(0.0, 1.0)]() mutable {
      return dist(gen);
    };
  }
}

std::chrono::milliseconds Backoff::next() {
  const double r = std::clamp(rand01_(), 0.0, 1.0);
  const auto jittered = std::chrono::milliseconds(
      static_cast<std::int64_t>(static_cast<double>(base_.count()) * (1.0 + p_.jitter * r)));
  const auto delay = std::min(jittered, p_.max);
  const auto grown = static_cast<std::int64_t>(static_cast<double>(base_.count()) * p_.factor);
  base_ = std::min(std::chrono::milliseconds(grown), p_.max);
  return delay;
}

TokenBucket::TokenBucket(double qps, std::uint32_t burst, kc::Clock* clock)
    : qps_(qps), burst_(std::max<double>(1.0, burst)), clock_(kc::clockOr(clock)), tokens_(burst_), last_(clock_.now()) {}

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
