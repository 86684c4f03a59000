// The queue policies in the cache alone (time passed in, wall clock injected): backfill (the
// daemon's queue so far) lets a later pod past an unfit head; fcfs holds every later pod behind
// a head that does not fit or waits for its GPU moves, and lets them go once it has started;
// easy-backfill lets a short pod through and holds a long one that would delay the head's
// reservation (node and start computed from the running pod's expected end and the move time);
// slack-backfill lets the long one through while the head still starts by its bound.

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "libcore/alloc/policy_registry.hpp"
#include "libcore/base/rfc3339.hpp"
#include "services/kubecomp-sched/sched_cache.hpp"
#include "tests/services/kubecomp-sched/cache_objects.hpp"

using namespace std::chrono_literals;
using kc::sched::Action;
using kc::sched::SchedCache;
using nlohmann::json;
using Kind = Action::Kind;
using kc::sched::test::node;

namespace {

const auto kWall0 = *kc::parseRfc3339("2026-01-01T00:00:00Z");

// A pod created at second `created` of 2026-01-01, with an expected run time (0: none), bound
// to `nodeName` and started at `startTime` when given.
json pod(const std::string& name, int gpus, int created, int runtime,
         const std::string& nodeName = "", const std::string& startTime = "") {
  json res = {{"cpu", "1"}};
  if (gpus > 0) {
    res["kubecomp.io/gpu"] = std::to_string(gpus);
  }
  json annotations = json::object();
  if (runtime > 0) {
    annotations["kubecomp.io/expected-runtime-seconds"] = std::to_string(runtime);
  }
  json p = {{"metadata",
             {{"name", name},
              {"namespace", "team"},
              {"uid", "uid-" + name},
              {"resourceVersion", "1"},
              {"creationTimestamp", kc::formatRfc3339(kWall0 + std::chrono::seconds(created))},
              {"annotations", annotations}}},
            {"spec",
             {{"schedulerName", "kubecomp-sched"},
              {"containers", {{{"name", "c"}, {"resources", {{"requests", res}}}}}}}}};
  if (!nodeName.empty()) {
    p["spec"]["nodeName"] = nodeName;
    p["status"] = {{"phase", "Running"}};
  }
  if (!startTime.empty()) {
    p["status"]["startTime"] = startTime;
  }
  return p;
}

// The wall clock a test sets (the cache reads it to place status.startTime and print times).
kc::sched::CacheOptions options(const std::string& queue,
                                const std::chrono::system_clock::time_point* wall) {
  kc::sched::CacheOptions o;
  o.reservationTimeout = 600s;
  o.initialBackoff = 1s;
  o.maxBackoff = 4s;
  o.queue = *kc::alloc::findQueuePolicy(queue);
  o.moveTime = 10s;
  o.defaultRuntime = 300s;
  o.wallClock = [wall] { return *wall; };
  return o;
}

// n1 with 4 GPUs run by x (started at kWall0, expected 100 s), n2 with 4 free, one pool.
void fourRunningFourFree(SchedCache& cache, kc::sched::Clock::time_point t0) {
  cache.ingestNode(node("n1", 4));
  cache.ingestNode(node("n2", 4));
  cache.ingestPool(kc::sched::test::pool("p0", {"n1", "n2"},
                                         {{"g1", "n1"},
                                          {"g2", "n1"},
                                          {"g3", "n1"},
                                          {"g4", "n1"},
                                          {"g5", "n2"},
                                          {"g6", "n2"},
                                          {"g7", "n2"},
                                          {"g8", "n2"}}));
  cache.ingestPod(pod("x", 4, 0, 100, "n1", "2026-01-01T00:00:00Z"), t0);
}

std::map<std::string, Action> byName(const std::vector<Action>& actions) {
  std::map<std::string, Action> out;
  for (const auto& a : actions) {
    out[a.name] = a;
  }
  return out;
}

}  // namespace

TEST_CASE("sched queue: backfill lets a later pod past an unfit head, fcfs holds it", "[sched]") {
  const auto policy = GENERATE(as<std::string>{}, "backfill", "fcfs");
  CAPTURE(policy);
  const auto t0 = kc::sched::Clock::time_point{} + 1h;
  auto wall = kWall0;
  SchedCache cache(options(policy, &wall));
  cache.ingestNode(node("n1", 2));
  cache.ingestPool(kc::sched::test::pool("p0", {"n1"}, {{"g1", "n1"}, {"g2", "n1"}}));
  cache.ingestPod(pod("x", 2, 0, 0, "n1"), t0);  // holds both GPUs
  cache.resetQueue(t0);
  cache.ingestPod(pod("big", 2, 1, 0), t0);
  cache.ingestPod(pod("small", 0, 2, 0), t0);
  auto a = byName(cache.next(t0, 10));
  REQUIRE(a.size() == 2);
  CHECK(a["big"].kind == Kind::kUnschedulable);
  if (policy == "backfill") {
    CHECK(a["small"].kind == Kind::kBind);
  } else {
    CHECK(a["small"].kind == Kind::kQueued);
    CHECK(a["small"].head == "team/big");
    CHECK(a["small"].message ==
          "waiting behind the queue head team/big (it does not fit now); queue policy fcfs starts "
          "pods in order");
    // Retried after its backoff: held again, the same message is not sent again.
    CHECK(cache.next(t0 + 4s, 10).size() == 1);  // big's FitError once more, nothing for small
    // x ends: big binds, and small right behind it.
    cache.removePod("team/x");
    auto after = byName(cache.next(t0 + 5s, 10));
    CHECK(after["big"].kind == Kind::kBind);
    CHECK(after["small"].kind == Kind::kBind);
    CHECK(cache.queueStats().held >= 2);
  }
}

TEST_CASE("sched queue: under fcfs a head waiting for its GPU moves blocks the pods behind it",
          "[sched]") {
  const auto t0 = kc::sched::Clock::time_point{} + 1h;
  auto wall = kWall0;
  SchedCache cache(options("fcfs", &wall));
  cache.ingestNode(node("n1", 0));
  cache.ingestPool(kc::sched::test::pool("p0", {"n1"}, {{"g1", ""}}));
  cache.resetQueue(t0);
  cache.ingestPod(pod("a", 1, 1, 0), t0);
  cache.ingestPod(pod("b", 0, 2, 0), t0);
  auto first = byName(cache.next(t0, 10));
  REQUIRE(first.size() == 2);
  CHECK(first["a"].kind == Kind::kReserve);
  CHECK(first["b"].kind == Kind::kQueued);
  CHECK(first["b"].message ==
        "waiting behind the queue head team/a (waiting for 1 kubecomp.io/gpu on node n1); queue "
        "policy fcfs "
        "starts pods in order");
  cache.reserveDone("team/a", true, t0);
  // A pod arriving while a still waits for its GPU waits too.
  cache.ingestPod(pod("c", 0, 3, 0), t0 + 500ms);
  auto third = byName(cache.next(t0 + 500ms, 10));
  REQUIRE(third.size() == 1);
  CHECK(third["c"].kind == Kind::kQueued);
  CHECK(third["c"].head == "team/a");
  // reconfig-mgr moves g1, kubelet shows it: a binds and b and c go in the same turn.
  cache.ingestPool(kc::sched::test::pool("p0", {"n1"}, {{"g1", "n1"}}));
  cache.ingestNode(node("n1", 1));
  auto second = byName(cache.next(t0 + 1s, 10));
  CHECK(second["a"].kind == Kind::kBind);
  CHECK(second["b"].kind == Kind::kBind);
  CHECK(second["c"].kind == Kind::kBind);
}

// One pool: n1 with 4 GPUs run by x (started at t0, expected 100 s), n2 with 4 free; moves of
// 10 s. The 8-GPU head is reserved on n1 (Eq. 1's tie by name) from t0 + 100 + 4 x 10 = 140 s.
TEST_CASE(
    "sched queue: easy-backfill lets a short pod through and holds one that would delay the head",
    "[sched]") {
  const auto t0 = kc::sched::Clock::time_point{} + 1h;
  auto wall = kWall0;
  SchedCache cache(options("easy-backfill", &wall));
  fourRunningFourFree(cache, t0);
  cache.resetQueue(t0);
  cache.ingestPod(pod("big", 8, 1, 50), t0);
  cache.ingestPod(pod("short", 1, 2, 30), t0);
  cache.ingestPod(pod("long", 1, 3, 200), t0);
  cache.ingestPod(pod("unsized", 1, 4, 0), t0);  // the default run time, 300 s: held too
  auto a = byName(cache.next(t0, 10));
  REQUIRE(a.size() == 4);
  CHECK(a["big"].kind == Kind::kUnschedulable);
  CHECK(a["short"].kind == Kind::kBind);
  CHECK(a["short"].node == "n2");
  CHECK(a["long"].kind == Kind::kQueued);
  CHECK(a["long"].head == "team/big");
  CHECK(a["long"].node == "n1");
  CHECK(a["long"].message ==
        "waiting behind the queue head team/big, reserved on node n1 from 2026-01-01T00:02:20Z: "
        "starting this "
        "pod now would delay it (queue policy easy-backfill)");
  CHECK(a["unsized"].kind == Kind::kQueued);
  const auto q = cache.queueStats();
  CHECK(q.head == "team/big");
  CHECK(q.headNode == "n1");
  REQUIRE(q.headStart.has_value());
  CHECK(*q.headStart == kWall0 + 140s);
  CHECK(q.backfilled == 1);
  CHECK(q.held == 2);
  // A CPU-only pod arriving while the head backs off: it goes, and the head (nothing was
  // released) is not decided again.
  wall = kWall0 + 500ms;
  cache.ingestPod(pod("tiny", 0, 5, 5), t0 + 500ms);
  auto tiny = cache.next(t0 + 500ms, 10);
  REQUIRE(tiny.size() == 1);
  CHECK(tiny[0].name == "tiny");
  CHECK(tiny[0].kind == Kind::kBind);
  // x runs past its expected end: it is treated as ending now, so the head's start moves with
  // the clock (now + 4 moves), and a pod that would end after now still waits.
  wall = kWall0 + 200s;
  cache.ingestPod(pod("soon", 1, 6, 10), t0);
  auto late = byName(cache.next(t0 + 200s, 10));
  CHECK(late["soon"].kind == Kind::kQueued);
  CHECK(late["soon"].message.find("from 2026-01-01T00:04:00Z") != std::string::npos);
  CHECK(*cache.queueStats().headStart == kWall0 + 240s);
}

TEST_CASE("sched queue: slack-backfill lets a pod delay the head up to its bound", "[sched]") {
  // As above; the head's bound is its first reservation plus its own run time: 140 + 50 = 190.
  // A 1-GPU pod of 150 s holds a GPU of n2 until 150: the head then starts at 190.
  auto [policy, kind] = GENERATE(table<std::string, Kind>(
      {{"easy-backfill", Kind::kQueued}, {"slack-backfill", Kind::kBind}}));
  CAPTURE(policy);
  const auto t0 = kc::sched::Clock::time_point{} + 1h;
  auto wall = kWall0;
  SchedCache cache(options(policy, &wall));
  fourRunningFourFree(cache, t0);
  cache.resetQueue(t0);
  cache.ingestPod(pod("big", 8, 1, 50), t0);
  cache.ingestPod(pod("mid", 1, 2, 150), t0);
  cache.ingestPod(pod("longer", 1, 3, 151), t0);
  auto a = byName(cache.next(t0, 10));
  CHECK(a["mid"].kind == kind);
  CHECK(a["longer"].kind == Kind::kQueued);
  if (policy == "slack-backfill") {
    CHECK(
        a["longer"].message ==
        "waiting behind the queue head team/big, reserved on node n1 from 2026-01-01T00:03:10Z: "
        "starting this "
        "pod now would delay it past its bound 2026-01-01T00:03:10Z (queue policy slack-backfill)");
  }
}

TEST_CASE("sched queue: a reservation's pod runs from when its GPUs land (the fabric clock)",
          "[sched]") {
  // n1 has no GPU, 2 unattached: "a" (1 GPU, 100 s) is reserved on n1 and waits for one move
  // (lands at 10 s, ends at 110 s). The 2-GPU head fits at 110, after one more move: 120 s. A
  // 1-GPU pod takes the other GPU after a's move (from 20 s): with 100 s it ends at 120 and the
  // head still starts at 120 (nothing left to move); with 101 s it would start at 121.
  auto [runtime, kind] = GENERATE(table<int, Kind>({{100, Kind::kReserve}, {101, Kind::kQueued}}));
  CAPTURE(runtime);
  const auto t0 = kc::sched::Clock::time_point{} + 1h;
  auto wall = kWall0;
  SchedCache cache(options("easy-backfill", &wall));
  cache.ingestNode(node("n1", 0));
  cache.ingestPool(kc::sched::test::pool("p0", {"n1"}, {{"g1", ""}, {"g2", ""}}));
  cache.resetQueue(t0);
  cache.ingestPod(pod("a", 1, 1, 100), t0);
  auto first = cache.next(t0, 10);
  REQUIRE(first.size() == 1);
  REQUIRE(first[0].kind == Kind::kReserve);
  cache.reserveDone("team/a", true, t0);
  cache.ingestPod(pod("head", 2, 2, 10), t0);
  cache.ingestPod(pod("c", 1, 3, runtime), t0);
  auto a = byName(cache.next(t0, 10));
  CHECK(a["head"].kind == Kind::kUnschedulable);
  CHECK(a["c"].kind == kind);
  CHECK(*cache.queueStats().headStart == kWall0 + 120s);
}

TEST_CASE("sched queue: slack-backfill's slack factor (--slack-factor) reaches the pass",
          "[sched]") {
  // As above: the head's first reservation is 140 s, its run time 50 s. Bound = 140 + factor x 50.
  // mid (150 s) moves the head's start to 190, longer (151 s) after mid to 191.
  //   factor 0: bound 140, both held; factor 1: bound 190, mid goes; factor 3: bound 290, both go.
  auto [factor, midKind, longerKind] =
      GENERATE(table<double, Kind, Kind>({{0.0, Kind::kQueued, Kind::kQueued},
                                          {1.0, Kind::kBind, Kind::kQueued},
                                          {3.0, Kind::kBind, Kind::kBind}}));
  CAPTURE(factor);
  const auto t0 = kc::sched::Clock::time_point{} + 1h;
  auto wall = kWall0;
  auto o = options("slack-backfill", &wall);
  o.slackFactor = factor;
  SchedCache cache(o);
  fourRunningFourFree(cache, t0);
  cache.resetQueue(t0);
  cache.ingestPod(pod("big", 8, 1, 50), t0);
  cache.ingestPod(pod("mid", 1, 2, 150), t0);
  cache.ingestPod(pod("longer", 1, 3, 151), t0);
  auto a = byName(cache.next(t0, 10));
  CHECK(a["big"].kind == Kind::kUnschedulable);
  CHECK(a["mid"].kind == midKind);
  CHECK(a["longer"].kind == longerKind);
}
