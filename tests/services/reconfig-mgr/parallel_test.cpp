// GPU moves of one pool in parallel across chassis (issue 29), every part a real process
// (cluster.hpp): one pool with two chassis, each cabled to every node. reconfig-mgr runs at most
// one move per chassis at a time (--moves-per-chassis 1, --moves-per-pool 0); each move's fabric
// step is one FabricDriver::move() on its own thread. Faults hit each phase of such a schedule:
// a SIGKILL with both chassis inside their fabric calls, a chassis that fails its attach, a
// destination node that never sees its GPU. Every scenario ends with the invariants against
// chassis-sim's true state (no GPU on two hosts or lost, every journal record finished, every
// running pod's GPUs on its own node).
//
// The oracle for "in parallel" is the journal as the API server published it: ScheduleLog
// watches the GPUPool and looks at every status written (each watch event, not a sample).

#include <catch2/catch.hpp>
#include <mutex>

#include "libcore/kube/informer.hpp"
#include "tests/services/reconfig-mgr/cluster.hpp"
#include "tests/support/wait.hpp"

using kc::reconfig::testing::ClusterSpec;
using kc::reconfig::testing::SimCluster;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

bool finishedPhase(const std::string& phase) {
  return phase == "Succeeded" || phase == "Failed";
}

std::string chassisOf(const std::string& gpu) {
  return gpu.substr(0, gpu.find('.'));
}

// Every GPUPool status the API server sent, as it came: what was in flight at each moment.
// Handlers run on the informer's thread; what they found sits under mu_.
class ScheduleLog {
 public:
  struct Summary {
    std::size_t statuses = 0;             // statuses seen with at least one record
    std::size_t maxActive = 0;            // records in flight at one moment, all chassis
    std::size_t maxActiveOneChassis = 0;  // ... on one chassis
    // Two records in Detaching (inside their fabric calls) on two chassis at one moment.
    bool twoChassisInFabric = false;
    // GPUs whose record finished while another GPU's record was still in flight.
    std::set<std::string> finishedBesideActive;
    std::map<std::string, std::set<std::string>> phases;  // GPU -> every phase its records showed
  };

  explicit ScheduleLog(kc::kube::KubeClient& client) : informer_(client, options()) {
    informer_.addHandler(
        {[this](const kc::kube::ObjectPtr& o) { see(*o); },
         [this](const kc::kube::ObjectPtr&, const kc::kube::ObjectPtr& o) { see(*o); },
         [](const kc::kube::ObjectPtr&) {}});
    informer_.start();
    REQUIRE(informer_.waitForSync(10s));
  }
  ~ScheduleLog() { informer_.stop(); }
  ScheduleLog(const ScheduleLog&) = delete;
  ScheduleLog& operator=(const ScheduleLog&) = delete;

  Summary summary() {
    std::lock_guard lock(mu_);
    return s_;
  }

 private:
  static kc::kube::InformerOptions options() {
    kc::kube::InformerOptions o;
    o.resource = kc::reconfig::testing::kGpuPools;
    return o;
  }

  void see(const json& pool) {
    if (pool["metadata"].value("name", "") != "pool-a") {
      return;
    }
    const json moves = pool.value("status", json::object()).value("moves", json::array());
    std::lock_guard lock(mu_);
    if (!moves.empty()) {
      ++s_.statuses;
    }
    std::map<std::string, std::size_t> perChassis;
    std::set<std::string> inFabric;
    std::set<std::string> active;
    for (const auto& m : moves) {
      const std::string gpu = m.value("gpu", "");
      const std::string phase = m.value("phase", "");
      s_.phases[gpu].insert(phase);
      if (finishedPhase(phase)) {
        continue;
      }
      active.insert(gpu);
      s_.maxActiveOneChassis = std::max(s_.maxActiveOneChassis, ++perChassis[chassisOf(gpu)]);
      if (phase == "Detaching") {
        inFabric.insert(chassisOf(gpu));
      }
    }
    s_.maxActive = std::max(s_.maxActive, active.size());
    s_.twoChassisInFabric = s_.twoChassisInFabric || inFabric.size() >= 2;
    if (!active.empty()) {
      for (const auto& gpu : lastActive_) {
        if (active.count(gpu) == 0) {
          s_.finishedBesideActive.insert(gpu);
        }
      }
    }
    lastActive_ = std::move(active);
  }

  std::mutex mu_;  // guards s_ and lastActive_ (the informer's thread writes, the test reads)
  Summary s_;
  std::set<std::string> lastActive_;
  kc::kube::Informer informer_;  // last: its thread stops before the members above go
};

// host01 has no GPU; chassis c0 has two on host02, chassis c1 two on host03. A pod for 4 on
// host01 needs four moves, two per chassis.
ClusterSpec twoChassis(double latencyScale) {
  ClusterSpec s;
  s.nodes = {"host01", "host02", "host03"};
  s.chassis["c0"] = {{"01", "host02"}, {"02", "host02"}};
  s.chassis["c1"] = {{"01", "host03"}, {"02", "host03"}};
  s.latencyScale = latencyScale;
  return s;
}

// The records of status.moves (active and history) of `gpu`.
std::vector<json> recordsOf(const json& status, const std::string& gpu) {
  std::vector<json> out;
  for (const auto& m : status.value("moves", json::array())) {
    if (m.value("gpu", "") == gpu) {
      out.push_back(m);
    }
  }
  return out;
}

// The newest record of a move to `node` (status.moves lists the active ones, then the history
// newest first: the first match).
json moveTo(const json& status, const std::string& node) {
  for (const auto& m : status.value("moves", json::array())) {
    if (m.value("toNode", "") == node) {
      return m;
    }
  }
  return json::object();
}

std::set<std::string> activeChassisIn(const json& status, const std::string& phase) {
  std::set<std::string> out;
  for (const auto& m : status.value("moves", json::array())) {
    if (m.value("phase", "") == phase) {
      out.insert(chassisOf(m.value("gpu", "")));
    }
  }
  return out;
}

// "reason: message" of every Event on the pod, one per line.
std::string podEvents(SimCluster& c, const std::string& pod) {
  std::string out;
  auto list = c.client().listAll(kc::kube::gvr::events(), "default");
  REQUIRE(list);
  for (const auto& e : list->items) {
    if (e.value("involvedObject", json::object()).value("name", "") == pod) {
      out += e.value("reason", "") + ": " + e.value("message", "") + "\n";
    }
  }
  return out;
}

// Serves the pod for 4 on host01 and checks the four records: one per GPU, all Succeeded.
void serveFour(SimCluster& c, std::chrono::milliseconds limit = 60s) {
  REQUIRE(c.waitAllocatable("host01", 4, limit));
  c.bindAndWaitRunning("big", "host01");
  CHECK(c.podGpus("big", "host01").size() == 4);
  const json st = c.poolStatus();
  for (const std::string gpu : {"c0.01", "c0.02", "c1.01", "c1.02"}) {
    CAPTURE(gpu, st["moves"]);
    const auto records = recordsOf(st, gpu);
    REQUIRE(records.size() == 1);  // moved once
    CHECK(records[0]["phase"] == "Succeeded");
    CHECK(records[0]["toNode"] == "host01");
  }
}

// Records on one chassis (with wholePool: any two records) never overlap in time: each starts
// no earlier than the one before it ended. The journal's stamps are whole seconds, so records
// started in the same second are not compared: a cross-check of ScheduleLog, weaker than it.
void sameChassisInTurn(const json& status, bool wholePool) {
  std::vector<json> done;
  for (const auto& m : status.value("moves", json::array())) {
    done.push_back(m);
  }
  for (const auto& a : done) {
    for (const auto& b : done) {
      const bool sameChassis = chassisOf(a.value("gpu", "")) == chassisOf(b.value("gpu", ""));
      if (a == b || !(wholePool || sameChassis) || a["startedAt"] > b["startedAt"]) {
        continue;
      }
      CAPTURE(a, b);
      // a started first (or in the same second): b began once a ended.
      if (a["startedAt"] < b["startedAt"]) {
        CHECK(b["startedAt"] >= a["phaseSince"]);
      }
    }
  }
}

}  // namespace

TEST_CASE(
    "parallel moves: two chassis move at once, one chassis moves one GPU at a time, and "
    "--moves-per-pool 1 is the serial schedule",
    "[reconfig][e2e]") {
  const auto perPool = GENERATE(as<std::string>{}, "0", "1");
  CAPTURE(perPool);
  // A tenth of the measured H3 latencies: each fabric step lasts about 2 s.
  SimCluster c(twoChassis(0.1));
  c.startManager({"--moves-per-pool", perPool});
  REQUIRE(c.waitAllocatable("host02", 2));
  REQUIRE(c.waitAllocatable("host03", 2));
  ScheduleLog log(c.client());
  c.createPod("big", 4, "host01");
  serveFour(c);
  auto s = log.summary();
  CAPTURE(s.statuses, s.maxActive, s.maxActiveOneChassis);
  CHECK(s.maxActiveOneChassis == 1);  // never two moves on one chassis
  if (perPool == "0") {
    CHECK(s.maxActive == 2);      // one per chassis
    CHECK(s.twoChassisInFabric);  // both fabric steps ran at one moment
    sameChassisInTurn(c.poolStatus(), false);
  } else {
    CHECK(s.maxActive == 1);
    CHECK_FALSE(s.twoChassisInFabric);
    sameChassisInTurn(c.poolStatus(), true);
  }
  c.invariants();
}

TEST_CASE(
    "parallel moves: SIGKILL with both chassis inside their fabric calls, and a restart "
    "finishes both without moving anything twice",
    "[reconfig][e2e]") {
  SimCluster c(twoChassis(0.1));
  const int first = c.startManager();
  REQUIRE(c.waitAllocatable("host02", 2));
  REQUIRE(c.waitAllocatable("host03", 2));
  ScheduleLog log(c.client());
  c.createPod("big", 4, "host01");
  // Both chassis' moves in Detaching: FabricDriver::move() running on two threads.
  std::map<std::string, std::string> started;  // GPU -> startedAt of its record in Detaching
  const bool hit = c.poolUntil(
      [&](const json& st) {
        started.clear();
        for (const auto& m : st.value("moves", json::array())) {
          if (m.value("phase", "") == "Detaching") {
            started[m.value("gpu", "")] = m.value("startedAt", "");
          }
        }
        return activeChassisIn(st, "Detaching").size() == 2;
      },
      30s);
  // ... and each chassis has the move's first request (its unassign) in hand: chassis-sim
  // counts a request when it arrives and answers after its latency (0.5-0.8 s here, then the
  // assign 0.8-1.6 s), so the kill lands inside both fabric calls.
  const bool sent =
      hit && kc::testing::eventually([&] { return c.simCounter("unassign") >= 2; }, 10s, 20ms);
  c.killManager(first);
  REQUIRE(hit);
  REQUIRE(sent);
  CHECK(activeChassisIn(c.poolStatus(), "Detaching").size() == 2);
  auto atKill = c.client().get(kc::reconfig::testing::kGpuPools, "", "pool-a");
  REQUIRE(atKill);
  CAPTURE((*atKill)["status"]["moves"]);
  REQUIRE(started.size() == 2);
  c.startManager();
  serveFour(c);
  // The two interrupted moves resumed from their records (same startedAt), not started anew.
  const json st = c.poolStatus();
  for (const auto& [gpu, since] : started) {
    CAPTURE(gpu);
    const auto records = recordsOf(st, gpu);
    REQUIRE(records.size() == 1);
    CHECK(records[0]["startedAt"] == since);
  }
  // Four moves, each request sent once, except that the two interrupted fabric steps may be
  // sent again on resume (their unassign was in hand at the kill; it is idempotent).
  CHECK(c.simCounter("unassign") >= 4);
  CHECK(c.simCounter("unassign") <= 6);
  CHECK(c.simCounter("assign") >= 4);
  CHECK(c.simCounter("assign") <= 6);
  CHECK(log.summary().maxActiveOneChassis == 1);
  c.invariants();
}

TEST_CASE(
    "parallel moves: a chassis that fails its attach fails its own move only - the other "
    "chassis' move succeeds undisturbed and the pod waits with the reason",
    "[reconfig][e2e]") {
  ClusterSpec spec = twoChassis(0.1);
  spec.chassis["c0"] = {{"01", "host02"}};
  spec.chassis["c1"] = {{"01", "host03"}};
  SimCluster c(spec);
  // Two tries per phase; a failed GPU is held back 1 s before it is moved again.
  c.startManager({"--max-attempts", "2", "--move-failure-backoff-seconds", "1"});
  REQUIRE(c.waitAllocatable("host02", 1));
  REQUIRE(c.waitAllocatable("host03", 1));
  // Every assign on c1 fails (the roll-back's too) until the faults are cleared.
  c.fault({{"chassis", "c1"}, {"op", "assign"}, {"kind", "fail"}, {"times", -1}});
  ScheduleLog log(c.client());
  c.createPod("pair", 2, "host01");
  json failed;
  REQUIRE(c.poolUntil(
      [&](const json& st) {
        const auto c1 = recordsOf(st, "c1.01");
        failed = c1.empty() ? json() : c1.back();  // the oldest: the first move
        const auto c0 = recordsOf(st, "c0.01");
        return !c0.empty() && c0.front()["phase"] == "Succeeded" && !c1.empty() &&
               c1.back()["phase"] == "Failed";
      },
      60s));
  CAPTURE(failed);
  // c0's move: the plain path, first time, verified.
  const json ok = recordsOf(c.poolStatus(), "c0.01").front();
  CAPTURE(ok);
  CHECK(ok["attempts"] == 0);
  CHECK(ok.value("message", "").find("verified") != std::string::npos);
  auto s = log.summary();
  CHECK(s.phases["c0.01"] ==
        std::set<std::string>{"Draining", "Detaching", "Verifying", "Succeeded"});
  CHECK(s.maxActive == 2);
  CHECK(s.finishedBesideActive.count("c0.01") == 1);  // done while c1's move still ran
  CHECK(s.phases["c1.01"].count("RollingBack") == 1);
  // c1's move: the attach failed at every try; the roll-back's attach fails too, so the GPU is
  // left unattached in the pool (it is detached already), never on two hosts.
  const std::string why = failed.value("message", "");
  CHECK(why.find("attach to host01 failed") != std::string::npos);
  auto truth = c.simGpus();
  CHECK(truth.at("c0.01") == "host01");
  if (why.find("rolled back to host03") != std::string::npos) {
    CHECK(truth.at("c1.01") == "host03");
  } else {
    CHECK(why.find("left unattached") != std::string::npos);
    CHECK(truth.at("c1.01") == "");
  }
  // The pod waits, and says why.
  CHECK(c.phaseOf("pair") == "Pending");
  CHECK(c.waitAllocatable("host01", 1));
  CHECK(c.allocatable("host01") == 1);
  std::string events;
  CHECK(kc::testing::eventually([&] {
    events = podEvents(c, "pair");
    return events.find("GPUMoveFailed: GPU c1.01 from host03 to host01") != std::string::npos;
  }));
  CAPTURE(events);
  // The chassis heals: c1's GPU is attached after its backoff and the pod runs.
  c.clearFaults();
  REQUIRE(c.waitAllocatable("host01", 2, 60s));
  c.bindAndWaitRunning("pair", "host01");
  const auto gpus = c.podGpus("pair", "host01");
  CHECK(std::set<std::string>(gpus.begin(), gpus.end()) == std::set<std::string>{"c0.01", "c1.01"});
  c.invariants();
}

TEST_CASE(
    "parallel moves: a destination node that never sees its GPU fails that move only - left "
    "attached, not offered - while the other chassis' move succeeds",
    "[reconfig][devplugin][e2e]") {
  ClusterSpec spec;
  spec.nodes = {"host01", "host02", "host03"};
  spec.chassis["c0"] = {{"1", "host03"}};
  spec.chassis["c1"] = {{"1", "host03"}};
  // The node agents check their hosts; the kernel misses every hot-add. host01's agent rescans
  // the PCI bus after 1 s of a GPU it should have and does not see; host02's never does.
  spec.hostView = true;
  spec.hostNeedsRescan = true;
  spec.nodePluginFlags["host01"] = {"--rescan-after-seconds", "1"};
  SimCluster c(spec);
  c.startManager({"--node-confirm-timeout-seconds", "3"});
  REQUIRE(c.waitAllocatable("host03", 2));
  ScheduleLog log(c.client());
  c.createPod("seen", 1, "host01");
  c.createPod("blind", 1, "host02");
  REQUIRE(c.waitAllocatable("host01", 1, 30s));
  c.bindAndWaitRunning("seen", "host01");
  REQUIRE(c.poolUntil(
      [](const json& st) { return moveTo(st, "host02").value("phase", "") == "Failed"; }, 30s));
  const json st = c.poolStatus();
  const json good = moveTo(st, "host01");
  const json bad = moveTo(st, "host02");
  CAPTURE(good, bad);
  const std::string goodGpu = good.value("gpu", "");
  const std::string badGpu = bad.value("gpu", "");
  CHECK(good["phase"] == "Succeeded");
  CHECK(good.value("message", "").find("by the node's host") != std::string::npos);
  CHECK(chassisOf(goodGpu) != chassisOf(badGpu));
  const std::string why = bad.value("message", "");
  CHECK(why.find("node host02 does not see GPU " + badGpu) != std::string::npos);
  CHECK(why.find("left attached, not offered to pods") != std::string::npos);
  // Both moves were in flight at once; host01's finished while host02's waited for its node.
  auto s = log.summary();
  CHECK(s.maxActive == 2);
  CHECK(s.maxActiveOneChassis == 1);
  CHECK(s.finishedBesideActive.count(goodGpu) == 1);
  CHECK(s.phases[badGpu].count("Verifying") == 1);
  // The chassis has the GPU on host02; host02 never offers it; its pod waits.
  CHECK(c.simGpus().at(badGpu) == "host02");
  CHECK(c.allocatable("host02") == 0);
  CHECK(c.phaseOf("blind") == "Pending");
  c.invariants();
}
