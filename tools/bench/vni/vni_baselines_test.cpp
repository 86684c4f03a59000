// The benchmark baselines keep the contract they are compared under: the lowest free value of
// [min, max) first, immediate reuse, "exhausted" when full, "not_allocated" for a value not held.
#include "tools/bench/vni/vni_baselines.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using kc::alloc::Vni;

namespace {

// The same scripted sequence on any baseline; expectations worked out by hand for [100, 104).
template <typename Allocator>
void checkFirstFitContract() {
  Allocator a(100, 104);
  CHECK(*a.allocate() == 100);
  CHECK(*a.allocate() == 101);
  REQUIRE(a.release(100).ok());
  CHECK(*a.allocate() == 100);  // immediate reuse: the weakness VniRange's cooldown fixes
  CHECK(*a.allocate() == 102);
  REQUIRE(a.release(101).ok());
  CHECK(*a.allocate() == 101);  // the lowest free value, not the most recently freed one
  CHECK(*a.allocate() == 103);
  CHECK(a.allocate().error().code == "exhausted");
  CHECK(a.release(7).error().code == "not_allocated");
  CHECK(a.release(104).error().code == "not_allocated");
  REQUIRE(a.release(103).ok());
  CHECK(a.release(103).error().code == "not_allocated");  // twice
}

}  // namespace

TEST_CASE("VNI baselines: first fit, immediate reuse, exhaustion", "[vni][bench]") {
  SECTION(kc::bench::SeedVniTable::kName) {
    checkFirstFitContract<kc::bench::SeedVniTable>();
  }
  SECTION(kc::bench::OrderedFreeSetVni::kName) {
    checkFirstFitContract<kc::bench::OrderedFreeSetVni>();
  }
  SECTION(kc::bench::PersistentBitsetVni::kName) {
    checkFirstFitContract<kc::bench::PersistentBitsetVni>();
  }
}

TEST_CASE("VNI baselines: the bitset's partial last word and word boundaries", "[vni][bench]") {
  // [0, 130): words of 64, 64 and 2 values; the 62 bits past 129 must never be returned.
  kc::bench::PersistentBitsetVni bits(0, 130);
  kc::bench::OrderedFreeSetVni set(0, 130);
  for (Vni want = 0; want < 130; ++want) {
    CHECK(*bits.allocate() == want);
    CHECK(*set.allocate() == want);
  }
  CHECK(bits.allocate().error().code == "exhausted");
  REQUIRE(bits.release(64).ok());
  REQUIRE(bits.release(129).ok());
  CHECK(*bits.allocate() == 64);
  CHECK(*bits.allocate() == 129);
}

TEST_CASE("VNI baselines: the seed's table skips values outside the range", "[vni][bench]") {
  const std::vector<Vni> rows{5, 1, 200, 2};
  CHECK(kc::bench::seedFirstFreeVni(rows, 1, 10) == Vni{3});
  CHECK_FALSE(kc::bench::seedFirstFreeVni(rows, 1, 3).has_value());
  CHECK_FALSE(kc::bench::seedFirstFreeVni(rows, 4, 4).has_value());
}
