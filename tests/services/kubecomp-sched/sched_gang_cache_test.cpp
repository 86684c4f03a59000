// Gangs in SchedCache alone (docs/sched.md "Gangs"), objects handed in as the informers would,
// time passed in by the test: a gang partly bound or reserved before a restart has only its
// missing members planned (scheduler-plugins' coscheduling counts a group's assigned pods toward
// minMember), and a member that uses ResourceClaims is scheduled on its own, said so, and not
// counted (gang scheduling does not cover the DRA path yet).

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "libcore/base/rfc3339.hpp"
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

const auto t0 = kc::sched::Clock::time_point{} + 1h;

kc::sched::CacheOptions options() {
  kc::sched::CacheOptions o;
  o.reservationTimeout = 30s;
  o.bindingTimeout = 60s;
  o.initialBackoff = 1s;
  o.maxBackoff = 4s;
  o.wallClock = [] { return *kc::parseRfc3339("2026-01-01T00:00:05Z"); };
  return o;
}

json podGroup(const std::string& name, int minMember) {
  return {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
          {"kind", "PodGroup"},
          {"metadata", {{"name", name}, {"namespace", "team"}, {"resourceVersion", "1"}}},
          {"spec", {{"minMember", minMember}}}};
}

// A member of PodGroup `group` asking `gpus` kubecomp.io/gpu, created `second` s after 00:00.
json member(const std::string& name, const std::string& group, int gpus, int second) {
  const std::string created = "2026-01-01T00:00:0" + std::to_string(second) + "Z";
  return {{"metadata",
           {{"name", name},
            {"namespace", "team"},
            {"uid", "uid-" + name},
            {"resourceVersion", "1"},
            {"creationTimestamp", created},
            {"labels", {{"scheduling.x-k8s.io/pod-group", group}}},
            {"annotations", json::object()}}},
          {"spec",
           {{"schedulerName", "kubecomp-sched"},
            {"containers",
             {{{"name", "c"},
               {"resources",
                {{"requests", {{"cpu", "1"}, {"kubecomp.io/gpu", std::to_string(gpus)}}}}}}}}}}};
}

json boundTo(json pod, const std::string& nodeName) {
  pod["spec"]["nodeName"] = nodeName;
  pod["status"] = {{"phase", "Running"}};
  return pod;
}

// The reconfiguration request kubecomp-sched wrote on a reserved member before it stopped.
json withRequest(json pod, const std::string& dst, int demand) {
  pod["metadata"]["annotations"] = {{"kubecomp.io/dst-node", dst},
                                    {"kubecomp.io/demand", std::to_string(demand)},
                                    {"kubecomp.io/reserved-at", "2026-01-01T00:00:04Z"}};
  return pod;
}

std::vector<std::string> named(const std::vector<Action>& actions, Kind kind) {
  std::vector<std::string> out;
  for (const Action& a : actions) {
    if (a.kind == kind) {
      out.push_back(a.name);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE(
    "sched gang cache: after a restart a partly bound and reserved gang has only its missing "
    "member planned, and binds with the adopted reservation",
    "[sched]") {
  // PodGroup "train", minMember 3, one GPU each. Before the restart: "a" bound on n1, "b"
  // reserved on n2 (g2 moving there), "c" planned but not yet bound (its node needed no move,
  // so it had no request to find). n1 has a second GPU of its own for "c".
  SchedCache cache(options());
  cache.ingestNode(node("n1", 2));
  cache.ingestNode(node("n2", 0));
  cache.ingestPool(pool("p0", {"n1", "n2"}, {{"g1", "n1"}, {"g3", "n1"}, {"g2", ""}}));
  cache.ingestPodGroup(podGroup("train", 3));
  cache.ingestPod(boundTo(member("a", "train", 1, 1), "n1"), t0);
  cache.ingestPod(withRequest(member("b", "train", 1, 2), "n2", 1), t0);
  cache.ingestPod(member("c", "train", 1, 3), t0);
  cache.resetQueue(t0);
  REQUIRE(cache.reservation("team/b").has_value());  // adopted, not sent again

  const auto first = cache.next(t0, 10);
  CAPTURE(first.size());
  for (const Action& a : first) {
    CAPTURE(a.name, static_cast<int>(a.kind), a.message);
  }
  // Nothing of the adopted reservation is cancelled; "c" alone is planned, on n1's free GPU,
  // and waits there for "b" instead of binding alone.
  CHECK(named(first, Kind::kCancel).empty());
  CHECK(named(first, Kind::kBind).empty());
  REQUIRE(named(first, Kind::kQueued) == std::vector<std::string>{"c"});
  const auto c =
      std::find_if(first.begin(), first.end(), [](const Action& a) { return a.name == "c"; });
  CHECK(c->node == "n1");
  CHECK(cache.reservation("team/b").has_value());
  CHECK(cache.reservation("team/c").has_value());

  // g2 lands on n2 and its kubelet shows it: "b" and "c" bind together.
  cache.ingestPool(pool("p0", {"n1", "n2"}, {{"g1", "n1"}, {"g3", "n1"}, {"g2", "n2"}}));
  cache.ingestNode(node("n2", 1));
  const auto second = cache.next(t0 + 1s, 10);
  CHECK(named(second, Kind::kBind) == std::vector<std::string>{"b", "c"});
  CHECK(named(second, Kind::kCancel).empty());
}

TEST_CASE("sched gang cache: members bound earlier count toward minMember", "[sched]") {
  // minMember 3 with two members bound: the third is the gang's last, bound at once on its own
  // node; the gang is not planned again.
  SchedCache cache(options());
  cache.ingestNode(node("n1", 2));
  cache.ingestNode(node("n2", 1));
  cache.ingestPool(pool("p0", {"n1", "n2"}, {{"g1", "n1"}, {"g2", "n1"}, {"g3", "n2"}}));
  cache.ingestPodGroup(podGroup("train", 3));
  cache.ingestPod(boundTo(member("a", "train", 1, 1), "n1"), t0);
  cache.ingestPod(boundTo(member("b", "train", 1, 2), "n1"), t0);
  cache.ingestPod(member("c", "train", 1, 3), t0);
  cache.resetQueue(t0);
  const auto actions = cache.next(t0, 10);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == Kind::kBind);
  CHECK(actions[0].name == "c");
  CHECK(actions[0].node == "n2");
}

TEST_CASE(
    "sched gang cache: a gang member that uses ResourceClaims is not planned with the gang, "
    "and its allocation says that gang scheduling does not cover it",
    "[sched][dra]") {
  // PodGroup minMember 2: "plain" asks kubecomp.io/gpu, "claimed" a ResourceClaim. The gang
  // does not count "claimed": "plain" waits for a second member, and "claimed" is never bound
  // by the gang's decision (that would bind it with its claim unallocated).
  SchedCache cache(options());
  cache.ingestNode(node("n1", 0));
  json dra = pool("p0", {"n1"}, {{"g1", "n1"}, {"g2", "n1"}});
  dra["spec"]["allocationPath"] = "DRA";
  cache.ingestPool(dra);
  cache.ingestNode(node("n2", 2));
  cache.ingestPool(pool("p1", {"n2"}, {{"g3", "n2"}, {"g4", "n2"}}));
  cache.ingestDeviceClass(
      {{"metadata", {{"name", "gpu.kubecomp.io"}, {"resourceVersion", "1"}}},
       {"spec",
        {{"selectors",
          json::array({{{"cel", {{"expression", "device.driver == \"gpu.kubecomp.io\""}}}}})}}}});
  cache.ingestClaim(
      {{"metadata",
        {{"name", "claimed-gpus"},
         {"namespace", "team"},
         {"uid", "uid-claim"},
         {"generation", 1},
         {"resourceVersion", "1"}}},
       {"spec",
        {{"devices",
          {{"requests",
            json::array(
                {{{"name", "gpus"},
                  {"exactly", {{"deviceClassName", "gpu.kubecomp.io"}, {"count", 1}}}}})}}}}}});
  cache.ingestPodGroup(podGroup("train", 2));
  cache.resetQueue(t0);
  cache.ingestPod(member("plain", "train", 1, 1), t0);
  json claimed = member("claimed", "train", 0, 2);
  claimed["spec"]["resourceClaims"] =
      json::array({{{"name", "gpus"}, {"resourceClaimName", "claimed-gpus"}}});
  cache.ingestPod(claimed, t0);

  const auto actions = cache.next(t0, 10);
  for (const Action& a : actions) {
    CAPTURE(a.name, static_cast<int>(a.kind), a.message);
  }
  CHECK(named(actions, Kind::kBind).empty());
  const auto plain = std::find_if(actions.begin(), actions.end(),
                                  [](const Action& a) { return a.name == "plain"; });
  REQUIRE(plain != actions.end());
  CHECK(plain->kind == Kind::kUnschedulable);
  CHECK(plain->message ==
        "PodGroup team/train: 1 of its minMember 2 pods exist; waiting for the others before any "
        "is placed");
  const auto claimedAction = std::find_if(actions.begin(), actions.end(),
                                          [](const Action& a) { return a.name == "claimed"; });
  REQUIRE(claimedAction != actions.end());
  CHECK(claimedAction->kind == Kind::kAllocate);
  CHECK(claimedAction->node == "n1");
  CHECK(claimedAction->message ==
        "the pod names PodGroup team/train, but gang scheduling does not cover pods that use "
        "ResourceClaims yet: it is scheduled on its own, neither waiting for the other members "
        "nor counted toward the gang's size");
}
