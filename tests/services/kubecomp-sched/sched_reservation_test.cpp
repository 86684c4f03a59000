// Reservations re-checked against what their GPU pool can still supply (issue 24 §6): after a
// lying chassis got two GPUs quarantined, a reservation the pool could no longer serve kept its
// GPUs until the reservation timeout while a pod the pool could serve waited. The cache alone,
// objects handed in as the informers would, time passed in by the test.

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "services/kubecomp-sched/reservation_supply.hpp"
#include "services/kubecomp-sched/sched_cache.hpp"
#include "tests/services/kubecomp-sched/cache_objects.hpp"

using namespace std::chrono_literals;
using kc::sched::Action;
using kc::sched::SchedCache;
using nlohmann::json;
using Kind = Action::Kind;
using kc::sched::test::node;

namespace {

json pod(const std::string& name, int gpus, const std::string& created,
         const std::string& models = "") {
  json meta = {{"name", name},
               {"namespace", "team"},
               {"uid", "uid-" + name},
               {"resourceVersion", "1"},
               {"creationTimestamp", created}};
  if (!models.empty()) {
    meta["annotations"] = {{"kubecomp.io/gpu-models", models}};
  }
  return {{"metadata", meta},
          {"spec",
           {{"schedulerName", "kubecomp-sched"},
            {"containers",
             {{{"name", "c"},
               {"resources",
                {{"requests", {{"cpu", "1"}, {"kubecomp.io/gpu", std::to_string(gpus)}}}}}}}}}}};
}

// A GPU of the pool's status: id, node ("" unattached), health, model, in use.
struct Gpu {
  std::string id;
  std::string node;
  bool healthy = true;
  std::string model = "V100";
  bool inUse = false;
};

json gpuPool(const std::vector<Gpu>& gpus) {
  json gs = json::array();
  for (const Gpu& g : gpus) {
    json j = {{"id", g.id},
              {"model", g.model},
              {"health", g.healthy ? "Healthy" : "Unhealthy"},
              {"draining", false}};
    if (!g.node.empty()) {
      j["node"] = g.node;
    }
    if (g.inUse) {
      j["inUseBy"] = json::array({"team/running"});
    }
    gs.push_back(j);
  }
  return {{"metadata", {{"name", "p0"}, {"resourceVersion", "1"}}},
          {"spec",
           {{"nodes", {{{"name", "n1"}, {"hostPort", "1"}}, {{"name", "n2"}, {"hostPort", "2"}}}}}},
          {"status", {{"gpus", gs}}}};
}

kc::sched::CacheOptions options() {
  kc::sched::CacheOptions o;
  o.reservationTimeout = 300s;
  o.initialBackoff = 1s;
  o.maxBackoff = 4s;
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

}  // namespace

TEST_CASE("sched reservation: one the shrunken pool cannot serve is cancelled, a servable pod runs",
          "[sched]") {
  SchedCache cache(options());
  const auto t0 = kc::sched::Clock::time_point{} + 1h;
  // n1 has one GPU (g1); g2 and g3 are unattached; n2 holds g4, used by a running pod.
  cache.ingestNode(node("n1", 1));
  cache.ingestNode(node("n2", 1));
  cache.ingestPool(
      gpuPool({{"g1", "n1"}, {"g2", ""}, {"g3", ""}, {"g4", "n2", true, "V100", true}}));
  json running = pod("running", 1, "2026-01-01T00:00:00Z");
  running["spec"]["nodeName"] = "n2";
  running["status"]["phase"] = "Running";
  cache.ingestPod(running, t0);
  cache.resetQueue(t0);
  cache.ingestPod(pod("big", 3, "2026-01-01T00:00:01Z"), t0);
  auto reserve = cache.next(t0, 10);
  REQUIRE(reserve.size() == 1);
  REQUIRE(reserve[0].kind == Kind::kReserve);
  CHECK(reserve[0].node == "n1");
  CHECK(reserve[0].deficit == 2);
  cache.reserveDone("team/big", true, t0);
  // A 1-GPU pod finds nothing: g1 is held by "big", g2 and g3 are promised to it.
  cache.ingestPod(pod("small", 1, "2026-01-01T00:00:02Z"), t0);
  auto waits = cache.next(t0, 10);
  REQUIRE(find(waits, "small") != nullptr);
  CHECK(find(waits, "small")->kind == Kind::kUnschedulable);

  SECTION("a GPU quarantined and another added: the pool still serves it, it stays") {
    cache.ingestPool(gpuPool({{"g1", "n1"},
                              {"g2", ""},
                              {"g3", "", false},
                              {"g5", ""},
                              {"g4", "n2", true, "V100", true}}));
    auto actions = cache.next(t0 + 1ms, 10);
    CHECK(find(actions, "big") == nullptr);
    CHECK(cache.reservation("team/big").has_value());
  }
  SECTION("two GPUs quarantined: cancelled at once with the reason, and the servable pod runs") {
    cache.ingestPool(gpuPool(
        {{"g1", "n1"}, {"g2", "", false}, {"g3", "", false}, {"g4", "n2", true, "V100", true}}));
    auto actions = cache.next(t0 + 1ms, 10);
    const Action* cancel = find(actions, "big");
    REQUIRE(cancel != nullptr);
    CHECK(cancel->kind == Kind::kCancel);
    CHECK(cancel->message ==
          "GPU pool p0 can no longer supply the 3 kubecomp.io/gpu the pod needs on node n1: 2 "
          "usable GPU(s) left in the pool, 1 held by pods placed before it (GPUs quarantined or "
          "gone); the reservation is cancelled and the pod scheduled again");
    CHECK_FALSE(cache.reservation("team/big").has_value());
    const Action* small = find(actions, "small");
    REQUIRE(small != nullptr);
    CHECK(small->kind == Kind::kBind);
    CHECK(small->node == "n1");
  }
}

TEST_CASE("sched reservation: the pool's count is optimistic", "[sched]") {
  using kc::sched::PoolSupply;
  const auto any = kc::alloc::GpuModelFilter{};
  const auto a100 = *kc::alloc::GpuModelFilter::parse("A100", ',');
  struct Case {
    const char* what;
    PoolSupply supply;
    std::int64_t gpus;
    std::int64_t heldByLater;
    const kc::alloc::GpuModelFilter* models;
    bool servable;
  };
  const std::vector<Case> cases = {
      {"exact fit", {"p0", 4, 0, 4}, 3, 3, &any, true},
      {"one short", {"p0", 3, 0, 4}, 3, 3, &any, false},
      {"later reservations do not count", {"p0", 4, 0, 9}, 3, 8, &any, true},
      {"earlier pods use other models first", {"p0", 2, 3, 5}, 2, 2, &a100, true},
      {"other models exhausted", {"p0", 2, 1, 4}, 2, 2, &a100, false},
      {"held below what this pod holds", {"p0", 1, 0, 0}, 1, 1, &any, true},
      {"node in no pool", {"", 0, 0, 0}, 1, 1, &any, false},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    CHECK(!kc::sched::unservableReservation(c.supply, "n1", c.gpus, c.heldByLater, *c.models) ==
          c.servable);
  }
}
