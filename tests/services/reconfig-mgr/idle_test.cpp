// Idle-time recomposition in reconfig-mgr (idle_planner.hpp): background moves planned by
// libcore's planIdleMoves and carried out by the same MoveRunner and journal as demand moves,
// on FakeDriver + FakeClock. A miniature pool worker runs what PoolWorker runs on each wake:
// the move in flight as far as it goes, then the demand plan, and only when no real request
// waits the idle plan. The device plugins are played by the harness: a GPU that is draining
// at one wake shows withdrawn at the next (unless the test holds it).

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "libcore/alloc/policy_registry.hpp"
#include "libcore/base/rfc3339.hpp"
#include "libcore/fabric/pool.hpp"
#include "services/reconfig-mgr/idle_planner.hpp"
#include "services/reconfig-mgr/move_runner.hpp"
#include "tests/support/fakes/fake_clock.hpp"
#include "tests/support/fakes/fake_driver.hpp"

using kc::reconfig::Journal;
using kc::reconfig::Move;
using kc::reconfig::MoveKind;
using kc::reconfig::MovePhase;
using kc::reconfig::PodInfo;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::vector<std::string> kNodes = {"host01", "host02", "host03", "host04"};

kc::reconfig::PoolSpec poolSpec() {
  json nodes = json::array();
  for (std::size_t i = 0; i < kNodes.size(); ++i) {
    nodes.push_back({{"name", kNodes[i]}, {"hostPort", std::to_string(i + 1)}});
  }
  const json obj = {{"metadata", {{"name", "pool-a"}, {"generation", 1}}},
                    {"spec",
                     {{"chassis", {{{"name", "c0"}, {"driver", "h3"}, {"endpoint", "http://x"}}}},
                      {"nodes", nodes}}}};
  return *kc::reconfig::parsePoolSpec(obj, "kubecomp");
}

// One pool: chassis c0 with hosts 1..4 = host01..host04.
class Pool final : public kc::reconfig::MoveEnv {
 public:
  // `layout`: GPU local id -> node ("" unattached).
  Pool(const std::vector<std::pair<std::string, std::string>>& layout,
       kc::alloc::RecomposeKind kind)
      : spec_(poolSpec()), runner_(*this, clock, options()), kind_(kind) {
    auto driver = std::make_unique<kc::testing::FakeDriver>(
        "c0", std::vector<std::string>{"1", "2", "3", "4"});
    chassis = driver.get();
    for (const auto& [id, node] : layout) {
      chassis->addGpu(id, node.empty() ? std::nullopt : std::optional<std::string>(portOf(node)));
    }
    std::vector<std::unique_ptr<kc::fabric::FabricDriver>> members;
    members.push_back(std::move(driver));
    fabric_ = std::move(kc::fabric::FabricPool::create("pool-a", std::move(members)).value());
    for (const auto& n : kNodes) {
      nodes[n] = kc::reconfig::NodeCapacity{64'000, 256 * 1024, false};
    }
  }

  // --- the cluster, as the test sets it ---
  // A kubecomp-sched pod created at `createdSec`.
  PodInfo& addPod(const std::string& name, std::int64_t gpus, int createdSec) {
    PodInfo p;
    p.ns = "default";
    p.name = name;
    p.uid = "uid-" + name;
    p.created = std::chrono::system_clock::time_point(std::chrono::seconds(createdSec));
    p.gpus = gpus;
    p.phase = "Pending";
    pods.push_back(p);
    return pods.back();
  }
  PodInfo* pod(const std::string& name) {
    for (auto& p : pods) {
      if (p.name == name) {
        return &p;
      }
    }
    return nullptr;
  }
  // A finished pod: part of the recent arrival mix, holds nothing.
  void arrivedAndFinished(const std::string& name, std::int64_t gpus, int createdSec) {
    PodInfo& p = addPod(name, gpus, createdSec);
    p.nodeName = "host01";
    p.phase = "Succeeded";
  }
  // A pod running on `node` on the given GPUs (the plugin reports them in use).
  void running(const std::string& name, const std::string& node,
               const std::vector<std::string>& gpus, int createdSec) {
    PodInfo& p = addPod(name, static_cast<std::int64_t>(gpus.size()), createdSec);
    p.nodeName = node;
    p.phase = "Running";
    for (const auto& g : gpus) {
      inUse[node][g] = {"default/" + name};
    }
  }

  // A restarted process: the journal read from the status, which the plugins saw too.
  void restore(const Journal& j) {
    journal = j;
    seenDraining_ = j.active && j.active->phase == MovePhase::kDraining ? j.active->gpu : "";
  }

  // --- one wake of the worker ---
  void wake() {
    syncPlugins();
    for (int i = 0; i < 64; ++i) {
      auto out = runner_.step(journal);
      if (out.kind == kc::reconfig::MoveRunner::Outcome::Kind::kProgressed) {
        continue;
      }
      if (out.kind == kc::reconfig::MoveRunner::Outcome::Kind::kWaiting) {
        return;
      }
      planAndStart();
      if (!journal.active) {
        return;
      }
    }
  }
  // Wakes until nothing is in flight and nothing new starts (at most `limit` wakes); clock
  // advanced past any backoff each time.
  void settle(int limit = 40) {
    for (int i = 0; i < limit; ++i) {
      wake();
      if (!journal.active) {
        wake();
        if (!journal.active) {
          return;
        }
      }
      clock.advance(1s);
    }
    std::string moves;
    for (const auto& s : started) {
      moves += s + "; ";
    }
    FAIL("the pool did not settle: " << moves
                                     << (journal.active ? journal.active->message : std::string()));
  }

  // GPU id -> node, as the chassis shows it.
  std::map<std::string, std::string> layout() {
    std::map<std::string, std::string> out;
    auto inv = chassis->inventory();
    REQUIRE(inv);
    for (const auto& g : inv->gpus) {
      out[g.id] = g.hostPort ? nodeOfPort(*g.hostPort) : "";
    }
    return out;
  }
  int onNode(const std::string& node) {
    int n = 0;
    for (const auto& [id, at] : layout()) {
      n += at == node ? 1 : 0;
    }
    return n;
  }
  kc::reconfig::PoolView view() {
    auto inv = fabric_->inventory();
    REQUIRE(inv);
    return kc::reconfig::buildView(spec_, *inv, usageByNode(), journal, quarantined);
  }

  // --- MoveEnv ---
  kc::fabric::FabricDriver& fabric() override { return *fabric_; }
  std::optional<kc::api::UsageReport> usage(const std::string& node) override {
    auto all = usageByNode();
    auto it = all.find(node);
    if (it == all.end()) {
      return std::nullopt;
    }
    return it->second;
  }
  bool podWaiting(const Move& m) override {
    const PodInfo* p = pod(m.podName);
    return p != nullptr && p->waiting() && p->dstNode == m.toNode;
  }
  std::optional<std::string> cancelBackground(const Move& m) override {
    const auto v = view();
    return kc::reconfig::backgroundCancelReason(demandPlan(v), v, pods, m);
  }
  kc::Status persist(const Journal& j) override {
    persisted.push_back(j.toJson());
    // The plugins see the status: a GPU no longer draining is advertised again (its
    // withdrawal is gone); a newly draining one is withdrawn by the next sync.
    const std::string draining =
        j.active && j.active->phase == MovePhase::kDraining ? j.active->gpu : "";
    if (draining != seenDraining_) {
      withdrawn_.clear();
      seenDraining_ = draining;
    }
    return kc::okStatus();
  }
  void event(const Move&, bool warning, const std::string& reason, const std::string&) override {
    events.push_back((warning ? "W " : "N ") + reason);
  }
  void inventoryRead(const kc::fabric::Inventory&) override {}
  void quarantine(const std::string&, const std::string&) override {}
  void unsupported(const std::string&) override {}

  kc::testing::FakeClock clock;
  kc::testing::FakeDriver* chassis = nullptr;
  Journal journal;
  std::vector<PodInfo> pods;
  std::map<std::string, kc::reconfig::NodeCapacity> nodes;
  std::map<std::string, std::map<std::string, std::vector<std::string>>>
      inUse;  // node -> gpu -> pods
  bool pluginsWithdraw = true;
  kc::reconfig::Quarantine quarantined;  // status.quarantine
  std::vector<std::string> started;      // "B c0.x>node" / "D c0.x>node", in start order
  std::vector<json> persisted;
  std::vector<std::string> events;

 private:
  static kc::reconfig::MoveRunnerOptions options() {
    kc::reconfig::MoveRunnerOptions o;
    o.maxAttempts = 3;
    o.backoff = {100ms, 400ms, 2.0, 0.0};
    return o;
  }
  static std::string portOf(const std::string& node) {
    for (std::size_t i = 0; i < kNodes.size(); ++i) {
      if (kNodes[i] == node) {
        return std::to_string(i + 1);
      }
    }
    return "?";
  }
  static std::string nodeOfPort(const std::string& port) {
    const std::size_t i = std::stoul(port);
    return i >= 1 && i <= kNodes.size() ? kNodes[i - 1] : "?";
  }

  // The plugins confirm the withdrawal of the GPU they saw draining.
  void syncPlugins() {
    if (pluginsWithdraw && !seenDraining_.empty() && journal.active &&
        journal.active->gpu == seenDraining_) {
      withdrawn_[journal.active->fromNode] = seenDraining_;
    }
  }
  kc::reconfig::UsageByNode usageByNode() {
    kc::reconfig::UsageByNode out;
    for (const auto& n : kNodes) {
      kc::api::UsageReport r;
      r.registered = true;
      if (auto it = inUse.find(n); it != inUse.end()) {
        r.inUse = it->second;
      }
      if (auto it = withdrawn_.find(n); it != withdrawn_.end()) {
        r.withdrawn.push_back(it->second);
      }
      out[n] = r;
    }
    return out;
  }
  kc::reconfig::PlanResult demandPlan(const kc::reconfig::PoolView& v) {
    kc::reconfig::PlanInputs in;
    in.spec = &spec_;
    in.view = &v;
    in.pods = &pods;
    in.active = &journal.active;
    in.policy = *kc::alloc::findGpuPolicy("unattached-first");
    return kc::reconfig::planMoves(in);
  }
  // PoolWorker::planAndStart: the demand move first; the idle plan only when none waits.
  void planAndStart() {
    const auto v = view();
    const auto demand = demandPlan(v);
    std::optional<Move> next = demand.next;
    if (!next && !kc::reconfig::demandWaits(demand)) {
      kc::reconfig::IdleInputs in;
      in.spec = &spec_;
      in.view = &v;
      in.pods = &pods;
      in.demand = &demand;
      in.nodes = &nodes;
      in.journal = &journal;
      in.kind = kind_;
      in.gpuPolicy = *kc::alloc::findGpuPolicy("unattached-first");
      in.now = clock.wallNow();
      auto idle = kc::reconfig::planIdle(in);
      REQUIRE(idle);
      next = idle->next;
    }
    if (next) {
      REQUIRE(runner_.start(journal, *next));
      started.push_back(std::string(next->background() ? "B " : "D ") + next->gpu + ">" +
                        next->toNode);
    }
  }

  kc::reconfig::PoolSpec spec_;
  std::unique_ptr<kc::fabric::FabricPool> fabric_;
  kc::reconfig::MoveRunner runner_;
  kc::alloc::RecomposeKind kind_;
  std::map<std::string, std::string> withdrawn_;  // node -> GPU confirmed withdrawn
  std::string seenDraining_;                      // the GPU the last status showed draining
};

// Eight free GPUs spread 3 + 2 + 2 + 1 over four nodes.
std::vector<std::pair<std::string, std::string>> spread() {
  return {{"1", "host01"}, {"2", "host01"}, {"3", "host01"}, {"4", "host02"},
          {"5", "host02"}, {"6", "host03"}, {"7", "host03"}, {"8", "host04"}};
}

bool startsWith(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

}  // namespace

TEST_CASE(
    "idle-gather: nothing waits, recent arrivals want 8 GPUs: gathered on one node, one "
    "move at a time",
    "[reconfig][idle]") {
  Pool pool(spread(), kc::alloc::RecomposeKind::IdleGather);
  pool.arrivedAndFinished("job-a", 8, 10);
  pool.arrivedAndFinished("job-b", 2, 20);

  // The first wake starts exactly one background move and it waits for the plugin.
  pool.wake();
  REQUIRE(pool.started.size() == 1);
  CHECK(startsWith(pool.started[0], "B "));
  REQUIRE(pool.journal.active);
  CHECK(pool.journal.active->background());
  CHECK(pool.journal.active->podName.empty());
  CHECK(pool.journal.active->toNode == "host01");    // the node holding the most free GPUs
  CHECK(pool.journal.active->fromNode == "host04");  // fragments first
  CHECK(pool.journal.active->reason.find("8 GPUs") != std::string::npos);
  pool.settle();

  CHECK(pool.onNode("host01") == 8);
  CHECK(pool.started.size() == 5);  // 8 - 3 already there
  for (const auto& s : pool.started) {
    CHECK(startsWith(s, "B "));
    CHECK(s.substr(s.size() - 6) == "host01");
  }
  // One at a time: every persisted journal has at most one move in flight, and a move starts
  // only when the one before it has finished.
  std::size_t inFlight = 0;
  std::string current;
  for (const json& j : pool.persisted) {
    int active = 0;
    for (const auto& m : j) {
      const std::string p = m["phase"];
      if (p != "Succeeded" && p != "Failed") {
        ++active;
        CHECK(m["kind"] == "Background");
        CHECK(m["pod"] == "");
        if (m["gpu"].get<std::string>() != current) {
          current = m["gpu"].get<std::string>();
          ++inFlight;
        }
      }
    }
    CHECK(active <= 1);
  }
  CHECK(inFlight == 5);
  REQUIRE(pool.journal.history.size() == 5);
  for (const Move& m : pool.journal.history) {
    CHECK(m.phase == MovePhase::kSucceeded);
    CHECK(m.background());
  }
  // Quiet afterwards: nothing moves back.
  pool.settle();
  CHECK(pool.started.size() == 5);
}

TEST_CASE("idle-gather: policy none moves nothing", "[reconfig][idle]") {
  Pool pool(spread(), kc::alloc::RecomposeKind::None);
  pool.arrivedAndFinished("job-a", 8, 10);
  pool.settle();
  CHECK(pool.started.empty());
  for (const auto& call : pool.chassis->callLog()) {
    CHECK(call == "inventory");
  }
  CHECK(pool.onNode("host01") == 3);
}

TEST_CASE(
    "idle-gather: a real request during a background move cancels the rest and is served "
    "next",
    "[reconfig][idle]") {
  Pool pool(spread(), kc::alloc::RecomposeKind::IdleGather);
  pool.arrivedAndFinished("job-a", 8, 10);

  SECTION("still draining: abandoned, the GPU stays where it was, the real move starts") {
    pool.pluginsWithdraw = false;  // the background move waits in Draining
    pool.wake();
    REQUIRE(pool.journal.active);
    const std::string gpu = pool.journal.active->gpu;
    const std::string from = pool.journal.active->fromNode;
    // A 3-GPU pod for host03 (2 free there): the scheduler annotated it.
    PodInfo& real = pool.addPod("real", 3, 30);
    real.dstNode = "host03";
    pool.wake();
    REQUIRE_FALSE(pool.journal.history.empty());
    const Move& cancelled = pool.journal.history[0];
    CHECK(cancelled.background());
    CHECK(cancelled.phase == MovePhase::kFailed);
    CHECK(cancelled.cancelled);
    CHECK(cancelled.message.find("default/real") != std::string::npos);
    CHECK(pool.layout().at(gpu) == from);  // nothing detached
    // The real request's move started at once, in the same wake.
    REQUIRE(pool.journal.active);
    CHECK_FALSE(pool.journal.active->background());
    CHECK(pool.journal.active->podName == "real");
    CHECK(pool.events.back() == "N GPUMoveStarted");
    CHECK(std::count(pool.events.begin(), pool.events.end(), "N GPUMoveCancelled") == 1);
    pool.pluginsWithdraw = true;
    pool.settle();
    CHECK(pool.onNode("host03") >= 3);
    // Only one demand move: the request needed exactly one GPU.
    CHECK(std::count_if(pool.started.begin(), pool.started.end(),
                        [](const std::string& s) { return startsWith(s, "D "); }) == 1);
  }
  SECTION("already past the detach: it completes, then the real move follows") {
    // The attach of the background move fails once: it sits in Attaching with a backoff.
    pool.chassis->failNext("attach", kc::makeError(kc::errc::kUnavailable, "busy"), 1);
    pool.wake();
    pool.wake();
    REQUIRE(pool.journal.active);
    REQUIRE(pool.journal.active->background());
    REQUIRE(pool.journal.active->phase == MovePhase::kAttaching);
    const std::string gpu = pool.journal.active->gpu;
    PodInfo& real = pool.addPod("real", 3, 30);
    real.dstNode = "host03";
    pool.wake();
    CHECK(pool.journal.active->gpu == gpu);  // not abandoned mid-way
    pool.clock.advance(1s);
    pool.wake();
    REQUIRE(pool.journal.history.size() >= 1);
    CHECK(pool.journal.history[0].gpu == gpu);
    CHECK(pool.journal.history[0].phase == MovePhase::kSucceeded);
    REQUIRE(pool.journal.active);
    CHECK(pool.journal.active->podName == "real");  // the very next move
    CHECK(pool.layout().at(gpu) == "host01");
  }
}

TEST_CASE("idle-gather: a GPU in use never moves", "[reconfig][idle]") {
  Pool pool(spread(), kc::alloc::RecomposeKind::IdleGather);
  SECTION("in use when planned") {
    pool.arrivedAndFinished("job-a", 6, 10);
    // Both of host02's GPUs run a pod (without the guard they would be the first donors
    // after host04's fragment).
    pool.running("busy", "host02", {"c0.4", "c0.5"}, 5);
    pool.settle();
    CHECK(pool.layout().at("c0.4") == "host02");
    CHECK(pool.layout().at("c0.5") == "host02");
    for (const auto& s : pool.started) {
      CHECK(s.find("c0.4>") == std::string::npos);
      CHECK(s.find("c0.5>") == std::string::npos);
    }
    CHECK(pool.onNode("host01") == 6);
  }
  pool.arrivedAndFinished("job-a", 7, 10);
  SECTION("a pod bound to the source, not yet running, may need it: the move is given up") {
    pool.pluginsWithdraw = false;
    pool.wake();
    REQUIRE(pool.journal.active);
    const std::string gpu = pool.journal.active->gpu;
    CHECK(gpu == "c0.8");
    // The scheduler binds a 1-GPU pod to host04 meanwhile: it needs host04's only GPU.
    PodInfo& p = pool.addPod("late", 1, 40);
    p.nodeName = "host04";
    p.phase = "Pending";
    pool.wake();
    REQUIRE_FALSE(pool.journal.history.empty());
    CHECK(pool.journal.history[0].gpu == gpu);
    CHECK(pool.journal.history[0].cancelled);
    CHECK(pool.layout().at(gpu) == "host04");
    pool.pluginsWithdraw = true;
    pool.settle();
    CHECK(pool.layout().at(gpu) == "host04");  // never planned again while claimed
  }
  SECTION("taken by a pod while draining: the move fails and leaves it") {
    pool.pluginsWithdraw = false;
    pool.wake();
    REQUIRE(pool.journal.active);
    const std::string gpu = pool.journal.active->gpu;
    const std::string from = pool.journal.active->fromNode;
    pool.inUse[from][gpu] = {"default/sneaky"};
    pool.wake();
    REQUIRE_FALSE(pool.journal.history.empty());
    CHECK(pool.journal.history[0].phase == MovePhase::kFailed);
    CHECK(pool.journal.history[0].message.find("in use") != std::string::npos);
    CHECK(pool.layout().at(gpu) == from);
  }
}

TEST_CASE("idle-gather: a quarantined GPU never moves", "[reconfig][idle]") {
  Pool pool(spread(), kc::alloc::RecomposeKind::IdleGather);
  pool.arrivedAndFinished("job-a", 7, 10);
  // host04's fragment, the first donor otherwise.
  pool.quarantined["c0.8"] = "attach reported done but did not happen";
  pool.settle();
  CHECK(pool.layout().at("c0.8") == "host04");
  for (const auto& s : pool.started) {
    CHECK(s.find("c0.8>") == std::string::npos);
  }
  CHECK(pool.onNode("host01") == 7);
}

TEST_CASE("idle-gather: a crash in each phase of a background move resumes or rolls back",
          "[reconfig][idle]") {
  const auto phase = GENERATE(MovePhase::kDraining, MovePhase::kDetaching, MovePhase::kAttaching,
                              MovePhase::kVerifying);
  CAPTURE(kc::reconfig::toString(phase));
  // Where c0.8 is when the process died at the start of `phase`.
  auto layout = spread();
  layout.back().second = phase == MovePhase::kAttaching   ? ""
                         : phase == MovePhase::kVerifying ? "host01"
                                                          : "host04";
  Move m;
  m.gpu = "c0.8";
  m.fromNode = "host04";
  m.fromHost = "c0/4";
  m.toNode = "host01";
  m.toHost = "c0/1";
  m.kind = MoveKind::kBackground;
  m.reason = "gathering";
  m.phase = phase;
  m.startedAt = m.phaseSince = "2026-01-01T00:00:00Z";
  Journal before;
  before.active = m;
  const json status = {{"status", {{"moves", before.toJson()}}}};

  // A new process: the journal from the status JSON, a fresh runner.
  Pool pool(layout, kc::alloc::RecomposeKind::IdleGather);
  auto parsed = kc::reconfig::parseJournal(status);
  REQUIRE(parsed.problems.empty());
  REQUIRE(parsed.journal.active);
  CHECK(parsed.journal.active->background());
  CHECK(parsed.journal.active->reason == "gathering");
  pool.restore(parsed.journal);

  SECTION("resumed to the end") {
    pool.wake();
    pool.wake();
    REQUIRE_FALSE(pool.journal.active);
    CHECK(pool.journal.history.at(0).phase == MovePhase::kSucceeded);
    CHECK(pool.journal.history.at(0).background());
    CHECK(pool.layout().at("c0.8") == "host01");
  }
  SECTION("a real request waits after the restart") {
    PodInfo& real = pool.addPod("real", 3, 30);
    real.dstNode = "host03";
    pool.settle();
    const Move& bg = pool.journal.history.back();
    CHECK(bg.background());
    if (phase == MovePhase::kDraining) {
      // Still before the detach: abandoned on host04 (where the real request's own move may
      // take it from), never brought to host01.
      CHECK(bg.cancelled);
      CHECK(bg.message.find("GPU left on host04") != std::string::npos);
      CHECK(pool.layout().at("c0.8") != "host01");
    } else {
      CHECK(bg.phase == MovePhase::kSucceeded);  // past the detach: completed
      CHECK(pool.layout().at("c0.8") == "host01");
    }
    CHECK(pool.onNode("host03") >= 3);  // and the real request was served
  }
  if (phase == MovePhase::kAttaching) {
    SECTION("the attach never works: rolled back to the source") {
      pool.chassis->failNext("attach", kc::makeError(kc::errc::kUnavailable, "503"), 3);
      for (int i = 0; i < 20 && pool.journal.active; ++i) {
        pool.wake();
        pool.clock.advance(1s);
      }
      CHECK(pool.journal.history.at(0).phase == MovePhase::kFailed);
      CHECK(pool.journal.history.at(0).message.find("rolled back") != std::string::npos);
      CHECK(pool.layout().at("c0.8") == "host04");
    }
  }
}

TEST_CASE("idle planner: the head, cooldown, journal records", "[reconfig][idle]") {
  SECTION("a waiting head that does not fit: free GPUs move to its reserved node only") {
    Pool pool({{"1", "host01"}, {"2", "host01"}, {"3", "host02"}, {"4", "host03"}},
              kc::alloc::RecomposeKind::IdleGather);
    pool.running("r1", "host01", {"c0.1", "c0.2"}, 1);
    pool.pod("r1")->expectedRuntimeSeconds = 600;  // started now (no startTime yet)
    // A 4-GPU head waits (the scheduler has not placed it: no dst-node); recent arrivals 8.
    pool.addPod("head", 4, 50);
    pool.arrivedAndFinished("job-a", 8, 10);
    pool.wake();
    REQUIRE(pool.journal.active);
    CHECK(pool.journal.active->toNode == "host01");
    CHECK(pool.journal.active->reason.find("default/head") != std::string::npos);
  }
  SECTION("a GPU a background move placed a moment ago is not moved back") {
    Pool pool(spread(), kc::alloc::RecomposeKind::IdleGather);
    pool.arrivedAndFinished("job-a", 8, 10);
    // c0.8 was just moved to host04 in the background (the journal says so).
    Move done;
    done.gpu = "c0.8";
    done.fromNode = "host01";
    done.fromHost = "c0/1";
    done.toNode = "host04";
    done.toHost = "c0/4";
    done.kind = MoveKind::kBackground;
    done.phase = MovePhase::kSucceeded;
    done.startedAt = kc::formatRfc3339(pool.clock.wallNow() - 30s);
    done.phaseSince = kc::formatRfc3339(pool.clock.wallNow() - 10s);
    pool.journal.history.push_back(done);
    pool.settle();
    CHECK(pool.layout().at("c0.8") == "host04");
    CHECK(pool.onNode("host01") == 7);
  }
  SECTION("journal: a background record names no pod; bad kinds are refused") {
    Move m;
    m.gpu = "c0.1";
    m.toNode = "host01";
    m.toHost = "c0/1";
    m.kind = MoveKind::kBackground;
    m.phase = MovePhase::kAttaching;
    json j = kc::reconfig::toJson(m);
    CHECK(j["kind"] == "Background");
    CHECK(j["pod"] == "");
    auto back = kc::reconfig::parseMove(j);
    REQUIRE(back);
    CHECK(*back == m);
    json bad = j;
    bad["kind"] = "Sometimes";
    CHECK_FALSE(kc::reconfig::parseMove(bad));
    bad = j;
    bad["pod"] = "default/x";
    CHECK_FALSE(kc::reconfig::parseMove(bad));
    json demand = j;
    demand.erase("kind");
    CHECK_FALSE(kc::reconfig::parseMove(demand));  // a demand record needs its pod
    demand["pod"] = "default/x";
    auto d = kc::reconfig::parseMove(demand);
    REQUIRE(d);
    CHECK(d->kind == MoveKind::kDemand);
  }
  SECTION("move time: the latest successful move's duration, else 20 s") {
    Journal j;
    CHECK(kc::reconfig::moveTimeEstimate(j) == 20s);
    Move m;
    m.phase = MovePhase::kSucceeded;
    m.startedAt = "2026-01-01T00:00:00Z";
    m.phaseSince = "2026-01-01T00:00:36Z";
    j.history.push_back(m);
    CHECK(kc::reconfig::moveTimeEstimate(j) == 36s);
  }
}
