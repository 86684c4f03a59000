#include "libcore/alloc/rt_admission.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "libcore/alloc/rng.hpp"

using namespace kc::alloc;

namespace {

using Cpus = std::vector<std::uint32_t>;

RtPacking packingNamed(const std::string& name) {
  auto p = findRtPacking(name);
  REQUIRE(p.ok());
  return *p;
}

RtCoreState makeNode(std::uint32_t cores, RtBound bound = RtBound{1'000'000, 1'000'000}) {
  Cpus ids;
  for (std::uint32_t i = 0; i < cores; ++i) {
    ids.push_back(i);
  }
  auto node = RtCoreState::create(bound, ids);
  REQUIRE(node.ok());
  return *node;
}

// 1/u of a period of 1 s: runtime in us for utilisation `percent`.
RtReservation res(std::uint64_t percent, std::uint32_t cpus) {
  return RtReservation{.runtimeUs = percent * 10'000, .periodUs = 1'000'000, .cpus = cpus};
}

}  // namespace

TEST_CASE("RT reservations are validated with a reason", "[alloc][rt]") {
  // clang-format off
  auto [runtime, period, cpus, reason] = GENERATE(table<std::uint64_t, std::uint64_t, std::uint32_t, std::string>({
    {100'000, 1'000'000, 2, ""},
    {1'000'000, 1'000'000, 1, ""},               // a full core is allowed by the reservation itself
    {100, 0, 1, "period is zero"},
    {0, 1000, 1, "runtime is zero"},
    {2000, 1000, 1, "runtime exceeds period"},
    {100, 1000, 0, "cpus is zero"},
    {1, kMaxRtMicros + 1, 1, "overflow"},
    {UINT64_MAX, UINT64_MAX, 1, "overflow"},
    {1, 1000, kMaxRtCpus + 1, "overflow"},
  }));
  // clang-format on
  CAPTURE(runtime, period, cpus);
  const auto s = validateReservation(RtReservation{runtime, period, cpus});
  if (reason.empty()) {
    CHECK(s.ok());
  } else {
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().code == "invalid");
    CHECK(s.error().message.find(reason) != std::string::npos);
  }
}

TEST_CASE("utilisation in parts per billion: reservations round up, bounds round down",
          "[alloc][rt]") {
  // clang-format off
  auto [runtime, period, ppb] = GENERATE(table<std::uint64_t, std::uint64_t, std::uint64_t>({
    {1, 3, 333'333'334}, {2, 3, 666'666'667}, {1, 1, 1'000'000'000},
    {950'000, 1'000'000, 950'000'000}, {1, kMaxRtMicros, 1},
    {kMaxRtMicros - 1, kMaxRtMicros, 1'000'000'000},  // rounds up to a full core: stricter
  }));
  // clang-format on
  CAPTURE(runtime, period);
  CHECK(utilizationPpb(RtReservation{runtime, period, 1}) == ppb);
  CHECK(boundPpb(RtBound{1, 3}) == 333'333'333);
  CHECK(boundPpb(RtBound{0, 1}) == 0);
  CHECK(boundPpb(RtBound{1, 0}) == 0);  // total even on a malformed bound
}

TEST_CASE("per-core bound from sched_rt_runtime_us / sched_rt_period_us", "[alloc][rt]") {
  // clang-format off
  auto [runtime, period, ppb] = GENERATE(table<std::int64_t, std::int64_t, std::int64_t>({
    {950'000, 1'000'000, 950'000'000},   // kernel default
    {-1, 1'000'000, 1'000'000'000},      // RUNTIME_INF
    {0, 1'000'000, 0},                   // RT disabled
    {-2, 1'000'000, -1}, {1, 0, -1}, {1, -5, -1}, {2'000'000, 1'000'000, -1},
  }));
  // clang-format on
  CAPTURE(runtime, period);
  auto bound = rtBoundFromSysctl(runtime, period);
  if (ppb < 0) {
    REQUIRE_FALSE(bound.ok());
    CHECK(bound.error().code == "invalid");
  } else {
    REQUIRE(bound.ok());
    CHECK(boundPpb(*bound) == static_cast<std::uint64_t>(ppb));
  }
}

TEST_CASE("the paper's sum test admits 3 x 0.51 on 2 cores, per-core packing does not",
          "[alloc][rt]") {
  RtCoreState node = makeNode(2);
  const RtReservation half = res(51, 1);
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(utilizationSumAdmits(node, half));         // 1.53 <= 2
    CHECK(utilizationSumAdmits(node, half, 8, 10));  // even the original's 0.8 factor: 1.53 <= 1.6
    auto cores = placeReservation(node, half, packingNamed("first-fit"));
    if (i < 2) {
      REQUIRE(cores.ok());
      REQUIRE(node.admit(half, *cores).ok());
    } else {
      REQUIRE_FALSE(cores.ok());
      CHECK(cores.error().code == "insufficient");
      CHECK(cores.error().message.find("0 of 2 have room") != std::string::npos);
    }
  }
}

TEST_CASE("first-fit and worst-fit choose different cores", "[alloc][rt]") {
  // clang-format off
  auto [preload, request, packing, expected] = GENERATE(table<std::vector<std::uint64_t>, RtReservation, std::string, Cpus>({
    // per-core load in percent before the request
    {{50, 10, 0, 30}, res(40, 1), "first-fit", {0}},
    {{50, 10, 0, 30}, res(40, 1), "worst-fit", {2}},
    {{50, 10, 0, 30}, res(40, 2), "first-fit", {0, 1}},
    {{50, 10, 0, 30}, res(40, 2), "worst-fit", {1, 2}},
    {{50, 10, 0, 30}, res(60, 2), "first-fit", {1, 2}},   // core 0 lacks room
    {{90, 90, 0, 0},  res(20, 2), "first-fit", {2, 3}},
    {{0, 0, 0, 0},    res(100, 4), "worst-fit", {0, 1, 2, 3}},
    {{20, 20, 20, 20}, res(10, 1), "worst-fit", {0}},     // ties: lowest core
  }));
  // clang-format on
  CAPTURE(preload, packing);
  RtCoreState node = makeNode(static_cast<std::uint32_t>(preload.size()));
  for (std::uint32_t c = 0; c < preload.size(); ++c) {
    if (preload[c] > 0) {
      const Cpus one{c};
      REQUIRE(node.admit(res(preload[c], 1), one).ok());
    }
  }
  auto cores = placeReservation(node, request, packingNamed(packing));
  REQUIRE(cores.ok());
  CHECK(*cores == expected);
}

TEST_CASE("RT core state validates admit and release and changes nothing on error", "[alloc][rt]") {
  CHECK(RtCoreState::create(RtBound{}, {}).error().code == "invalid");
  CHECK(RtCoreState::create(RtBound{}, {1, 2, 1}).error().code == "invalid");
  CHECK(RtCoreState::create(RtBound{2, 1}, {0}).error().code == "invalid");
  CHECK(RtCoreState::create(RtBound{1, 0}, {0}).error().code == "invalid");

  auto made = RtCoreState::create(RtBound{950'000, 1'000'000}, {7, 3, 5});
  REQUIRE(made.ok());
  RtCoreState node = *made;
  CHECK(node.cpuId(0) == 3);  // kept in CPU id order
  REQUIRE(node.admit(res(50, 2), Cpus{3, 7}).ok());
  const RtCoreState before = node;
  auto same = [&] {
    for (std::size_t c = 0; c < node.coreCount(); ++c) {
      if (node.usedPpb(c) != before.usedPpb(c)) {
        return false;
      }
    }
    return node.totalUsedPpb() == before.totalUsedPpb();
  };
  CHECK(node.admit(res(50, 2), Cpus{3}).error().code == "invalid");          // wrong count
  CHECK(node.admit(res(10, 1), Cpus{4}).error().code == "invalid");          // not an RT core
  CHECK(node.admit(res(10, 2), Cpus{5, 5}).error().code == "invalid");       // repeated core
  CHECK(node.admit(res(46, 2), Cpus{5, 7}).error().code == "insufficient");  // 7 would reach 0.96
  CHECK(node.admit(RtReservation{0, 1, 1}, Cpus{5}).error().code == "invalid");
  CHECK(node.release(res(60, 1), Cpus{3}).error().code == "conflict");
  CHECK(node.release(res(10, 1), Cpus{5}).error().code == "conflict");
  CHECK(same());
  REQUIRE(node.admit(res(45, 2), Cpus{5, 7}).ok());  // exactly 0.95 on core 7
  CHECK(node.usedPpb(2) == node.boundPpb());
  REQUIRE(node.release(res(50, 2), Cpus{7, 3}).ok());
  CHECK(node.usedPpb(0) == 0);
  CHECK(node.totalUsedPpb() == 2 * 450'000'000ULL);
  CHECK(findRtPacking("best-fit").error().code == "not_found");
  // Over-request: more servers than RT cores, under both packings; a zero limit admits nothing.
  for (const RtPacking& packing : rtPackings()) {
    auto tooMany = placeReservation(node, res(1, 4), packing);
    REQUIRE_FALSE(tooMany.ok());
    CHECK(tooMany.error().code == "insufficient");
  }
  CHECK_FALSE(utilizationSumAdmits(node, res(1, 1), 1, 0));
  CHECK_FALSE(utilizationSumAdmits(node, RtReservation{}, 1, 1));
  // A node whose bound is 0 (sched_rt_runtime_us = 0) admits nothing.
  RtCoreState off = *RtCoreState::create(RtBound{0, 1'000'000}, {0, 1});
  CHECK(placeReservation(off, RtReservation{1, 1'000'000, 1}, packingNamed("first-fit"))
            .error()
            .code == "insufficient");
  CHECK(placeReservation(node, RtReservation{5, 1, 1}, packingNamed("first-fit")).error().code ==
        "invalid");
}

TEST_CASE("RT packing properties over random reservation sequences", "[alloc][rt][property]") {
  const std::uint64_t seed = GENERATE(range<std::uint64_t>(1, 1001));
  CAPTURE(seed);
  SplitMix64 rng(seed);
  const auto cores = static_cast<std::uint32_t>(1 + rng.below(12));
  const RtBound bound{rng.below(3) == 0 ? 1'000'000 : 500'000 + rng.below(500'001), 1'000'000};
  RtCoreState node = makeNode(cores, bound);
  const RtPacking packing =
      rng.below(2) == 0 ? packingNamed("first-fit") : packingNamed("worst-fit");
  const RtPacking other = packing.worstFit ? packingNamed("first-fit") : packingNamed("worst-fit");
  struct Held {
    RtReservation r;
    Cpus cpus;
  };
  std::vector<Held> held;
  for (int step = 0; step < 60; ++step) {
    if (!held.empty() && rng.below(4) == 0) {
      const std::size_t i = rng.below(held.size());
      REQUIRE(node.release(held[i].r, held[i].cpus).ok());
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    const std::uint64_t period = 1 + rng.below(1'000'000);
    const RtReservation r{
        1 + rng.below(period), period,
        static_cast<std::uint32_t>(1 + rng.below(std::min<std::uint32_t>(cores, 4)))};
    const std::uint64_t u = utilizationPpb(r);
    std::uint32_t roomy = 0;
    for (std::size_t c = 0; c < node.coreCount(); ++c) {
      roomy += node.freePpb(c) >= u ? 1 : 0;
    }
    const bool sumOk = utilizationSumAdmits(node, r);
    auto placed = placeReservation(node, r, packing);
    // Exact feasibility: the packing admits iff enough cores have room, and both packings agree.
    REQUIRE(placed.ok() == (roomy >= r.cpus));
    REQUIRE(placeReservation(node, r, other).ok() == placed.ok());
    // Whatever the per-core packing admits, the sum test admits too (it is only weaker).
    if (placed.ok()) {
      CHECK(sumOk);
    }
    // On one core, for one server, the sum test is exact and first-fit admits what it admits.
    if (cores == 1 && r.cpus == 1) {
      CHECK(sumOk == placed.ok());
    }
    if (!placed.ok()) {
      CHECK(placed.error().code == "insufficient");
      continue;
    }
    REQUIRE(placed->size() == r.cpus);
    REQUIRE(std::adjacent_find(placed->begin(), placed->end()) ==
            placed->end());  // distinct, sorted
    REQUIRE(node.admit(r, *placed).ok());
    held.push_back(Held{r, *placed});
    std::uint64_t total = 0;
    for (std::size_t c = 0; c < node.coreCount(); ++c) {
      REQUIRE(node.usedPpb(c) <= node.boundPpb());  // never above the bound on any core
      total += node.usedPpb(c);
    }
    REQUIRE(total == node.totalUsedPpb());
  }
}
