#include "libcore/fabric/call_policy.hpp"

#include "libcore/base/backoff.hpp"

namespace kc::fabric {

Sleeper sleeperOn(kc::Clock& clock) {
  return [&clock](Millis d) { clock.sleepFor(d); };
}

Sleeper realSleeper() {
  return sleeperOn(kc::systemClock());
}

Millis CallPolicy::backoffBefore(std::uint32_t attempt) const {
  if (attempt < 2) {
    return Millis{0};
  }
  const kc::BackoffParams schedule{initialBackoff, maxBackoff, 2.0, 0.0};
  return schedule.base(attempt - 2);
}

}  // namespace kc::fabric
