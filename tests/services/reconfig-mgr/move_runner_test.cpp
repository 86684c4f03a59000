// The move state machine (move_runner.hpp) on FakeDriver + FakeClock: the safe protocol's
// order (journal written before every fabric action), waiting for the device plugin's
// withdrawal, failures with backoff and roll-back, a lying chassis, an unsupported fabric,
// cancellation, and a crash at every phase resumed by a fresh runner from the persisted JSON;
// the gate that stops moves on a fabric that cannot move and probes it again after an interval.

#include "services/reconfig-mgr/move_runner.hpp"

#include <catch2/catch.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "services/reconfig-mgr/moves_gate.hpp"
#include "tests/support/fakes/fake_clock.hpp"
#include "tests/support/fakes/fake_driver.hpp"

using kc::reconfig::Journal;
using kc::reconfig::Move;
using kc::reconfig::MovePhase;
using kc::reconfig::MoveRunner;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// A FakeDriver that logs into the env's log, and can lie: "lie_failure" does the move and
// answers an error (the real H3 quirk), "lie_success" answers ok and does nothing.
class LoggingDriver final : public kc::fabric::FabricDriver {
 public:
  LoggingDriver(kc::testing::FakeDriver& inner, std::vector<std::string>& log)
      : inner_(inner), log_(log) {}
  std::string_view dialect() const override { return "fake"; }
  const std::string& name() const override { return inner_.name(); }
  kc::Result<kc::fabric::Inventory> inventory() override {
    log_.push_back("inventory");
    return inner_.inventory();
  }
  kc::Result<kc::fabric::MoveReport> attach(const std::string& gpu,
                                            const std::string& host) override {
    log_.push_back("attach " + gpu + " " + host);
    if (take("attach") == "lie_success") {
      return kc::fabric::MoveReport{gpu, std::nullopt, host, true, 1, {}};
    }
    auto r = inner_.attach(gpu, host);
    if (lied_) {
      lied_ = false;
      return kc::makeError(kc::errc::kRefused, "chassis said no");
    }
    return r;
  }
  kc::Result<kc::fabric::MoveReport> detach(const std::string& gpu) override {
    log_.push_back("detach " + gpu);
    if (take("detach") == "lie_success") {
      return kc::fabric::MoveReport{gpu, std::string("48"), std::nullopt, true, 1, {}};
    }
    auto r = inner_.detach(gpu);
    if (lied_) {
      lied_ = false;
      return kc::makeError(kc::errc::kRefused, "chassis said no");
    }
    return r;
  }
  // The next `op` ("attach"/"detach") lies with `kind`.
  void lie(const std::string& op, const std::string& kind) { lies_[op] = kind; }

 private:
  std::string take(const std::string& op) {
    auto it = lies_.find(op);
    if (it == lies_.end()) {
      return {};
    }
    std::string k = it->second;
    lies_.erase(it);
    if (k == "lie_failure") {
      lied_ = true;
    }
    return k;
  }
  kc::testing::FakeDriver& inner_;
  std::vector<std::string>& log_;
  std::map<std::string, std::string> lies_;
  bool lied_ = false;
};

class TestEnv : public kc::reconfig::MoveEnv {
 public:
  explicit TestEnv(kc::testing::FakeDriver& d) : driver(d, log) {}
  kc::fabric::FabricDriver& fabric() override { return driver; }
  std::optional<kc::api::UsageReport> usage(const std::string& node) override {
    auto it = reports.find(node);
    if (it == reports.end()) {
      return std::nullopt;
    }
    return it->second;
  }
  bool podWaiting(const Move&) override { return waiting; }
  kc::Status persist(const Journal& j) override {
    if (failPersist) {
      log.push_back("persist FAILED");
      return kc::makeError(kc::errc::kUnavailable, "API down");
    }
    persisted = j.toJson();
    log.push_back(std::string("persist ") +
                  (j.active ? std::string(kc::reconfig::toString(j.active->phase)) : "idle"));
    return kc::okStatus();
  }
  void event(const Move&, bool warning, const std::string& reason, const std::string&) override {
    events.push_back((warning ? "W " : "N ") + reason);
  }
  void inventoryRead(const kc::fabric::Inventory&) override {}
  void quarantine(const std::string& gpu, const std::string& reason) override {
    quarantined[gpu] = reason;
  }
  void unsupported(const std::string& message) override { unsupportedMsg = message; }
  void moveFinished(const Move& m) override { finishedMoves.push_back(m); }
  void movesSerialised(const std::string& why) override { serialised.push_back(why); }

  std::vector<std::string> log;
  LoggingDriver driver;
  std::map<std::string, kc::api::UsageReport> reports;
  bool waiting = true;
  bool failPersist = false;
  json persisted = json::array();
  std::vector<std::string> events;
  std::map<std::string, std::string> quarantined;
  std::optional<std::string> unsupportedMsg;
  std::vector<Move> finishedMoves;
  std::vector<std::string> serialised;
};

Move moveOf(const std::string& gpu, const std::string& from, const std::string& to) {
  Move m;
  m.gpu = gpu;
  m.fromNode = from.empty() ? "" : "node-" + from;
  m.fromHost = from;
  m.toNode = "node-" + to;
  m.toHost = to;
  m.podNamespace = "default";
  m.podName = "train";
  m.podUid = "uid-1";
  m.phase = from.empty() ? MovePhase::kAttaching : MovePhase::kDraining;
  return m;
}

kc::api::UsageReport report(std::vector<std::string> withdrawn,
                            std::map<std::string, std::vector<std::string>> inUse = {}) {
  kc::api::UsageReport r;
  r.withdrawn = std::move(withdrawn);
  r.inUse = std::move(inUse);
  r.registered = true;
  return r;
}

std::optional<std::string> hostOf(kc::testing::FakeDriver& d, const std::string& gpu) {
  auto inv = d.inventory();
  REQUIRE(inv);
  const auto* g = inv->find(gpu);
  REQUIRE(g != nullptr);
  return g->hostPort;
}

// Steps until idle or waiting; returns the last outcome.
MoveRunner::Outcome run(MoveRunner& r, Journal& j, int limit = 20) {
  MoveRunner::Outcome out;
  for (int i = 0; i < limit; ++i) {
    out = r.step(j);
    if (out.kind != MoveRunner::Outcome::Kind::kProgressed) {
      return out;
    }
  }
  return out;
}

}  // namespace

TEST_CASE(
    "move runner: the safe protocol in order with the journal written before every fabric action",
    "[reconfig]") {
  kc::testing::FakeDriver chassis("c0", {"0", "48"});
  chassis.addGpu("6", std::string("0"));
  TestEnv env(chassis);
  kc::testing::FakeClock clock;
  MoveRunner runner(env, clock);
  Journal j;

  REQUIRE(runner.start(j, moveOf("c0.6", "0", "48")));
  CHECK(env.events == std::vector<std::string>{"N GPUMoveStarted"});
  // Nothing happens on the fabric until the source's plugin confirms the withdrawal.
  auto out = run(runner, j);
  CHECK(out.kind == MoveRunner::Outcome::Kind::kWaiting);
  CHECK(j.active->phase == MovePhase::kDraining);
  CHECK(env.log == std::vector<std::string>{"persist Draining"});
  // Withdrawn but still in use: still no detach; the move gives up and leaves the GPU.
  SECTION("withdrawn and unused: detach, attach, verify, done") {
    env.reports["node-0"] = report({"c0.6"});
    out = run(runner, j);
    CHECK(out.kind == MoveRunner::Outcome::Kind::kIdle);
    CHECK_FALSE(j.active);
    REQUIRE(j.history.size() == 1);
    CHECK(j.history[0].phase == MovePhase::kSucceeded);
    CHECK(hostOf(chassis, "c0.6") == "48");
    // One fabric step for the whole journey (FabricDriver::move: its re-read verifies it); no
    // second inventory read.
    CHECK(env.log == std::vector<std::string>{"persist Draining", "persist Detaching",
                                              "detach c0.6", "attach c0.6 48", "persist Verifying",
                                              "persist idle"});
    CHECK(env.events == std::vector<std::string>{"N GPUMoveStarted", "N GPUDrained", "N GPUMoved"});
  }
  SECTION("in use on the source: the move ends, the GPU stays, draining is cleared") {
    env.reports["node-0"] = report({"c0.6"}, {{"c0.6", {"default/other"}}});
    out = run(runner, j);
    CHECK_FALSE(j.active);
    CHECK(j.history[0].phase == MovePhase::kFailed);
    CHECK(j.history[0].message.find("in use") != std::string::npos);
    CHECK(hostOf(chassis, "c0.6") == "0");
    CHECK(chassis.callLog().size() == 1);  // only the test's own inventory read
  }
  SECTION("a withdrawal left from an earlier drain counts only after it was seen cleared") {
    env.reports["node-0"] = report({"c0.6"});
    Journal j2;
    kc::testing::FakeDriver c2("c0", {"0", "48"});
    c2.addGpu("6", std::string("0"));
    TestEnv env2(c2);
    env2.reports["node-0"] = report({"c0.6"});  // stale: listed before this drain began
    MoveRunner r2(env2, clock);
    REQUIRE(r2.start(j2, moveOf("c0.6", "0", "48")));
    CHECK(j2.active->staleWithdrawn);
    CHECK(run(r2, j2).kind == MoveRunner::Outcome::Kind::kWaiting);
    CHECK(j2.active->phase == MovePhase::kDraining);
    env2.reports["node-0"] = report({});  // the plugin saw draining cleared...
    run(r2, j2);
    CHECK(j2.active->phase == MovePhase::kDraining);
    env2.reports["node-0"] = report({"c0.6"});  // ...and now this drain
    run(r2, j2);
    CHECK_FALSE(j2.active);
    CHECK(hostOf(c2, "c0.6") == "48");
  }
  SECTION("not withdrawn within the drain timeout: given up, GPU stays") {
    clock.advance(61s);
    run(runner, j);
    CHECK_FALSE(j.active);
    CHECK(j.history[0].phase == MovePhase::kFailed);
    CHECK(j.history[0].message.find("did not confirm") != std::string::npos);
    CHECK(hostOf(chassis, "c0.6") == "0");
  }
  SECTION("the pod stopped waiting while draining: cancelled, nothing detached") {
    env.waiting = false;
    run(runner, j);
    CHECK_FALSE(j.active);
    CHECK(j.history[0].message.find("cancelled") != std::string::npos);
    CHECK(hostOf(chassis, "c0.6") == "0");
  }
  SECTION("the journal cannot be written: no fabric request is sent") {
    env.reports["node-0"] = report({"c0.6"});
    env.failPersist = true;
    run(runner, j);
    CHECK(j.active->phase == MovePhase::kDraining);
    for (const auto& e : env.log) {
      CHECK(e.rfind("detach", 0) != 0);
    }
    env.failPersist = false;
    clock.advance(1s);
    run(runner, j);
    CHECK_FALSE(j.active);
    CHECK(hostOf(chassis, "c0.6") == "48");
  }
}

TEST_CASE("move runner: an unattached GPU skips draining", "[reconfig]") {
  kc::testing::FakeDriver chassis("c0", {"0", "48"});
  chassis.addGpu("5");
  TestEnv env(chassis);
  kc::testing::FakeClock clock;
  MoveRunner runner(env, clock);
  Journal j;
  REQUIRE(runner.start(j, moveOf("c0.5", "", "48")));
  run(runner, j);
  CHECK_FALSE(j.active);
  CHECK(j.history[0].phase == MovePhase::kSucceeded);
  CHECK(env.log == std::vector<std::string>{"persist Attaching", "attach c0.5 48",
                                            "persist Verifying", "persist idle"});
}

TEST_CASE("move runner: fabric failures and backoff and roll-back and lies and unsupported",
          "[reconfig]") {
  kc::testing::FakeDriver chassis("c0", {"0", "48"});
  chassis.addGpu("6", std::string("0"));
  TestEnv env(chassis);
  kc::testing::FakeClock clock;
  kc::reconfig::MoveRunnerOptions o;
  o.maxAttempts = 3;
  o.backoff = {1000ms, 4000ms, 2.0, 0.0};
  MoveRunner runner(env, clock, o);
  Journal j;
  REQUIRE(runner.start(j, moveOf("c0.6", "0", "48")));
  env.reports["node-0"] = report({"c0.6"});

  SECTION("detach times out twice, then works: retried after 1 s and 2 s") {
    chassis.failNext("detach", kc::makeError(kc::errc::kTimeout, "no answer"), 2);
    auto out = run(runner, j);
    REQUIRE(out.kind == MoveRunner::Outcome::Kind::kWaiting);
    CHECK(j.active->phase == MovePhase::kDetaching);
    CHECK(j.active->attempts == 1);
    CHECK(out.wakeAt == clock.now() + 1s);
    clock.advance(999ms);
    run(runner, j);
    CHECK(j.active->attempts == 1);  // not before the backoff
    clock.advance(1ms);
    out = run(runner, j);
    CHECK(j.active->attempts == 2);
    CHECK(out.wakeAt == clock.now() + 2s);
    clock.advance(2s);
    run(runner, j);
    CHECK_FALSE(j.active);
    CHECK(j.history[0].phase == MovePhase::kSucceeded);
    CHECK(hostOf(chassis, "c0.6") == "48");
  }
  SECTION("detach fails every time: given up, GPU still on the source, draining cleared") {
    chassis.failNext("detach", kc::makeError(kc::errc::kUnavailable, "503"), -1);
    for (int i = 0; i < 10 && j.active; ++i) {
      run(runner, j);
      clock.advance(5s);
    }
    CHECK_FALSE(j.active);
    CHECK(j.history[0].phase == MovePhase::kFailed);
    CHECK(hostOf(chassis, "c0.6") == "0");
  }
  SECTION("detach answers an error but did it (H3 quirk): go on to attach") {
    env.driver.lie("detach", "lie_failure");
    run(runner, j);
    CHECK_FALSE(j.active);
    CHECK(j.history[0].phase == MovePhase::kSucceeded);
    CHECK(hostOf(chassis, "c0.6") == "48");
  }
  SECTION("attach fails every time: rolled back to the source") {
    chassis.failNext("attach", kc::makeError(kc::errc::kUnavailable, "503"), 3);
    for (int i = 0; i < 10 && j.active; ++i) {
      run(runner, j);
      clock.advance(5s);
    }
    CHECK_FALSE(j.active);
    CHECK(j.history[0].phase == MovePhase::kFailed);
    CHECK(j.history[0].message.find("rolled back") != std::string::npos);
    CHECK(hostOf(chassis, "c0.6") == "0");
  }
  SECTION(
      "resumed in Verifying (a restart): the chassis is re-read, and an attach that did not "
      "happen is made again") {
    // The journal says Verifying, the chassis has the GPU unattached (the attach was lost),
    // and a new runner (a restarted process) has no verification of its own.
    j.active->phase = MovePhase::kVerifying;
    REQUIRE(chassis.detach("c0.6"));
    MoveRunner resumed(env, clock, o);
    env.log.clear();
    auto out = run(resumed, j);
    CHECK(j.active->phase == MovePhase::kAttaching);
    CHECK(j.active->attempts == 1);
    CHECK(env.log.front() == "inventory");
    clock.advance(out.wakeAt - clock.now());
    run(resumed, j);
    CHECK_FALSE(j.active);
    CHECK(j.history[0].phase == MovePhase::kSucceeded);
    CHECK(hostOf(chassis, "c0.6") == "48");
  }
  SECTION("a failed attach inside the move is a failed try of Attaching, with its backoff") {
    chassis.failNext("attach", kc::makeError(kc::errc::kUnavailable, "busy"), 1);
    auto out = run(runner, j);
    CHECK(j.active->phase == MovePhase::kAttaching);
    CHECK(j.active->attempts == 1);
    CHECK(out.wakeAt == clock.now() + 1s);
    CHECK_FALSE(hostOf(chassis, "c0.6").has_value());
    clock.advance(1s);
    run(runner, j);
    CHECK_FALSE(j.active);
    CHECK(hostOf(chassis, "c0.6") == "48");
  }
  SECTION("the driver reports the chassis lied (unverified): quarantined, left unattached") {
    chassis.failNext("attach", kc::makeError(kc::errc::kUnverified, "said done, is not"));
    run(runner, j);
    CHECK_FALSE(j.active);
    CHECK(j.history[0].phase == MovePhase::kFailed);
    CHECK(env.quarantined.count("c0.6") == 1);
    CHECK(hostOf(chassis, "c0.6") == std::nullopt);
  }
  SECTION("the fabric cannot move at all: reported, not retried, GPU stays") {
    chassis.failNext("detach", kc::makeError(kc::errc::kUnsupported, "no RemoveResourceBlock"));
    run(runner, j);
    CHECK_FALSE(j.active);
    CHECK(env.unsupportedMsg.has_value());
    CHECK(hostOf(chassis, "c0.6") == "0");
  }
}

TEST_CASE("move runner: a crash at any phase resumes from the persisted journal", "[reconfig]") {
  // Crash points: after each persist, before the action it announces (the worst moment).
  const auto phase = GENERATE(MovePhase::kDraining, MovePhase::kDetaching, MovePhase::kAttaching,
                              MovePhase::kVerifying);
  CAPTURE(kc::reconfig::toString(phase));
  // Where the GPU is when the crash happens at the start of `phase`.
  kc::testing::FakeDriver chassis("c0", {"0", "48"});
  chassis.addGpu("6", phase == MovePhase::kAttaching   ? std::nullopt
                      : phase == MovePhase::kVerifying ? std::optional<std::string>("48")
                                                       : std::optional<std::string>("0"));
  Move m = moveOf("c0.6", "0", "48");
  m.phase = phase;
  Journal before;
  before.active = m;
  const json persisted = before.toJson();

  // A new process: journal from JSON, new runner, new env.
  auto parsed = kc::reconfig::parseMove(persisted[0]);
  REQUIRE(parsed);
  Journal j;
  j.active = *parsed;
  TestEnv env(chassis);
  env.reports["node-0"] = report({"c0.6"});
  kc::testing::FakeClock clock;
  MoveRunner runner(env, clock);
  run(runner, j);
  CHECK_FALSE(j.active);
  REQUIRE(j.history.size() == 1);
  CHECK(j.history[0].phase == MovePhase::kSucceeded);
  CHECK(hostOf(chassis, "c0.6") == "48");
  // Attaching and Verifying may be redone even after they completed (a crash before the
  // next record was written): attach to the host the GPU is on is a no-op.
  if (phase == MovePhase::kAttaching || phase == MovePhase::kVerifying) {
    Journal again;
    again.active = *parsed;
    MoveRunner runner2(env, clock);
    run(runner2, again);
    CHECK(again.history.at(0).phase == MovePhase::kSucceeded);
    CHECK(hostOf(chassis, "c0.6") == "48");
  }
}

TEST_CASE(
    "moves gate: a fabric that refused moves as unsupported is probed again after the interval",
    "[reconfig]") {
  using kc::reconfig::MovesGate;
  using T = MovesGate::Transition;
  kc::testing::FakeDriver chassis("c0", {"0", "48"});
  chassis.addGpu("6");  // unattached: a move is one attach
  kc::testing::FakeClock clock;
  // The pool worker's part: the runner reports refusals and finished moves, the gate decides
  // whether the next move may start and says when the condition changes (the worker writes an
  // Event for each transition other than kNone).
  struct GateEnv final : TestEnv {
    GateEnv(kc::testing::FakeDriver& d, kc::Clock& c) : TestEnv(d), clock(c) {}
    void unsupported(const std::string& message) override {
      transitions.push_back(gate.refused(message, clock.now()));
    }
    void moveFinished(const Move& m) override {
      if (m.phase == MovePhase::kSucceeded) {
        transitions.push_back(gate.moved());
      }
    }
    kc::Clock& clock;
    MovesGate gate{300s};
    std::vector<T> transitions;
  } env(chassis, clock);
  MoveRunner runner(env, clock);
  Journal j;
  // Moves the pool needs, started only when the gate allows (planAndStart's check).
  auto tryMove = [&] {
    if (!env.gate.allows(clock.now())) {
      return false;
    }
    REQUIRE(runner.start(j, moveOf("c0.6", "", "48")));
    run(runner, j);
    REQUIRE_FALSE(j.active);
    return true;
  };

  chassis.failNext("attach", kc::makeError(kc::errc::kUnsupported, "no AddResourceBlock"), -1);
  REQUIRE(tryMove());
  CHECK(j.history.front().phase == MovePhase::kFailed);
  CHECK(env.transitions == std::vector<T>{T::kUnsupported});
  CHECK(env.gate.unsupported() == "no AddResourceBlock");
  const auto refusedAt = clock.now();
  CHECK(env.gate.reprobeAt() == refusedAt + 300s);
  // Within the interval nothing is sent to the fabric.
  const auto calls = chassis.callLog().size();
  clock.advance(300s - 1ms);
  CHECK_FALSE(tryMove());
  CHECK(chassis.callLog().size() == calls);
  // At the interval the next move is tried: still refused, the condition stays (no transition,
  // so no second Event) and the interval starts over from this refusal.
  clock.advance(1ms);
  REQUIRE(tryMove());
  CHECK(chassis.callLog().size() > calls);
  CHECK(j.history.front().phase == MovePhase::kFailed);
  CHECK(env.transitions == std::vector<T>{T::kUnsupported, T::kNone});
  CHECK(env.gate.unsupported() == "no AddResourceBlock");
  CHECK(env.gate.reprobeAt() == refusedAt + 600s);
  clock.advance(1s);
  CHECK_FALSE(tryMove());
  // The chassis learned to move (firmware update): the next probe goes through, the condition
  // turns True once, and moves go on without waiting.
  chassis.clearFaults();
  clock.advance(299s - 1ms);
  CHECK_FALSE(tryMove());
  clock.advance(1ms);
  REQUIRE(tryMove());
  CHECK(j.history.front().phase == MovePhase::kSucceeded);
  CHECK(hostOf(chassis, "c0.6") == "48");
  CHECK(env.transitions == std::vector<T>{T::kUnsupported, T::kNone, T::kSupported});
  CHECK_FALSE(env.gate.unsupported().has_value());
  CHECK_FALSE(env.gate.reprobeAt().has_value());
  CHECK(env.gate.allows(clock.now()));
}

TEST_CASE("moves gate: interval 0 never probes again, a reset (the chassis list changed) opens it",
          "[reconfig]") {
  using kc::reconfig::MovesGate;
  using T = MovesGate::Transition;
  MovesGate gate(0s);
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  CHECK(gate.allows(t0));
  CHECK(gate.moved() == T::kNone);  // a move while supported changes nothing
  CHECK(gate.refused("no RemoveResourceBlock", t0) == T::kUnsupported);
  CHECK_FALSE(gate.allows(t0 + 24h * 365));
  CHECK_FALSE(gate.reprobeAt().has_value());
  CHECK(gate.reset() == T::kSupported);
  CHECK(gate.reset() == T::kNone);
  CHECK(gate.allows(t0));
}

TEST_CASE("move journal: a claim move round-trips and names a claim, not a pod", "[reconfig]") {
  Move m;
  m.kind = kc::reconfig::MoveKind::kClaim;
  m.gpu = "c0.4";
  m.toNode = "node-1";
  m.toHost = "c0/h1";
  m.claimNamespace = "default";
  m.claimName = "claim-1";
  m.claimUid = "uid-1";
  m.phase = kc::reconfig::MovePhase::kAttaching;
  const json j = kc::reconfig::toJson(m);
  CHECK(j["kind"] == "Claim");
  CHECK(j["claim"] == "default/claim-1");
  CHECK(j["pod"] == "");
  auto back = kc::reconfig::parseMove(j);
  REQUIRE(back);
  CHECK(*back == m);
  json bad = j;
  bad["claim"] = "claim-1";  // not namespace/name
  CHECK_FALSE(kc::reconfig::parseMove(bad));
  bad = j;
  bad["pod"] = "default/p";  // a claim move names no pod
  CHECK_FALSE(kc::reconfig::parseMove(bad));
  json demand = j;
  demand.erase("kind");
  demand["pod"] = "default/p";
  CHECK_FALSE(kc::reconfig::parseMove(demand));  // only a claim move names a claim
}

TEST_CASE("move runner: Verifying waits for the destination node to see the GPU on its host",
          "[reconfig]") {
  kc::testing::FakeDriver chassis("c0", {"0", "48"});
  chassis.addGpu("5");
  TestEnv env(chassis);
  kc::testing::FakeClock clock;
  kc::reconfig::MoveRunnerOptions opts;
  opts.nodeConfirmTimeout = std::chrono::seconds(10);
  MoveRunner runner(env, clock, opts);
  // The destination's agent checks its host and does not see the GPU yet (hot-add pending).
  kc::api::UsageReport dest = report({});
  dest.hostChecked = true;
  dest.notVisible = {{"c0.5", "host: no GPU with UUID GPU-x on this host's PCI bus"}};
  env.reports["node-48"] = dest;
  Journal j;
  REQUIRE(runner.start(j, moveOf("c0.5", "", "48")));
  auto out = run(runner, j);
  CHECK(out.kind == MoveRunner::Outcome::Kind::kWaiting);
  REQUIRE(j.active);
  CHECK(j.active->phase == MovePhase::kVerifying);
  const auto reads = std::count(env.log.begin(), env.log.end(), "inventory");
  // Waiting for the node does not read the chassis again.
  clock.advance(std::chrono::seconds(1));
  run(runner, j);
  CHECK(std::count(env.log.begin(), env.log.end(), "inventory") == reads);
  REQUIRE(j.active);

  SECTION("the node sees it: verified") {
    env.reports["node-48"].hostVisible = {"c0.5"};
    env.reports["node-48"].notVisible.clear();
    run(runner, j);
    CHECK_FALSE(j.active);
    CHECK(j.history[0].phase == MovePhase::kSucceeded);
    CHECK(j.history[0].message.find("host") != std::string::npos);
  }
  SECTION("never: the move fails with the node's reason, the GPU stays attached") {
    clock.advance(std::chrono::seconds(11));
    run(runner, j);
    CHECK_FALSE(j.active);
    CHECK(j.history[0].phase == MovePhase::kFailed);
    CHECK(j.history[0].message.find("does not see GPU c0.5") != std::string::npos);
    CHECK(j.history[0].message.find("PCI bus") != std::string::npos);
    CHECK(hostOf(chassis, "c0.5") == std::optional<std::string>("48"));
  }
  SECTION("a node agent without the host check: the fabric's word is enough") {
    env.reports["node-48"].hostChecked = false;
    run(runner, j);
    CHECK_FALSE(j.active);
    CHECK(j.history[0].phase == MovePhase::kSucceeded);
  }
}

TEST_CASE("move runner: a GPU held open on its source node waits, and the move says why",
          "[reconfig]") {
  kc::testing::FakeDriver chassis("c0", {"0", "48"});
  chassis.addGpu("5", "0");
  TestEnv env(chassis);
  kc::testing::FakeClock clock;
  kc::reconfig::MoveRunnerOptions opts;
  opts.drainTimeout = std::chrono::seconds(10);
  MoveRunner runner(env, clock, opts);
  // The source node hot-removes before the detach; a process holds the GPU's device node.
  kc::api::UsageReport src = report({});
  src.hostChecked = true;
  src.removeBlocked = {{"c0.5", "/dev/nvidia0 held open by pid 4242 (python3)"}};
  env.reports["node-0"] = src;
  Journal j;
  REQUIRE(runner.start(j, moveOf("c0.5", "0", "48")));
  run(runner, j);
  REQUIRE(j.active);
  CHECK(j.active->phase == MovePhase::kDraining);
  CHECK(j.active->message.find("pid 4242 (python3)") != std::string::npos);
  CHECK(std::count(env.events.begin(), env.events.end(), "W GPUHeldOpen") == 1);
  run(runner, j);  // the same reason again: no second event
  CHECK(std::count(env.events.begin(), env.events.end(), "W GPUHeldOpen") == 1);
  CHECK(hostOf(chassis, "c0.5") == std::optional<std::string>("0"));  // never detached

  SECTION("released and removed: withdrawn, the move goes on") {
    env.reports["node-0"].removeBlocked.clear();
    env.reports["node-0"].withdrawn = {"c0.5"};
    run(runner, j);
    CHECK_FALSE(j.active);
    CHECK(j.history[0].phase == MovePhase::kSucceeded);
  }
  SECTION("held past the drain timeout: the move fails naming the holder, the GPU stays") {
    clock.advance(std::chrono::seconds(11));
    run(runner, j);
    CHECK_FALSE(j.active);
    CHECK(j.history[0].phase == MovePhase::kFailed);
    CHECK(j.history[0].message.find("pid 4242") != std::string::npos);
    CHECK(hostOf(chassis, "c0.5") == std::optional<std::string>("0"));
  }
}

TEST_CASE("move runner: several moves in flight as the concurrency allows and busy makes it serial",
          "[reconfig][runner]") {
  kc::testing::FakeDriver chassis("c0", {"0", "48"});
  chassis.addGpu("5", std::string("0"));
  chassis.addGpu("6", std::string("0"));
  chassis.addGpu("7", std::string("0"));
  TestEnv env(chassis);
  kc::testing::FakeClock clock;
  kc::reconfig::MoveRunnerOptions o;
  o.backoff = {1000ms, 4000ms, 2.0, 0.0};
  SECTION("one per chassis: a second move on the same chassis waits, another chassis' starts") {
    o.concurrency = {1, 0};
    MoveRunner runner(env, clock, o);
    Journal j;
    REQUIRE(runner.start(j, moveOf("c0.5", "0", "48")));
    CHECK_FALSE(runner.canStart(j, "c0.6"));
    auto refused = runner.start(j, moveOf("c0.6", "0", "48"));
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == kc::errc::kConflict);
    CHECK(runner.canStart(j, "c1.1"));        // another chassis
    CHECK_FALSE(runner.canStart(j, "c0.5"));  // the same GPU never twice
    CHECK(j.active.size() == 1);
  }
  SECTION("the pool limit counts every chassis") {
    o.concurrency = {1, 1};
    MoveRunner runner(env, clock, o);
    Journal j;
    REQUIRE(runner.start(j, moveOf("c0.5", "0", "48")));
    CHECK_FALSE(runner.canStart(j, "c1.1"));
  }
  SECTION("two in flight step independently; a busy answer serialises the pool for a while") {
    o.concurrency = {2, 0};
    o.serialAfterBusy = 60'000ms;
    MoveRunner runner(env, clock, o);
    Journal j;
    REQUIRE(runner.start(j, moveOf("c0.5", "0", "48")));
    REQUIRE(runner.start(j, moveOf("c0.6", "0", "48")));
    CHECK(j.active.size() == 2);
    CHECK(j.toJson().size() == 2);  // both records in status.moves
    env.reports["node-0"] = report({"c0.5", "c0.6"});
    chassis.failNext("attach", kc::makeError(kc::errc::kUnavailable, "HTTP 503: busy"), 1);
    run(runner, j);
    // One move got the busy answer (detached, a failed try of Attaching); the other went on.
    REQUIRE(env.serialised.size() == 1);
    CHECK(env.serialised[0].find("busy") != std::string::npos);
    CHECK(runner.concurrencyNow().perPool == 1);
    CHECK_FALSE(runner.canStart(j, "c0.7"));
    clock.advance(5s);
    run(runner, j);
    CHECK_FALSE(j.active);
    CHECK(hostOf(chassis, "c0.5") == "48");
    CHECK(hostOf(chassis, "c0.6") == "48");
    clock.advance(60s);
    CHECK(runner.concurrencyNow().perPool == 0);  // back to the configured schedule
    CHECK(env.serialised.size() == 1);
  }
}
