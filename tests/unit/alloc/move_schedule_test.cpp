// The schedule of GPU moves in one pool (libcore/alloc/move_schedule.hpp): which moves start now
// (movesToStart, what reconfig-mgr runs) and the timeline the same rule gives (scheduleMoves,
// what the simulator and the backfill predictions charge). Every expected slot is worked out by
// hand from the rule; a seeded property test replays scheduleMoves' timeline through
// movesToStart instant by instant.
#include "libcore/alloc/move_schedule.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace kc::alloc;

namespace {

constexpr std::int64_t kM = 100;  // one move's time in the tables

std::vector<std::string> chassis(std::initializer_list<const char*> names) {
  return {names.begin(), names.end()};
}

std::vector<MoveSlot> slots(std::initializer_list<std::pair<std::int64_t, std::int64_t>> list) {
  std::vector<MoveSlot> out;
  for (auto [s, e] : list) {
    out.push_back(MoveSlot{s, e});
  }
  return out;
}

}  // namespace

TEST_CASE("chassisOfGpu: the text before the first dot", "[alloc][moves]") {
  CHECK(chassisOfGpu("falcon-0.001300") == "falcon-0");
  CHECK(chassisOfGpu("falcon-1.g0000003") == "falcon-1");
  CHECK(chassisOfGpu("a.b.c") == "a");
  CHECK(chassisOfGpu("g0000003") == "g0000003");  // no chassis part: its own chassis
  CHECK(chassisOfGpu("") == "");
}

TEST_CASE("movesToStart: per chassis and per pool limits, priority order", "[alloc][moves]") {
  struct Row {
    std::vector<std::string> pending;
    std::vector<std::string> inFlight;
    MoveConcurrency c;
    std::vector<std::size_t> expected;
  };
  // clang-format off
  const auto row = GENERATE(values<Row>({
    {chassis({"a", "a", "b", "b"}), {}, {1, 0}, {0, 2}},          // one per chassis
    {chassis({"a", "a", "b", "b"}), {}, kSerialMoves, {0}},        // the paper: one per pool
    {chassis({"a", "a", "b", "b"}), {}, {2, 0}, {0, 1, 2, 3}},     // two per chassis
    {chassis({"a", "a", "b", "b"}), {}, {2, 3}, {0, 1, 2}},        // pool limit 3
    {chassis({"a", "b", "c"}), chassis({"a"}), {1, 0}, {1, 2}},   // a is busy: b, c overtake
    {chassis({"a", "b", "c"}), chassis({"a"}), {1, 2}, {1}},      // pool has one place left
    {chassis({"a", "b"}), chassis({"c", "d"}), {1, 2}, {}},       // pool full
    {chassis({"a", "b"}), {}, {0, 0}, {0, 1}},                     // perChassis 0 counts as 1
    {{}, chassis({"a"}), {1, 0}, {}},                             // nothing pending
  }));
  // clang-format on
  CAPTURE(row.pending, row.inFlight, row.c.perChassis, row.c.perPool);
  CHECK(movesToStart(row.pending, row.inFlight, row.c) == row.expected);
}

TEST_CASE("scheduleMoves: hand-computed timelines", "[alloc][moves]") {
  struct Row {
    const char* what;
    std::vector<std::string> pending;
    std::vector<MoveInFlight> inFlight;
    MoveConcurrency c;
    std::int64_t moveTime;
    std::vector<MoveSlot> expected;
  };
  const std::vector<std::string> abab = chassis({"a", "b", "a", "b"});
  const std::vector<std::string> aabb = chassis({"a", "a", "b", "b"});
  // clang-format off
  const auto row = GENERATE_COPY(values<Row>({
    {"4 moves over 2 chassis, one per chassis: done at 2 moves",
     abab, {}, {1, 0}, kM, slots({{0, 100}, {0, 100}, {100, 200}, {100, 200}})},
    {"the same in another priority order: the chassis, not the order, bound it",
     aabb, {}, {1, 0}, kM, slots({{0, 100}, {100, 200}, {0, 100}, {100, 200}})},
    {"serial: 4 moves back to back",
     abab, {}, kSerialMoves, kM, slots({{0, 100}, {100, 200}, {200, 300}, {300, 400}})},
    {"one chassis: serial whatever the pool allows",
     chassis({"a", "a", "a"}), {}, {1, 0}, kM, slots({{0, 100}, {100, 200}, {200, 300}})},
    {"a busy until 150: b starts now, a's moves after it lands",
     abab, {{"a", 150}}, {1, 0}, kM, slots({{150, 250}, {0, 100}, {250, 350}, {100, 200}})},
    {"a move that ended before now holds nothing",
     abab, {{"a", -5}, {"b", 0}}, {1, 0}, kM, slots({{0, 100}, {0, 100}, {100, 200}, {100, 200}})},
    {"serial behind moves in flight: after the last one lands",
     chassis({"b", "c"}), {{"a", 40}, {"a", 70}}, kSerialMoves, kM, slots({{70, 170}, {170, 270}})},
    {"pool limit 2 over 3 chassis: the third waits for a landing",
     chassis({"a", "b", "c"}), {}, {1, 2}, kM, slots({{0, 100}, {0, 100}, {100, 200}})},
    {"pool limit 2, one place taken until 30: c starts at 30",
     chassis({"a", "b", "c"}), {{"z", 30}}, {1, 2}, kM, slots({{0, 100}, {30, 130}, {100, 200}})},
    {"two per chassis",
     chassis({"a", "a", "a"}), {}, {2, 0}, kM, slots({{0, 100}, {0, 100}, {100, 200}})},
    {"move time 0: everything at now, even serially",
     abab, {{"a", 0}}, kSerialMoves, 0, slots({{0, 0}, {0, 0}, {0, 0}, {0, 0}})},
    {"move time 0 behind a move in flight",
     chassis({"a", "b"}), {{"a", 20}}, {1, 0}, 0, slots({{20, 20}, {0, 0}})},
    {"empty input", {}, {{"a", 50}}, {1, 0}, kM, {}},
  }));
  // clang-format on
  CAPTURE(row.what);
  auto got = scheduleMoves(row.pending, 0, row.moveTime, row.c, row.inFlight);
  REQUIRE(got.ok());
  CHECK(*got == row.expected);
  auto last = lastLanding(row.pending, 0, row.moveTime, row.c, row.inFlight);
  REQUIRE(last.ok());
  std::int64_t expectedLast = 0;
  for (const MoveSlot& s : row.expected) {
    expectedLast = std::max(expectedLast, s.end);
  }
  CHECK(*last == expectedLast);
}

TEST_CASE("scheduleMoves: bad move time and int64 overflow are errors", "[alloc][moves]") {
  const auto two = chassis({"a", "a"});
  CHECK(scheduleMoves(two, 0, -1, {1, 0}, {}).error().code == kc::errc::kInvalid);
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  // The first move fits exactly, the second would end past int64.
  auto edge = scheduleMoves(chassis({"a"}), kMax - 10, 10, {1, 0}, {});
  REQUIRE(edge.ok());
  CHECK(*edge == slots({{kMax - 10, kMax}}));
  auto over = scheduleMoves(two, kMax - 10, 10, {1, 0}, {});
  REQUIRE_FALSE(over.ok());
  CHECK(over.error().code == kc::errc::kInvalid);
  CHECK(lastLanding(two, kMax - 10, 10, kSerialMoves, {}).error().code == kc::errc::kInvalid);
  // Two chassis in parallel fit where the serial schedule overflows.
  CHECK(lastLanding(chassis({"a", "b"}), kMax - 10, 10, {1, 0}, {}).ok());
}

TEST_CASE("scheduleMoves: the timeline is movesToStart applied at every landing",
          "[alloc][moves]") {
  std::mt19937_64 rng(29);
  for (int trial = 0; trial < 300; ++trial) {
    const std::uint32_t chassisCount = 1 + static_cast<std::uint32_t>(rng() % 4);
    auto pick = [&] { return std::string("c").append(std::to_string(rng() % chassisCount)); };
    std::vector<std::string> pending(rng() % 9);
    for (auto& c : pending) {
      c = pick();
    }
    std::vector<MoveInFlight> inFlight(rng() % 4);
    for (auto& m : inFlight) {
      m = MoveInFlight{pick(), static_cast<std::int64_t>(rng() % 250)};
    }
    const MoveConcurrency c{1 + static_cast<std::uint32_t>(rng() % 2),
                            static_cast<std::uint32_t>(rng() % 4)};
    const std::int64_t moveTime = static_cast<std::int64_t>(rng() % 3) * 50;
    CAPTURE(trial, pending, c.perChassis, c.perPool, moveTime);
    auto got = scheduleMoves(pending, 0, moveTime, c, inFlight);
    REQUIRE(got.ok());
    // Replay: at every start or end instant, the moves starting then are exactly those
    // movesToStart picks among the ones not started yet, given what holds a chassis then.
    std::vector<std::int64_t> instants{0};
    for (const MoveSlot& s : *got) {
      CHECK(s.end == s.start + moveTime);
      CHECK(s.start >= 0);
      instants.push_back(s.start);
      instants.push_back(s.end);
    }
    for (const MoveInFlight& m : inFlight) {
      instants.push_back(std::max<std::int64_t>(0, m.end));
    }
    std::sort(instants.begin(), instants.end());
    instants.erase(std::unique(instants.begin(), instants.end()), instants.end());
    std::vector<bool> started(pending.size(), false);
    for (std::int64_t t : instants) {
      // Zero-length moves start and end at one instant: apply the rule until nothing changes.
      while (true) {
        std::vector<std::string> busy;
        for (const MoveInFlight& m : inFlight) {
          if (m.end > t) {
            busy.push_back(m.chassis);
          }
        }
        std::vector<std::size_t> waitingIdx;
        std::vector<std::string> waiting;
        for (std::size_t i = 0; i < pending.size(); ++i) {
          if (started[i] && (*got)[i].start <= t && (*got)[i].end > t) {
            busy.push_back(pending[i]);
          }
          if (!started[i]) {
            waitingIdx.push_back(i);
            waiting.push_back(pending[i]);
          }
        }
        const auto now = movesToStart(waiting, busy, c);
        std::vector<std::size_t> expectStart;
        for (std::size_t k : now) {
          expectStart.push_back(waitingIdx[k]);
        }
        std::vector<std::size_t> actualStart;
        for (std::size_t i : waitingIdx) {
          if ((*got)[i].start == t) {
            actualStart.push_back(i);
          }
        }
        if (moveTime > 0) {
          CHECK(actualStart == expectStart);  // one round per instant
        } else {
          // Zero-length moves land at once: this round is a prefix of what starts at t.
          CHECK(std::includes(actualStart.begin(), actualStart.end(), expectStart.begin(),
                              expectStart.end()));
          if (expectStart.empty()) {
            CHECK(actualStart.empty());  // nothing starts at t that the rule would not start
          }
          actualStart = expectStart;
        }
        for (std::size_t i : actualStart) {
          started[i] = true;
        }
        if (actualStart.empty() || moveTime > 0) {
          break;
        }
      }
    }
    CHECK(std::all_of(started.begin(), started.end(), [](bool b) { return b; }));
  }
}
