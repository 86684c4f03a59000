// SchedCache on its own: objects handed in as the informers would, time passed in by the test
// (no API server, no threads, no waiting). FCFS order, the backoff schedule, the GPUs promised
// to a reservation, the bind once allocatable shows them, the timeout to the millisecond, and
// the adoption of a request found on a pod (its timeout continuing from kubecomp.io/reserved-at).

#include "services/kubecomp-sched/sched_cache.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "libcore/base/rfc3339.hpp"
#include "tests/services/kubecomp-sched/cache_objects.hpp"

using namespace std::chrono_literals;
using kc::sched::Action;
using kc::sched::SchedCache;
using nlohmann::json;
using Kind = Action::Kind;
using kc::sched::test::node;
using kc::sched::test::pool;

namespace {

json pod(const std::string& name, int gpus, const std::string& created,
         const json& annotations = json::object()) {
  json res = {{"cpu", "1"}};
  if (gpus > 0) {
    res["kubecomp.io/gpu"] = std::to_string(gpus);
  }
  return {{"metadata",
           {{"name", name},
            {"namespace", "team"},
            {"uid", "uid-" + name},
            {"resourceVersion", "1"},
            {"creationTimestamp", created},
            {"annotations", annotations}}},
          {"spec",
           {{"schedulerName", "kubecomp-sched"},
            {"containers", {{{"name", "c"}, {"resources", {{"requests", res}}}}}}}}};
}

kc::sched::CacheOptions options() {
  kc::sched::CacheOptions o;
  o.reservationTimeout = 30s;
  o.initialBackoff = 1s;
  o.maxBackoff = 4s;
  return o;
}

}  // namespace

TEST_CASE("sched cache: pods are decided in creation order, whatever order they arrive in",
          "[sched]") {
  SchedCache cache(options());
  const auto t0 = kc::sched::Clock::time_point{} + 1h;
  cache.ingestNode(node("n1", 8));
  cache.ingestPool(pool("p0", {"n1"}, {{"g1", "n1"}, {"g2", "n1"}, {"g3", "n1"}}));
  cache.resetQueue(t0);
  cache.ingestPod(pod("late", 1, "2026-01-01T00:00:03Z"), t0);
  cache.ingestPod(pod("first", 1, "2026-01-01T00:00:01Z"), t0);
  cache.ingestPod(pod("second", 1, "2026-01-01T00:00:02Z"), t0);
  auto actions = cache.next(t0, 10);
  REQUIRE(actions.size() == 3);
  CHECK(actions[0].name == "first");
  CHECK(actions[1].name == "second");
  CHECK(actions[2].name == "late");
  for (const auto& a : actions) {
    CHECK(a.kind == Kind::kBind);
    CHECK(a.node == "n1");
  }
  // Three GPUs were there and all three are now assumed taken.
  CHECK(cache.freeGpus("n1") == 0);
}

TEST_CASE("sched cache: an unschedulable pod backs off 1 s, 2 s, 4 s, 4 s", "[sched]") {
  SchedCache cache(options());
  const auto t0 = kc::sched::Clock::time_point{} + 1h;
  cache.ingestNode(node("n1", 0));
  cache.ingestPool(pool("p0", {"n1"}, {}));
  cache.resetQueue(t0);
  cache.ingestPod(pod("w", 1, "2026-01-01T00:00:01Z"), t0);
  auto at = t0;
  auto attempt = [&](kc::sched::Clock::time_point t) {
    auto a = cache.next(t, 10);
    return a.size() == 1 && a[0].kind == Kind::kUnschedulable;
  };
  REQUIRE(attempt(at));
  CHECK(cache.next(at, 10).empty());
  for (auto delay : {1000ms, 2000ms, 4000ms, 4000ms}) {
    CAPTURE(delay.count());
    CHECK(cache.nextWake(at) == at + std::min<std::chrono::milliseconds>(delay, 1s));
    CHECK(cache.next(at + delay - 1ms, 10).empty());
    at += delay;
    REQUIRE(attempt(at));
  }
}

TEST_CASE(
    "sched cache: a reservation holds its GPUs, binds when allocatable shows them, oldest first",
    "[sched]") {
  SchedCache cache(options());
  const auto t0 = kc::sched::Clock::time_point{} + 1h;
  cache.ingestNode(node("n1", 1));
  cache.ingestNode(node("n2", 0));
  cache.ingestPool(pool("p0", {"n1", "n2"}, {{"g1", "n1"}, {"g2", ""}, {"g3", ""}}));
  cache.resetQueue(t0);
  cache.ingestPod(pod("a", 2, "2026-01-01T00:00:01Z"), t0);
  auto first = cache.next(t0, 10);
  REQUIRE(first.size() == 1);
  CHECK(first[0].kind == Kind::kReserve);
  CHECK(first[0].node == "n1");
  CHECK(first[0].deficit == 1);
  cache.reserveDone("team/a", true, t0);
  // One unattached GPU is promised to "a": a 2-GPU pod cannot be served by the pool any more.
  cache.ingestPod(pod("b", 2, "2026-01-01T00:00:02Z"), t0);
  auto second = cache.next(t0, 10);
  REQUIRE(second.size() == 1);
  CHECK(second[0].kind == Kind::kUnschedulable);
  CHECK(second[0].message ==
        "0/2 nodes are available: 2 node(s) had too few free kubecomp.io/gpu in their GPU pool. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.");
  // A 1-GPU pod fits with one move (g3), on n2 or n1: n1's own GPU is held by "a".
  cache.ingestPod(pod("c", 1, "2026-01-01T00:00:03Z"), t0);
  auto third = cache.next(t0, 10);
  REQUIRE(third.size() == 1);
  CHECK(third[0].kind == Kind::kReserve);
  CHECK(third[0].node == "n1");  // least-demand tie, broken by name
  cache.reserveDone("team/c", true, t0);
  // reconfig-mgr moves g2 to n1; kubelet shows 2: "a" (older) binds, "c" still waits.
  cache.ingestPool(pool("p0", {"n1", "n2"}, {{"g1", "n1"}, {"g2", "n1"}, {"g3", ""}}));
  // (A change to the pool retries the backing-off "b" at once: it is still unschedulable.)
  auto binds = [](const std::vector<Action>& actions) {
    std::vector<std::string> out;
    for (const auto& a : actions) {
      if (a.kind == Kind::kBind) {
        out.push_back(a.name);
      }
    }
    return out;
  };
  CHECK(binds(cache.next(t0 + 1ms, 10)).empty());  // the inventory alone is not enough
  cache.ingestNode(node("n1", 2));
  CHECK(binds(cache.next(t0 + 2ms, 10)) == std::vector<std::string>{"a"});
  CHECK(cache.reservation("team/c").has_value());
}

TEST_CASE("sched cache: a reservation is cancelled at its deadline, not a millisecond before",
          "[sched]") {
  SchedCache cache(options());
  const auto t0 = kc::sched::Clock::time_point{} + 1h;
  cache.ingestNode(node("n1", 0));
  cache.ingestPool(pool("p0", {"n1"}, {{"g1", ""}}));
  cache.resetQueue(t0);
  cache.ingestPod(pod("w", 1, "2026-01-01T00:00:01Z"), t0);
  REQUIRE(cache.next(t0, 10).size() == 1);
  cache.reserveDone("team/w", true, t0);
  CHECK(cache.nextWake(t0 + 29s) == t0 + 30s);
  CHECK(cache.next(t0 + 30s - 1ms, 10).empty());
  auto cancel = cache.next(t0 + 30s, 10);
  REQUIRE(cancel.size() == 1);
  CHECK(cancel[0].kind == Kind::kCancel);
  CHECK(
      cancel[0].message ==
      "node n1 did not show the 1 kubecomp.io/gpu the pod needs within 30s of the reconfiguration "
      "request; trying again");
  CHECK_FALSE(cache.reservation("team/w").has_value());
}

TEST_CASE("sched cache: a request found on a pod is adopted, not sent again, a bad one is refused",
          "[sched]") {
  SchedCache cache(options());
  const auto t0 = kc::sched::Clock::time_point{} + 1h;
  cache.ingestNode(node("n1", 0));
  cache.ingestPool(pool("p0", {"n1"}, {{"g1", ""}, {"g2", ""}}));
  cache.ingestPod(pod("w", 1, "2026-01-01T00:00:01Z",
                      {{"kubecomp.io/dst-node", "n1"}, {"kubecomp.io/demand", "1"}}),
                  t0);
  cache.ingestPod(pod("bad", 1, "2026-01-01T00:00:02Z",
                      {{"kubecomp.io/dst-node", "n1"}, {"kubecomp.io/demand", "-1"}}),
                  t0);
  cache.resetQueue(t0);
  auto r = cache.reservation("team/w");
  REQUIRE(r.has_value());
  CHECK(r->node == "n1");
  CHECK(r->deficit == 1);
  CHECK(r->requested);
  auto actions = cache.next(t0, 10);
  REQUIRE(actions.size() == 1);  // nothing for "w"
  CHECK(actions[0].name == "bad");
  CHECK(actions[0].kind == Kind::kInvalid);
  CHECK(actions[0].clearAnnotations);
  CHECK(actions[0].message ==
        "annotation kubecomp.io/demand '-1' is not a whole number of GPUs (0-65535); the "
        "reconfiguration "
        "request is removed and the pod scheduled again");
}

TEST_CASE(
    "sched cache: a request carries its time, an adopted one times out at reserved-at + the "
    "timeout",
    "[sched]") {
  using std::chrono::system_clock;
  // The wall clock as the test sets it: 2026-01-01T00:10:00Z at steady t0, moving with it.
  const auto t0 = kc::sched::Clock::time_point{} + 1h;
  const auto w0 = *kc::parseRfc3339("2026-01-01T00:10:00Z");
  kc::sched::Clock::time_point steadyNow = t0;
  auto o = options();
  o.wallClock = [&] {
    return w0 + std::chrono::duration_cast<system_clock::duration>(steadyNow - t0);
  };

  {
    // A new request is stamped with the wall clock, whole milliseconds.
    SchedCache cache(o);
    cache.ingestNode(node("n1", 0));
    cache.ingestPool(pool("p0", {"n1"}, {{"g1", ""}}));
    cache.resetQueue(t0);
    cache.ingestPod(pod("w", 1, "2026-01-01T00:00:01Z"), t0);
    steadyNow = t0 + 1234567us;
    auto actions = cache.next(steadyNow, 10);
    REQUIRE(actions.size() == 1);
    CHECK(actions[0].kind == Kind::kReserve);
    CHECK(kc::formatRfc3339(actions[0].reservedAt, kc::Rfc3339Precision::kMicros) ==
          "2026-01-01T00:10:01.234000Z");
    CHECK(cache.reservation("team/w")->deadline == steadyNow + 30s);
  }

  struct Case {
    const char* reservedAt;          // nullptr: no annotation (an older scheduler's request)
    std::chrono::milliseconds left;  // from adoption (t0 + 5 s) to the deadline
  };
  for (const Case& k :
       {Case{"2026-01-01T00:09:52.250Z", 17'250ms},       // made 12.750 s before adoption
        Case{"2026-01-01T01:09:52.250+01:00", 17'250ms},  // the same time, another offset
        Case{nullptr, 30'000ms},                          // no time: a fresh timeout
        Case{"2026-01-01T00:10:09Z", 34'000ms},           // 4 s ahead: within the skew, kept
        Case{"2026-01-01T00:10:11Z", 30'000ms},           // 6 s ahead: counts as now
        Case{"2026-01-01T00:09:35Z", 0ms}}) {             // 30 s ago: due at once
    CAPTURE(k.reservedAt ? k.reservedAt : "none");
    steadyNow = t0;
    SchedCache cache(o);
    cache.ingestNode(node("n1", 0));
    cache.ingestPool(pool("p0", {"n1"}, {{"g1", ""}}));
    json ann = {{"kubecomp.io/dst-node", "n1"}, {"kubecomp.io/demand", "1"}};
    if (k.reservedAt) {
      ann["kubecomp.io/reserved-at"] = k.reservedAt;
    }
    cache.ingestPod(pod("w", 1, "2026-01-01T00:00:01Z", ann), t0);
    // Adopted when this replica starts leading, 5 s of wall clock later (a failover).
    steadyNow = t0 + 5s;
    cache.resetQueue(steadyNow);
    auto r = cache.reservation("team/w");
    REQUIRE(r.has_value());
    const auto deadline = steadyNow + k.left;
    CHECK(r->deadline == deadline);
    if (k.left > 0ms) {
      CHECK(cache.next(deadline - 1ms, 10).empty());
    }
    steadyNow = deadline;
    auto cancel = cache.next(deadline, 10);
    REQUIRE(cancel.size() == 1);
    CHECK(cancel[0].kind == Kind::kCancel);
    CHECK_FALSE(cache.reservation("team/w").has_value());
  }
}

TEST_CASE(
    "sched cache: a malformed or stray kubecomp.io/reserved-at is refused like a malformed request",
    "[sched]") {
  const auto t0 = kc::sched::Clock::time_point{} + 1h;
  for (
      const auto& [value, message] : std::vector<std::pair<std::string, std::string>>{
          {"yesterday", "annotation kubecomp.io/reserved-at 'yesterday' is not an RFC 3339 time ("},
          {"2026-02-30T00:00:00Z",
           "annotation kubecomp.io/reserved-at '2026-02-30T00:00:00Z' is not an RFC 3339 time ("},
          {"2026-01-01 00:00:00",
           "annotation kubecomp.io/reserved-at '2026-01-01 00:00:00' is not an RFC 3339 time ("}}) {
    CAPTURE(value);
    SchedCache cache(options());
    cache.ingestNode(node("n1", 0));
    cache.ingestPool(pool("p0", {"n1"}, {{"g1", ""}}));
    cache.ingestPod(pod("w", 1, "2026-01-01T00:00:01Z",
                        {{"kubecomp.io/dst-node", "n1"},
                         {"kubecomp.io/demand", "1"},
                         {"kubecomp.io/reserved-at", value}}),
                    t0);
    cache.resetQueue(t0);
    CHECK_FALSE(cache.reservation("team/w").has_value());
    auto actions = cache.next(t0, 10);
    REQUIRE(actions.size() == 1);
    CHECK(actions[0].kind == Kind::kInvalid);
    CHECK(actions[0].clearAnnotations);
    CHECK_THAT(actions[0].message, Catch::StartsWith(message));
    CHECK_THAT(
        actions[0].message,
        Catch::EndsWith("); the reconfiguration request is removed and the pod scheduled again"));
    // Once the annotations are gone (the scheduler's patch came back), the pod is decided afresh.
    cache.ingestPod(pod("w", 1, "2026-01-01T00:00:01Z"), t0);
    auto again = cache.next(t0 + 1s, 10);
    REQUIRE(again.size() == 1);
    CHECK(again[0].kind == Kind::kReserve);
  }
  // A reserved-at left alone (no dst-node, no demand) is no request: refused and removed too.
  SchedCache cache(options());
  cache.ingestNode(node("n1", 0));
  cache.ingestPool(pool("p0", {"n1"}, {{"g1", ""}}));
  cache.ingestPod(
      pod("w", 1, "2026-01-01T00:00:01Z", {{"kubecomp.io/reserved-at", "2026-01-01T00:00:00Z"}}),
      t0);
  cache.resetQueue(t0);
  auto actions = cache.next(t0, 10);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == Kind::kInvalid);
  CHECK(actions[0].clearAnnotations);
  CHECK(actions[0].message ==
        "annotation kubecomp.io/dst-node '' is not a node name; the reconfiguration request is "
        "removed and the "
        "pod scheduled again");
}
