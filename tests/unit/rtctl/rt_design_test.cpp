// rtctl's analysis: the linear supply bound, the per-core test, the least runtime by hand, the
// partition, and the errors.

#include "tools/rtctl/rt_design.hpp"

#include <catch2/catch.hpp>
#include <cmath>

using kc::rtctl::Task;

TEST_CASE("lsbf: (Q/P)(t - 2(P - Q)), never negative", "[rt]") {
  CHECK(kc::rtctl::lsbf(10, 5, 10) == Approx(0.0));
  CHECK(kc::rtctl::lsbf(10, 5, 20) == Approx(5.0));
  CHECK(kc::rtctl::lsbf(10, 10, 7) == Approx(7.0));  // a dedicated core
  CHECK(kc::rtctl::lsbf(10, 2, 3) == 0.0);
}

TEST_CASE("least runtime of one task, by hand", "[rt]") {
  // C=1000, T=D=10000, P=5000: 2Q^2/5000 >= 1000 -> Q >= 1581.14 -> 1582.
  CHECK(kc::rtctl::minRuntime({Task{1000, 10000, 0}}, 5000) == 1582u);
  CHECK(kc::rtctl::coreSchedulable({Task{1000, 10000, 0}}, 5000, 1582));
  CHECK_FALSE(kc::rtctl::coreSchedulable({Task{1000, 10000, 0}}, 5000, 1581));
  // A full core at P: lsbf(t) = t, so any C <= D passes; C > D never does.
  CHECK(kc::rtctl::minRuntime({Task{9000, 10000, 0}}, 1000).has_value());
}

TEST_CASE("higher-priority interference counts at the scheduling points", "[rt]") {
  // On a dedicated core (Q = P): RM {(1,4),(2,6),(3,12)} U = 0.83 passes (response of the
  // last: 10 <= 12, classic example); adding (1,12) more breaks it.
  const std::vector<Task> ok{{1, 4, 0}, {2, 6, 0}, {3, 12, 0}};
  CHECK(kc::rtctl::coreSchedulable(ok, 1, 1));
  std::vector<Task> over = ok;
  over.push_back({3, 12, 0});
  CHECK_FALSE(kc::rtctl::coreSchedulable(over, 1, 1));
}

TEST_CASE("design: cores, runtime and pinning, errors that say what is wrong", "[rt]") {
  // Two tasks of utilization 0.6 cannot share a core: two cores.
  auto d = kc::rtctl::design({{6000, 10000, 0}, {6000, 10000, 0}}, 1000);
  REQUIRE(d.ok());
  CHECK(d->cpus == 2);
  CHECK(d->coreOfTask[0] != d->coreOfTask[1]);
  CHECK(kc::rtctl::coreSchedulable({{6000, 10000, 0}}, 1000, d->runtimeUs));
  CHECK_FALSE(kc::rtctl::coreSchedulable({{6000, 10000, 0}}, 1000, d->runtimeUs - 1));
  // Small tasks share one core.
  d = kc::rtctl::design({{500, 10000, 0}, {1000, 20000, 0}, {200, 5000, 0}}, 2500);
  REQUIRE(d.ok());
  CHECK(d->cpus == 1);
  CHECK(static_cast<double>(d->runtimeUs) / 2500.0 >= 0.05 + 0.05 + 0.04);  // at least U
  // Errors.
  CHECK(kc::rtctl::design({}, 1000).error().code == "invalid");
  CHECK(kc::rtctl::design({{0, 10, 0}}, 5).error().code == "invalid");
  CHECK(kc::rtctl::design({{5, 10, 20}}, 5).error().code == "invalid");
  CHECK(kc::rtctl::design({{1, 10, 0}}, 0).error().code == "invalid");
  CHECK(kc::rtctl::design({{1, 10, 0}}, 5, 1.5).error().code == "invalid");
  // C = D on a bound of 0.95 cannot pass: no partition.
  CHECK(kc::rtctl::design({{10000, 10000, 0}}, 1000).error().code == "insufficient");
  CHECK(kc::rtctl::parseTask("100,1000").value().t == 1000);
  CHECK(kc::rtctl::parseTask("100,1000,900").value().d == 900);
  CHECK(kc::rtctl::parseTask("100").error().code == "invalid");
  CHECK(kc::rtctl::parseTask("1,-2").error().code == "invalid");
}

TEST_CASE("design: the runtime passes every core and is the least that does", "[rt]") {
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    std::vector<Task> tasks;
    for (std::uint64_t i = 0; i < 1 + seed % 5; ++i) {
      const std::uint64_t t = 2000 * (1 + (seed * 7 + i * 3) % 10);
      tasks.push_back({1 + (t * ((seed + i) % 4 + 1)) / 20, t, 0});
    }
    auto d = kc::rtctl::design(tasks, 1000);
    REQUIRE(d.ok());
    for (std::uint32_t k = 0; k < d->cpus; ++k) {
      std::vector<Task> core;
      for (std::size_t i = 0; i < tasks.size(); ++i) {
        if (d->coreOfTask[i] == k) {
          core.push_back(tasks[i]);
        }
      }
      CHECK(kc::rtctl::coreSchedulable(core, 1000, d->runtimeUs));
      CHECK(kc::rtctl::coreSchedulable(core, 1000, d->coreRuntimeUs[k]));
      CHECK_FALSE(kc::rtctl::coreSchedulable(core, 1000, d->coreRuntimeUs[k] - 1));
    }
  }
}
