// SchedCache on the DRA path (docs/dra.md "kubecomp-sched"), objects handed in as the informers
// would, time passed in by the test: which pods are ours, the devices chosen (the node's own
// first, then the pool's with binding conditions), the wait for the conditions, a failure or a
// timeout clearing the allocation, two pods never sharing a device, the adoption of an
// allocation made before a restart, one path per pool, a finished pod's devices waited for
// rather than a move, and an allocation waiting for attaches remade when the node frees devices.

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "libcore/api/dra_claim.hpp"
#include "libcore/api/dra_slice.hpp"
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

kc::sched::CacheOptions options() {
  kc::sched::CacheOptions o;
  o.reservationTimeout = 30s;
  o.bindingTimeout = 60s;
  o.initialBackoff = 1s;
  o.maxBackoff = 4s;
  // The wall clock of the objects below (allocationTimestamp 00:00:02).
  o.wallClock = [] { return *kc::parseRfc3339("2026-01-01T00:00:05Z"); };
  return o;
}

json draPool(const std::string& name, const std::vector<std::string>& nodes,
             const std::vector<std::pair<std::string, std::string>>& gpus) {
  json p = pool(name, nodes, gpus);
  p["spec"]["allocationPath"] = "DRA";
  return p;
}

json deviceClass(const std::string& name, const std::string& expr) {
  return {{"metadata", {{"name", name}, {"resourceVersion", "1"}}},
          {"spec", {{"selectors", json::array({{{"cel", {{"expression", expr}}}}})}}}};
}

json claim(const std::string& name, int count, const std::string& cls = "gpu.kubecomp.io",
           const std::string& selector = "") {
  json exactly = {{"deviceClassName", cls}, {"count", count}};
  if (!selector.empty()) {
    exactly["selectors"] = json::array({{{"cel", {{"expression", selector}}}}});
  }
  return {{"metadata",
           {{"name", name},
            {"namespace", "team"},
            {"uid", "uid-claim-" + name},
            {"generation", 1},
            {"resourceVersion", "1"}}},
          {"spec",
           {{"devices", {{"requests", json::array({{{"name", "gpus"}, {"exactly", exactly}}})}}}}}};
}

json claimPod(const std::string& name, const std::vector<std::string>& claims,
              const std::string& created = "2026-01-01T00:00:01Z") {
  json refs = json::array();
  for (const auto& c : claims) {
    refs.push_back({{"name", c}, {"resourceClaimName", c}});
  }
  return {{"metadata",
           {{"name", name},
            {"namespace", "team"},
            {"uid", "uid-" + name},
            {"resourceVersion", "1"},
            {"creationTimestamp", created}}},
          {"spec",
           {{"schedulerName", "kubecomp-sched"},
            {"resourceClaims", refs},
            {"containers", {{{"name", "c"}, {"resources", {{"requests", {{"cpu", "1"}}}}}}}}}}};
}

// The claim as the watch shows it after kubecomp-sched's write of `a`.
json allocated(const json& c, const Action& a, int rv = 2) {
  kc::api::ClaimAllocation al;
  for (const auto& p : a.picks) {
    al.results.push_back(p.device);
  }
  al.nodeName = a.node;
  al.allocationTimestamp = "2026-01-01T00:00:02Z";
  json out = c;
  out["metadata"]["resourceVersion"] = std::to_string(rv);
  out["status"] = {
      {"allocation", kc::api::toJson(al)},
      {"reservedFor", json::array({{{"resource", "pods"}, {"name", a.name}, {"uid", a.uid}}})}};
  return out;
}

// `c` with condition `type`=True on every device that has binding conditions.
json withCondition(json c, std::string_view type, int rv) {
  auto parsed = kc::api::parseClaim(c);
  REQUIRE(parsed);
  std::vector<kc::api::ClaimDeviceStatus> devices;
  for (const auto& d : parsed->allocation->results) {
    if (d.bindingConditions.empty()) {
      continue;
    }
    kc::api::ClaimCondition cond{std::string(type),     "True", "Attached", "", 1,
                                 "2026-01-01T00:00:03Z"};
    devices = kc::api::withDeviceCondition(devices, d, cond);
  }
  json list = json::array();
  for (const auto& d : devices) {
    list.push_back(kc::api::toJson(d));
  }
  c["status"]["devices"] = list;
  c["metadata"]["resourceVersion"] = std::to_string(rv);
  return c;
}

// n1: two GPUs attached, n2: none; two unattached.
void cluster(SchedCache& cache) {
  cache.ingestNode(node("n1", 0));
  cache.ingestNode(node("n2", 0));
  cache.ingestPool(
      draPool("p0", {"n1", "n2"}, {{"g1", "n1"}, {"g2", "n1"}, {"g3", ""}, {"g4", ""}}));
  cache.ingestDeviceClass(deviceClass("gpu.kubecomp.io", "device.driver == \"gpu.kubecomp.io\""));
}

const auto t0 = kc::sched::Clock::time_point{} + 1h;

// Pod `name` with its claim of `gpus` allocated on n1's own GPUs and running there since t0+1s;
// returns the pod as the watch showed it last (set its phase and resourceVersion to move on).
json runOnN1(SchedCache& cache, const std::string& name, int gpus) {
  const json c = claim(name + "-gpus", gpus);
  cache.ingestClaim(c);
  cache.ingestPod(claimPod(name, {name + "-gpus"}), t0);
  const Action a = cache.next(t0, 10).at(0);
  REQUIRE(a.kind == Kind::kAllocate);
  REQUIRE(a.bindNow);
  cache.ingestClaim(allocated(c, a));
  json pod = claimPod(name, {name + "-gpus"});
  pod["metadata"]["resourceVersion"] = "3";
  pod["spec"]["nodeName"] = "n1";
  pod["status"] = {{"phase", "Running"}};
  cache.ingestPod(pod, t0 + 1s);
  return pod;
}

}  // namespace

TEST_CASE("sched DRA: the node's own devices first, the pool's with binding conditions, then bind",
          "[sched][dra]") {
  SchedCache cache(options());
  cluster(cache);
  cache.resetQueue(t0);
  const json c = claim("train-gpus", 3);
  cache.ingestClaim(c);
  cache.ingestPod(claimPod("train", {"train-gpus"}), t0);
  auto actions = cache.next(t0, 10);
  REQUIRE(actions.size() == 1);
  const Action a = actions[0];
  REQUIRE(a.kind == Kind::kAllocate);
  CHECK(a.node == "n1");  // Eq. 1: one move instead of three
  CHECK_FALSE(a.bindNow);
  CHECK(a.deficit == 1);
  REQUIRE(a.picks.size() == 3);
  CHECK(a.picks[0].device.pool == "p0/n1");
  CHECK(a.picks[1].device.pool == "p0/n1");
  CHECK(a.picks[0].device.bindingConditions.empty());
  CHECK(a.picks[2].device.pool == "p0");
  CHECK(a.picks[2].device.device == kc::api::draDeviceName(a.picks[2].gpuId));
  CHECK(a.picks[2].device.bindingConditions ==
        std::vector<std::string>{std::string(kc::api::kAttachedCondition)});
  CHECK(a.picks[2].device.bindingFailureConditions ==
        std::vector<std::string>{std::string(kc::api::kAttachFailedCondition)});
  cache.allocateDone(a.key, true, t0);
  // Allocated, the condition not yet True: nothing to do.
  cache.ingestClaim(allocated(c, a));
  CHECK(cache.next(t0 + 1s, 10).empty());
  // The attach controller reports it attached: bind.
  cache.ingestClaim(withCondition(allocated(c, a), kc::api::kAttachedCondition, 3));
  actions = cache.next(t0 + 2s, 10);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == Kind::kBind);
  CHECK(actions[0].node == "n1");
}

TEST_CASE("sched DRA: only node-local devices: allocate and bind at once", "[sched][dra]") {
  SchedCache cache(options());
  cluster(cache);
  cache.resetQueue(t0);
  cache.ingestClaim(claim("small", 2));
  cache.ingestPod(claimPod("p", {"small"}), t0);
  auto actions = cache.next(t0, 10);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == Kind::kAllocate);
  CHECK(actions[0].node == "n1");
  CHECK(actions[0].bindNow);
  CHECK(actions[0].deficit == 0);
}

TEST_CASE("sched DRA: a failure condition or the binding timeout clears the allocation",
          "[sched][dra]") {
  const bool timeout = GENERATE(false, true);
  CAPTURE(timeout);
  SchedCache cache(options());
  cluster(cache);
  cache.resetQueue(t0);
  const json c = claim("train-gpus", 3);
  cache.ingestClaim(c);
  cache.ingestPod(claimPod("train", {"train-gpus"}), t0);
  const Action a = cache.next(t0, 10).at(0);
  REQUIRE(a.kind == Kind::kAllocate);
  cache.allocateDone(a.key, true, t0);
  cache.ingestClaim(allocated(c, a));
  auto at = t0 + 1s;
  if (timeout) {
    CHECK(cache.next(t0 + 60s - 1ms, 10).empty());
    at = t0 + 60s;
  } else {
    cache.ingestClaim(withCondition(allocated(c, a), kc::api::kAttachFailedCondition, 3));
  }
  const auto actions = cache.next(at, 10);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == Kind::kCancel);
  CHECK(actions[0].clearClaims == std::vector<std::string>{"team/train-gpus"});
  CHECK_THAT(actions[0].message, Catch::Contains(timeout ? "binding conditions" : "attach-failed"));
  // Until the watch shows the allocation cleared, the pod is not placed again.
  CHECK(cache.next(at + 10s, 10).empty());
  json cleared = c;
  cleared["metadata"]["resourceVersion"] = "9";
  cache.ingestClaim(cleared);
  const auto again = cache.next(at + 10s, 10);
  REQUIRE(again.size() == 1);
  CHECK(again[0].kind == Kind::kAllocate);
}

TEST_CASE("sched DRA: two pods never get the same device", "[sched][dra]") {
  SchedCache cache(options());
  cluster(cache);
  cache.resetQueue(t0);
  cache.ingestClaim(claim("a", 2));
  cache.ingestClaim(claim("b", 2));
  cache.ingestPod(claimPod("pa", {"a"}, "2026-01-01T00:00:01Z"), t0);
  cache.ingestPod(claimPod("pb", {"b"}, "2026-01-01T00:00:02Z"), t0);
  const auto actions = cache.next(t0, 10);
  REQUIRE(actions.size() == 2);
  std::set<std::string> devices;
  for (const auto& a : actions) {
    CHECK(a.kind == Kind::kAllocate);
    for (const auto& p : a.picks) {
      CHECK(devices.insert(p.gpuId).second);
    }
  }
  CHECK(devices.size() == 4);
  CHECK(actions[0].node == "n1");  // the node's own pair
}

TEST_CASE("sched DRA: pods the scheduler does not serve stay Pending with the reason",
          "[sched][dra]") {
  struct Row {
    const char* what;
    json claim;
    const char* says;
  };
  const std::vector<Row> rows = {
      {"another driver's class", claim("c1", 1, "nic"), "driver gpu.kubecomp.io"},
      {"a selector outside the CEL subset",
       claim("c2", 1, "gpu.kubecomp.io",
             "device.attributes[\"gpu.kubecomp.io\"].model.matches(\"A.*\")"),
       "matches"},
      {"no such class", claim("c3", 1, "missing"), "DeviceClass missing not found"},
      {"more than the pool has", claim("c4", 5), "too few free kubecomp.io/gpu"},
  };
  for (const Row& r : rows) {
    CAPTURE(r.what);
    SchedCache cache(options());
    cluster(cache);
    cache.ingestDeviceClass(deviceClass("nic", "device.driver == \"nic.example.com\""));
    cache.resetQueue(t0);
    cache.ingestClaim(r.claim);
    cache.ingestPod(claimPod("p", {r.claim["metadata"]["name"]}), t0);
    const auto actions = cache.next(t0, 10);
    REQUIRE(actions.size() == 1);
    CHECK(actions[0].kind == Kind::kUnschedulable);
    CHECK_THAT(actions[0].message, Catch::Contains(r.says));
  }
  // A claim not created yet (from a template) waits, saying so.
  SchedCache cache(options());
  cluster(cache);
  cache.resetQueue(t0);
  json pod = claimPod("tmpl", {});
  pod["spec"]["resourceClaims"] =
      json::array({{{"name", "g"}, {"resourceClaimTemplateName", "t"}}});
  cache.ingestPod(pod, t0);
  const auto actions = cache.next(t0, 10);
  REQUIRE(actions.size() == 1);
  CHECK_THAT(actions[0].message, Catch::Contains("to be created from its template"));
}

TEST_CASE("sched DRA: a claim pod that fits nowhere preempts nobody, and says so", "[sched][dra]") {
  // The DRA path does not preempt (docs/sched.md "Priority and preemption"): a higher-priority
  // claim pod that only evicting `low` would serve stays Pending; the condition says so where
  // kube-scheduler's PostFilter text stands.
  SchedCache cache(options());
  cluster(cache);
  cache.resetQueue(t0);
  runOnN1(cache, "low", 2);
  cache.ingestClaim(claim("big", 4));
  json high = claimPod("high", {"big"}, "2026-01-01T00:00:05Z");
  high["spec"]["priority"] = 1000;
  cache.ingestPod(high, t0 + 2s);
  const auto actions = cache.next(t0 + 2s, 10);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == Kind::kUnschedulable);
  CHECK(actions[0].victims.empty());
  CHECK_THAT(actions[0].message,
             Catch::StartsWith("0/2 nodes are available: ") &&
                 Catch::EndsWith(". preemption: not tried for a pod with ResourceClaims."));
  CHECK_FALSE(cache.nominatedNode("team/high"));
}

TEST_CASE("sched DRA: an allocation made before a restart is adopted, not made again",
          "[sched][dra]") {
  SchedCache cache(options());
  cluster(cache);
  cache.resetQueue(t0);
  const json c = claim("train-gpus", 3);
  cache.ingestClaim(c);
  cache.ingestPod(claimPod("train", {"train-gpus"}), t0);
  const Action a = cache.next(t0, 10).at(0);
  REQUIRE(a.kind == Kind::kAllocate);

  // A new leader: the claim shows the allocation, reserved for the pod.
  SchedCache next(options());
  cluster(next);
  next.ingestClaim(allocated(c, a));
  next.ingestPod(claimPod("train", {"train-gpus"}), t0);
  next.resetQueue(t0);
  CHECK(next.next(t0, 10).empty());
  next.ingestClaim(withCondition(allocated(c, a), kc::api::kAttachedCondition, 3));
  const auto actions = next.next(t0 + 1s, 10);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == Kind::kBind);
  CHECK(actions[0].node == "n1");
}

TEST_CASE("sched DRA: one path per pool", "[sched][dra]") {
  SchedCache cache(options());
  cache.ingestNode(node("dp", 2));
  cache.ingestNode(node("dra", 0));
  cache.ingestPool(pool("p-dp", {"dp"}, {{"d1", "dp"}, {"d2", "dp"}}));
  cache.ingestPool(draPool("p-dra", {"dra"}, {{"r1", "dra"}, {"r2", "dra"}}));
  cache.ingestDeviceClass(deviceClass("gpu.kubecomp.io", "device.driver == \"gpu.kubecomp.io\""));
  cache.resetQueue(t0);
  json limits = claimPod("limits", {});
  limits["spec"].erase("resourceClaims");
  limits["spec"]["containers"][0]["resources"]["limits"] = {{"kubecomp.io/gpu", "2"}};
  cache.ingestPod(limits, t0);
  cache.ingestClaim(claim("two", 2));
  cache.ingestPod(claimPod("claims", {"two"}, "2026-01-01T00:00:02Z"), t0);
  const auto actions = cache.next(t0, 10);
  REQUIRE(actions.size() == 2);
  CHECK(actions[0].name == "limits");
  CHECK(actions[0].kind == Kind::kBind);
  CHECK(actions[0].node == "dp");
  CHECK(actions[1].name == "claims");
  CHECK(actions[1].kind == Kind::kAllocate);
  CHECK(actions[1].node == "dra");
}

TEST_CASE("sched DRA: a finished pod's devices are waited for, not replaced by a move",
          "[sched][dra]") {
  const bool released = GENERATE(true, false);
  CAPTURE(released);
  SchedCache cache(options());  // draReleaseWait 5 s (the default)
  cluster(cache);
  cache.resetQueue(t0);
  // "first" ran on n1 with both of n1's GPUs and has just finished; its claim is still
  // allocated (the resourceclaim controller has not deallocated it yet).
  json done = runOnN1(cache, "first", 2);
  done["metadata"]["resourceVersion"] = "4";
  done["status"] = {{"phase", "Succeeded"}};
  cache.ingestPod(done, t0 + 10s);

  cache.ingestClaim(claim("b", 2));
  cache.ingestPod(claimPod("second", {"b"}, "2026-01-01T00:00:03Z"), t0 + 10s);
  auto actions = cache.next(t0 + 10s, 10);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == Kind::kUnschedulable);
  CHECK_THAT(actions[0].message,
             Catch::Contains("waiting for 2 device(s) on n1 that ResourceClaims of finished pods"));
  if (released) {
    // The claim goes (or is deallocated): the pod takes n1's own GPUs, no move.
    cache.removeClaim("team/first-gpus");
    actions = cache.next(t0 + 10s + 100ms, 10);
    REQUIRE(actions.size() == 1);
    CHECK(actions[0].kind == Kind::kAllocate);
    CHECK(actions[0].node == "n1");
    CHECK(actions[0].bindNow);
  } else {
    // Nobody lets go within the wait: the claim counts as held and GPUs are moved.
    actions = cache.next(t0 + 15s, 10);
    REQUIRE(actions.size() == 1);
    CHECK(actions[0].kind == Kind::kAllocate);
    CHECK(actions[0].deficit == 2);
    CHECK_FALSE(actions[0].bindNow);
  }
}

TEST_CASE("sched DRA: devices freed on the node while a pod waits for an attach replace it",
          "[sched][dra]") {
  SchedCache cache(options());
  cluster(cache);
  cache.resetQueue(t0);
  // "first" holds g1 on n1 and runs.
  json running = runOnN1(cache, "first", 1);
  // "train" needs 2: n1's g2 and one attached from the pool.
  const json t = claim("t", 2);
  cache.ingestClaim(t);
  cache.ingestPod(claimPod("train", {"t"}, "2026-01-01T00:00:03Z"), t0 + 1s);
  const Action train = cache.next(t0 + 1s, 10).at(0);
  REQUIRE(train.kind == Kind::kAllocate);
  REQUIRE(train.node == "n1");
  REQUIRE(train.deficit == 1);
  cache.allocateDone(train.key, true, t0 + 1s);
  cache.ingestClaim(allocated(t, train));
  // The GPU being moved shows on n1 before its condition is True: still the same allocation.
  cache.ingestPool(
      draPool("p0", {"n1", "n2"}, {{"g1", "n1"}, {"g2", "n1"}, {"g3", "n1"}, {"g4", ""}}));
  CHECK(cache.next(t0 + 2s, 10).empty());
  // "first" ends and its claim is deallocated: g1 is free on n1, so "train" needs no attach.
  running["metadata"]["resourceVersion"] = "4";
  running["status"] = {{"phase", "Succeeded"}};
  cache.ingestPod(running, t0 + 3s);
  cache.removeClaim("team/first-gpus");
  auto actions = cache.next(t0 + 3s, 10);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == Kind::kCancel);
  CHECK(actions[0].clearClaims == std::vector<std::string>{"team/t"});
  CHECK_THAT(actions[0].message, Catch::Contains("1 device(s) of node n1 became free"));
  json cleared = t;
  cleared["metadata"]["resourceVersion"] = "9";
  cache.ingestClaim(cleared);
  actions = cache.next(t0 + 3s + 10ms, 10);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == Kind::kAllocate);
  CHECK(actions[0].node == "n1");
  CHECK(actions[0].bindNow);
}
