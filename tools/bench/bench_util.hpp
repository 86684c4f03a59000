#pragma once
// What the benchmarks share: the percentile they report and a loop run on several threads.

#include <algorithm>
#include <atomic>
#include <functional>
#include <stdexcept>
#include <thread>
#include <vector>

namespace kc::bench {

// The nearest-rank percentile `p` (0..1) of `v`. Throws std::runtime_error when `v` is empty.
inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) {
    throw std::runtime_error("no samples");
  }
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// Runs f(i) for every i in [0, n) on `threads` threads.
inline void parallel(int n, int threads, const std::function<void(int)>& f) {
  std::atomic<int> next{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&] {
      for (int i = next++; i < n; i = next++) {
        f(i);
      }
    });
  }
  for (auto& t : ts) {
    t.join();
  }
}

}  // namespace kc::bench
