#include "tools/kubecomp-sim/workload.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <string>

using namespace kc::sim;

TEST_CASE("Table II mixes give exact per-type counts") {
  using Counts = std::array<std::uint64_t, kJobTypeCount>;
  auto [name, jobs, expected] = GENERATE(table<std::string, std::uint64_t, Counts>({
      {"w1", 50, Counts{25, 25, 0, 0, 0}},
      {"w2", 50, Counts{25, 0, 25, 0, 0}},
      {"w3", 50, Counts{13, 13, 12, 12, 0}},
      {"w4", 50, Counts{12, 12, 12, 12, 2}},
      {"fig13", 50, Counts{10, 10, 10, 10, 10}},
      {"ae:70", 40, Counts{28, 0, 0, 0, 12}},
      {"custom:1,0,0,0,3", 8, Counts{2, 0, 0, 0, 6}},
  }));
  CAPTURE(name, jobs);
  auto mix = mixByName(name);
  REQUIRE(mix.ok());
  CHECK(mixCounts(*mix, jobs) == expected);
}

TEST_CASE("unknown or malformed mixes are rejected") {
  auto name = GENERATE(as<std::string>{}, "w5", "ae:150", "ae:x", "custom:1,2", "custom:0,0,0,0,0",
                       "custom:1,2,3,4,-1");
  CAPTURE(name);
  CHECK_FALSE(mixByName(name).ok());
}

TEST_CASE("generated workload: Table I jobs, Poisson integer gaps, seeded and reproducible") {
  WorkloadSpec spec;
  spec.mix = *mixByName("fig13");
  spec.jobs = 2000;
  spec.lambda = 60;
  spec.seed = 7;
  auto a = generateWorkload(spec);
  auto b = generateWorkload(spec);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(a->jobs.size() == 2000);
  CHECK(a->jobs.front().arrival == 0);
  std::map<char, int> perType;
  double gapSum = 0;
  for (std::size_t i = 0; i < a->jobs.size(); ++i) {
    const Job& j = a->jobs[i];
    CHECK(j.id == b->jobs[i].id);
    CHECK(j.arrival == b->jobs[i].arrival);
    CHECK(j.duration == kPaperJobDuration);
    CHECK(j.arrival % kMsPerSecond == 0);  // integer seconds
    const char type = j.id[0];
    ++perType[type];
    const JobType& jt = kPaperJobTypes[static_cast<std::size_t>(type - 'A')];
    CHECK(j.gpus == jt.gpus);
    CHECK(j.cpuMilli == jt.cpuMilli);
    if (i > 0) {
      CHECK(j.arrival >= a->jobs[i - 1].arrival);
      gapSum += static_cast<double>(j.arrival - a->jobs[i - 1].arrival) / kMsPerSecond;
    }
  }
  for (char t = 'A'; t <= 'E'; ++t) {
    CHECK(perType[t] == 400);
  }
  // Mean gap of 1999 Poisson(60) draws: standard error ~0.17, so +-1.5 is a > 8 sigma band.
  CHECK(gapSum / 1999 == Approx(60).margin(1.5));

  spec.seed = 8;
  auto c = generateWorkload(spec);
  REQUIRE(c.ok());
  CHECK(c->jobs.back().arrival != a->jobs.back().arrival);
}

TEST_CASE("workload parameters are validated") {
  WorkloadSpec spec;
  spec.mix = *mixByName("w1");
  spec.lambda = 0;
  CHECK_FALSE(generateWorkload(spec).ok());
  // Beyond 1e9 a Poisson draw could leave int64 (1e300 used to be accepted).
  spec.lambda = 1e300;
  auto huge = generateWorkload(spec);
  REQUIRE_FALSE(huge.ok());
  CHECK_THAT(huge.error().message, Catch::Contains("lambda must be in (0, 1e9]"));
  spec.lambda = std::nan("");
  CHECK_FALSE(generateWorkload(spec).ok());
  spec.lambda = 30;
  spec.intervalUnit = 0;
  CHECK_FALSE(generateWorkload(spec).ok());
  spec.intervalUnit = 1000;
  spec.jobs = 0;
  CHECK_FALSE(generateWorkload(spec).ok());
  spec.jobs = kMaxJobs + 1;  // refused before anything is allocated
  auto many = generateWorkload(spec);
  REQUIRE_FALSE(many.ok());
  CHECK_THAT(many.error().message, Catch::Contains("1..10000000 (the limit)"));
  // Arrivals past 10^12 s: 1e9 x 1e9 ms units = 1e15 s per gap.
  spec.jobs = 2;
  spec.lambda = 1e9;
  spec.intervalUnit = 1'000'000'000;
  auto far = generateWorkload(spec);
  REQUIRE_FALSE(far.ok());
  CHECK_THAT(far.error().message,
             Catch::Contains("would arrive after the limit of 1000000000000 s"));
}
