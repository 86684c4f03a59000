#include "libcore/fabric/call_policy.hpp"

#include <algorithm>
#include <thread>

namespace kc::fabric {

Sleeper realSleeper() {
  return [](Millis d) { std::this_thread::sleep_for(d); };
}

Millis CallPolicy::backoffBefore(std::uint32_t attempt) const {
  if (attempt < 2) {
    return Millis{0};
  }
  Millis wait = initialBackoff;
  for (std::uint32_t i = 2; i < attempt && wait < maxBackoff; ++i) {
    wait *= 2;
  }
  return std::min(wait, maxBackoff);
}

}  // namespace kc::fabric
