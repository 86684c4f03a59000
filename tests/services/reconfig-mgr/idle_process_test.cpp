// Idle-time recomposition through the reconfig-mgr process (--recompose-policy idle-gather)
// with the API server double, chassis-sim, kubelet stand-ins and the real device plugins
// (cluster.hpp). The test plays kubecomp-sched. Nothing waits and the recent arrivals asked for
// 8 GPUs: free GPUs are gathered on one node in the background, one journaled move at a time;
// a real request that comes while a background move is past its detach waits for that one
// move only, one that comes while it is still draining cancels it; the default policy (none)
// moves nothing.

#include <catch2/catch.hpp>
#include <set>

#include "tests/services/reconfig-mgr/cluster.hpp"

using kc::reconfig::testing::ClusterSpec;
using kc::reconfig::testing::SimCluster;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// Host01 holds GPU01-03, Host02 GPU04-06, Host03 GPU07-08: 8 free GPUs, no node with more
// than 3.
ClusterSpec spread() {
  ClusterSpec s;
  s.nodes = {"host01", "host02", "host03"};
  s.chassis["c0"] = {{"01", "host01"}, {"02", "host01"}, {"03", "host01"}, {"04", "host02"},
                     {"05", "host02"}, {"06", "host02"}, {"07", "host03"}, {"08", "host03"}};
  return s;
}

// An 8-GPU pod that came and went (the recent arrival mix): created, then Succeeded.
void pastEightGpuJob(SimCluster& c) {
  c.createPod("past", 8);
  auto pod = c.client().get(kc::kube::gvr::pods(), "default", "past");
  REQUIRE(pod);
  json body = *pod;
  body["status"] = {{"phase", "Succeeded"}};
  REQUIRE(c.client().updateStatus(kc::kube::gvr::pods(), "default", body));
}

int onNode(SimCluster& c, const std::string& node) {
  int n = 0;
  for (const auto& [id, at] : c.simGpus()) {
    n += at == node ? 1 : 0;
  }
  return n;
}

bool poolEvent(SimCluster& c, const std::string& reason) {
  auto ev = c.client().list(kc::kube::gvr::events(), "default");
  if (!ev) {
    return false;
  }
  for (const auto& e : ev->items) {
    if (e["involvedObject"].value("kind", "") == "GPUPool" &&
        e["involvedObject"].value("name", "") == "pool-a" && e.value("reason", "") == reason) {
      return true;
    }
  }
  return false;
}

}  // namespace

TEST_CASE(
    "reconfig-mgr idle-gather: free GPUs gathered for the recent 8-GPU arrivals - a real "
    "request waits for the one move in flight only",
    "[reconfig][e2e]") {
  SimCluster c(spread());
  pastEightGpuJob(c);
  // The first background move (GPU07, Host03's fragment, to Host01) hangs 2.5 s in its attach:
  // it is past the detach when the real request comes.
  c.fault({{"chassis", "c0"},
           {"op", "assign"},
           {"kind", "hang"},
           {"hangMs", 2500},
           {"gpu", "07"},
           {"times", 1}});
  const int id = c.startManager({"--recompose-policy", "idle-gather"});
  REQUIRE(c.poolUntil([](const json& st) {
    for (const auto& m : st.value("moves", json::array())) {
      // Past the drain: inside the move's fabric step (detach, the hanging attach, the read).
      if (m.value("phase", "") == "Detaching" && m.value("kind", "") == "Background") {
        return true;
      }
    }
    return false;
  }));
  const json inFlight = c.poolStatus()["moves"][0];
  CHECK(inFlight["gpu"] == "c0.07");
  CHECK(inFlight["toNode"] == "host01");
  CHECK(inFlight["pod"] == "");
  CHECK(inFlight.value("reason", "").find("8 GPUs") != std::string::npos);

  // A 4-GPU pod for Host02 (3 free there): the scheduler annotates it now.
  c.createPod("real", 4, "host02");
  REQUIRE(c.waitAllocatable("host02", 4, 60s));
  c.bindAndWaitRunning("real", "host02");
  c.invariants();

  // The journal, newest first: the real pod's move, right after the background move that was
  // in flight when it came; nothing else in between, and nothing after (the pool no longer has
  // 8 free GPUs to gather).
  const json moves = c.poolStatus()["moves"];
  REQUIRE(moves.size() == 2);
  CHECK(moves[0]["pod"] == "default/real");
  CHECK(moves[0].value("kind", "Demand") == "Demand");
  CHECK(moves[0]["phase"] == "Succeeded");
  CHECK(moves[1]["gpu"] == "c0.07");
  CHECK(moves[1]["kind"] == "Background");
  CHECK(moves[1]["phase"] == "Succeeded");
  CHECK(c.simGpus().at("c0.07") == "host01");
  CHECK(poolEvent(c, "GPUMoveStarted"));
  CHECK(poolEvent(c, "GPUMoved"));
  const std::string m = c.metrics(id);
  CHECK(m.find(R"(kubecomp_reconfig_background_moves_total{result="succeeded"} 1)") !=
        std::string::npos);
  CHECK(m.find(R"(kubecomp_reconfig_moves_total{result="succeeded"} 2)") != std::string::npos);
}

TEST_CASE(
    "reconfig-mgr idle-gather: a background move still draining is cancelled by a real "
    "request, which is served at once",
    "[reconfig][e2e]") {
  SimCluster c(spread());
  pastEightGpuJob(c);
  // Host03's plugin stops: the first background move (GPU07, Host03's fragment, to Host01)
  // never gets its withdrawal confirmed and stays Draining.
  c.stopPlugin("host03");
  // first-fit: the real request's source is Host01's GPU01, not the stuck Host03.
  const int id = c.startManager({"--recompose-policy", "idle-gather", "--gpu-policy", "first-fit"});
  REQUIRE(c.poolUntil([](const json& st) {
    const auto moves = st.value("moves", json::array());
    return !moves.empty() && moves[0].value("phase", "") == "Draining" &&
           moves[0].value("kind", "") == "Background" && moves[0].value("gpu", "") == "c0.07";
  }));
  c.createPod("real", 4, "host02");
  REQUIRE(c.waitAllocatable("host02", 4, 60s));
  c.bindAndWaitRunning("real", "host02");
  c.invariants();
  const json moves = c.poolStatus()["moves"];
  REQUIRE(moves.size() == 2);
  CHECK(moves[0]["pod"] == "default/real");
  CHECK(moves[0]["phase"] == "Succeeded");
  CHECK(moves[0]["gpu"] == "c0.01");
  CHECK(moves[1]["gpu"] == "c0.07");
  CHECK(moves[1]["kind"] == "Background");
  CHECK(moves[1]["phase"] == "Failed");
  CHECK(moves[1].value("cancelled", false));
  CHECK(moves[1].value("message", "").find("default/real") != std::string::npos);
  CHECK(c.simGpus().at("c0.07") == "host03");  // never detached
  CHECK(poolEvent(c, "GPUMoveCancelled"));
  const std::string m = c.metrics(id);
  CHECK(m.find(R"(kubecomp_reconfig_background_moves_total{result="cancelled"} 1)") !=
        std::string::npos);
  // The failure kinds are exported from start at 0 (docs/monitoring.md): none counted.
  CHECK(m.find(R"(kubecomp_reconfig_failures_total{kind="move"} 0)") != std::string::npos);
}

TEST_CASE(
    "reconfig-mgr idle-gather: nothing waits, all 8 free GPUs end on one node - policy none "
    "moves nothing",
    "[reconfig][e2e]") {
  SimCluster c(spread());
  pastEightGpuJob(c);
  SECTION("none (the default)") {
    c.startManager();
    // Three inventory polls later (1 s apart, each a status write) nothing has moved.
    std::set<std::string> polls;
    REQUIRE(c.poolUntil(
        [&](const json& st) {
          if (st.contains("lastInventoryTime")) {
            polls.insert(st["lastInventoryTime"].get<std::string>());
          }
          return polls.size() >= 4;
        },
        30s));
    CHECK(c.poolStatus().value("moves", json::array()).empty());
    CHECK(onNode(c, "host01") == 3);
  }
  SECTION("idle-gather") {
    const int id = c.startManager({"--recompose-policy", "idle-gather"});
    REQUIRE(c.poolUntil(
        [&](const json& st) {
          const auto moves = st.value("moves", json::array());
          if (moves.size() != 5) {
            return false;
          }
          for (const auto& m : moves) {
            if (m.value("phase", "") != "Succeeded") {
              return false;
            }
          }
          return true;
        },
        90s));
    CHECK(onNode(c, "host01") == 8);
    for (const auto& m : c.poolStatus()["moves"]) {
      CHECK(m["kind"] == "Background");
      CHECK(m["toNode"] == "host01");
    }
    c.invariants();
    CHECK(c.waitAllocatable("host01", 8));  // the plugin advertises them, kubelet syncs
    const std::string text = c.metrics(id);
    CHECK(text.find(R"(kubecomp_reconfig_background_moves_total{result="succeeded"} 5)") !=
          std::string::npos);
  }
}
