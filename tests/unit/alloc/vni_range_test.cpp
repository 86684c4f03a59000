#include "libcore/alloc/vni_range.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <tuple>
#include <vector>

using kc::alloc::Vni;
using kc::alloc::VniRange;
using kc::alloc::VniRangeOptions;
using kc::alloc::VniState;
using kc::alloc::VniTime;

namespace {

// Builder for allocator options: makeRange(100, 110).reserved({105}).cooldownMs(5).
struct RangeBuilder {
  VniRangeOptions options;
  RangeBuilder& reserved(std::vector<Vni> values) {
    options.reserved = std::move(values);
    return *this;
  }
  RangeBuilder& cooldownMs(std::int64_t ms) {
    options.cooldown = VniTime{ms};
    return *this;
  }
  VniRange build() const {
    auto r = VniRange::create(options);
    REQUIRE(r.ok());
    return std::move(r).value();
  }
};

RangeBuilder makeRange(Vni min, Vni max) {
  RangeBuilder b;
  b.options.min = min;
  b.options.max = max;
  return b;
}

// Obviously-correct reference: linear next-fit over a std::set / std::map.
struct ReferenceModel {
  Vni min;
  Vni max;
  std::set<Vni> reserved;
  std::int64_t cooldown;
  Vni last;
  std::set<Vni> allocated;
  std::map<Vni, std::int64_t> readyAt;

  bool issuable(Vni v, std::int64_t now) const {
    if (v == 0 || reserved.count(v) || allocated.count(v)) {
      return false;
    }
    auto it = readyAt.find(v);
    return it == readyAt.end() || it->second <= now;
  }
  std::optional<Vni> allocate(std::int64_t now) {
    const Vni n = max - min;
    const Vni start = (last >= min && last + 1 < max) ? last + 1 - min : 0;
    for (Vni k = 0; k < n; ++k) {
      const Vni v = min + (start + k) % n;
      if (issuable(v, now)) {
        allocated.insert(v);
        readyAt.erase(v);
        last = v;
        return v;
      }
    }
    return std::nullopt;
  }
  void release(Vni v, std::int64_t now) {
    allocated.erase(v);
    if (cooldown > 0) {
      readyAt[v] = now + cooldown;
    }
  }
};

}  // namespace

TEST_CASE("VniRange rejects invalid configurations and changes nothing", "[alloc][vni]") {
  auto [min, max, cooldown, reserved, why] =
      GENERATE(table<Vni, Vni, std::int64_t, std::vector<Vni>, const char*>({
          {10, 10, 0, {}, "empty range"},
          {20, 10, 0, {}, "min above max"},
          {1024, 65537, 0, {}, "beyond 16 bits"},
          {1024, 2048, -1, {}, "negative cooldown"},
          {0, 2, 0, {1}, "only reserved values"},
          {10, 11, 0, {10}, "single reserved value"},
      }));
  CAPTURE(why);
  VniRangeOptions o;
  o.min = min;
  o.max = max;
  o.cooldown = VniTime{cooldown};
  o.reserved = reserved;
  auto r = VniRange::create(o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == "invalid");
}

TEST_CASE("VniRange defaults are Slurm's range without the default CXI service VNIs", "[alloc]") {
  auto r = VniRange::create(VniRangeOptions{});
  REQUIRE(r.ok());
  CHECK(r->min() == 1024);
  CHECK(r->max() == 65535);
  CHECK(r->cooldown() == VniTime{60'000});
  CHECK(r->counts().capacity == 65535 - 1024);
  CHECK(*r->allocate(VniTime{0}) == 1024);
}

TEST_CASE("VniRange never issues 0, 1 or 10 even when they are inside the range", "[alloc]") {
  auto range = makeRange(0, 64).cooldownMs(0).build();
  std::set<Vni> seen;
  for (;;) {
    auto v = range.allocate(VniTime{0});
    if (!v) {
      CHECK(v.error().code == "exhausted");
      break;
    }
    CHECK(seen.insert(*v).second);
  }
  CHECK(seen.size() == 61);
  CHECK_FALSE(seen.count(0));
  CHECK_FALSE(seen.count(1));
  CHECK_FALSE(seen.count(10));
  CHECK(range.state(1) == VniState::Reserved);
  CHECK(range.reserve(10).error().code == "reserved");
  // 0 is invalid on the NIC even if the caller passes an empty reserved set.
  auto noReserved = makeRange(0, 3).reserved({}).cooldownMs(0).build();
  CHECK(*noReserved.allocate(VniTime{0}) == 1);
  CHECK(*noReserved.allocate(VniTime{0}) == 2);
  CHECK_FALSE(noReserved.allocate(VniTime{0}).ok());
}

TEST_CASE("VniRange is next-fit: it continues after the last value and wraps", "[alloc]") {
  auto range = makeRange(100, 105).reserved({}).cooldownMs(0).build();
  CHECK(*range.allocate(VniTime{0}) == 100);
  CHECK(*range.allocate(VniTime{0}) == 101);
  REQUIRE(range.release(100, VniTime{0}).ok());
  // First-fit would hand 100 back at once; next-fit moves on.
  CHECK(*range.allocate(VniTime{0}) == 102);
  CHECK(*range.allocate(VniTime{0}) == 103);
  CHECK(*range.allocate(VniTime{0}) == 104);
  CHECK(*range.allocate(VniTime{0}) == 100);  // wrapped
  range.setLastAllocated(102);
  REQUIRE(range.release(103, VniTime{0}).ok());
  CHECK(*range.allocate(VniTime{0}) == 103);
  // A last value from outside the range (a database written under another range, or
  // garbage) restarts the search at min instead of reading outside the bitmap.
  for (Vni bogus : {Vni{0}, Vni{99}, Vni{105}, Vni{4'294'967'295u}}) {
    range.setLastAllocated(bogus);
    CHECK(range.lastAllocated() == 104);  // max - 1: the next search starts at min
  }
  REQUIRE(range.release(101, VniTime{0}).ok());
  CHECK(*range.allocate(VniTime{0}) == 101);
}

TEST_CASE("VniRange exhaustion is exact and recovers after one release", "[alloc]") {
  auto range = makeRange(2000, 2100).cooldownMs(0).build();
  for (int i = 0; i < 100; ++i) {
    REQUIRE(range.allocate(VniTime{0}).ok());
  }
  auto full = range.allocate(VniTime{0});
  REQUIRE_FALSE(full.ok());
  CHECK(full.error().code == "exhausted");
  CHECK(full.error().message.find("[2000, 2100)") != std::string::npos);
  CHECK(full.error().message.find("100 allocated") != std::string::npos);
  CHECK(range.counts().allocated == 100);  // the failure changed nothing
  REQUIRE(range.release(2042, VniTime{0}).ok());
  CHECK(*range.allocate(VniTime{0}) == 2042);
  CHECK_FALSE(range.allocate(VniTime{0}).ok());
}

TEST_CASE("VniRange holds a released value for the whole cooldown", "[alloc]") {
  auto range = makeRange(500, 503).reserved({}).cooldownMs(60'000).build();
  for (int i = 0; i < 3; ++i) {
    REQUIRE(range.allocate(VniTime{0}).ok());
  }
  REQUIRE(range.release(501, VniTime{1'000}).ok());
  CHECK(range.state(501) == VniState::CoolingDown);
  CHECK(range.cooldownEnds(501) == VniTime{61'000});
  auto early = range.allocate(VniTime{60'999});
  REQUIRE_FALSE(early.ok());
  CHECK(early.error().code == "exhausted");
  CHECK(early.error().message.find("1 cooling down") != std::string::npos);
  CHECK(*range.allocate(VniTime{61'000}) == 501);
}

TEST_CASE("VniRange release and reserve report misuse without changing state", "[alloc]") {
  auto range = makeRange(100, 200).cooldownMs(10).build();
  CHECK(range.release(150, VniTime{0}).error().code == "not_allocated");
  CHECK(range.release(99, VniTime{0}).error().code == "out_of_range");
  CHECK(range.reserve(200).error().code == "out_of_range");
  REQUIRE(range.reserve(150).ok());
  CHECK(range.reserve(150).error().code == "conflict");
  CHECK(range.isAllocated(150));
  REQUIRE(range.release(150, VniTime{5}).ok());
  CHECK(range.release(150, VniTime{6}).error().code == "not_allocated");
  CHECK(range.counts().allocated == 0);
  CHECK(range.counts().cooling == 1);
  // Recovery may re-reserve a cooling value (the durable record wins), and a stale cooldown
  // deadline must not free it later.
  REQUIRE(range.reserve(150).ok());
  range.advanceTo(VniTime{1'000});
  CHECK(range.isAllocated(150));
  CHECK(range.counts().cooling == 0);
}

TEST_CASE("VniRange restores cooldowns from before a restart", "[alloc]") {
  auto range = makeRange(100, 102).reserved({}).cooldownMs(1'000).build();
  REQUIRE(range.restoreCooldown(100, VniTime{5'000}).ok());
  REQUIRE(range.restoreCooldown(100, VniTime{4'000}).ok());  // earlier release: later deadline kept
  CHECK(range.cooldownEnds(100) == VniTime{6'000});
  CHECK(*range.allocate(VniTime{5'500}) == 101);
  CHECK_FALSE(range.allocate(VniTime{5'999}).ok());
  CHECK(*range.allocate(VniTime{6'000}) == 100);
  CHECK(range.restoreCooldown(100, VniTime{0}).error().code == "conflict");
}

TEST_CASE("VniRange matches a reference model over random operation sequences", "[alloc]") {
  // Property test: thousands of seeded random allocate/release/advance steps. At every step the
  // bitmap allocator gives exactly what the linear next-fit reference gives: never a duplicate,
  // never a reserved value, exhausted exactly when nothing is issuable, cooldown honoured.
  // `extra` random values are reserved on top of 0, 1 and 10. The one-value range [5, 6) runs
  // once with its value issuable (allocate, exhaust, cool down, reuse) and once with it reserved,
  // where creation must fail because nothing could ever be issued.
  const auto [min, max, cooldown, extra] = GENERATE(table<Vni, Vni, std::int64_t, int>({
      {0, 64, 0, 3},
      {0, 130, 7, 3},
      {1000, 1100, 3, 3},
      {60000, 65536, 50, 3},
      {1024, 65535, 500, 3},
      {5, 6, 2, 0},
      {5, 6, 2, 1},
  }));
  const std::uint32_t seed = GENERATE(1u, 2u, 3u);
  CAPTURE(min, max, cooldown, extra, seed);
  std::mt19937 rng(seed);
  std::vector<Vni> reserved{0, 1, 10};
  std::uniform_int_distribution<Vni> anyValue(min, max - 1);
  for (int i = 0; i < extra; ++i) {
    reserved.push_back(anyValue(rng));
  }
  VniRangeOptions o;
  o.min = min;
  o.max = max;
  o.reserved = reserved;
  o.cooldown = VniTime{cooldown};
  auto created = VniRange::create(o);
  std::uint32_t issuable = 0;
  for (std::uint32_t v = min; v < max; ++v) {
    issuable +=
        std::find(reserved.begin(), reserved.end(), static_cast<Vni>(v)) == reserved.end() ? 1 : 0;
  }
  if (issuable == 0) {
    REQUIRE_FALSE(created.ok());
    CHECK(created.error().code == "invalid");
    CHECK_THAT(created.error().message, Catch::Contains("reserved"));
    return;
  }
  REQUIRE(created.ok());
  VniRange range = std::move(created).value();
  ReferenceModel model{min, max, {reserved.begin(), reserved.end()}, cooldown, max - 1, {}, {}};
  std::vector<Vni> live;
  std::int64_t now = 0;
  const std::uint32_t capacity = range.counts().capacity;
  // Bias towards filling up so that exhaustion and wrap-around happen often.
  std::bernoulli_distribution allocateMore(0.6);
  for (int step = 0; step < 4000; ++step) {
    now += std::uniform_int_distribution<std::int64_t>(0, 3)(rng);
    if (live.empty() || allocateMore(rng)) {
      const auto got = range.allocate(VniTime{now});
      const auto want = model.allocate(now);
      REQUIRE(got.ok() == want.has_value());
      if (got.ok()) {
        REQUIRE(*got == *want);
        REQUIRE(std::find(live.begin(), live.end(), *got) == live.end());
        live.push_back(*got);
      } else {
        REQUIRE(got.error().code == "exhausted");
      }
    } else {
      std::uniform_int_distribution<std::size_t> pick(0, live.size() - 1);
      const std::size_t k = pick(rng);
      const Vni v = live[k];
      live[k] = live.back();
      live.pop_back();
      REQUIRE(range.release(v, VniTime{now}).ok());
      model.release(v, now);
    }
    range.advanceTo(VniTime{now});
    const auto c = range.counts();
    REQUIRE(c.capacity == issuable);
    REQUIRE(c.allocated == live.size());
    REQUIRE(c.allocated + c.cooling + c.free == capacity);
  }
}
