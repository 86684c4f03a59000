// reconfig-mgr as a process with the API server double, chassis-sim, kubelet stand-ins and
// the real disaggpu-devplugin on every node (cluster.hpp). The test plays kubecomp-sched.

#include <catch2/catch.hpp>

#include "tests/services/reconfig-mgr/cluster.hpp"

using kc::reconfig::testing::ClusterSpec;
using kc::reconfig::testing::SimCluster;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// The paper's Fig. 5: Host01 holds GPU01-03, Host02 GPU04-06, Host03 GPU07-08 (one chassis).
ClusterSpec fig5() {
  ClusterSpec s;
  s.nodes = {"host01", "host02", "host03"};
  s.chassis["c0"] = {{"01", "host01"}, {"02", "host01"}, {"03", "host01"}, {"04", "host02"},
                     {"05", "host02"}, {"06", "host02"}, {"07", "host03"}, {"08", "host03"}};
  return s;
}

std::string conditionStatus(const json& status, const std::string& type) {
  for (const auto& c : status.value("conditions", json::array())) {
    if (c.value("type", "") == type) {
      return c.value("status", "");
    }
  }
  return {};
}

}  // namespace

TEST_CASE("reconfig-mgr: --help and bad flags (exit 2)", "[reconfig]") {
  kc::testing::ChildProcess help({RECONFIG_MGR_EXE, "--help"}, kc::testing::ChildOutput::kCapture);
  const std::string text = help.readAll();
  CHECK(help.wait() == 0);
  CHECK(text.find("--gpu-policy") != std::string::npos);
  CHECK(text.find("--drain-timeout-seconds") != std::string::npos);
  CHECK(text.find("--recompose-policy") != std::string::npos);
  CHECK(text.find("--default-runtime-seconds") != std::string::npos);
  CHECK(text.find("--moves-reprobe-seconds") != std::string::npos);
  CHECK(text.find("(0: never)") != std::string::npos);
  for (const char* value : {"-1", "604801", "1.5", "soon"}) {
    kc::testing::ChildProcess p({RECONFIG_MGR_EXE, "--moves-reprobe-seconds", value},
                                kc::testing::ChildOutput::kCaptureMerged);
    const std::string out = p.readAll();
    CAPTURE(value, out);
    CHECK(p.wait() == 2);
    CHECK(out.find("--moves-reprobe-seconds") != std::string::npos);
  }
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--gpu-policy", "best-guess"},
        {"--recompose-policy", "gather-all"},
        {"--default-runtime-seconds", "0"},
        {"--recompose-cooldown-seconds", "-1"},
        {"--max-attempts", "0"},
        {"--leader-elect-lease-duration", "1", "--leader-elect-renew-deadline", "2"},
        {"--no-such-flag"}}) {
    std::vector<std::string> args = {RECONFIG_MGR_EXE};
    args.insert(args.end(), bad.begin(), bad.end());
    kc::testing::ChildProcess p(args, kc::testing::ChildOutput::kCaptureMerged);
    p.readAll();
    CHECK(p.wait() == 2);
  }
}

TEST_CASE(
    "reconfig-mgr: the chassis inventory reaches the GPUPool status and the device plugins and "
    "kubelet",
    "[reconfig][e2e]") {
  auto spec = fig5();
  spec.chassis["c0"].push_back({"09", ""});  // unattached
  SimCluster c(spec);
  c.startManager();
  REQUIRE(c.poolUntil([](const json& st) { return st.value("totalGPUs", 0) == 9; }));
  const json st = c.poolStatus();
  CHECK(st["attachedGPUs"] == 8);
  CHECK(st["freeGPUs"] == 9);
  CHECK(st["observedGeneration"] == 1);
  CHECK(conditionStatus(st, "Ready") == "True");
  std::map<std::string, std::string> nodeOf;
  for (const auto& g : st["gpus"]) {
    nodeOf[g["id"]] = g["node"];
    CHECK(g["health"] == "Healthy");
    CHECK(g["draining"] == false);
    CHECK(g["uuid"].get<std::string>().rfind("GPU-", 0) == 0);
  }
  CHECK(nodeOf["c0.01"] == "host01");
  CHECK(nodeOf["c0.06"] == "host02");
  CHECK(nodeOf["c0.08"] == "host03");
  CHECK(nodeOf["c0.09"] == "");
  // Each plugin advertised its node's GPUs; the stand-ins put them into allocatable.
  CHECK(c.waitAllocatable("host01", 3));
  CHECK(c.waitAllocatable("host02", 3));
  CHECK(c.waitAllocatable("host03", 2));

  // A running pod shows as inUseBy (from the plugin's usage report).
  c.runPodOn("busy", 2, "host02");
  const auto held = c.podGpus("busy", "host02");
  REQUIRE(held.size() == 2);
  CHECK(c.poolUntil([&](const json& s) {
    for (const auto& g : s["gpus"]) {
      if (g["id"] == held[0]) {
        return g["inUseBy"] == json::array({"default/busy"});
      }
    }
    return false;
  }));
  CHECK(c.poolUntil([](const json& s) { return s.value("freeGPUs", 0) == 7; }));

  // The chassis changed behind our back (someone attached GPU09 to host03): the next poll shows it.
  kc::net::ClientOptions o;
  o.baseUrl = "http://127.0.0.1:" + std::to_string(c.simPort());
  auto http = std::move(kc::net::HttpClient::create(o).value());
  auto r = http->request("POST", "/chassis/c0/h3api/v1/allocation",
                         R"({"gep":"0","port_gid":"03h","dev_gid":"09"})",
                         {{"Content-Type", "text/plain"}});
  REQUIRE(r);
  CHECK(c.poolUntil(
      [](const json& s) {
        for (const auto& g : s["gpus"]) {
          if (g["id"] == "c0.09") {
            return g["node"] == "host03";
          }
        }
        return false;
      },
      10s));
  CHECK(c.waitAllocatable("host03", 3));
  c.invariants();
}

TEST_CASE("reconfig-mgr: the paper's Fig. 5 - a GPU moves from Host02 to Host01 for a 4-GPU pod",
          "[reconfig][e2e]") {
  const auto policy = GENERATE(as<std::string>{}, "alg1", "unattached-first");
  CAPTURE(policy);
  SimCluster c(fig5());
  const int mgr = c.startManager({"--gpu-policy", policy});
  REQUIRE(c.waitAllocatable("host02", 3));
  // Two of Host02's GPUs are busy: its one free GPU is a fragment (Algorithm 1 scores it -1,
  // Host03's two free GPUs -2 each), so it is the one to move.
  c.runPodOn("resident", 2, "host02");
  const auto busy = c.podGpus("resident", "host02");
  std::string fragment;
  for (const char* id : {"c0.04", "c0.05", "c0.06"}) {
    if (std::find(busy.begin(), busy.end(), id) == busy.end()) {
      fragment = id;
    }
  }
  REQUIRE(!fragment.empty());
  CHECK(c.poolUntil([](const json& s) { return s.value("freeGPUs", 0) == 6; }));

  // kubecomp-sched chose Host01 for a 4-GPU pod (3 free there): it annotates and waits.
  c.createPod("big", 4, "host01");
  REQUIRE(c.waitAllocatable("host01", 4, 30s));
  CHECK(c.simGpus()[fragment] == "host01");
  c.bindAndWaitRunning("big", "host01");
  auto gpus = c.podGpus("big", "host01");
  std::sort(gpus.begin(), gpus.end());
  std::vector<std::string> want = {"c0.01", "c0.02", "c0.03", fragment};
  std::sort(want.begin(), want.end());
  CHECK(gpus == want);
  // Exactly one move, journaled as succeeded, nothing left draining.
  const json st = c.poolStatus();
  REQUIRE(st["moves"].size() == 1);
  CHECK(st["moves"][0]["phase"] == "Succeeded");
  CHECK(st["moves"][0]["gpu"] == fragment);
  CHECK(st["moves"][0]["fromNode"] == "host02");
  CHECK(st["moves"][0]["toNode"] == "host01");
  CHECK(st["moves"][0]["pod"] == "default/big");
  for (const auto& g : st["gpus"]) {
    CHECK(g["draining"] == false);
  }
  // Events on the pod per phase, and the paper's phase histograms once bound.
  auto events = c.client().list(kc::kube::gvr::events(), "default");
  REQUIRE(events);
  std::set<std::string> reasons;
  for (const auto& e : events->items) {
    if (e["involvedObject"].value("name", "") == "big") {
      reasons.insert(e.value("reason", ""));
    }
  }
  CHECK(reasons == std::set<std::string>{"GPUMoveStarted", "GPUDrained", "GPUMoved"});
  CHECK(kc::testing::eventually(
      [&] {
        return c.metrics(mgr).find(
                   R"(kubecomp_reconfig_phase_seconds_count{gpus="1",phase="reallocation"} 1)") !=
               std::string::npos;
      },
      10s));
  const std::string m = c.metrics(mgr);
  CHECK(m.find(R"(kubecomp_reconfig_moves_total{result="succeeded"} 1)") != std::string::npos);
  c.invariants();
}

TEST_CASE(
    "reconfig-mgr: Fig. 2 - a pod that fits nowhere runs after one device moves (unattached GPUs "
    "first)",
    "[reconfig][e2e]") {
  ClusterSpec s;
  s.nodes = {"node-a", "node-b"};
  s.chassis["c0"] = {{"1", "node-a"}, {"2", "node-a"}, {"3", "node-b"}, {"4", "node-b"}, {"5", ""}};
  SimCluster c(s);
  c.startManager();
  REQUIRE(c.waitAllocatable("node-a", 2));
  c.createPod("three", 3, "node-a");
  REQUIRE(c.waitAllocatable("node-a", 3));
  c.bindAndWaitRunning("three", "node-a");
  // The unattached GPU was the cheapest source: node-b keeps both of its GPUs.
  CHECK(c.simGpus()["c0.5"] == "node-a");
  CHECK(c.simGpus()["c0.3"] == "node-b");
  CHECK(c.simGpus()["c0.4"] == "node-b");
  // A second 3-GPU pod for node-b: needs one of node-a's... all busy, so nothing moves and
  // the pod gets a clear Warning; a third, satisfiable pod behind it is not blocked.
  c.createPod("stuck", 3, "node-b");
  c.createPod("fits", 2, "node-b");
  REQUIRE(c.pods().until(
      [&](const kc::kube::Store&) {
        auto ev = c.client().list(kc::kube::gvr::events(), "default");
        for (const auto& e : ev->items) {
          if (e["involvedObject"].value("name", "") == "stuck" &&
              e.value("reason", "") == "ReconfigInsufficient") {
            return true;
          }
        }
        return false;
      },
      20s));
  c.bindAndWaitRunning("fits", "node-b");
  CHECK(c.phaseOf("stuck") == "Pending");
  c.invariants();
}

TEST_CASE(
    "reconfig-mgr: a Redfish chassis with basic auth from a Secret - inventory and a move through "
    "AddResourceBlock",
    "[reconfig][e2e]") {
  ClusterSpec s;
  s.nodes = {"node-a", "node-b"};
  s.chassis["rf0"] = {{"1", "node-a"}, {"2", "node-b"}, {"3", "node-b"}};
  s.dialect = "redfish";
  SimCluster c(s);
  const int mgr = c.startManager();
  REQUIRE(c.poolUntil([](const json& st) { return st.value("totalGPUs", 0) == 3; }));
  CHECK(conditionStatus(c.poolStatus(), "Ready") == "True");
  REQUIRE(c.waitAllocatable("node-b", 2));
  c.createPod("two", 2, "node-a");
  REQUIRE(c.waitAllocatable("node-a", 2, 30s));
  c.bindAndWaitRunning("two", "node-a");
  CHECK(c.poolStatus()["moves"][0]["phase"] == "Succeeded");
  c.invariants();
  // SIGTERM: steps down and exits 0.
  CHECK(c.manager(mgr).terminate(10s) == 0);
}

TEST_CASE("reconfig-mgr: two pods racing for one node are both served and never share a GPU",
          "[reconfig][e2e]") {
  ClusterSpec s;
  s.nodes = {"host01", "host02", "host03"};
  s.chassis["c0"] = {{"01", "host01"}, {"02", "host01"}, {"03", "host02"},
                     {"04", "host02"}, {"05", "host03"}, {"06", "host03"}};
  SimCluster c(s);
  c.startManager();
  REQUIRE(c.waitAllocatable("host01", 2));
  // Both ask for host01 at once: 3 + 3 GPUs, 2 there. The first (FCFS) is counted the two
  // free ones and one move, the second four moves; neither counts the other's GPUs.
  c.createPod("first", 3, "host01");
  c.createPod("second", 3, "host01");
  REQUIRE(c.waitAllocatable("host01", 6, 60s));
  c.bindAndWaitRunning("first", "host01");
  c.bindAndWaitRunning("second", "host01");
  auto a = c.podGpus("first", "host01");
  auto b = c.podGpus("second", "host01");
  CHECK(a.size() == 3);
  CHECK(b.size() == 3);
  std::set<std::string> all(a.begin(), a.end());
  all.insert(b.begin(), b.end());
  CHECK(all.size() == 6);
  CHECK(c.poolStatus()["moves"].size() == 4);
  c.invariants();
}
