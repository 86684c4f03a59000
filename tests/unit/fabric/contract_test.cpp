// The FabricDriver contract, run identically against every implementation and every simulator
// profile: the H3 driver, the Redfish driver on the classic profile (session and basic auth)
// and on the emulator profile (308 on /redfish/v1, Links.Members collections, composition by
// POST/DELETE only) and on the fabric profile (DSP0268 Endpoints, Connections POSTed and
// DELETEd), and a FabricPool of H3 and Redfish, each talking to the chassis simulator
// in-process over real HTTP.

#include <catch2/catch.hpp>

#include "tests/unit/fabric/sim_harness.hpp"

using namespace kc::fabric;
using test::SimHarness;
using test::SleepLog;

namespace {

// What a contract test drives: a driver, the chassis its GPUs live on, and how it names hosts.
struct Subject {
  std::string label;
  std::unique_ptr<FabricDriver> driver;
  std::string chassis = "falcon-a";
  std::function<std::string(std::uint32_t)> host;
  std::string gpu(const std::string& gid) const { return makeGpuId(chassis, gid); }
};

Subject makeSubject(const std::string& kind, SimHarness& sim, SleepLog& log) {
  Subject s;
  s.label = kind;
  const auto systemOf = [](std::uint32_t port) {
    return port == 48 ? std::string("node-1") : std::string("node-2");
  };
  if (kind == "h3") {
    s.driver = sim.h3("falcon-a", log, test::fastPolicy(), Credentials{"admin", "secret"});
    s.host = [](std::uint32_t port) { return std::to_string(port); };
  } else if (kind == "redfish-session") {
    s.driver = sim.redfish("falcon-a", log, RedfishAuth::kSession);
    s.host = systemOf;
  } else if (kind == "redfish-basic") {
    s.driver = sim.redfish("falcon-a", log, RedfishAuth::kBasic);
    s.host = systemOf;
  } else if (kind == "redfish-emulator") {
    // Hosts are the Compute ResourceBlocks, named like the classic profile's systems.
    s.driver = sim.redfish("falcon-a", log, RedfishAuth::kSession);
    s.host = systemOf;
  } else if (kind == "redfish-fabric") {
    // DSP0268 Fabrics: hosts are initiator Endpoints named like the classic profile's systems.
    RedfishOptions o;
    o.chassis = "falcon-a";
    o.baseUrl = sim.url("falcon-a");
    o.credentials = Credentials{"admin", "secret"};
    o.policy = test::fastPolicy();
    o.sleeper = log.sleeper();
    o.style = RedfishStyle::kFabric;
    o.fabric = "PCIe";
    auto d = RedfishDriver::create(o);
    REQUIRE(d.ok());
    s.driver = std::move(d).value();
    s.host = systemOf;
  } else {
    std::vector<std::unique_ptr<FabricDriver>> members;
    members.push_back(sim.redfish("falcon-a", log));
    members.push_back(sim.h3("falcon-b", log, test::fastPolicy(), Credentials{"admin", "secret"}));
    auto pool = FabricPool::create("pool-1", std::move(members));
    REQUIRE(pool.ok());
    s.driver = std::move(pool).value();
    s.host = [systemOf](std::uint32_t port) { return "falcon-a/" + systemOf(port); };
  }
  return s;
}

#define KINDS                                                                               \
  GENERATE(as<std::string>{}, "h3", "redfish-session", "redfish-basic", "redfish-emulator", \
           "redfish-fabric", "pool")

// The simulator profile a kind runs against.
std::string topologyFor(const std::string& kind) {
  // The emulator profile also pages its collections (Members@odata.nextLink with $skip).
  if (kind == "redfish-fabric") {
    return test::defaultTopology("redfish: {profile: fabric}\n");
  }
  return test::defaultTopology(
      kind == "redfish-emulator" ? "redfish: {profile: emulator, pageSize: 2}\n" : "");
}

}  // namespace

TEST_CASE("contract: inventory reports every GPU as the chassis has it", "[fabric][contract]") {
  const std::string kind = KINDS;
  CAPTURE(kind);
  SimHarness sim(topologyFor(kind), Credentials{"admin", "secret"});
  SleepLog log;
  Subject s = makeSubject(kind, sim, log);
  auto inv = s.driver->inventory();
  REQUIRE(inv.ok());
  const auto truth = *sim.model().snapshot(s.chassis);
  // Exactly the chassis' GPUs: no phantom (a Compute block is a host, never a GPU).
  CHECK(static_cast<std::size_t>(std::count_if(
            inv->gpus.begin(), inv->gpus.end(),
            [&](const GpuInfo& g) { return g.chassis == s.chassis; })) == truth.gpus.size());
  CHECK(inv->skipped.empty());
  for (const auto& g : truth.gpus) {
    const GpuInfo* got = inv->find(s.gpu(g.gid));
    REQUIRE(got != nullptr);
    CHECK(got->uuid == g.uuid);
    CHECK_FALSE(got->model.empty());
    CHECK(got->health == GpuHealth::kOk);
    CHECK(got->hostPort == (g.host ? std::optional<std::string>(s.host(*g.host)) : std::nullopt));
  }
  CHECK(std::find(inv->hosts.begin(), inv->hosts.end(), s.host(48)) != inv->hosts.end());
  CHECK(std::is_sorted(inv->gpus.begin(), inv->gpus.end(),
                       [](const GpuInfo& a, const GpuInfo& b) { return a.id < b.id; }));
}

TEST_CASE("contract: attach and detach are verified and idempotent", "[fabric][contract]") {
  const std::string kind = KINDS;
  CAPTURE(kind);
  SimHarness sim(topologyFor(kind), Credentials{"admin", "secret"});
  SleepLog log;
  Subject s = makeSubject(kind, sim, log);

  auto attached = s.driver->attach(s.gpu("000500"), s.host(0));
  REQUIRE(attached.ok());
  CHECK(attached->changed);
  CHECK(attached->attempts == 1);
  CHECK_FALSE(attached->hostBefore.has_value());
  CHECK(attached->hostAfter == s.host(0));
  CHECK(sim.trueHost("falcon-a", "000500") == 0);

  const auto assignsBefore = sim.counter("falcon-a", "assign");
  auto again = s.driver->attach(s.gpu("000500"), s.host(0));
  REQUIRE(again.ok());
  CHECK_FALSE(again->changed);
  CHECK(sim.counter("falcon-a", "assign") == assignsBefore);  // nothing sent

  auto detached = s.driver->detach(s.gpu("001300"));
  REQUIRE(detached.ok());
  CHECK(detached->changed);
  CHECK(detached->hostBefore == s.host(48));
  CHECK(sim.trueHost("falcon-a", "001300") == -1);
  auto detachedAgain = s.driver->detach(s.gpu("001300"));
  REQUIRE(detachedAgain.ok());
  CHECK_FALSE(detachedAgain->changed);

  auto inv = s.driver->inventory();
  REQUIRE(inv.ok());
  CHECK(inv->find(s.gpu("000500"))->hostPort == s.host(0));
  CHECK_FALSE(inv->find(s.gpu("001300"))->hostPort.has_value());
  CHECK(log.count() == 0);  // no retries were needed
}

TEST_CASE("contract: bad requests fail clearly and change nothing", "[fabric][contract]") {
  const std::string kind = KINDS;
  CAPTURE(kind);
  SimHarness sim(topologyFor(kind), Credentials{"admin", "secret"});
  SleepLog log;
  Subject s = makeSubject(kind, sim, log);
  const auto gpusOf = [&sim] {
    std::vector<nlohmann::json> out;
    const auto st = sim.state();
    for (const auto& c : st["chassis"]) {
      out.push_back(c["gpus"]);
    }
    return out;
  };
  const auto before = gpusOf();

  auto conflict = s.driver->attach(s.gpu("001300"), s.host(0));  // attached to 48
  REQUIRE_FALSE(conflict.ok());
  CHECK(conflict.error().code == errc::kConflict);
  CHECK_THAT(conflict.error().message, Catch::Contains("detach it first"));

  auto unknownGpu = s.driver->attach(s.gpu("0ABCDE"), s.host(0));
  REQUIRE_FALSE(unknownGpu.ok());
  CHECK(unknownGpu.error().code == errc::kNotFound);

  auto badId = s.driver->detach("not-an-id");
  REQUIRE_FALSE(badId.ok());
  CHECK(badId.error().code == errc::kInvalid);

  CHECK(gpusOf() == before);
}

TEST_CASE("contract: every injected lie is caught by verification", "[fabric][contract]") {
  const std::string kind = KINDS;
  CAPTURE(kind);
  SimHarness sim(topologyFor(kind), Credentials{"admin", "secret"});
  SleepLog log;
  Subject s = makeSubject(kind, sim, log);

  SECTION("reports success but does nothing, once: retried, then verified") {
    sim.fault(R"({"chassis":"falcon-a","op":"assign","kind":"lie_success","gpu":"000500"})");
    auto r = s.driver->attach(s.gpu("000500"), s.host(48));
    REQUIRE(r.ok());
    CHECK(r->attempts == 2);
    CHECK(sim.trueHost("falcon-a", "000500") == 48);
    CHECK(log.count() == 1);
  }
  SECTION("reports success but does nothing, always: unverified, never success") {
    sim.fault(R"({"chassis":"falcon-a","op":"assign","kind":"lie_success","times":-1})");
    auto r = s.driver->attach(s.gpu("000500"), s.host(48));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == errc::kUnverified);
    CHECK(sim.trueHost("falcon-a", "000500") == -1);
    sim.fault(R"({"chassis":"falcon-a","op":"unassign","kind":"lie_success","times":-1})");
    auto d = s.driver->detach(s.gpu("000C00"));
    REQUIRE_FALSE(d.ok());
    CHECK(d.error().code == errc::kUnverified);
    CHECK(sim.trueHost("falcon-a", "000C00") == 0);
  }
  SECTION("reports failure but does the move (the H3 assign quirk): success with a note") {
    sim.fault(R"({"chassis":"falcon-a","op":"assign","kind":"lie_failure"})");
    auto r = s.driver->attach(s.gpu("000500"), s.host(0));
    REQUIRE(r.ok());
    CHECK(r->attempts == 1);
    REQUIRE(r->notes.size() == 1);
    CHECK(sim.trueHost("falcon-a", "000500") == 0);
    sim.fault(R"({"chassis":"falcon-a","op":"unassign","kind":"lie_failure"})");
    auto d = s.driver->detach(s.gpu("000500"));
    REQUIRE(d.ok());
    CHECK(d->attempts == 1);
    CHECK(sim.trueHost("falcon-a", "000500") == -1);
  }
  SECTION("fails every time: error after the configured attempts with backoff") {
    sim.fault(R"({"chassis":"falcon-a","op":"assign","kind":"fail","times":-1})");
    auto r = s.driver->attach(s.gpu("000500"), s.host(0));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("after 3 attempts"));
    CHECK(sim.trueHost("falcon-a", "000500") == -1);
    std::lock_guard lock(log.mutex);
    CHECK(log.sleeps == std::vector<Millis>{Millis{100}, Millis{200}});
  }
  SECTION("loses the GPU during the move: unhealthy, and inventory says so") {
    sim.fault(R"({"chassis":"falcon-a","op":"assign","kind":"lose_gpu","gpu":"000500"})");
    auto r = s.driver->attach(s.gpu("000500"), s.host(0));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == errc::kUnhealthy);
    auto inv = s.driver->inventory();
    REQUIRE(inv.ok());
    CHECK(inv->find(s.gpu("000500"))->health == GpuHealth::kUnhealthy);
    auto again = s.driver->attach(s.gpu("000500"), s.host(0));
    REQUIRE_FALSE(again.ok());
    CHECK(again.error().code == errc::kUnhealthy);
  }
  SECTION("loses the GPU during a detach that does not happen: unhealthy, not unverified") {
    REQUIRE(s.driver->attach(s.gpu("000500"), s.host(0)).ok());
    sim.fault(R"({"chassis":"falcon-a","op":"unassign","kind":"lose_gpu","gpu":"000500"})");
    auto r = s.driver->detach(s.gpu("000500"));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == errc::kUnhealthy);
  }
  SECTION("hangs past the client timeout once: retried and verified") {
    sim.fault(R"({"chassis":"falcon-a","op":"assign","kind":"hang","hangMs":3000})");
    auto r = s.driver->attach(s.gpu("000500"), s.host(48));
    REQUIRE(r.ok());
    CHECK(r->attempts == 2);
    CHECK(sim.trueHost("falcon-a", "000500") == 48);
  }
}

TEST_CASE("contract: inventory failures are retried, then reported", "[fabric][contract]") {
  const std::string kind = KINDS;
  CAPTURE(kind);
  SimHarness sim(topologyFor(kind), Credentials{"admin", "secret"});
  SleepLog log;
  Subject s = makeSubject(kind, sim, log);

  sim.fault(R"({"chassis":"falcon-a","op":"inventory","kind":"fail","times":2})");
  auto ok = s.driver->inventory();
  REQUIRE(ok.ok());
  CHECK(log.count() == 2);

  sim.fault(R"({"chassis":"falcon-a","op":"inventory","kind":"fail","times":-1})");
  auto failed = s.driver->inventory();
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error().code == errc::kUnavailable);
}

TEST_CASE("contract: malformed replies are errors, never a success", "[fabric][contract]") {
  const std::string kind = KINDS;
  auto body = GENERATE(as<std::string>{}, R"({"bodyBytes":9437184})",
                       R"({"body":"{\"Members\":[{\"x\":1}]"})",
                       R"({"body":"[{\"dev_type\":\"GPU\",\"Dev_GID\":5}]"})",
                       R"({"body":"<html>oops</html>"})", R"({"body":"{\"Members\":\"all\"}"})");
  CAPTURE(kind, body);
  SimHarness sim(topologyFor(kind), Credentials{"admin", "secret"});
  SleepLog log;
  Subject s = makeSubject(kind, sim, log);
  auto spec = nlohmann::json::parse(body);
  spec["chassis"] = "falcon-a";
  spec["op"] = "inventory";
  spec["kind"] = "malformed";
  spec["times"] = -1;
  sim.fault(spec.dump());
  auto inv = s.driver->inventory();
  REQUIRE_FALSE(inv.ok());
  CHECK(inv.error().code == errc::kProtocol);
  auto moved = s.driver->attach(s.gpu("000500"), s.host(0));
  REQUIRE_FALSE(moved.ok());
  CHECK(sim.trueHost("falcon-a", "000500") == -1);
}

TEST_CASE("contract: move() is a verified detach and attach in one call", "[fabric][contract]") {
  const std::string kind = KINDS;
  CAPTURE(kind);
  SimHarness sim(topologyFor(kind), Credentials{"admin", "secret"});
  SleepLog log;
  Subject s = makeSubject(kind, sim, log);

  SECTION("an attached GPU to another host, and an unattached one") {
    const auto readsBefore = sim.counter("falcon-a", "inventory");
    auto r = s.driver->move(s.gpu("001300"), s.host(48), s.host(0));
    REQUIRE(r.ok());
    CHECK(r->changed);
    CHECK(r->hostBefore == s.host(48));
    CHECK(r->hostAfter == s.host(0));
    CHECK(sim.trueHost("falcon-a", "001300") == 0);
    if (kind == "h3") {
      // The chassis' own time of a move: unassign, assign and ONE re-read.
      CHECK(sim.counter("falcon-a", "inventory") - readsBefore == 1);
      CHECK(r->attempts == 2);
    }
    auto u = s.driver->move(s.gpu("000500"), std::nullopt, s.host(48));
    REQUIRE(u.ok());
    CHECK_FALSE(u->hostBefore.has_value());
    CHECK(sim.trueHost("falcon-a", "000500") == 48);
    CHECK(sim.counter("falcon-a", "unassign") <= 1);  // nothing to detach: none sent
    CHECK(log.count() == 0);
  }
  SECTION("an unassign that does not happen: the GPU stays where it was, never success") {
    sim.fault(R"({"chassis":"falcon-a","op":"unassign","kind":"lie_success","times":-1})");
    auto r = s.driver->move(s.gpu("000C00"), s.host(0), s.host(48));
    REQUIRE_FALSE(r.ok());
    CHECK((r.error().code == errc::kUnverified || r.error().code == errc::kConflict));
    CHECK(sim.trueHost("falcon-a", "000C00") == 0);
  }
  SECTION("an assign that always fails: error, and the re-read shows where the GPU is") {
    sim.fault(R"({"chassis":"falcon-a","op":"assign","kind":"fail","times":-1})");
    auto r = s.driver->move(s.gpu("000C00"), s.host(0), s.host(48));
    REQUIRE_FALSE(r.ok());
    CHECK(sim.trueHost("falcon-a", "000C00") != 48);
    auto inv = s.driver->inventory();
    REQUIRE(inv.ok());
    CHECK(inv->find(s.gpu("000C00"))->hostPort != std::optional<std::string>(s.host(48)));
  }
  SECTION("the H3 assign quirk (failure answered, move made): success") {
    sim.fault(R"({"chassis":"falcon-a","op":"assign","kind":"lie_failure"})");
    auto r = s.driver->move(s.gpu("001300"), s.host(48), s.host(0));
    REQUIRE(r.ok());
    CHECK(sim.trueHost("falcon-a", "001300") == 0);
  }
  SECTION("a host of another chassis or no host at all: invalid, nothing sent") {
    const auto sent = sim.counter("falcon-a", "unassign") + sim.counter("falcon-a", "assign");
    auto bad = s.driver->move(s.gpu("001300"), s.host(48), "");
    REQUIRE_FALSE(bad.ok());
    CHECK(sim.trueHost("falcon-a", "001300") == 48);
    CHECK(sim.counter("falcon-a", "unassign") + sim.counter("falcon-a", "assign") == sent);
  }
}
