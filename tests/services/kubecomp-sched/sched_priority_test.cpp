// Priority in the cache alone (issue 27), objects handed in as the informers would, time passed
// in: the queue order (higher spec.priority first, FCFS within a priority, then namespace and
// name, libcore/alloc/pod_order.hpp), and the preemption decision: a pod that fits nowhere even
// with GPUs moved evicts lower-priority pods; one that a GPU move serves evicts nobody.

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "services/kubecomp-sched/sched_cache.hpp"
#include "tests/services/kubecomp-sched/cache_objects.hpp"

using namespace std::chrono_literals;
using kc::sched::Action;
using kc::sched::SchedCache;
using nlohmann::json;
using Kind = Action::Kind;
using kc::sched::test::node;
using kc::sched::test::pool;

namespace {

json pod(const std::string& name, int priority, const std::string& created, int gpus = 1,
         const std::string& cpu = "1") {
  json res = {{"cpu", cpu}};
  if (gpus > 0) {
    res["kubecomp.io/gpu"] = std::to_string(gpus);
  }
  return {{"metadata",
           {{"name", name},
            {"namespace", "team"},
            {"uid", "uid-" + name},
            {"resourceVersion", "1"},
            {"creationTimestamp", created}}},
          {"spec",
           {{"schedulerName", "kubecomp-sched"},
            {"priority", priority},
            {"containers", {{{"name", "c"}, {"resources", {{"requests", res}}}}}}}}};
}

// A pod another scheduler bound to `nodeName`, running.
json running(const std::string& name, int priority, const std::string& nodeName, int gpus,
             const std::string& cpu = "1") {
  json p = pod(name, priority, "2026-01-01T00:00:00Z", gpus, cpu);
  p["spec"]["schedulerName"] = "default-scheduler";
  p["spec"]["nodeName"] = nodeName;
  p["status"] = {{"phase", "Running"}, {"startTime", "2026-01-01T00:00:00Z"}};
  return p;
}

kc::sched::CacheOptions options() {
  kc::sched::CacheOptions o;
  o.reservationTimeout = 30s;
  o.initialBackoff = 1s;
  o.maxBackoff = 4s;
  o.wallClock = [] {
    return std::chrono::system_clock::time_point{} +
           std::chrono::hours(24 * 365 * 57);  // December 2026: after every startTime here
  };
  return o;
}

}  // namespace

TEST_CASE("sched priority: higher priority first, FCFS within a priority, then the name",
          "[sched]") {
  SchedCache cache(options());
  const auto t0 = kc::sched::Clock::time_point{} + 1h;
  cache.ingestNode(node("n1", 8));
  cache.ingestPool(pool("p0", {"n1"}, {{"g1", "n1"}, {"g2", "n1"}, {"g3", "n1"}, {"g4", "n1"}}));
  cache.resetQueue(t0);
  cache.ingestPod(pod("old-low", 0, "2026-01-01T00:00:01Z"), t0);
  cache.ingestPod(pod("new-high", 100, "2026-01-01T00:00:05Z"), t0);
  cache.ingestPod(pod("b-high", 100, "2026-01-01T00:00:03Z"), t0);
  cache.ingestPod(pod("a-high", 100, "2026-01-01T00:00:03Z"), t0);  // same second: by name
  auto actions = cache.next(t0, 10);
  REQUIRE(actions.size() == 4);
  CHECK(actions[0].name == "a-high");
  CHECK(actions[1].name == "b-high");
  CHECK(actions[2].name == "new-high");
  CHECK(actions[3].name == "old-low");
}

TEST_CASE("sched priority: a pod that fits nowhere preempts the lowest-priority pod", "[sched]") {
  SchedCache cache(options());
  const auto t0 = kc::sched::Clock::time_point{} + 1h;
  cache.ingestNode(node("n1", 2));
  cache.ingestNode(node("n2", 2));
  cache.ingestPool(
      pool("p0", {"n1", "n2"}, {{"g1", "n1"}, {"g2", "n1"}, {"g3", "n2"}, {"g4", "n2"}}));
  cache.ingestPod(running("mid", 50, "n1", 2), t0);
  cache.ingestPod(running("low", 10, "n2", 2), t0);
  cache.resetQueue(t0);
  cache.ingestPod(pod("urgent", 100, "2026-01-01T00:00:05Z", 2), t0);
  auto actions = cache.next(t0, 10);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == Kind::kPreempt);
  CHECK(actions[0].node == "n2");
  REQUIRE(actions[0].victims.size() == 1);
  CHECK(actions[0].victims[0].key == "team/low");
  CHECK(actions[0].victims[0].uid == "uid-low");
  CHECK(actions[0].message ==
        "0/2 nodes are available: 2 node(s) had too few free kubecomp.io/gpu in their GPU pool.");
  CHECK(cache.nominatedNode("team/urgent") == "n2");
  // The eviction is refused (a budget's 429): the nomination goes.
  cache.preemptDone("team/urgent", false);
  CHECK_FALSE(cache.nominatedNode("team/urgent"));
}

TEST_CASE("sched priority: a GPU move is preferred to evicting anyone", "[sched]") {
  SchedCache cache(options());
  const auto t0 = kc::sched::Clock::time_point{} + 1h;
  cache.ingestNode(node("n1", 2));
  cache.ingestNode(node("n2", 0));
  // Two free GPUs sit unattached in the pool: they can be moved to n2.
  cache.ingestPool(pool("p0", {"n1", "n2"}, {{"g1", "n1"}, {"g2", "n1"}, {"g3", ""}, {"g4", ""}}));
  cache.ingestPod(running("low", 10, "n1", 2), t0);
  cache.resetQueue(t0);
  cache.ingestPod(pod("urgent", 100, "2026-01-01T00:00:05Z", 2), t0);
  auto actions = cache.next(t0, 10);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == Kind::kReserve);  // the two unattached GPUs are moved
  CHECK(actions[0].deficit == 2);
  CHECK(actions[0].victims.empty());
}

TEST_CASE("sched priority: preemptionPolicy Never and equal priorities preempt nobody", "[sched]") {
  SchedCache cache(options());
  const auto t0 = kc::sched::Clock::time_point{} + 1h;
  cache.ingestNode(node("n1", 2));
  cache.ingestPool(pool("p0", {"n1"}, {{"g1", "n1"}, {"g2", "n1"}}));
  cache.ingestPod(running("low", 10, "n1", 2), t0);
  cache.resetQueue(t0);
  json never = pod("polite", 100, "2026-01-01T00:00:05Z", 2);
  never["spec"]["preemptionPolicy"] = "Never";
  cache.ingestPod(never, t0);
  cache.ingestPod(pod("peer", 10, "2026-01-01T00:00:06Z", 2), t0);
  auto actions = cache.next(t0, 10);
  REQUIRE(actions.size() == 2);
  CHECK(actions[0].name == "polite");
  CHECK(actions[0].kind == Kind::kUnschedulable);
  CHECK(actions[0].message ==
        "0/1 nodes are available: 1 node(s) had too few free kubecomp.io/gpu in their GPU pool. "
        "preemption: not eligible due to preemptionPolicy=Never.");
  CHECK(actions[1].name == "peer");
  CHECK(actions[1].kind == Kind::kUnschedulable);
  // Nobody of lower priority than `peer` runs: kube-scheduler's search finds no victims, and
  // says so.
  CHECK(actions[1].message ==
        "0/1 nodes are available: 1 node(s) had too few free kubecomp.io/gpu in their GPU pool. "
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.");
}
