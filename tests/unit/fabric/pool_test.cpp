#include "libcore/fabric/pool.hpp"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

using namespace kc::fabric;

namespace {

// Concatenation via append (GCC 12's -Wrestrict misfires on chained operator+ at -O3).
template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::string out;
  (out.append(parts), ...);
  return out;
}

// Counts how many calls run at once, globally and per chassis; inventory() can be made to
// wait until `rendezvous` callers are inside at the same time.
struct Concurrency {
  std::mutex mutex;
  std::condition_variable cv;
  int inside = 0;
  int maxInside = 0;
  std::map<std::string, int> perChassis;
  std::map<std::string, int> maxPerChassis;
  int rendezvous = 0;
  bool rendezvousMet = false;

  void enter(const std::string& chassis) {
    std::unique_lock lock(mutex);
    ++inside;
    maxInside = std::max(maxInside, inside);
    maxPerChassis[chassis] = std::max(maxPerChassis[chassis], ++perChassis[chassis]);
    if (rendezvous > 0) {
      if (inside >= rendezvous) {
        rendezvousMet = true;
        cv.notify_all();
      }
      // Bounded wait: a sequential implementation fails the test instead of hanging.
      cv.wait_for(lock, std::chrono::seconds(5), [&] { return rendezvousMet; });
    }
  }
  void leave(const std::string& chassis) {
    std::lock_guard lock(mutex);
    --inside;
    --perChassis[chassis];
  }
};

class FakeDriver final : public FabricDriver {
 public:
  FakeDriver(std::string name, Concurrency& c, bool fail = false)
      : name_(std::move(name)), c_(c), fail_(fail) {
    gpus_.push_back(GpuInfo{makeGpuId(name_, "001300"), name_, "001300", cat("GPU-", name_, "-1"),
                            "V100", std::string("48"), GpuHealth::kOk, ""});
    gpus_.push_back(GpuInfo{makeGpuId(name_, "000C00"), name_, "000C00", cat("GPU-", name_, "-2"),
                            "V100", std::nullopt, GpuHealth::kOk, ""});
  }
  std::string_view dialect() const override { return "fake"; }
  const std::string& name() const override { return name_; }
  kc::Result<Inventory> inventory() override {
    c_.enter(name_);
    c_.leave(name_);
    if (fail_) {
      return kc::makeError(errc::kTimeout, "chassis did not answer");
    }
    return Inventory{gpus_, {"0", "48"}};
  }
  kc::Result<MoveReport> attach(const std::string& gpuId, const std::string& host) override {
    c_.enter(name_);
    std::this_thread::yield();
    c_.leave(name_);
    for (auto& g : gpus_) {
      if (g.id == gpuId) {
        MoveReport r{gpuId, g.hostPort, host, g.hostPort != host, 1, {}};
        g.hostPort = host;
        return r;
      }
    }
    return kc::makeError(errc::kNotFound, cat("no ", gpuId));
  }
  kc::Result<MoveReport> detach(const std::string& gpuId) override {
    for (auto& g : gpus_) {
      if (g.id == gpuId) {
        MoveReport r{gpuId, g.hostPort, std::nullopt, g.hostPort.has_value(), 1, {}};
        g.hostPort.reset();
        return r;
      }
    }
    return kc::makeError(errc::kNotFound, cat("no ", gpuId));
  }

 private:
  std::string name_;
  Concurrency& c_;
  bool fail_;
  std::vector<GpuInfo> gpus_;
};

std::unique_ptr<FabricPool> makePool(Concurrency& c, int n, int failing = -1) {
  std::vector<std::unique_ptr<FabricDriver>> drivers;
  for (int i = 0; i < n; ++i) {
    drivers.push_back(std::make_unique<FakeDriver>(cat("c", std::to_string(i)), c, i == failing));
  }
  auto pool = FabricPool::create("pool-a", std::move(drivers));
  REQUIRE(pool.ok());
  return std::move(pool).value();
}

}  // namespace

TEST_CASE("pool: inventory reads every chassis at the same time", "[fabric][pool]") {
  Concurrency c;
  c.rendezvous = 4;  // each chassis waits until all four are inside inventory()
  auto pool = makePool(c, 4);
  auto inv = pool->inventory();
  REQUIRE(inv.ok());
  CHECK(c.rendezvousMet);
  CHECK(c.maxInside == 4);
  CHECK(inv->gpus.size() == 8);
  CHECK(inv->hosts.front() == "c0/0");
  const GpuInfo* g = inv->find("c2.001300");
  REQUIRE(g != nullptr);
  CHECK(g->hostPort == "c2/48");
}

TEST_CASE("pool: moves on one chassis are serialised, chassis run in parallel", "[fabric][pool]") {
  Concurrency c;
  auto pool = makePool(c, 2);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      const std::string chassis = cat("c", std::to_string(t % 2));
      for (int i = 0; i < 50; ++i) {
        if (!pool->attach(cat(chassis, ".000C00"),
                          cat(chassis, "/", std::to_string(i % 2 ? 0 : 48)))
                 .ok()) {
          ++failures;
        }
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  CHECK(failures == 0);
  CHECK(c.maxPerChassis["c0"] == 1);
  CHECK(c.maxPerChassis["c1"] == 1);
}

TEST_CASE("pool: one failed chassis is reported by name, others still visible", "[fabric][pool]") {
  Concurrency c;
  auto pool = makePool(c, 3, 1);
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
  Concurrency c;
  auto pool = makePool(c, 2);
  auto moved = pool->attach("c1.000C00", "c1/0");
  REQUIRE(moved.ok());
  CHECK(moved->hostAfter == "c1/0");
  CHECK(pool->attach("c1.000C00", "0").ok());  // bare chassis-local host accepted
  CHECK(pool->attach("c1.000C00", "c0/0").error().code == errc::kInvalid);
  CHECK(pool->attach("c9.000C00", "c9/0").error().code == errc::kNotFound);
  CHECK(pool->detach("no-dot").error().code == errc::kInvalid);
  auto detached = pool->detach("c0.001300");
  REQUIRE(detached.ok());
  CHECK(detached->hostBefore == "c0/48");
}

TEST_CASE("pool: construction is validated", "[fabric][pool]") {
  Concurrency c;
  std::vector<std::unique_ptr<FabricDriver>> twice;
  twice.push_back(std::make_unique<FakeDriver>("c0", c));
  twice.push_back(std::make_unique<FakeDriver>("c0", c));
  CHECK_FALSE(FabricPool::create("p", std::move(twice)).ok());
  CHECK_FALSE(FabricPool::create("p", {}).ok());
  CHECK_FALSE(FabricPool::create("Bad.Name", {}).ok());
}
