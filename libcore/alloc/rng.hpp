#pragma once
// SplitMix64: a tiny seeded pseudo-random generator that the caller owns and passes in, so the
// random baselines are reproducible across runs, compilers and standard libraries (the
// distributions of <random> are implementation-defined). Not for anything security-related.

#include <cstdint>

namespace kc::alloc {

class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}

  std::uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ULL;
    std::uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  // Uniform in [0, bound); 0 when bound is 0. Rejection sampling: no modulo bias.
  std::uint64_t below(std::uint64_t bound) {
    if (bound == 0) {
      return 0;
    }
    const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % bound);
    std::uint64_t value = next();
    while (value >= limit) {
      value = next();
    }
    return value % bound;
  }

 private:
  std::uint64_t state_;
};

}  // namespace kc::alloc
