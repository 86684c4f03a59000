#include <catch2/catch.hpp>

#include "libcore/kube/backoff.hpp"
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
