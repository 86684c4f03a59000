#pragma once
// The one way tests wait for something another thread or process makes true: poll `condition`
// until it holds or `limit` passes, then check it once more (so a condition that became true
// at the deadline counts). Used where nothing can be waited on directly (a child process, an
// API server's derived state); code on kc::Clock is driven with FakeClock instead, never by
// waiting in real time.

#include <chrono>
#include <functional>
#include <thread>

namespace kc::testing {

inline constexpr std::chrono::milliseconds kDefaultWaitPoll{10};

inline bool eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds limit = std::chrono::seconds(15),
                       std::chrono::milliseconds poll = kDefaultWaitPoll) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) {
      return true;
    }
    std::this_thread::sleep_for(poll);
  }
  return condition();
}

}  // namespace kc::testing
