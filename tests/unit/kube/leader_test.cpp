// Leader election timing on a FakeClock against a scripted Lease endpoint: the test moves time
// from one wait of the elector to the next, so every bound is checked exactly in lease time.

#include "libcore/kube/leader.hpp"

#include <catch2/catch.hpp>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>

#include "tests/support/fakes/fake_clock.hpp"
#include "tests/unit/kube/fake_server.hpp"

using namespace kc::kube;
using kc::kube::testing::FakeServer;
using kc::kube::testing::statusResponse;
using namespace std::chrono_literals;

namespace {

// One Lease with optimistic concurrency (resourceVersion), or every request answered 500.
class LeaseEndpoint {
 public:
  explicit LeaseEndpoint(FakeServer& fake) {
    fake.setHandler([this](const kc::net::Request& req) { return handle(req); });
  }
  void setFailing(bool on) {
    std::lock_guard<std::mutex> lock(mu_);
    failing_ = on;
  }
  int writes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return writes_;
  }

 private:
  kc::net::Response handle(const kc::net::Request& req) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failing_) {
      return statusResponse(500, "InternalError", "etcd is gone");
    }
    if (req.method == "GET") {
      if (!lease_) {
        return statusResponse(404, "NotFound", "leases \"lock\" not found");
      }
      return kc::net::Response::json(200, *lease_);
    }
    auto body = nlohmann::json::parse(req.body);
    if (req.method == "POST") {
      if (lease_) {
        return statusResponse(409, "AlreadyExists", "leases \"lock\" already exists");
      }
    } else if (req.method == "PUT") {
      if (!lease_ || body["metadata"].value("resourceVersion", "") !=
                         (*lease_)["metadata"]["resourceVersion"]) {
        return statusResponse(409, "Conflict", "the object has been modified");
      }
    } else {
      return statusResponse(405, "MethodNotAllowed", req.method);
    }
    body["metadata"]["resourceVersion"] = std::to_string(++version_);
    lease_ = body;
    ++writes_;
    return kc::net::Response::json(req.method == "POST" ? 201 : 200, body);
  }

  mutable std::mutex mu_;  // guards everything below
  bool failing_ = false;
  std::optional<nlohmann::json> lease_;
  int version_ = 0;
  int writes_ = 0;
};

}  // namespace

TEST_CASE("a leader that cannot renew steps down exactly renewDeadline after its last renew",
          "[kube][leader]") {
  FakeServer fake;
  LeaseEndpoint endpoint(fake);
  kc::testing::FakeClock clock;
  KubeClientOptions o;
  o.qps = 0;
  o.clock = &clock;
  auto client = KubeClient::create(fake.config(), o);
  REQUIRE(client.ok());

  std::mutex mu;
  std::condition_variable cv;
  std::optional<kc::Clock::SteadyTime> stoppedAt;
  LeaderElectionConfig cfg;
  cfg.ns = "default";
  cfg.name = "lock";
  cfg.identity = "me";
  cfg.leaseDuration = 3000ms;
  cfg.renewDeadline = 2000ms;
  cfg.retryPeriod = 300ms;
  cfg.releaseOnStop = false;
  cfg.rand01 = [] { return 0.0; };
  cfg.onStoppedLeading = [&] {
    std::lock_guard<std::mutex> lock(mu);
    stoppedAt = clock.now();
    cv.notify_all();
  };
  auto made = LeaderElector::create(**client, cfg);
  REQUIRE(made.ok());
  auto& elector = **made;

  // Releases the elector's current wait and returns once it waits again: one round.
  auto round = [&] {
    const std::size_t asked = clock.requestedWaits().size();
    REQUIRE(clock.advanceToNextDeadline());
    REQUIRE(clock.awaitWait(asked + 1));
  };

  elector.start();
  REQUIRE(clock.awaitWait(1));  // created the lease, now waits one retry period
  CHECK(elector.isLeader());
  round();
  round();
  CHECK(endpoint.writes() == 3);  // create + two renewals
  CHECK(elector.isLeader());

  // The API server fails from now on. The last successful renew started now.
  const auto lastRenew = clock.now();
  const std::size_t before = clock.requestedWaits().size();
  endpoint.setFailing(true);
  for (int i = 0; i < 20; ++i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stoppedAt) {
        break;
      }
    }
    CHECK(elector.isLeader());  // still within renewDeadline of lastRenew
    round();
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, 30s, [&] { return stoppedAt.has_value(); }));  // guard only
    CHECK(*stoppedAt - lastRenew == cfg.renewDeadline);
  }
  CHECK_FALSE(elector.isLeader());
  // Renew attempts every retry period, then a shorter wait that ends exactly at the deadline;
  // then the ex-leader campaigns again at the retry period.
  auto waits = clock.requestedWaits();
  waits.erase(waits.begin(), waits.begin() + static_cast<std::ptrdiff_t>(before));
  REQUIRE(waits.size() >= 7);
  waits.resize(7);
  CHECK(waits ==
        std::vector<std::chrono::nanoseconds>{300ms, 300ms, 300ms, 300ms, 300ms, 200ms, 300ms});
  CHECK(endpoint.writes() == 3);
  elector.stop();
}

TEST_CASE("a candidate takes a lease only leaseDuration after it last saw the record change",
          "[kube][leader]") {
  FakeServer fake;
  LeaseEndpoint endpoint(fake);
  kc::testing::FakeClock clock;
  KubeClientOptions o;
  o.qps = 0;
  o.clock = &clock;
  auto client = KubeClient::create(fake.config(), o);
  REQUIRE(client.ok());
  auto config = [](const std::string& id) {
    LeaderElectionConfig cfg;
    cfg.ns = "default";
    cfg.name = "lock";
    cfg.identity = id;
    cfg.leaseDuration = 3000ms;
    cfg.renewDeadline = 2000ms;
    cfg.retryPeriod = 300ms;
    return cfg;
  };
  auto holder = LeaderElector::create(**client, config("holder"));
  auto other = LeaderElector::create(**client, config("other"));
  REQUIRE(holder.ok());
  REQUIRE(other.ok());
  // Single attempts, no threads: the holder takes the lease and never renews.
  REQUIRE((*holder)->tryAcquireOrRenew());
  CHECK_FALSE((*other)->tryAcquireOrRenew());  // first sight of the record starts its timer
  CHECK((*other)->observedHolder() == "holder");
  clock.advance(2999ms);
  CHECK_FALSE((*other)->tryAcquireOrRenew());
  clock.advance(1ms);
  CHECK((*other)->tryAcquireOrRenew());
  CHECK((*other)->observedHolder() == "other");
  // The holder sees the change and now waits a full lease itself.
  CHECK_FALSE((*holder)->tryAcquireOrRenew());
  clock.advance(2999ms);
  CHECK_FALSE((*holder)->tryAcquireOrRenew());
}
