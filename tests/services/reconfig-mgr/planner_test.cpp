// The pure parts of reconfig-mgr: GPUPool spec parsing, the journal's JSON, the per-GPU view
// and status, and the planner (deficit, FCFS claims, model constraints, Algorithm 1 source
// choice as in the paper's Fig. 5, multi-pool separation).

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "libcore/alloc/policy_registry.hpp"
#include "services/reconfig-mgr/move_planner.hpp"
#include "services/reconfig-mgr/pool_view.hpp"

using kc::reconfig::PodInfo;
using kc::reconfig::PodPlan;
using nlohmann::json;

namespace {

json poolObject(std::vector<std::pair<std::string, std::string>> nodes,
                const std::string& name = "pool-a") {
  json n = json::array();
  for (const auto& [node, port] : nodes) {
    n.push_back({{"name", node}, {"hostPort", port}});
  }
  return {{"metadata", {{"name", name}, {"generation", 3}}},
          {"spec",
           {{"chassis", {{{"name", "c0"}, {"driver", "h3"}, {"endpoint", "http://x"}}}},
            {"nodes", n}}}};
}

// A chassis inventory: GPUs "c0.<n>" on pool hosts "c0/<port>" (nullopt: unattached).
struct G {
  std::string id;
  std::optional<std::string> port;
  std::string model = "V100";
};
kc::fabric::Inventory inventory(const std::vector<G>& gpus) {
  kc::fabric::Inventory inv;
  for (const G& g : gpus) {
    kc::fabric::GpuInfo i;
    i.id = "c0." + g.id;
    i.chassis = "c0";
    i.localId = g.id;
    i.uuid = "GPU-" + g.id;
    i.model = g.model;
    if (g.port) {
      i.hostPort = "c0/" + *g.port;
    }
    inv.gpus.push_back(i);
  }
  std::sort(inv.gpus.begin(), inv.gpus.end(), [](auto& a, auto& b) { return a.id < b.id; });
  return inv;
}

PodInfo waitingPod(const std::string& name, const std::string& dst, std::int64_t gpus,
                   int createdSec, const std::string& models = "") {
  PodInfo p;
  p.ns = "default";
  p.name = name;
  p.uid = "uid-" + name;
  p.created = std::chrono::system_clock::time_point(std::chrono::seconds(createdSec));
  p.dstNode = dst;
  p.gpus = gpus;
  p.phase = "Pending";
  p.models = *kc::alloc::GpuModelFilter::parse(models, ',');
  return p;
}

struct Fixture {
  kc::reconfig::PoolSpec spec;
  kc::reconfig::PoolView view;
  std::vector<PodInfo> pods;
  kc::reconfig::ActiveMoves active;
  kc::reconfig::PlanResult plan(std::string_view policy = "unattached-first") {
    kc::reconfig::PlanInputs in;
    in.spec = &spec;
    in.view = &view;
    in.pods = &pods;
    in.active = &active;
    in.policy = *kc::alloc::findGpuPolicy(policy);
    return kc::reconfig::planMoves(in);
  }
};

Fixture fixture(const std::vector<G>& gpus, kc::reconfig::UsageByNode usage = {}) {
  Fixture f;
  f.spec = *kc::reconfig::parsePoolSpec(
      poolObject({{"host01", "1"}, {"host02", "2"}, {"host03", "3"}}), "kubecomp");
  f.view = kc::reconfig::buildView(f.spec, inventory(gpus), usage, {}, {});
  return f;
}

kc::api::UsageReport inUse(std::map<std::string, std::vector<std::string>> m) {
  kc::api::UsageReport r;
  r.inUse = std::move(m);
  return r;
}

}  // namespace

TEST_CASE("pool spec: hosts per chassis and strict errors", "[reconfig]") {
  json pool = poolObject({{"n1", "1"}, {"n2", "2"}});
  pool["spec"]["chassis"].push_back({{"name", "c1"},
                                     {"driver", "redfish"},
                                     {"endpoint", "https://y"},
                                     {"credentialsSecret", {{"name", "bmc"}}}});
  pool["spec"]["nodes"][1]["chassisHostPorts"] = {{"c1", "sys-2"}};
  auto spec = kc::reconfig::parsePoolSpec(pool, "kubecomp");
  REQUIRE(spec);
  CHECK(spec->generation == 3);
  CHECK(spec->pollIntervalSeconds == 30);
  CHECK_FALSE(spec->dra);  // allocationPath defaults to DevicePlugin
  pool["spec"]["allocationPath"] = "DRA";
  CHECK(kc::reconfig::parsePoolSpec(pool, "kubecomp")->dra);
  pool["spec"]["allocationPath"] = "DevicePlugin";
  CHECK_FALSE(kc::reconfig::parsePoolSpec(pool, "kubecomp")->dra);
  CHECK(spec->chassis[1].secretNamespace == "kubecomp");
  CHECK(spec->hostOf("n2", "c1") == "sys-2");
  CHECK(spec->hostOf("n2", "c0") == "2");
  CHECK(spec->poolHostOf("n2", "c1.blk-7") == "c1/sys-2");
  CHECK(spec->nodeAt("c1/sys-2") == "n2");
  CHECK(spec->nodeAt("c1/2") == "");
  CHECK_FALSE(spec->hostOf("n9", "c0"));

  using Mutate = std::function<void(json&)>;
  const auto [what, mutate, needle] = GENERATE(table<std::string, Mutate, std::string>({
      {"no chassis", [](json& p) { p["spec"].erase("chassis"); }, "chassis"},
      {"bad driver", [](json& p) { p["spec"]["chassis"][0]["driver"] = "pcie"; }, "driver"},
      {"bad chassis name", [](json& p) { p["spec"]["chassis"][0]["name"] = "C_0"; }, "DNS label"},
      {"repeated node", [](json& p) { p["spec"]["nodes"][1]["name"] = "n1"; }, "repeated"},
      {"shared host", [](json& p) { p["spec"]["nodes"][1]["hostPort"] = "1"; }, "share host"},
      {"unknown chassis host",
       [](json& p) { p["spec"]["nodes"][0]["chassisHostPorts"] = {{"zz", "1"}}; },
       "unknown chassis"},
      {"poll 0", [](json& p) { p["spec"]["pollIntervalSeconds"] = 0; }, "pollIntervalSeconds"},
      {"unknown path", [](json& p) { p["spec"]["allocationPath"] = "Both"; }, "allocationPath"},
      {"hostPort number", [](json& p) { p["spec"]["nodes"][0]["hostPort"] = 1; }, "hostPort"},
  }));
  CAPTURE(what);
  json bad = poolObject({{"n1", "1"}, {"n2", "2"}});
  mutate(bad);
  auto r = kc::reconfig::parsePoolSpec(bad, "kubecomp");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == "invalid");
  CHECK(r.error().message.find(needle) != std::string::npos);
}

TEST_CASE("journal: JSON round trip with strict reading and one active record", "[reconfig]") {
  kc::reconfig::Move m;
  m.gpu = "c0.6";
  m.fromNode = "host02";
  m.fromHost = "c0/2";
  m.toNode = "host01";
  m.toHost = "c0/1";
  m.podNamespace = "default";
  m.podName = "train";
  m.podUid = "u1";
  m.phase = kc::reconfig::MovePhase::kDetaching;
  m.attempts = 2;
  m.staleWithdrawn = true;
  auto back = kc::reconfig::parseMove(kc::reconfig::toJson(m));
  REQUIRE(back);
  CHECK(*back == m);

  json bad = kc::reconfig::toJson(m);
  bad["phase"] = "Teleporting";
  CHECK_FALSE(kc::reconfig::parseMove(bad));
  bad = kc::reconfig::toJson(m);
  bad["pod"] = "train";
  CHECK_FALSE(kc::reconfig::parseMove(bad));
  bad = kc::reconfig::toJson(m);
  bad["fromHost"] = "";
  CHECK_FALSE(kc::reconfig::parseMove(bad));

  kc::reconfig::Move done = m;
  done.phase = kc::reconfig::MovePhase::kSucceeded;
  json pool = {
      {"status",
       {{"moves",
         {kc::reconfig::toJson(m), kc::reconfig::toJson(m), kc::reconfig::toJson(done), "junk"}}}}};
  auto parsed = kc::reconfig::parseJournal(pool);
  REQUIRE(parsed.journal.active);
  CHECK(parsed.journal.active->gpu == "c0.6");
  CHECK(parsed.journal.history.size() == 1);
  CHECK(parsed.problems.size() == 2);
}

TEST_CASE(
    "view and status: node by host and draining from the journal and in use from the plugins and "
    "quarantine",
    "[reconfig]") {
  auto spec =
      *kc::reconfig::parsePoolSpec(poolObject({{"host01", "1"}, {"host02", "2"}}), "kubecomp");
  kc::reconfig::Journal j;
  kc::reconfig::Move m;
  m.gpu = "c0.2";
  m.fromNode = "host02";
  m.fromHost = "c0/2";
  m.toNode = "host01";
  m.toHost = "c0/1";
  m.podNamespace = "default";
  m.podName = "p";
  j.active = m;
  const auto view = kc::reconfig::buildView(
      spec, inventory({{"1", "1"}, {"2", "2"}, {"3", std::nullopt}, {"4", "9"}}),
      {{"host01", inUse({{"c0.1", {"default/a"}}})}}, j, {{"c0.3", "lied"}});
  REQUIRE(view.gpus.size() == 4);
  CHECK(view.gpus[0].node == "host01");
  CHECK(view.gpus[0].inUseBy == std::vector<std::string>{"default/a"});
  CHECK(view.gpus[1].draining);
  CHECK_FALSE(view.gpus[2].healthy);
  CHECK(view.gpus[3].node == "");  // host 9 belongs to no node

  kc::reconfig::StatusInputs in;
  in.spec = &spec;
  in.view = &view;
  in.journal = &j;
  kc::reconfig::Quarantine q = {{"c0.3", "lied"}};
  in.quarantine = &q;
  in.now = std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000));
  const json st = kc::reconfig::renderStatus(in);
  CHECK(st["observedGeneration"] == 3);
  CHECK(st["totalGPUs"] == 4);
  CHECK(st["attachedGPUs"] == 3);
  CHECK(st["freeGPUs"] == 1);  // c0.4 (on no node) counts: healthy, unused, not draining
  CHECK(st["gpus"][1]["draining"] == true);
  CHECK(st["gpus"][2]["health"] == "Unhealthy");
  CHECK(st["moves"].size() == 1);
  CHECK(st["quarantine"][0]["gpu"] == "c0.3");
  // Conditions keep their transition time while unchanged.
  in.previousStatus = st;
  in.now += std::chrono::hours(1);
  const json again = kc::reconfig::renderStatus(in);
  CHECK(again["conditions"] == st["conditions"]);
  in.movesUnsupported = "no AddResourceBlock";
  const json refused = kc::reconfig::renderStatus(in);
  bool found = false;
  for (const auto& c : refused["conditions"]) {
    if (c["type"] == "MovesSupported") {
      found = true;
      CHECK(c["status"] == "False");
      CHECK(c["message"] == "no AddResourceBlock");
    }
  }
  CHECK(found);
  // A malformed block the fabric listed is left out and said so; the pool stays Ready.
  in.movesUnsupported.reset();
  in.inventorySkipped = {"c0: ResourceBlock /rb/7: ResourceBlock 7 has no CompositionStatus"};
  const json partial = kc::reconfig::renderStatus(in);
  std::map<std::string, json> byType;
  for (const auto& c : partial["conditions"]) {
    byType[c["type"]] = c;
  }
  CHECK(byType["InventoryComplete"]["status"] == "False");
  CHECK(byType["InventoryComplete"]["reason"] == "ResourcesSkipped");
  CHECK_THAT(byType["InventoryComplete"]["message"].get<std::string>(),
             Catch::Contains("has no CompositionStatus"));
  CHECK(byType["Ready"]["status"] == "True");
}

TEST_CASE("planner: the paper's Fig. 5 example - GPU06 moves from Host02 to Host01", "[reconfig]") {
  // Host01: GPU01-03 free. Host02: GPU04, GPU05 in use, GPU06 free. Host03: GPU07, GPU08 free.
  // A pod needs 4 GPUs on Host01: deficit 1. Algorithm 1 scores GPU06 -1 (Host02 has one free
  // candidate) and GPU07/08 -2: GPU06 is taken, leaving Host03's pair whole.
  const auto policy = GENERATE(as<std::string>{}, "alg1", "unattached-first");
  CAPTURE(policy);
  auto f = fixture({{"01", "1"},
                    {"02", "1"},
                    {"03", "1"},
                    {"04", "2"},
                    {"05", "2"},
                    {"06", "2"},
                    {"07", "3"},
                    {"08", "3"}},
                   {{"host02", inUse({{"c0.04", {"default/r"}}, {"c0.05", {"default/r"}}})}});
  f.pods.push_back(waitingPod("big", "host01", 4, 10));
  auto plan = f.plan(policy);
  REQUIRE(plan.pods.size() == 1);
  CHECK(plan.pods[0].deficit == 1);
  CHECK(plan.pods[0].verdict == PodPlan::Verdict::kMoving);
  REQUIRE(plan.next);
  CHECK(plan.next->gpu == "c0.06");
  CHECK(plan.next->fromNode == "host02");
  CHECK(plan.next->fromHost == "c0/2");
  CHECK(plan.next->toHost == "c0/1");
  CHECK(plan.next->phase == kc::reconfig::MovePhase::kDraining);
}

TEST_CASE(
    "planner: a pod the pod watch still shows waiting but the usage report shows running on its "
    "node is satisfied",
    "[reconfig]") {
  // Fig. 5 after the move: Host01 holds GPU01-03 and GPU06, all four in use by "big" (bound and
  // started), while the pod informer still has "big" annotated and unbound. Nothing is short:
  // no move and no "insufficient" verdict (which would put a false Warning on the pod).
  auto f = fixture({{"01", "1"},
                    {"02", "1"},
                    {"03", "1"},
                    {"04", "2"},
                    {"05", "2"},
                    {"06", "1"},
                    {"07", "3"},
                    {"08", "3"}},
                   {{"host01", inUse({{"c0.01", {"default/big"}},
                                      {"c0.02", {"default/big"}},
                                      {"c0.03", {"default/big"}},
                                      {"c0.06", {"default/big"}}})},
                    {"host02", inUse({{"c0.04", {"default/r"}}, {"c0.05", {"default/r"}}})}});
  f.pods.push_back(waitingPod("big", "host01", 4, 10));
  auto plan = f.plan();
  REQUIRE(plan.pods.size() == 1);
  CHECK(plan.pods[0].verdict == PodPlan::Verdict::kSatisfied);
  CHECK(plan.pods[0].deficit == 0);
  CHECK_FALSE(plan.next);
  // Partly started (the report lists two of its four): the rest is still a deficit of free
  // GPUs first, then moves.
  auto g = fixture({{"01", "1"}, {"02", "1"}, {"03", "3"}, {"04", "3"}},
                   {{"host01", inUse({{"c0.01", {"default/big"}}, {"c0.02", {"default/big"}}})}});
  g.pods.push_back(waitingPod("big", "host01", 4, 10));
  auto partial = g.plan();
  REQUIRE(partial.pods.size() == 1);
  CHECK(partial.pods[0].deficit == 2);
  CHECK(partial.pods[0].verdict == PodPlan::Verdict::kMoving);
}

TEST_CASE("planner: FCFS claims and the move in flight and models - insufficient pods do not block",
          "[reconfig]") {
  SECTION("two pods on one node: the earlier one claims the free GPUs first") {
    auto f = fixture({{"1", "1"}, {"2", "2"}, {"3", "3"}});
    f.pods.push_back(waitingPod("late", "host01", 1, 20));
    f.pods.push_back(waitingPod("early", "host01", 1, 10));
    auto plan = f.plan();
    REQUIRE(plan.pods.size() == 2);
    CHECK(plan.pods[0].pod == "default/early");
    CHECK(plan.pods[0].verdict == PodPlan::Verdict::kSatisfied);
    CHECK(plan.pods[1].deficit == 1);
    REQUIRE(plan.next);
    CHECK(plan.next->podName == "late");
  }
  SECTION("a bound pod not yet using its GPUs keeps them") {
    auto f = fixture({{"1", "1"}, {"2", "2"}});
    PodInfo bound = waitingPod("bound", "", 1, 5);
    bound.nodeName = "host01";
    f.pods.push_back(bound);
    f.pods.push_back(waitingPod("p", "host01", 1, 10));
    auto plan = f.plan();
    CHECK(plan.pods[0].deficit == 1);
    REQUIRE(plan.next);
    CHECK(plan.next->gpu == "c0.2");
  }
  SECTION("the move in flight counts for its pod; no second move starts") {
    auto f = fixture({{"1", "2"}, {"2", "3"}});
    f.pods.push_back(waitingPod("p", "host01", 2, 10));
    kc::reconfig::Move m;
    m.gpu = "c0.1";
    m.podNamespace = "default";
    m.podName = "p";
    m.toNode = "host01";
    m.phase = kc::reconfig::MovePhase::kDetaching;
    f.active = m;
    f.view = kc::reconfig::buildView(f.spec, inventory({{"1", "2"}, {"2", "3"}}), {},
                                     kc::reconfig::Journal{m, {}}, {});
    auto plan = f.plan();
    CHECK(plan.pods[0].deficit == 1);
    CHECK(plan.pods[0].sources == std::vector<std::string>{"c0.2"});
    CHECK_FALSE(plan.next);
  }
  SECTION("unattached GPUs first (ours) vs taken last (the original)") {
    auto f = fixture({{"1", "2"}, {"2", std::nullopt}, {"3", std::nullopt}});
    f.pods.push_back(waitingPod("p", "host01", 1, 10));
    CHECK(f.plan("unattached-first").next->gpu == "c0.2");
    CHECK(f.plan("unattached-first").next->phase == kc::reconfig::MovePhase::kAttaching);
    CHECK(f.plan("alg1").next->gpu == "c0.1");
  }
  SECTION("models: only accepted GPUs count and move") {
    auto f = fixture({{"1", "1", "T4"}, {"2", "2", "T4"}, {"3", "3", "A100"}});
    f.pods.push_back(waitingPod("p", "host01", 1, 10, "A100"));
    auto plan = f.plan();
    CHECK(plan.pods[0].deficit == 1);
    REQUIRE(plan.next);
    CHECK(plan.next->gpu == "c0.3");
  }
  SECTION("a pod the pool cannot supply gets no move, and the next pod still does") {
    auto f = fixture({{"0", "1"}, {"1", "2"}, {"2", "3"}});
    f.pods.push_back(waitingPod("huge", "host01", 8, 5));
    f.pods.push_back(waitingPod("small", "host01", 2, 10));
    auto plan = f.plan();
    CHECK(plan.pods[0].verdict == PodPlan::Verdict::kInsufficient);
    // The insufficient pod holds no claim: host01's free GPU counts for the next pod (so the
    // big one lacks all 8).
    CHECK(plan.pods[0].reason.find("cannot supply 8") != std::string::npos);
    CHECK(plan.pods[1].deficit == 1);
    REQUIRE(plan.next);
    CHECK(plan.next->podName == "small");
  }
  SECTION("pods for nodes of another pool, bound or deleting pods are not planned") {
    auto f = fixture({{"1", "2"}});
    f.pods.push_back(waitingPod("elsewhere", "node-of-pool-b", 1, 5));
    PodInfo deleting = waitingPod("deleting", "host01", 1, 6);
    deleting.deleting = true;
    f.pods.push_back(deleting);
    auto plan = f.plan();
    CHECK(plan.pods.empty());
    CHECK_FALSE(plan.next);
  }
}
