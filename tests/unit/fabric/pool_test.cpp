#include "libcore/fabric/pool.hpp"

#include <atomic>
#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/fakes/fake_driver.hpp"

using namespace kc::fabric;
using kc::testing::FabricCallTracker;
using kc::testing::FakeDriver;

namespace {

// "c<i>", appended (GCC 12's -Wrestrict misfires on "c" + std::to_string(i) at -O3).
std::string chassisName(int i) {
  std::string name = "c";
  name += std::to_string(i);
  return name;
}

// Chassis c0..c<n-1>, hosts "0" and "48", GPU 001300 on 48 and 000C00 free on each; chassis
// `failing` times out every inventory.
std::unique_ptr<FabricPool> makePool(FabricCallTracker& tracker, int n, int failing = -1) {
  std::vector<std::unique_ptr<FabricDriver>> drivers;
  for (int i = 0; i < n; ++i) {
    auto d =
        std::make_unique<FakeDriver>(chassisName(i), std::vector<std::string>{"0", "48"}, &tracker);
    d->addGpu("001300", "48").addGpu("000C00");
    if (i == failing) {
      d->failNext("inventory", kc::makeError(errc::kTimeout, "chassis did not answer"), -1);
    }
    drivers.push_back(std::move(d));
  }
  auto pool = FabricPool::create("pool-a", std::move(drivers));
  REQUIRE(pool.ok());
  return std::move(pool).value();
}

}  // namespace

TEST_CASE("pool: inventory reads every chassis at the same time", "[fabric][pool]") {
  FabricCallTracker tracker;
  tracker.setBarrier(4);  // each chassis' inventory() waits until all four are inside
  auto pool = makePool(tracker, 4);
  auto inv = pool->inventory();
  REQUIRE(inv.ok());
  CHECK(tracker.barrierMisses() == 0);
  CHECK(tracker.barriersMet() == 1);
  CHECK(tracker.maxChassisInFlight() == 4);
  CHECK(inv->gpus.size() == 8);
  CHECK(inv->hosts.front() == "c0/0");
  const GpuInfo* g = inv->find("c2.001300");
  REQUIRE(g != nullptr);
  CHECK(g->hostPort == "c2/48");
}

TEST_CASE("pool: moves on one chassis are serialised, chassis run in parallel", "[fabric][pool]") {
  // Four threads per chassis, each attaching and detaching its chassis' free GPU. Every driver
  // call waits inside until a second call is inside too (barrier of two). Serialised per
  // chassis, the second one can only come from the other chassis, so each barrier pairs one
  // move on c0 with one on c1: the pool must let them overlap. A pool that serialised all
  // chassis never meets a barrier (barrierMisses > 0); one that did not serialise a chassis
  // lets two of its calls in at once (maxInFlight(chassis) == 2).
  FabricCallTracker tracker;
  auto pool = makePool(tracker, 2);
  tracker.setBarrier(2);
  constexpr int kThreadsPerChassis = 4;
  constexpr int kRounds = 10;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 2 * kThreadsPerChassis; ++t) {
    threads.emplace_back([&, t] {
      const std::string chassis = chassisName(t % 2);
      for (int i = 0; i < kRounds; ++i) {
        failures += pool->attach(chassis + ".000C00", chassis + "/0").ok() ? 0 : 1;
        failures += pool->detach(chassis + ".000C00").ok() ? 0 : 1;
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  CHECK(failures == 0);
  CHECK(tracker.calls() == 2 * kThreadsPerChassis * kRounds * 2);
  CHECK(tracker.barrierMisses() == 0);
  CHECK(tracker.barriersMet() == kThreadsPerChassis * kRounds * 2);
  CHECK(tracker.maxChassisInFlight() == 2);
  CHECK(tracker.maxInFlight("c0") == 1);
  CHECK(tracker.maxInFlight("c1") == 1);
}

TEST_CASE("pool: one failed chassis is reported by name, others still visible", "[fabric][pool]") {
  FabricCallTracker tracker;
  auto pool = makePool(tracker, 3, 1);
  auto merged = pool->inventory();
  REQUIRE_FALSE(merged.ok());
  CHECK(merged.error().code == errc::kTimeout);
  CHECK_THAT(merged.error().message, Catch::Contains("c1: chassis did not answer"));
  auto each = pool->inventoryByChassis();
  REQUIRE(each.size() == 3);
  CHECK(each[0].inventory.ok());
  CHECK_FALSE(each[1].inventory.ok());
  CHECK(each[2].inventory.ok());
}

TEST_CASE("pool: routing by GPU id and host", "[fabric][pool]") {
  FabricCallTracker tracker;
  auto pool = makePool(tracker, 2);
  auto moved = pool->attach("c1.000C00", "c1/0");
  REQUIRE(moved.ok());
  CHECK(moved->hostAfter == "c1/0");
  CHECK(moved->changed);
  auto again = pool->attach("c1.000C00", "0");  // bare chassis-local host accepted
  REQUIRE(again.ok());
  CHECK_FALSE(again->changed);
  CHECK(pool->attach("c1.000C00", "c0/0").error().code == errc::kInvalid);
  CHECK(pool->attach("c1.000C00", "c1/48").error().code == errc::kConflict);  // from the driver
  CHECK(pool->attach("c9.000C00", "c9/0").error().code == errc::kNotFound);
  CHECK(pool->detach("no-dot").error().code == errc::kInvalid);
  auto detached = pool->detach("c0.001300");
  REQUIRE(detached.ok());
  CHECK(detached->hostBefore == "c0/48");
}

TEST_CASE("pool: construction is validated", "[fabric][pool]") {
  std::vector<std::unique_ptr<FabricDriver>> twice;
  twice.push_back(std::make_unique<FakeDriver>("c0"));
  twice.push_back(std::make_unique<FakeDriver>("c0"));
  CHECK_FALSE(FabricPool::create("p", std::move(twice)).ok());
  CHECK_FALSE(FabricPool::create("p", {}).ok());
  CHECK_FALSE(FabricPool::create("Bad.Name", {}).ok());
}

// The shared fake must keep the contract the real drivers keep, or tests built on it lie.
TEST_CASE("fake driver: keeps the FabricDriver contract", "[fabric][fake]") {
  FakeDriver d("c0");
  d.addGpu("001300", "48").addGpu("000C00").addGpu("000500");
  d.setHealth("000500", GpuHealth::kUnhealthy, "lost");

  auto inv = d.inventory();
  REQUIRE(inv.ok());
  REQUIRE(inv->gpus.size() == 3);
  CHECK(inv->gpus.front().id == "c0.000500");  // sorted by id
  CHECK(inv->find("c0.001300")->uuid == "GPU-c0-001300");

  auto up = d.attach("c0.000C00", "0");
  REQUIRE(up.ok());
  CHECK((up->changed && up->attempts == 1 && !up->hostBefore && up->hostAfter == "0"));
  auto same = d.attach("c0.000C00", "0");
  REQUIRE(same.ok());
  CHECK((!same->changed && same->attempts == 0));
  CHECK(d.attach("c0.000C00", "48").error().code == errc::kConflict);
  CHECK(d.attach("c0.000500", "0").error().code == errc::kUnhealthy);
  CHECK(d.attach("c0.0FFF00", "0").error().code == errc::kNotFound);
  CHECK(d.attach("c0.001300", "7").error().code == errc::kNotFound);
  CHECK(d.attach("c1.001300", "0").error().code == errc::kInvalid);
  CHECK(d.attach("c0.001300", "").error().code == errc::kInvalid);

  d.failNext("detach", kc::makeError(errc::kUnverified, "chassis lied"));
  CHECK(d.detach("c0.000C00").error().code == errc::kUnverified);
  CHECK(d.inventory()->find("c0.000C00")->hostPort == "0");  // a failed move changes nothing
  auto down = d.detach("c0.000C00");
  REQUIRE(down.ok());
  CHECK((down->changed && down->hostBefore == "0"));
  auto again = d.detach("c0.000C00");
  REQUIRE(again.ok());
  CHECK_FALSE(again->changed);
  CHECK(d.callLog().size() == 13);
  CHECK(d.callLog()[1] == "attach c0.000C00 0");
}
