#include <SQLiteCpp/SQLiteCpp.h>
#include <sqlite3.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <random>
#include <set>
#include <string>

#include "services/vni-webhook/vni_service.hpp"
#include "tests/services/vni-webhook/hook_request_builder.hpp"
#include "tests/support/temp_dir.hpp"

using kc::testing::TempDir;
using kc::vni::HookKind;
using kc::vni::HookReply;
using kc::vni::VniService;
using kc::vni::testing::makeParent;
using nlohmann::json;

namespace {

// Injected wall clock (Unix ms).
struct FakeClock {
  std::shared_ptr<std::atomic<std::int64_t>> ms =
      std::make_shared<std::atomic<std::int64_t>>(1'795'381'200'000);
  VniService::WallClockMs fn() const {
    return [m = ms] { return m->load(); };
  }
  void advanceMs(std::int64_t d) { *ms += d; }
};

kc::vni::ServiceOptions options(const std::string& db, kc::alloc::Vni min, kc::alloc::Vni max,
                                std::int64_t cooldownMs = 0) {
  kc::vni::ServiceOptions o;
  o.store.path = db;
  o.store.range.min = min;
  o.store.range.max = max;
  o.store.range.cooldown = kc::alloc::VniTime{cooldownMs};
  return o;
}

std::unique_ptr<VniService> startService(const kc::vni::ServiceOptions& o, const FakeClock& clock,
                                         kc::vni::StoreReport* report = nullptr) {
  auto s = VniService::start(o, clock.fn(), report);
  REQUIRE(s.ok());
  return std::move(s).value();
}

std::int64_t vniOf(const HookReply& reply) {
  REQUIRE(reply.status == 200);
  REQUIRE(reply.body["attachments"].size() == 1);
  return reply.body["attachments"][0]["spec"]["vni"].get<std::int64_t>();
}

std::size_t rowCount(const std::string& db) {
  auto rows = kc::vni::readAllocations(db);
  REQUIRE(rows.ok());
  return rows->size();
}

}  // namespace

TEST_CASE("Sync twice gives the same VNI, another owner gets another", "[vni]") {
  TempDir dir;
  FakeClock clock;
  auto service = startService(options(dir.file("vni.sqlite3"), 1024, 65535), clock);
  auto a = makeParent("Job", "a").optIn();
  const auto first = vniOf(service->handleNow(HookKind::kSync, a.body(HookKind::kSync)));
  CHECK(first == 1024);
  CHECK(vniOf(service->handleNow(HookKind::kSync, a.vniObserved(first).body(HookKind::kSync))) ==
        first);
  auto b = makeParent("Deployment", "b").optIn();
  CHECK(vniOf(service->handleNow(HookKind::kSync, b.body(HookKind::kSync))) == 1025);
  CHECK(rowCount(dir.file("vni.sqlite3")) == 2);
}

TEST_CASE("Finalize releases once, answers 200 every time, finalized after the object is gone",
          "[vni]") {
  TempDir dir;
  FakeClock clock;
  auto service = startService(options(dir.file("vni.sqlite3"), 1024, 2048), clock);
  auto job = makeParent("Job", "j").optIn();
  const auto vni = vniOf(service->handleNow(HookKind::kSync, job.body(HookKind::kSync)));
  job.vniObserved(vni).deleting("2026-11-22T21:00:00Z");

  HookReply r1 = service->handleNow(HookKind::kFinalize, job.body(HookKind::kFinalize));
  CHECK(r1.status == 200);
  CHECK(r1.body["finalized"] == false);
  CHECK(r1.body["attachments"].empty());
  CHECK(rowCount(dir.file("vni.sqlite3")) == 0);
  // A retry with the object still observed (Metacontroller's deletion pending) is harmless.
  HookReply r2 = service->handleNow(HookKind::kFinalize, job.body(HookKind::kFinalize));
  CHECK(r2.status == 200);
  CHECK(r2.body["finalized"] == false);
  auto gone = makeParent("Job", "j").optIn().deleting("2026-11-22T21:00:00Z");
  for (int i = 0; i < 2; ++i) {
    HookReply r = service->handleNow(HookKind::kFinalize, gone.body(HookKind::kFinalize));
    CHECK(r.status == 200);
    CHECK(r.body["finalized"] == true);
  }
}

TEST_CASE("Finalize releases by the owner's uid even when the VNI object is absent", "[vni]") {
  TempDir dir;
  FakeClock clock;
  auto service = startService(options(dir.file("vni.sqlite3"), 1024, 2048), clock);
  auto job = makeParent("Job", "j").optIn();
  (void)vniOf(service->handleNow(HookKind::kSync, job.body(HookKind::kSync)));
  HookReply r = service->handleNow(HookKind::kFinalize, job.body(HookKind::kFinalize));
  CHECK(r.body["finalized"] == true);
  CHECK(rowCount(dir.file("vni.sqlite3")) == 0);
}

TEST_CASE("Finalize holds the VNI while the job's pods run, then releases", "[vni]") {
  TempDir dir;
  FakeClock clock;
  auto service = startService(options(dir.file("vni.sqlite3"), 1024, 2048), clock);
  auto job = makeParent("Job", "j").optIn();
  const auto vni = vniOf(service->handleNow(HookKind::kSync, job.body(HookKind::kSync)));

  SECTION("annotation removed from a live job: never freed while pods run") {
    auto live = makeParent("Job", "j").vniObserved(vni).pod("j-1", "Running");
    HookReply r = service->handleNow(HookKind::kFinalize, live.body(HookKind::kFinalize));
    CHECK(r.body["finalized"] == false);
    CHECK(r.body["resyncAfterSeconds"] == 5.0);
    CHECK(vniOf(r) == vni);  // the object is kept
    clock.advanceMs(10LL * 24 * 3600 * 1000);
    CHECK(
        service->handleNow(HookKind::kFinalize, live.body(HookKind::kFinalize)).body["finalized"] ==
        false);
    // A sync without the annotation neither frees nor allocates.
    auto noAnnotation = makeParent("Job", "j").vniObserved(vni);
    CHECK(vniOf(service->handleNow(HookKind::kSync, noAnnotation.body(HookKind::kSync))) == vni);
    CHECK(rowCount(dir.file("vni.sqlite3")) == 1);
  }
  SECTION("deleted job: waits for pods, bounded by the timeout") {
    auto deleted = makeParent("Job", "j")
                       .optIn()
                       .vniObserved(vni)
                       .deleting("2026-11-22T21:00:00Z")
                       .pod("j-1", "Running");
    CHECK(service->handleNow(HookKind::kFinalize, deleted.body(HookKind::kFinalize))
              .body["finalized"] == false);
    CHECK(rowCount(dir.file("vni.sqlite3")) == 1);
    clock.advanceMs(301'000);  // default timeout 300 s after the deletionTimestamp
    HookReply r = service->handleNow(HookKind::kFinalize, deleted.body(HookKind::kFinalize));
    CHECK(r.body["attachments"].empty());
    CHECK(rowCount(dir.file("vni.sqlite3")) == 0);
  }
}

TEST_CASE("Exhaustion answers 503 naming the range, writes nothing, recovers after a release",
          "[vni]") {
  TempDir dir;
  FakeClock clock;
  auto service = startService(options(dir.file("vni.sqlite3"), 1024, 1027), clock);
  std::vector<kc::vni::testing::ParentBuilder> jobs;
  for (int i = 0; i < 3; ++i) {
    jobs.push_back(makeParent("Job", "j" + std::to_string(i)).optIn());
    (void)vniOf(service->handleNow(HookKind::kSync, jobs.back().body(HookKind::kSync)));
  }
  auto extra = makeParent("Job", "extra").optIn();
  HookReply full = service->handleNow(HookKind::kSync, extra.body(HookKind::kSync));
  CHECK(full.status == 503);
  CHECK(full.body["error"] == "exhausted");
  CHECK(full.body["range"] == json{{"min", 1024}, {"max", 1027}});
  CHECK(full.body["held"] == 3);
  CHECK_THAT(full.body["message"].get<std::string>(), Catch::Contains("[1024, 1027)"));
  CHECK(rowCount(dir.file("vni.sqlite3")) == 3);

  CHECK(service->handleNow(HookKind::kFinalize, jobs[1].body(HookKind::kFinalize)).status == 200);
  CHECK(vniOf(service->handleNow(HookKind::kSync, extra.body(HookKind::kSync))) == 1025);
}

TEST_CASE("Cooldown: a released VNI is not reissued before it passes", "[vni]") {
  TempDir dir;
  FakeClock clock;
  auto service = startService(options(dir.file("vni.sqlite3"), 1024, 1026, 60'000), clock);
  auto a = makeParent("Job", "a").optIn();
  auto b = makeParent("Job", "b").optIn();
  CHECK(vniOf(service->handleNow(HookKind::kSync, a.body(HookKind::kSync))) == 1024);
  CHECK(vniOf(service->handleNow(HookKind::kSync, b.body(HookKind::kSync))) == 1025);
  REQUIRE(service->handleNow(HookKind::kFinalize, a.body(HookKind::kFinalize)).status == 200);
  auto c = makeParent("Job", "c").optIn();
  clock.advanceMs(59'999);
  HookReply early = service->handleNow(HookKind::kSync, c.body(HookKind::kSync));
  CHECK(early.status == 503);
  CHECK(early.body["cooling"] == 1);
  SECTION("in the same process") {
    clock.advanceMs(1);
    CHECK(vniOf(service->handleNow(HookKind::kSync, c.body(HookKind::kSync))) == 1024);
  }
  SECTION("across a restart") {
    service.reset();
    kc::vni::StoreReport report;
    service = startService(options(dir.file("vni.sqlite3"), 1024, 1026, 60'000), clock, &report);
    CHECK(report.coolingRestored == 1);
    CHECK(service->handleNow(HookKind::kSync, c.body(HookKind::kSync)).status == 503);
    clock.advanceMs(1);
    CHECK(vniOf(service->handleNow(HookKind::kSync, c.body(HookKind::kSync))) == 1024);
  }
}

TEST_CASE("Restart keeps every allocation and continues next-fit", "[vni]") {
  TempDir dir;
  FakeClock clock;
  std::map<std::string, std::int64_t> got;
  {
    auto service = startService(options(dir.file("vni.sqlite3"), 1024, 65535), clock);
    for (int i = 0; i < 50; ++i) {
      auto p = makeParent("Job", "j" + std::to_string(i)).optIn();
      got[p.uidValue()] = vniOf(service->handleNow(HookKind::kSync, p.body(HookKind::kSync)));
    }
    auto j7 = makeParent("Job", "j7").optIn();
    REQUIRE(service->handleNow(HookKind::kFinalize, j7.body(HookKind::kFinalize)).status == 200);
    got.erase(j7.uidValue());
  }
  kc::vni::StoreReport report;
  auto service = startService(options(dir.file("vni.sqlite3"), 1024, 65535), clock, &report);
  CHECK(report.allocations == 49);
  for (int i = 0; i < 50; ++i) {
    auto p = makeParent("Job", "j" + std::to_string(i)).optIn();
    if (i == 7) {
      continue;
    }
    CHECK(vniOf(service->handleNow(HookKind::kSync, p.body(HookKind::kSync))) == got[p.uidValue()]);
  }
  // Next-fit resumes after the last value handed out (1073), not at the freed 1031.
  auto next = makeParent("Job", "next").optIn();
  CHECK(vniOf(service->handleNow(HookKind::kSync, next.body(HookKind::kSync))) == 1074);
}

TEST_CASE("Reserved VNIs 0, 1 and 10 are never issued", "[vni]") {
  TempDir dir;
  FakeClock clock;
  auto service = startService(options(dir.file("vni.sqlite3"), 0, 16), clock);
  std::set<std::int64_t> issued;
  for (int i = 0; i < 20; ++i) {
    auto p = makeParent("Job", "j" + std::to_string(i)).optIn();
    HookReply r = service->handleNow(HookKind::kSync, p.body(HookKind::kSync));
    if (r.status == 503) {
      break;
    }
    issued.insert(vniOf(r));
  }
  CHECK(issued.size() == 13);
  CHECK_FALSE(issued.count(0));
  CHECK_FALSE(issued.count(1));
  CHECK_FALSE(issued.count(10));
}

TEST_CASE("A range change across restarts keeps old allocations valid and reports them", "[vni]") {
  TempDir dir;
  FakeClock clock;
  auto a = makeParent("Job", "a").optIn();
  auto b = makeParent("Job", "b").optIn();
  {
    auto service = startService(options(dir.file("vni.sqlite3"), 1024, 1034), clock);
    CHECK(vniOf(service->handleNow(HookKind::kSync, a.body(HookKind::kSync))) == 1024);
    CHECK(vniOf(service->handleNow(HookKind::kSync, b.body(HookKind::kSync))) == 1025);
  }
  kc::vni::StoreReport report;
  auto service = startService(options(dir.file("vni.sqlite3"), 1025, 1030), clock, &report);
  REQUIRE(report.previousRange.has_value());
  CHECK(report.previousRange->first == 1024);
  CHECK(report.outOfRange == 1);
  CHECK(service->stats().outOfRange == 1);
  CHECK(vniOf(service->handleNow(HookKind::kSync, a.body(HookKind::kSync))) == 1024);
  CHECK(vniOf(service->handleNow(HookKind::kSync, b.body(HookKind::kSync))) == 1025);
  auto c = makeParent("Job", "c").optIn();
  CHECK(vniOf(service->handleNow(HookKind::kSync, c.body(HookKind::kSync))) == 1026);
  REQUIRE(service->handleNow(HookKind::kFinalize, a.body(HookKind::kFinalize)).status == 200);
  CHECK(service->stats().outOfRange == 0);
  CHECK(rowCount(dir.file("vni.sqlite3")) == 2);
}

TEST_CASE("A ReplicaSet of a Deployment holding a VNI gets none of its own", "[vni]") {
  TempDir dir;
  FakeClock clock;
  auto service = startService(options(dir.file("vni.sqlite3"), 1024, 2048), clock);
  auto dep = makeParent("Deployment", "web").uid("dep-uid").optIn();
  const auto vni = vniOf(service->handleNow(HookKind::kSync, dep.body(HookKind::kSync)));
  auto rs = makeParent("ReplicaSet", "web-7d9").optIn().ownedByDeployment("web", "dep-uid");
  HookReply r = service->handleNow(HookKind::kSync, rs.body(HookKind::kSync));
  CHECK(r.status == 200);
  CHECK(r.body["attachments"].empty());
  CHECK(r.body["labels"]["vni.kubecomp.io/vni"] == std::to_string(vni));
  CHECK(rowCount(dir.file("vni.sqlite3")) == 1);
  // Its finalize frees nothing of the Deployment's.
  CHECK(service->handleNow(HookKind::kFinalize, rs.body(HookKind::kFinalize)).body["finalized"] ==
        true);
  CHECK(rowCount(dir.file("vni.sqlite3")) == 1);
  // A ReplicaSet whose Deployment holds nothing is a job of its own.
  auto lone = makeParent("ReplicaSet", "other-1").optIn().ownedByDeployment("other", "o-uid");
  CHECK(vniOf(service->handleNow(HookKind::kSync, lone.body(HookKind::kSync))) == vni + 1);
}

TEST_CASE("A recreated job (same name, new uid) gets its own VNI and the old finalize keeps it",
          "[vni]") {
  TempDir dir;
  FakeClock clock;
  auto service = startService(options(dir.file("vni.sqlite3"), 1024, 2048), clock);
  auto old = makeParent("Job", "j").uid("uid-old").optIn();
  auto fresh = makeParent("Job", "j").uid("uid-new").optIn();
  const auto v1 = vniOf(service->handleNow(HookKind::kSync, old.body(HookKind::kSync)));
  const auto v2 = vniOf(service->handleNow(HookKind::kSync, fresh.body(HookKind::kSync)));
  CHECK(v1 != v2);
  REQUIRE(service->handleNow(HookKind::kFinalize, old.body(HookKind::kFinalize)).status == 200);
  CHECK(vniOf(service->handleNow(HookKind::kSync, fresh.body(HookKind::kSync))) == v2);
}

TEST_CASE("A lost database adopts the value recorded in the surviving VNI object", "[vni]") {
  TempDir dir;
  FakeClock clock;
  auto service = startService(options(dir.file("vni.sqlite3"), 1024, 2048), clock);
  auto job = makeParent("Job", "j").optIn().vniObserved(1500);
  CHECK(vniOf(service->handleNow(HookKind::kSync, job.body(HookKind::kSync))) == 1500);
  // An observed value held by someone else is not adopted twice.
  auto other = makeParent("Job", "k").optIn().vniObserved(1500);
  CHECK(vniOf(service->handleNow(HookKind::kSync, other.body(HookKind::kSync))) == 1024);
}

TEST_CASE("A surviving VNI object adopts its value once that value's cooldown has ended", "[vni]") {
  TempDir dir;
  FakeClock clock;
  auto service = startService(options(dir.file("vni.sqlite3"), 1024, 2048, 60'000), clock);
  auto first = makeParent("Job", "first").optIn();
  REQUIRE(vniOf(service->handleNow(HookKind::kSync, first.body(HookKind::kSync))) == 1024);
  REQUIRE(service->handleNow(HookKind::kFinalize, first.body(HookKind::kFinalize)).status == 200);
  auto survivor = makeParent("Job", "survivor").optIn().vniObserved(1024);
  SECTION("still cooling: not adopted") {
    clock.advanceMs(59'000);
    CHECK(vniOf(service->handleNow(HookKind::kSync, survivor.body(HookKind::kSync))) == 1025);
  }
  SECTION("cooldown over: adopted") {
    clock.advanceMs(60'000);
    CHECK(vniOf(service->handleNow(HookKind::kSync, survivor.body(HookKind::kSync))) == 1024);
  }
}

TEST_CASE("Bad requests change nothing", "[vni]") {
  TempDir dir;
  FakeClock clock;
  auto service = startService(options(dir.file("vni.sqlite3"), 1024, 2048), clock);
  for (const std::string body :
       {"{", "[]", R"({"object":{"kind":"Job"}})",
        R"({"controller":{"spec":{"hooks":{"sync":{"version":"v9"}}}}})"}) {
    HookReply r = service->handleNow(HookKind::kSync, body);
    CHECK(r.status == 400);
    CHECK(r.body["error"] == "invalid");
  }
  CHECK(rowCount(dir.file("vni.sqlite3")) == 0);
}

TEST_CASE("The database refuses a duplicate VNI whatever the code above it does", "[vni]") {
  TempDir dir;
  FakeClock clock;
  {
    auto service = startService(options(dir.file("vni.sqlite3"), 1024, 2048), clock);
    (void)vniOf(
        service->handleNow(HookKind::kSync, makeParent("Job", "a").optIn().body(HookKind::kSync)));
  }
  // Another writer inserting the same VNI for another owner fails on UNIQUE(vni).
  auto rows = kc::vni::readAllocations(dir.file("vni.sqlite3"));
  REQUIRE(rows.ok());
  REQUIRE(rows->size() == 1);
  const auto held = (*rows)[0].vni;
  SQLite::Database other(dir.file("vni.sqlite3"), SQLite::OPEN_READWRITE);
  int extended = 0;
  try {
    SQLite::Statement insert(other,
                             "INSERT INTO vni_allocs(uid, namespace, vni, allocated_at_ms) "
                             "VALUES ('x', 'y', ?, 0)");
    insert.bind(1, static_cast<std::int64_t>(held));
    insert.exec();
  } catch (const SQLite::Exception& e) {
    extended = e.getExtendedErrorCode();
  }
  CHECK(extended == SQLITE_CONSTRAINT_UNIQUE);
  CHECK(rowCount(dir.file("vni.sqlite3")) == 1);
}
