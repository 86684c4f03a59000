// reconfig-mgr under faults, every part a real process (cluster.hpp): the chassis fails,
// hangs or lies at each step; reconfig-mgr is SIGKILLed at each phase and restarted; the
// pending pod is deleted mid-move; two replicas; two pools. The invariants are checked after
// every scenario.

#include <catch2/catch.hpp>
#include <thread>

#include "tests/services/reconfig-mgr/cluster.hpp"

using kc::reconfig::testing::ClusterSpec;
using kc::reconfig::testing::SimCluster;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// Host01 has 2 GPUs, Host02 2 (free), Host03 2 (free); a pod for 4 on Host01 needs 2 moves.
ClusterSpec threeNodes(double latencyScale = 0) {
  ClusterSpec s;
  s.nodes = {"host01", "host02", "host03"};
  s.chassis["c0"] = {{"01", "host01"}, {"02", "host01"}, {"03", "host02"},
                     {"04", "host02"}, {"05", "host03"}, {"06", "host03"}};
  s.latencyScale = latencyScale;
  return s;
}

std::string activePhase(const json& status) {
  for (const auto& m : status.value("moves", json::array())) {
    const std::string p = m.value("phase", "");
    if (p != "Succeeded" && p != "Failed") {
      return p;
    }
  }
  return {};
}

int movesWith(const json& status, const std::string& phase) {
  int n = 0;
  for (const auto& m : status.value("moves", json::array())) {
    n += m.value("phase", "") == phase ? 1 : 0;
  }
  return n;
}

// The pod for 4 GPUs on Host01 runs with GPUs that are all attached to Host01.
void serveBigPod(SimCluster& c, std::chrono::milliseconds limit = 60s) {
  c.createPod("big", 4, "host01");
  REQUIRE(c.waitAllocatable("host01", 4, limit));
  c.bindAndWaitRunning("big", "host01");
  const auto gpus = c.podGpus("big", "host01");
  CHECK(gpus.size() == 4);
}

}  // namespace

TEST_CASE(
    "reconfig-mgr faults: the chassis fails or hangs or lies at each step and the move still lands "
    "safely",
    "[reconfig][e2e]") {
  struct Case {
    std::string name;
    json fault;
    bool expectQuarantine;
  };
  const auto which =
      GENERATE(as<std::string>{}, "unassign fail", "assign fail", "unassign hang", "assign hang",
               "unassign lie_failure", "assign lie_failure", "assign lie_success once",
               "assign lie_success always", "inventory fail");
  CAPTURE(which);
  const std::map<std::string, Case> cases = {
      {"unassign fail", {"", {{"op", "unassign"}, {"kind", "fail"}, {"times", 2}}, false}},
      {"assign fail", {"", {{"op", "assign"}, {"kind", "fail"}, {"times", 2}}, false}},
      {"unassign hang",
       {"", {{"op", "unassign"}, {"kind", "hang"}, {"hangMs", 4000}, {"times", 1}}, false}},
      {"assign hang",
       {"", {{"op", "assign"}, {"kind", "hang"}, {"hangMs", 4000}, {"times", 1}}, false}},
      {"unassign lie_failure",
       {"", {{"op", "unassign"}, {"kind", "lie_failure"}, {"times", 1}}, false}},
      {"assign lie_failure",
       {"", {{"op", "assign"}, {"kind", "lie_failure"}, {"times", 1}}, false}},
      {"assign lie_success once",
       {"", {{"op", "assign"}, {"kind", "lie_success"}, {"times", 1}}, false}},
      // A chassis that never attaches but says it did: every GPU tried is quarantined and the
      // pod cannot be served; nothing is lost or doubly attached.
      {"assign lie_success always",
       {"", {{"op", "assign"}, {"kind", "lie_success"}, {"times", -1}}, true}},
      {"inventory fail", {"", {{"op", "inventory"}, {"kind", "fail"}, {"times", 3}}, false}},
  };
  const Case& k = cases.at(which);
  SimCluster c(threeNodes());
  c.startManager();
  REQUIRE(c.waitAllocatable("host01", 2));
  json f = k.fault;
  f["chassis"] = "c0";
  c.fault(f);
  if (!k.expectQuarantine) {
    serveBigPod(c);
    CHECK(movesWith(c.poolStatus(), "Succeeded") >= 2);
    c.invariants();
    return;
  }
  c.createPod("big", 4, "host01");
  // Two GPUs are tried, each quarantined and left unattached; the status says why.
  REQUIRE(c.poolUntil(
      [](const json& st) {
        return st.value("quarantine", json::array()).size() >= 2 && activePhase(st).empty();
      },
      60s));
  const json st = c.poolStatus();
  for (const auto& q : st["quarantine"]) {
    const std::string id = q["gpu"];
    CHECK(c.simGpus()[id] == "");  // left unattached, never on two hosts
    for (const auto& g : st["gpus"]) {
      if (g["id"] == id) {
        CHECK(g["health"] == "Unhealthy");
      }
    }
  }
  CHECK(c.phaseOf("big") == "Pending");
  c.clearFaults();
  c.invariants();
}

TEST_CASE(
    "reconfig-mgr faults: SIGKILL at each phase of a move and a restart finishes it without losing "
    "a GPU",
    "[reconfig][e2e]") {
  const auto phase = GENERATE(as<std::string>{}, "Draining", "Detaching", "Attaching", "Verifying");
  CAPTURE(phase);
  // Latency on (a tenth of the measured H3 figures) so that each phase lasts long enough to be hit.
  SimCluster c(threeNodes(0.1));
  const int first = c.startManager();
  REQUIRE(c.waitAllocatable("host01", 2, 30s));
  if (phase == "Attaching") {
    // A move's detach and attach are one fabric step (FabricDriver::move); the journal says
    // Attaching once the detach is done and an attach failed (and waits out its backoff).
    c.fault({{"chassis", "c0"}, {"op", "assign"}, {"kind", "fail"}, {"times", 2}});
  }
  c.createPod("big", 4, "host01");
  const bool hit = c.poolUntil([&](const json& st) { return activePhase(st) == phase; }, 30s);
  c.killManager(first);
  CHECK(hit);  // the journal showed the phase before the kill
  // Where the journal stands after the kill (the phase seen, or one step further).
  auto obj = c.client().get(kc::reconfig::testing::kGpuPools, "", "pool-a");
  REQUIRE(obj);
  const std::string atKill = activePhase((*obj)["status"]);
  CAPTURE(atKill);
  c.startManager();
  REQUIRE(c.waitAllocatable("host01", 4, 60s));
  c.bindAndWaitRunning("big", "host01");
  const json st = c.poolStatus();
  CHECK(activePhase(st).empty());
  CHECK(movesWith(st, "Succeeded") == 2);  // the interrupted move resumed, not redone elsewhere
  for (const auto& g : st["gpus"]) {
    CHECK(g["draining"] == false);
  }
  c.invariants();
}

TEST_CASE("reconfig-mgr faults: the pending pod deleted mid-move cancels the moves not started",
          "[reconfig][e2e]") {
  SimCluster c(threeNodes(0.1));
  c.startManager();
  REQUIRE(c.waitAllocatable("host01", 2, 30s));
  const auto before = c.simGpus();
  c.createPod("big", 4, "host01");
  REQUIRE(c.poolUntil([](const json& st) { return activePhase(st) == "Detaching"; }, 30s));
  REQUIRE(c.client().remove(kc::kube::gvr::pods(), "default", "big"));
  // The move in flight ends (completes: its GPU is off its node already); no second one starts.
  REQUIRE(c.poolUntil(
      [](const json& st) { return activePhase(st).empty() && !st["moves"].empty(); }, 30s));
  std::this_thread::sleep_for(1500ms);  // time for a (wrong) second move to start: it must not
  const json st = c.poolStatus();
  CHECK(activePhase(st).empty());
  CHECK(st["moves"].size() == 1);
  int moved = 0;
  for (const auto& [id, node] : c.simGpus()) {
    moved += before.at(id) != node ? 1 : 0;
  }
  CHECK(moved <= 1);
  // A new pod is served as usual: the stuck-then-deleted one blocked nothing.
  c.createPod("next", 3, "host01");
  REQUIRE(c.waitAllocatable("host01", 3, 30s));
  c.bindAndWaitRunning("next", "host01");
  c.invariants();
}

TEST_CASE(
    "reconfig-mgr faults: two replicas - one acts and the other takes over after the leader is "
    "killed mid-move",
    "[reconfig][e2e]") {
  SimCluster c(threeNodes(0.1));
  const int a = c.startManager();
  REQUIRE(c.poolUntil([](const json& st) { return st.value("totalGPUs", 0) == 6; }));
  const int b = c.startManager();
  CHECK(c.metrics(a).find("kubecomp_reconfig_is_leader 1") != std::string::npos);
  CHECK(c.metrics(b).find("kubecomp_reconfig_is_leader 0") != std::string::npos);
  c.createPod("big", 4, "host01");
  // Killed inside the move's fabric step (detach, attach and the verifying read).
  REQUIRE(c.poolUntil([](const json& st) { return activePhase(st) == "Detaching"; }, 30s));
  c.killManager(a);
  REQUIRE(c.waitAllocatable("host01", 4, 60s));
  c.bindAndWaitRunning("big", "host01");
  CHECK(c.metrics(b).find("kubecomp_reconfig_is_leader 1") != std::string::npos);
  CHECK(movesWith(c.poolStatus(), "Succeeded") == 2);
  c.invariants();
}

TEST_CASE("reconfig-mgr: two pools - GPUs never cross pools and pools move in parallel",
          "[reconfig][e2e]") {
  ClusterSpec s;
  s.nodes = {"a1", "a2", "b1", "b2"};
  // Every chassis is cabled to every node, so only reconfig-mgr keeps pool-b's GPUs off pool-a.
  s.chassis["pool-a-c0"] = {{"1", "a1"}, {"2", "a2"}};
  s.chassis["pool-b-c0"] = {{"1", "b1"}, {"2", "b2"}, {"3", ""}, {"4", ""}};
  s.pools = {{"pool-a", {"a1", "a2"}}, {"pool-b", {"b1", "b2"}}};
  SimCluster c(s);
  c.startManager();
  REQUIRE(c.waitAllocatable("a1", 1));
  // pool-a cannot supply 3 GPUs to a1 although pool-b has free ones: nothing moves for it.
  c.createPod("too-big", 3, "a1");
  // pool-b serves b1 from its own unattached GPUs.
  c.createPod("b-pod", 3, "b1");
  REQUIRE(c.waitAllocatable("b1", 3, 30s));
  c.bindAndWaitRunning("b-pod", "b1");
  // a2's GPU moves to a1 for a 2-GPU pod.
  c.createPod("a-pod", 2, "a1");
  REQUIRE(c.waitAllocatable("a1", 2, 30s));
  c.bindAndWaitRunning("a-pod", "a1");
  CHECK(c.phaseOf("too-big") == "Pending");
  for (const auto& [id, node] : c.simGpus()) {
    CAPTURE(id, node);
    if (id.rfind("pool-a-", 0) == 0) {
      CHECK((node.empty() || node[0] == 'a'));
    } else {
      CHECK((node.empty() || node[0] == 'b'));
    }
  }
  c.invariants();
  const json a = c.poolStatus("pool-a");
  const json b = c.poolStatus("pool-b");
  CHECK(a["totalGPUs"] == 2);
  CHECK(b["totalGPUs"] == 4);
}

TEST_CASE(
    "reconfig-mgr faults: a chassis that keeps failing attaches is backed off per GPU and "
    "chassis across moves, with a condition, and moves resume after",
    "[reconfig][e2e]") {
  SimCluster c(threeNodes());
  // One try per move phase, so that without a backoff across moves every plan re-POSTs at once.
  c.startManager({"--max-attempts", "1", "--move-failure-backoff-seconds", "3"});
  REQUIRE(c.waitAllocatable("host01", 2, 30s));
  c.fault({{"chassis", "c0"}, {"op", "assign"}, {"kind", "fail"}, {"times", -1}});
  c.createPod("big", 4, "host01");
  std::string why;
  REQUIRE(c.poolUntil(
      [&](const json& st) {
        for (const auto& cond : st.value("conditions", json::array())) {
          if (cond.value("type", "") == "MovesBackingOff" && cond.value("status", "") == "True" &&
              cond.value("message", "").find("chassis c0") != std::string::npos) {
            why = cond.value("message", "");
            return true;
          }
        }
        return false;
      },
      30s));
  CAPTURE(why);
  // Two failed moves (two GPUs of c0), then the chassis waits: nothing more is sent meanwhile
  // (without the backoff, every plan re-POSTs at once).
  const int atBackoff = c.simCounter("assign");
  std::this_thread::sleep_for(2s);
  CHECK(c.simCounter("assign") == atBackoff);
  // The chassis heals; once the backoff ends the moves go on and the pod runs.
  c.clearFaults();
  REQUIRE(c.waitAllocatable("host01", 4, 60s));
  c.bindAndWaitRunning("big", "host01");
  c.invariants();
}
