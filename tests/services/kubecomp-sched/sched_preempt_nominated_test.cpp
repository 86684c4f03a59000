// The nominated node while a preemption's victims terminate (issue 27), in the cache alone,
// objects handed in as the informers would, time passed in. kube-scheduler (framework's
// RunFilterPluginsWithNominatedPods, addGENominatedPods) filters a node for pod Q as if every pod
// nominated there of priority >= Q's already ran on it, and tries a nominated pod's node first:
//   - a lower-priority pod arriving while the victims terminate does not take the room they
//     free (the GPUs included);
//   - the preemptor binds on its nominated node once they are gone, even where another node
//     would be chosen otherwise;
//   - a pod of higher priority than the preemptor ignores the nomination.
// The FitError's preemption text is kube-scheduler's: "preemption: 0/N nodes are available:
// N No preemption victims found for incoming pod." also when nobody of lower priority runs.

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

json pod(const std::string& name, int priority, const std::string& created, int gpus) {
  return {{"metadata",
           {{"name", name},
            {"namespace", "team"},
            {"uid", "uid-" + name},
            {"resourceVersion", "1"},
            {"creationTimestamp", created}}},
          {"spec",
           {{"schedulerName", "kubecomp-sched"},
            {"priority", priority},
            {"containers",
             {{{"name", "c"},
               {"resources",
                {{"requests", {{"cpu", "1"}, {"kubecomp.io/gpu", std::to_string(gpus)}}}}}}}}}}};
}

// A pod another scheduler bound to `nodeName`, running.
json running(const std::string& name, int priority, const std::string& nodeName, int gpus) {
  json p = pod(name, priority, "2026-01-01T00:00:00Z", gpus);
  p["spec"]["schedulerName"] = "default-scheduler";
  p["spec"]["nodeName"] = nodeName;
  p["status"] = {{"phase", "Running"}, {"startTime", "2026-01-01T00:00:00Z"}};
  return p;
}

// The same pod, evicted: terminating.
json terminating(json p) {
  p["metadata"]["deletionTimestamp"] = "2026-01-01T00:10:00Z";
  p["metadata"]["resourceVersion"] = "2";
  return p;
}

kc::sched::CacheOptions options() {
  kc::sched::CacheOptions o;
  o.reservationTimeout = 30s;
  o.initialBackoff = 1s;
  o.maxBackoff = 4s;
  o.wallClock = [] {
    return std::chrono::system_clock::time_point{} + std::chrono::hours(24 * 365 * 56);
  };
  return o;
}

const Action* find(const std::vector<Action>& actions, const std::string& name) {
  for (const Action& a : actions) {
    if (a.name == name) {
      return &a;
    }
  }
  return nullptr;
}

const auto t0 = kc::sched::Clock::time_point{} + 1h;

// n1 (4 GPUs) runs v1 and v2 (priority 10, 2 GPUs each); n2 (2 GPUs) runs `other` (priority
// 1000). `high` (priority 100, 4 GPUs) preempts v1 and v2 on n1; v1 is gone, v2 terminates.
void preemptOnN1(SchedCache& cache) {
  cache.ingestNode(node("n1", 4));
  cache.ingestNode(node("n2", 2));
  cache.ingestPool(
      pool("p0", {"n1", "n2"},
           {{"g1", "n1"}, {"g2", "n1"}, {"g3", "n1"}, {"g4", "n1"}, {"g5", "n2"}, {"g6", "n2"}}));
  cache.ingestPod(running("v1", 10, "n1", 2), t0);
  cache.ingestPod(running("v2", 10, "n1", 2), t0);
  cache.ingestPod(running("other", 1000, "n2", 2), t0);
  cache.resetQueue(t0);
  cache.ingestPod(pod("high", 100, "2026-01-01T00:00:05Z", 4), t0);
  auto actions = cache.next(t0, 10);
  REQUIRE(actions.size() == 1);
  REQUIRE(actions[0].kind == Kind::kPreempt);
  REQUIRE(actions[0].node == "n1");
  REQUIRE(actions[0].victims.size() == 2);
  cache.preemptDone("team/high", true);
  REQUIRE(cache.nominatedNode("team/high") == "n1");
  cache.ingestPod(terminating(running("v1", 10, "n1", 2)), t0 + 1s);
  cache.ingestPod(terminating(running("v2", 10, "n1", 2)), t0 + 1s);
  cache.removePod("team/v1");  // v1 is gone: two GPUs of n1 are free
}

}  // namespace

TEST_CASE("sched nominated: a lower-priority pod does not take the room the victims free",
          "[sched]") {
  SchedCache cache(options());
  preemptOnN1(cache);
  cache.ingestPod(pod("low", 50, "2026-01-01T00:00:09Z", 2), t0 + 2s);
  auto actions = cache.next(t0 + 2s, 10);
  const Action* high = find(actions, "high");
  REQUIRE(high != nullptr);
  CHECK(high->kind == Kind::kUnschedulable);  // v2 still terminates: n1 is not free yet
  CHECK(high->message ==
        "0/2 nodes are available: 2 node(s) had too few free kubecomp.io/gpu in their GPU pool. "
        "preemption: not eligible due to a terminating pod on the nominated node.");
  const Action* low = find(actions, "low");
  REQUIRE(low != nullptr);
  // n1's two free GPUs are high's: n1 counts high there (less the GPUs v2 still holds).
  CHECK(low->kind == Kind::kUnschedulable);
  CHECK(low->message ==
        "0/2 nodes are available: 2 node(s) had too few free kubecomp.io/gpu in their GPU pool. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.");
  CHECK(cache.nominatedNode("team/high") == "n1");

  // v2 is gone: high binds on n1; low still finds no room.
  cache.removePod("team/v2");
  actions = cache.next(t0 + 3s, 10);
  high = find(actions, "high");
  REQUIRE(high != nullptr);
  CHECK(high->kind == Kind::kBind);
  CHECK(high->node == "n1");
  CHECK_FALSE(cache.nominatedNode("team/high"));  // placed: the nomination is done
  low = find(actions, "low");
  REQUIRE(low != nullptr);
  CHECK(low->kind == Kind::kUnschedulable);
}

TEST_CASE("sched nominated: a pod of higher priority than the preemptor ignores it", "[sched]") {
  SchedCache cache(options());
  preemptOnN1(cache);
  cache.ingestPod(pod("top", 200, "2026-01-01T00:00:09Z", 2), t0 + 2s);
  auto actions = cache.next(t0 + 2s, 10);
  const Action* top = find(actions, "top");
  REQUIRE(top != nullptr);
  CHECK(top->kind == Kind::kBind);
  CHECK(top->node == "n1");
}

TEST_CASE("sched nominated: the preemptor tries its nominated node first", "[sched]") {
  SchedCache cache(options());
  preemptOnN1(cache);
  cache.removePod("team/v2");
  // n0 comes with four free GPUs: placed afresh, high would go there (Eq. 1's tie: the first
  // node); kube-scheduler evaluates the nominated node first.
  cache.ingestNode(node("n0", 4));
  cache.ingestPool(pool("p1", {"n0"}, {{"h1", "n0"}, {"h2", "n0"}, {"h3", "n0"}, {"h4", "n0"}}));
  auto actions = cache.next(t0 + 3s, 10);
  const Action* high = find(actions, "high");
  REQUIRE(high != nullptr);
  CHECK(high->kind == Kind::kBind);
  CHECK(high->node == "n1");
}

// kube-scheduler's Preempt clears the pod's nominatedNodeName when it finds no candidate: a
// nominee that no longer fits anywhere, with nobody to evict, holds its node no more.
TEST_CASE("sched nominated: a nominee that finds no victims loses its nomination", "[sched]") {
  SchedCache cache(options());
  preemptOnN1(cache);
  cache.removePod("team/v2");  // n1's four GPUs are free
  // top (200) comes first and takes two of them; high (100, 4 GPUs) then fits nowhere and has
  // nobody of lower priority to evict; low (50, 2 GPUs) takes n1's other two.
  cache.ingestPod(pod("top", 200, "2026-01-01T00:00:09Z", 2), t0 + 2s);
  cache.ingestPod(pod("low", 50, "2026-01-01T00:00:09Z", 2), t0 + 2s);
  auto actions = cache.next(t0 + 2s, 10);
  const Action* top = find(actions, "top");
  REQUIRE(top != nullptr);
  CHECK(top->kind == Kind::kBind);
  CHECK(top->node == "n1");
  const Action* high = find(actions, "high");
  REQUIRE(high != nullptr);
  CHECK(high->kind == Kind::kUnschedulable);
  CHECK(high->message.find("preemption: 0/2 nodes are available: 2 No preemption victims found") !=
        std::string::npos);
  CHECK_FALSE(cache.nominatedNode("team/high"));
  const Action* low = find(actions, "low");
  REQUIRE(low != nullptr);
  CHECK(low->kind == Kind::kBind);
  CHECK(low->node == "n1");
}

// The GPUs a preemption's victims free are owed to its preemptor while they still run (not yet
// seen terminating): a second preemptor of no higher priority, deciding in the same pass, counts
// the nominated pod on the node (kube-scheduler's victim search with the nominated pods) and
// finds that evicting the same victim gives it nothing.
TEST_CASE("sched nominated: a second preemptor does not count the first one's GPUs as freed",
          "[sched]") {
  SchedCache cache(options());
  cache.ingestNode(node("n1", 1));
  cache.ingestNode(node("n2", 2));
  cache.ingestPool(pool("p0", {"n1", "n2"}, {{"g1", "n1"}, {"g2", "n2"}, {"g3", "n2"}}));
  cache.ingestPod(running("r", 0, "n1", 1), t0);
  cache.ingestPod(running("big", 1000, "n2", 2), t0);
  cache.resetQueue(t0);
  cache.ingestPod(pod("a", 5, "2026-01-01T00:00:05Z", 1), t0);
  cache.ingestPod(pod("b", 5, "2026-01-01T00:00:06Z", 1), t0);
  auto actions = cache.next(t0, 10);
  const Action* a = find(actions, "a");
  REQUIRE(a != nullptr);
  CHECK(a->kind == Kind::kPreempt);
  CHECK(a->node == "n1");
  REQUIRE(a->victims.size() == 1);
  CHECK(a->victims[0].name == "r");
  const Action* b = find(actions, "b");
  REQUIRE(b != nullptr);
  CHECK(b->kind == Kind::kUnschedulable);
  CHECK(b->victims.empty());
  CHECK(b->message.find("preemption: 0/2 nodes are available: 1 Insufficient kubecomp.io/gpu, "
                        "1 No preemption victims found") != std::string::npos);
}
