#pragma once
// The schedule of GPU moves in one pool (issue 29): which wanted moves may start now, and the
// timeline the same rule gives. reconfig-mgr starts moves by movesToStart; the simulator and
// the backfill predictions charge the timeline of scheduleMoves, so both follow one rule.
//
// The rule: moves are taken in priority order (the order the caller gives: FCFS pods, each
// pod's sources best first); a move starts as soon as its chassis has fewer than
// MoveConcurrency::perChassis moves in flight and the pool fewer than perPool (0: no pool
// limit). A move never waits behind a later one on another chassis, and a later move may start
// before an earlier one whose chassis is busy. With perChassis = 1 and perPool = 1 this is the
// paper's serial schedule (one move at a time per pool).
//
// Pure: no I/O, threads or clocks; times are whatever unit the caller uses (the simulator: ms).

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::alloc {

// The chassis of a pool GPU id: the text before the first '.' ("falcon-0.001300" ->
// "falcon-0"), the whole id when it has none (fabric ids are "<chassis>.<local id>").
std::string_view chassisOfGpu(std::string_view gpuId);

struct MoveConcurrency {
  std::uint32_t perChassis = 1;  // moves in flight on one chassis at once (>= 1)
  std::uint32_t perPool = 0;     // moves in flight in the pool at once; 0 = no pool limit
  friend bool operator==(const MoveConcurrency&, const MoveConcurrency&) = default;
};

// The paper's schedule: one move at a time per pool.
inline constexpr MoveConcurrency kSerialMoves{1, 1};

// Indices into `pending` (the chassis of each wanted move, in priority order) of the moves that
// may start now, given the chassis of the moves already in flight, in priority order.
std::vector<std::size_t> movesToStart(std::span<const std::string> pending,
                                      std::span<const std::string> inFlight,
                                      const MoveConcurrency& concurrency);

// A move already under way (or booked ahead, as the simulator books a placement's moves): it
// holds its chassis and a place in the pool from now until `end`.
struct MoveInFlight {
  std::string chassis;
  std::int64_t end = 0;
  friend bool operator==(const MoveInFlight&, const MoveInFlight&) = default;
};

// When one wanted move starts and lands.
struct MoveSlot {
  std::int64_t start = 0;
  std::int64_t end = 0;
  friend bool operator==(const MoveSlot&, const MoveSlot&) = default;
};

// The timeline movesToStart gives: from `now`, every move whose chassis and pool have room is
// started (movesToStart on what is still pending, in priority order), each takes `moveTime`,
// and at each landing the rule is applied again, until every pending move has a slot. Slot i
// belongs to pendingChassis[i]. Moves of `inFlight` ending at or before `now` are over; the
// others hold their chassis and pool until their end. With kSerialMoves the slots are
// back to back from max(now, the last end in flight), the paper's serial fabric.
// Errors: "invalid" (moveTime < 0, or a time past int64). Empty input: no slots.
Result<std::vector<MoveSlot>> scheduleMoves(std::span<const std::string> pendingChassis,
                                            std::int64_t now, std::int64_t moveTime,
                                            const MoveConcurrency& concurrency,
                                            std::span<const MoveInFlight> inFlight);

// When the last of `pendingChassis` lands under scheduleMoves (`now` when none is pending).
Result<std::int64_t> lastLanding(std::span<const std::string> pendingChassis, std::int64_t now,
                                 std::int64_t moveTime, const MoveConcurrency& concurrency,
                                 std::span<const MoveInFlight> inFlight);

}  // namespace kc::alloc
