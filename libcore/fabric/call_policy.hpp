#pragma once
// Timeouts and retries of one driver call. Time is injected: the sleeper is the only way a
// driver waits between attempts, so unit tests record the backoff instead of sleeping. The
// backoff schedule is kc::BackoffParams (libcore/base/backoff.hpp), shared with libcore/kube.

#include <chrono>
#include <cstdint>
#include <functional>

#include "libcore/base/clock.hpp"

namespace kc::fabric {

using Millis = std::chrono::milliseconds;
using Sleeper = std::function<void(Millis)>;

// Waits on `clock` (not owned; it must outlive the sleeper).
Sleeper sleeperOn(kc::Clock& clock);
// Sleeps on the calling thread: sleeperOn(kc::systemClock()) (production).
Sleeper realSleeper();

struct CallPolicy {
  // Per HTTP request. Defaults sit well above the latencies measured on a real H3 Falcon
  // 4005 (inventory 3-4 s, unassign 5-8 s, assign 8-16 s).
  Millis readTimeout{15'000};
  Millis moveTimeout{45'000};
  std::uint32_t attempts = 3;  // per call, >= 1
  Millis initialBackoff{500};
  Millis maxBackoff{8'000};

  // Backoff before attempt `attempt` (2, 3, ...): initial * 2^(attempt-2), capped; no jitter
  // (kc::BackoffParams::base).
  Millis backoffBefore(std::uint32_t attempt) const;
};

}  // namespace kc::fabric
