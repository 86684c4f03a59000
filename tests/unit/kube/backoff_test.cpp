#include "libcore/kube/backoff.hpp"

#include <catch2/catch.hpp>

#include "tests/support/fakes/fake_clock.hpp"

using namespace kc::kube;
using std::chrono::milliseconds;

TEST_CASE("backoff grows from 0.8 s to 30 s with bounded jitter", "[kube][backoff]") {
  double r = 0.0;
  Backoff b({}, [&r] { return r; });
  std::vector<long> seen;
  for (int i = 0; i < 8; ++i) {
    seen.push_back(b.next().count());
  }
  CHECK(seen == std::vector<long>{800, 1600, 3200, 6400, 12800, 25600, 30000, 30000});
  b.reset();
  r = 0.999;
  auto first = b.next();
  CHECK(first >= milliseconds(800));
  CHECK(first <= milliseconds(960));
  for (int i = 0; i < 20; ++i) {
    CHECK(b.next() <= milliseconds(30000));
  }
  Backoff fast({milliseconds(10), milliseconds(40), 2.0, 0.0});
  CHECK(fast.next() == milliseconds(10));
  CHECK(fast.next() == milliseconds(20));
  CHECK(fast.next() == milliseconds(40));
  CHECK(fast.next() == milliseconds(40));
}

TEST_CASE("token bucket allows a burst then paces at qps", "[kube][backoff]") {
  kc::testing::FakeClock clock;
  TokenBucket tb(10.0, 3, &clock);
  CHECK(tb.reserve().count() == 0);
  CHECK(tb.reserve().count() == 0);
  CHECK(tb.reserve().count() == 0);
  CHECK(tb.reserve() == std::chrono::milliseconds(100));
  CHECK(tb.reserve() == std::chrono::milliseconds(200));
  clock.advance(std::chrono::seconds(10));  // refills only up to burst
  for (int i = 0; i < 3; ++i) {
    CHECK(tb.reserve().count() == 0);
  }
  CHECK(tb.reserve().count() > 0);
  TokenBucket off(0, 1);
  for (int i = 0; i < 100; ++i) {
    CHECK(off.reserve().count() == 0);
  }
}

TEST_CASE("the backoff schedule is total: any step, factor or bound stays within [0, max]",
          "[kube][backoff]") {
  using P = kc::BackoffParams;
  // params, step n, expected base delay in ms
  auto [p, n, want] = GENERATE(table<P, std::uint32_t, long>({
      {P{milliseconds(800), milliseconds(30000), 2.0, 0.2}, 0, 800},
      {P{milliseconds(800), milliseconds(30000), 2.0, 0.2}, 5, 25600},
      {P{milliseconds(800), milliseconds(30000), 2.0, 0.2}, 6, 30000},
      {P{milliseconds(800), milliseconds(30000), 2.0, 0.2}, UINT32_MAX, 30000},
      {P{milliseconds(500), milliseconds(8000), 2.0, 0.0}, 3, 4000},  // fabric defaults
      {P{milliseconds(100), milliseconds(1000), 3.0, 0.0}, 2, 900},
      {P{milliseconds(900), milliseconds(100), 2.0, 0.0}, 0, 100},  // initial above the cap
      {P{milliseconds(100), milliseconds(1000), 1.0, 0.0}, 1'000'000, 100},  // no growth
      {P{milliseconds(100), milliseconds(1000), 0.5, 0.0}, 7, 100},  // shrinking factor ignored
      {P{milliseconds(-5), milliseconds(1000), 2.0, 0.0}, 3, 0},
      {P{milliseconds(INT64_MAX), milliseconds(INT64_MAX / 2), 10.0, 0.0}, 40, INT64_MAX / 2},
  }));
  CAPTURE(p.initial.count(), p.max.count(), p.factor, n);
  CHECK(p.base(n).count() == want);
}

TEST_CASE("jitter never lifts a delay above the cap", "[kube][backoff]") {
  Backoff b({milliseconds(100), milliseconds(1000), 2.0, 1.0}, [] { return 0.999; });
  std::vector<long> seen;
  for (int i = 0; i < 6; ++i) {
    seen.push_back(b.next().count());
  }
  CHECK(seen == std::vector<long>{199, 399, 799, 1000, 1000, 1000});
  CHECK(b.currentBase() == milliseconds(1000));
  b.reset();
  CHECK(b.currentBase() == milliseconds(100));
}
