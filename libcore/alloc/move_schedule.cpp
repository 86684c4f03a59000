#include "libcore/alloc/move_schedule.hpp"

#include <algorithm>
#include <limits>
#include <map>

namespace kc::alloc {

std::string_view chassisOfGpu(std::string_view gpuId) {
  const auto dot = gpuId.find('.');
  return dot == std::string_view::npos ? gpuId : gpuId.substr(0, dot);
}

std::vector<std::size_t> movesToStart(std::span<const std::string> pending,
                                      std::span<const std::string> inFlight,
                                      const MoveConcurrency& concurrency) {
  const std::uint32_t perChassis = std::max<std::uint32_t>(1, concurrency.perChassis);
  std::map<std::string_view, std::uint32_t> busy;
  for (const auto& c : inFlight) {
    ++busy[c];
  }
  std::size_t running = inFlight.size();
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < pending.size(); ++i) {
    if (concurrency.perPool != 0 && running >= concurrency.perPool) {
      break;
    }
    auto& n = busy[pending[i]];
    if (n >= perChassis) {
      continue;
    }
    ++n;
    ++running;
    out.push_back(i);
  }
  return out;
}

Result<std::vector<MoveSlot>> scheduleMoves(std::span<const std::string> pendingChassis,
                                            std::int64_t now, std::int64_t moveTime,
                                            const MoveConcurrency& concurrency,
                                            std::span<const MoveInFlight> inFlight) {
  if (moveTime < 0) {
    return makeError(kc::errc::kInvalid,
                     "move time must be >= 0 (got " + std::to_string(moveTime) + ")");
  }
  std::vector<MoveSlot> slots(pendingChassis.size());
  if (pendingChassis.empty()) {
    return slots;
  }
  // What holds a chassis at time t: the moves in flight and those started here, until they end.
  std::vector<MoveInFlight> active;
  for (const MoveInFlight& m : inFlight) {
    if (m.end > now) {
      active.push_back(m);
    }
  }
  std::vector<std::size_t> waiting(pendingChassis.size());  // indices still to start, in order
  for (std::size_t i = 0; i < waiting.size(); ++i) {
    waiting[i] = i;
  }
  std::vector<std::string> waitingChassis;
  std::vector<std::string> activeChassis;
  std::int64_t t = now;
  while (!waiting.empty()) {
    std::erase_if(active, [t](const MoveInFlight& m) { return m.end <= t; });
    waitingChassis.clear();
    for (std::size_t i : waiting) {
      waitingChassis.push_back(pendingChassis[i]);
    }
    activeChassis.clear();
    for (const MoveInFlight& m : active) {
      activeChassis.push_back(m.chassis);
    }
    const std::vector<std::size_t> starting =
        movesToStart(waitingChassis, activeChassis, concurrency);
    std::int64_t end = 0;
    if (!starting.empty() && __builtin_add_overflow(t, moveTime, &end)) {
      return makeError(kc::errc::kInvalid, "a move starting at " + std::to_string(t) +
                                               " would land past the int64 time range");
    }
    for (std::size_t k : starting) {
      slots[waiting[k]] = MoveSlot{t, end};
      active.push_back(MoveInFlight{waitingChassis[k], end});
    }
    // `starting` is ascending: remove from the back so earlier positions stay valid.
    for (auto it = starting.rbegin(); it != starting.rend(); ++it) {
      waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(*it));
    }
    if (waiting.empty()) {
      break;
    }
    // Nothing more starts before the next landing; when nothing started at all, something in
    // flight ends after t (else the first waiting move would have started), so time moves on.
    std::int64_t next = std::numeric_limits<std::int64_t>::max();
    for (const MoveInFlight& m : active) {
      next = std::min(next, m.end);
    }
    t = std::max(t, next);
  }
  return slots;
}

Result<std::int64_t> lastLanding(std::span<const std::string> pendingChassis, std::int64_t now,
                                 std::int64_t moveTime, const MoveConcurrency& concurrency,
                                 std::span<const MoveInFlight> inFlight) {
  auto slots = scheduleMoves(pendingChassis, now, moveTime, concurrency, inFlight);
  if (!slots) {
    return slots.error();
  }
  std::int64_t last = now;
  for (const MoveSlot& s : *slots) {
    last = std::max(last, s.end);
  }
  return last;
}

}  // namespace kc::alloc
