// The shared queue pass (libcore/alloc/queue_pass.hpp) through a test host that places with
// alloc::placeNow: hand-computed verdicts on tiny clusters, the slack bound kept across passes,
// a head that never fits passed over, the landing correction, and a seeded property test over
// random workloads (easy and slack): the head's reservation never moves later because of a
// backfilled pod, the head starts by its bound, and nobody starves.
#include "libcore/alloc/queue_pass.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "tests/unit/alloc/cluster_builder.hpp"
#include "tests/unit/alloc/placement_helpers.hpp"

using namespace kc::alloc;
using kc::alloc::test::makeCluster;
using kc::alloc::test::pod;
using kc::alloc::test::rules;
using kc::alloc::test::runningOn;
using V = QueueVerdict;

namespace {

// A host over a pool model: the queue is a vector, a start is placeNow, running pods end at
// start + duration.
class TestHost : public QueueHost {
 public:
  TestHost(ClusterState s, const PlacementRules& r, std::int64_t now)
      : state(std::move(s)),
        fabric{std::vector<std::int64_t>(state.poolCount(), 0)},
        rules_(r),
        now_(now) {}

  std::size_t waiting() const override { return queue.size(); }
  QueuedPod queued(std::size_t i) const override { return queue[i]; }
  QueueView view() const override { return QueueView{&state, running, fabric, landing}; }
  SplitMix64 placementRng() const override { return rng; }
  kc::Result<bool> start(std::size_t i, bool tested) override {
    auto placed = placeNow(state, fabric, queue[i].pod, {}, rules_, &rng, now_);
    if (!placed) {
      if (placed.error().code != kc::errc::kUnschedulable) {
        return placed.error();
      }
      if (tested) {
        return kc::makeError(kc::errc::kInternal, "a tested pod did not fit");
      }
      return false;
    }
    started.emplace_back(queue[i].id, placed->start);
    running.push_back(
        RunningPod{placed->node, queue[i].pod, placed->gpus, placed->start + queue[i].duration});
    return true;
  }
  // Drops the started pods from the queue (what a caller does after a pass).
  void dropStarted(const QueuePassResult& r) {
    std::vector<QueuedPod> left;
    for (std::size_t i = 0; i < queue.size(); ++i) {
      if (r.verdicts[i] != V::kStarted) {
        left.push_back(queue[i]);
      }
    }
    queue = std::move(left);
  }
  void setNow(std::int64_t now) { now_ = now; }

  ClusterState state;
  FabricClock fabric;
  std::vector<RunningPod> running;
  std::vector<QueuedPod> queue;
  std::vector<std::int64_t> landing;
  std::vector<std::pair<std::uint64_t, std::int64_t>> started;  // id, start
  SplitMix64 rng{1};

 private:
  PlacementRules rules_;
  std::int64_t now_;
};

QueuedPod queued(std::uint64_t id, std::uint32_t gpus, std::int64_t duration,
                 std::uint64_t cpu = 1000) {
  return QueuedPod{id, pod(gpus, cpu), nullptr, 0, duration};
}

// One pool: n1 with 4 GPUs in use until 100, n2 with 4 free. An 8-GPU head is reserved at
// 140 (fits at 100, 4 moves x 10 s; n1 wins Eq. 1's tie by name).
TestHost fourBusyFourFree(std::int64_t moveTime = 10) {
  auto c = makeCluster().pool("p").node("n1", 0, 4).node("n2", 4, 0).build();
  TestHost h(c, rules(moveTime), 0);
  h.running.push_back(runningOn(h.state, "n1", {"g0000", "g0001", "g0002", "g0003"}, 100));
  return h;
}

}  // namespace

TEST_CASE("queue pass: FCFS while the head fits, then who may jump the reserved head",
          "[alloc][queue]") {
  auto h = fourBusyFourFree();
  h.queue = {queued(0, 1, 5000),  // fits now: started FCFS, holds one of n2's GPUs long
             queued(1, 7, 300),   // the head: at 100, n1 (4 free) + 3 moved from n2: 130
             queued(2, 1, 30),    // ends at 30, before the fit time: started
             queued(3, 1, 200),   // would still hold a GPU at 100: delays the head
             queued(4, 4, 10),    // only 2 free now (n2: 4 - 1 - 1): does not fit
             queued(5, 5, 10)};   // at least as large as pod 4: not tested
  QueuePass pass(QueueDiscipline::EasyBackfill);
  auto r = pass.run(h, rules(10), 0);
  REQUIRE(r.ok());
  CHECK(r->verdicts == std::vector<V>{V::kStarted, V::kHead, V::kStarted, V::kDelaysHead, V::kUnfit,
                                      V::kDominated});
  REQUIRE(r->head == 1u);
  REQUIRE(r->reservation.has_value());
  CHECK(r->reservation->start == 130);
  CHECK(r->reservation->node == *h.state.findNode("n1"));
  CHECK(r->bound == 130);
  CHECK(r->reservedStarts == std::vector<std::int64_t>{130});
  CHECK(r->tested == 3);  // pods 2, 3, 4
  CHECK(r->backfilled == 1);
}

TEST_CASE("queue pass: slack lets a pod delay the head up to a bound fixed when it became head",
          "[alloc][queue]") {
  // Head 8 GPUs reserved at 140 with a run time of 50: slack bound 190. A 1-GPU pod of 150
  // holds a GPU of n2 until 150: the head then fits at 150, start 190, within the bound.
  auto [discipline, verdict] = GENERATE(table<QueueDiscipline, V>({
      {QueueDiscipline::EasyBackfill, V::kDelaysHead},
      {QueueDiscipline::SlackBackfill, V::kStarted},
  }));
  CAPTURE(static_cast<int>(discipline));
  auto h = fourBusyFourFree();
  h.queue = {queued(0, 8, 50), queued(1, 1, 150)};
  QueuePass pass(discipline);
  auto r = pass.run(h, rules(10), 0);
  REQUIRE(r.ok());
  CHECK(r->verdicts == std::vector<V>{V::kHead, verdict});
  if (discipline == QueueDiscipline::SlackBackfill) {
    CHECK(r->bound == 190);
    CHECK(r->reservation->start == 190);
    CHECK(r->reservedStarts == std::vector<std::int64_t>{140, 190});
    // The next pass: the head is the same, so the bound stays 190 (not 190 + 50): a pod that
    // would push the head to 191 is refused, one that keeps 190 is not.
    h.dropStarted(*r);
    h.queue.push_back(queued(2, 1, 151));
    h.queue.push_back(queued(3, 1, 150));
    auto again = pass.run(h, rules(10), 0);
    REQUIRE(again.ok());
    CHECK(again->verdicts == std::vector<V>{V::kHead, V::kDelaysHead, V::kStarted});
    CHECK(again->bound == 190);
  }
}

TEST_CASE("queue pass: the slack factor scales the bound a backfilled pod may delay the head to",
          "[alloc][queue]") {
  // Head 8 GPUs reserved at 140 (run time 50). A 1-GPU pod holding one of n2's GPUs until
  // `end` makes the head fit at `end`, start end + 40 (4 moves of 10). Bound: 140 + f x 50.
  auto [factor, end, verdict, bound] = GENERATE(table<double, std::int64_t, V, std::int64_t>({
      {1.0, 150, V::kStarted, 190},
      {1.0, 151, V::kDelaysHead, 190},
      {3.0, 250, V::kStarted, 290},
      {3.0, 251, V::kDelaysHead, 290},
      {0.5, 125, V::kStarted, 165},
      {0.5, 126, V::kDelaysHead, 165},
      {0.0, 100, V::kStarted, 140},
      {0.0, 101, V::kDelaysHead, 140},
  }));
  CAPTURE(factor, end);
  auto h = fourBusyFourFree();
  h.queue = {queued(0, 8, 50), queued(1, 1, end)};
  QueuePass pass(QueueDiscipline::SlackBackfill, factor);
  auto r = pass.run(h, rules(10), 0);
  REQUIRE(r.ok());
  CHECK(r->verdicts == std::vector<V>{V::kHead, verdict});
  CHECK(r->bound == bound);
  CHECK(r->reservation->start <= bound);
}

TEST_CASE("queue pass: slack factor values", "[alloc][queue]") {
  CHECK(slackFor(300, kDefaultSlackFactor) == 300);
  CHECK(slackFor(300, 3.0) == 900);
  CHECK(slackFor(300, 0.0) == 0);
  CHECK(slackFor(3, 0.5) == 2);  // 1.5 rounds to the nearest even: 2
  CHECK(slackFor(0, 3.0) == 0);
  CHECK(slackFor(INT64_MAX / 2, 1000.0) == INT64_MAX);  // saturates
  CHECK(checkSlackFactor(0.0).ok());
  CHECK(checkSlackFactor(kMaxSlackFactor).ok());
  for (double bad : {-0.5, 1000.5, std::nan(""), std::numeric_limits<double>::infinity()}) {
    CAPTURE(bad);
    auto s = checkSlackFactor(bad);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().code == "invalid");
    // The pass refuses it before starting anything.
    auto h = fourBusyFourFree();
    h.queue = {queued(0, 1, 10), queued(1, 8, 10), queued(2, 1, 10)};
    QueuePass pass(QueueDiscipline::SlackBackfill, bad);
    auto r = pass.run(h, rules(10), 0);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == "invalid");
    CHECK(h.started.empty());
  }
  // Only slack-backfill reads a slack factor: easy-backfill with one is a caller's mistake.
  auto h = fourBusyFourFree();
  h.queue = {queued(0, 1, 10)};
  QueuePass easy(QueueDiscipline::EasyBackfill, 3.0);
  auto r = easy.run(h, rules(10), 0);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == "invalid");
  CHECK(h.started.empty());
}

// backfill_test's moves case: n1 2 free + 2 in use until 100, n2 2 free, 3 unattached, moves
// of 50. The 8-GPU head is reserved at 300 (4 moves after 100). A 3-GPU pod of 40 (on n1, one
// GPU moved there) brings it forward to 250 (3 moves after 100). From then on 250 is what a
// later pod may not delay: a 2-GPU pod of 120 on n2 would push it to 270 (< 300, > 250).
TEST_CASE("queue pass: an earlier reservation after a backfill is the new bound (easy)",
          "[alloc][queue]") {
  auto c = makeCluster().pool("p").node("n1", 2, 2).node("n2", 2, 0).unattached(3).build();
  TestHost h(c, rules(50), 0);
  h.running.push_back(runningOn(h.state, "n1", {"g0000", "g0001"}, 100));
  h.queue = {queued(0, 8, 10), queued(1, 3, 40), queued(2, 2, 120)};
  QueuePass pass(QueueDiscipline::EasyBackfill);
  auto r = pass.run(h, rules(50), 0);
  REQUIRE(r.ok());
  CHECK(r->verdicts == std::vector<V>{V::kHead, V::kStarted, V::kDelaysHead});
  CHECK(r->reservedStarts == std::vector<std::int64_t>{300, 250});
  CHECK(r->bound == 250);
}

TEST_CASE("queue pass: a head that never fits is passed over, the next one is reserved",
          "[alloc][queue]") {
  auto h = fourBusyFourFree();
  h.queue = {queued(0, 9, 10), queued(1, 8, 10), queued(2, 1, 30)};
  QueuePass pass(QueueDiscipline::EasyBackfill);
  auto r = pass.run(h, rules(10), 0);
  REQUIRE(r.ok());
  CHECK(r->verdicts == std::vector<V>{V::kNeverFits, V::kHead, V::kStarted});
  CHECK(r->head == 1u);
  CHECK(r->reservation->start == 140);
}

TEST_CASE("queue pass: a lone head gets no reservation, other disciplines are refused",
          "[alloc][queue]") {
  auto h = fourBusyFourFree();
  h.queue = {queued(0, 1, 10), queued(1, 8, 10)};
  QueuePass pass(QueueDiscipline::EasyBackfill);
  auto r = pass.run(h, rules(10), 0);
  REQUIRE(r.ok());
  CHECK(r->verdicts == std::vector<V>{V::kStarted, V::kAlone});
  CHECK_FALSE(r->head.has_value());
  CHECK_FALSE(r->reservation.has_value());
  QueuePass fcfs(QueueDiscipline::Fcfs);
  auto bad = fcfs.run(h, rules(10), 0);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == "invalid");
}

TEST_CASE("queue pass: a move in flight delays the head's pool and lengthens every candidate",
          "[alloc][queue]") {
  // A background move lands at 200 in the head's pool: the reservation (140) becomes 200, and a
  // candidate of 30 is tested as 30 + 200 = 230 long: it would hold a GPU past the fit time.
  auto [landing, verdict, start] = GENERATE(table<std::int64_t, V, std::int64_t>({
      {0, V::kStarted, 140},
      {200, V::kDelaysHead, 200},
  }));
  CAPTURE(landing);
  auto h = fourBusyFourFree();
  h.landing = {landing};
  h.queue = {queued(0, 8, 50), queued(1, 1, 30)};
  QueuePass pass(QueueDiscipline::EasyBackfill);
  auto r = pass.run(h, rules(10), 0);
  REQUIRE(r.ok());
  CHECK(r->verdicts[1] == verdict);
  CHECK(r->reservedStarts.front() == start);
}

// The property, through the pass as both callers run it: over random workloads on random small
// composable clusters, the head's reservation never moves later (within a pass and from one
// pass to the next), the head starts no later than its bound (easy: its last reservation;
// slack: its first reservation plus its run time times the slack factor: 1, 0 and 3 here), and
// every pod starts.
TEST_CASE("queue pass property: the head's reservation never moves later, nobody starves",
          "[alloc][queue]") {
  const auto [discipline, factor] = GENERATE(table<QueueDiscipline, double>({
      {QueueDiscipline::EasyBackfill, kDefaultSlackFactor},
      {QueueDiscipline::SlackBackfill, kDefaultSlackFactor},
      {QueueDiscipline::SlackBackfill, 0.0},
      {QueueDiscipline::SlackBackfill, 3.0},
  }));
  const std::uint64_t seed = GENERATE(range(1, 41));
  CAPTURE(static_cast<int>(discipline), factor, seed);
  std::mt19937_64 gen(seed);
  auto uni = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen);
  };
  std::uint32_t minPoolGpus = 0;
  ClusterState cluster = kc::alloc::test::randomQueueCluster(gen, minPoolGpus);
  const PlacementRules r = rules(uni(0, 30));
  TestHost host(std::move(cluster), r, 0);
  host.rng = SplitMix64(seed);
  struct TestJob {
    std::int64_t arrival;
    QueuedPod q;
  };
  std::vector<TestJob> jobs(static_cast<std::size_t>(uni(5, 25)));
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    jobs[i] = TestJob{uni(0, 300),
                      QueuedPod{i,
                                PodRequest{static_cast<std::uint64_t>(uni(1, 16)) * 1000, 1024,
                                           static_cast<std::uint32_t>(uni(0, minPoolGpus))},
                                nullptr, 0, uni(1, 200)}};
  }
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const TestJob& a, const TestJob& b) { return a.arrival < b.arrival; });
  QueuePass pass(discipline, factor);
  std::map<std::uint64_t, std::int64_t> duration;  // per id
  for (const auto& j : jobs) {
    duration[j.q.id] = j.q.duration;
  }
  std::map<std::uint64_t, std::int64_t> latest;  // per head id: its latest reservation
  std::map<std::uint64_t, std::int64_t> bound;   // per head id: the bound it must start by
  std::size_t nextArrival = 0;
  std::int64_t now = 0;
  int backfilled = 0;
  for (int step = 0; step < 10'000; ++step) {
    for (auto it = host.running.begin(); it != host.running.end();) {
      if (it->end <= now) {
        for (GpuIndex g : it->gpus) {
          REQUIRE(host.state.releaseGpu(g).ok());
        }
        REQUIRE(host.state.release(it->node, it->pod.cpuMilli, it->pod.memoryMiB).ok());
        it = host.running.erase(it);
      } else {
        ++it;
      }
    }
    while (nextArrival < jobs.size() && jobs[nextArrival].arrival <= now) {
      host.queue.push_back(jobs[nextArrival++].q);
    }
    host.setNow(now);
    const std::size_t startedBefore = host.started.size();
    auto res = pass.run(host, r, now);
    REQUIRE(res.ok());
    for (std::size_t k = startedBefore; k < host.started.size(); ++k) {
      const auto [id, start] = host.started[k];
      if (auto it = bound.find(id); it != bound.end()) {
        CAPTURE(id, now);
        CHECK(start <= it->second);  // the head starts by its bound
      }
    }
    if (res->head) {
      const std::uint64_t id = host.queue[*res->head].id;
      CAPTURE(id, now);
      for (std::int64_t s : res->reservedStarts) {
        if (discipline == QueueDiscipline::EasyBackfill) {
          if (auto it = latest.find(id); it != latest.end()) {
            CHECK(s <= it->second);  // renewed, in this pass or the next: never later
          }
          latest[id] = s;
        } else if (auto it = bound.find(id); it != bound.end()) {
          CHECK(s <= it->second);  // slack: never past the bound fixed when it became head
        }
      }
      CHECK(res->reservation->start <= res->bound);
      if (auto it = bound.find(id); it != bound.end()) {
        CHECK(res->bound <= it->second);  // from pass to pass: never later
      } else if (discipline == QueueDiscipline::SlackBackfill) {
        // Fixed when it became the head: its first reservation plus factor x its run time.
        CHECK(res->bound == res->reservedStarts.front() + slackFor(duration[id], factor));
      }
      bound[id] = res->bound;
      backfilled += static_cast<int>(res->backfilled);
    }
    host.dropStarted(*res);
    if (host.queue.empty() && nextArrival == jobs.size()) {
      break;
    }
    std::int64_t next = INT64_MAX;
    for (const auto& rp : host.running) {
      next = std::min(next, rp.end);
    }
    if (nextArrival < jobs.size()) {
      next = std::min(next, jobs[nextArrival].arrival);
    }
    REQUIRE(next != INT64_MAX);
    now = std::max(now + 1, next);
  }
  std::map<std::uint64_t, std::int64_t> startOf(host.started.begin(), host.started.end());
  for (const auto& j : jobs) {
    CAPTURE(j.q.id);
    REQUIRE(startOf.contains(j.q.id));
    CHECK(startOf[j.q.id] >= j.arrival);
  }
  (void)backfilled;
}
