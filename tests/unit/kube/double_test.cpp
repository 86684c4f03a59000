// Client, informer and leader election against tools/kube-apiserver-double over TLS with a
// bearer token, with the double's fault modes switched on where the test needs them.

#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <thread>

#include "libcore/kube/client.hpp"
#include "libcore/kube/informer.hpp"
#include "libcore/kube/leader.hpp"
#include "tests/support/fakes/fake_clock.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/kube/double_process.hpp"
#include "tests/unit/kube/stall_proxy.hpp"

using namespace kc::kube;
using kc::kube::testing::DoubleProcess;
using kc::testing::TempDir;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<KubeClient> clientFor(const ClusterConfig& cfg, KubeClientOptions o = {}) {
  o.qps = 0;  // the tests measure behaviour, not pacing
  auto c = KubeClient::create(cfg, std::move(o));
  REQUIRE(c.ok());
  return std::move(c).value();
}

nlohmann::json configMap(const std::string& ns, const std::string& name, int value) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"labels", {{"app", "conv"}}}}},
          {"data", {{"value", std::to_string(value)}}}};
}

std::map<std::string, std::string> serverState(KubeClient& c, const GroupVersionResource& r,
                                               const std::string& ns) {
  ListOptions lo;
  lo.limit = 1000;
  auto all = c.listAll(r, ns, lo);
  REQUIRE(all.ok());
  std::map<std::string, std::string> out;
  for (const auto& item : all->items) {
    out[item["metadata"]["namespace"].get<std::string>() + "/" +
        item["metadata"]["name"].get<std::string>()] = item["metadata"]["resourceVersion"];
  }
  return out;
}

std::map<std::string, std::string> cacheState(const Store& s) {
  std::map<std::string, std::string> out;
  for (const auto& o : s.list()) {
    out[objectKey(*o)] = objectResourceVersion(*o);
  }
  return out;
}

}  // namespace

TEST_CASE("informer converges after 10,000 random changes with dropped watches and 410s",
          "[kube][double]") {
  TempDir dir;
  // Faults: watch streams dropped at random, a short history window so reconnects hit 410,
  // and expiry reported both as HTTP 410 and as an ERROR event.
  DoubleProcess api(KC_APISERVER_DOUBLE_EXE, dir.path().string(),
                    {"--drop-watch-probability", "0.003", "--history-window", "400"});
  auto writer = clientFor(api.config());
  auto reader = clientFor(api.config());
  const std::string ns = "conv";
  REQUIRE(writer
              ->create(gvr::namespaces(), "",
                       {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}})
              .ok());

  InformerOptions io;
  io.resource = gvr::configMaps();
  io.ns = ns;
  io.pageSize = 50;
  io.backoff = {10ms, 200ms, 2.0, 0.5};
  io.healthyWatch = 50ms;
  std::mt19937 seedRng(20261122);
  io.rand01 = [rng = std::mt19937(seedRng()),
               d = std::uniform_real_distribution<double>(0, 1)]() mutable { return d(rng); };
  Informer informer(*reader, io);
  // A handler-side mirror built only from callbacks: it must end equal to the cache.
  std::mutex mirrorMu;  // guards mirror and mirrorChanges
  std::condition_variable mirrorCv;
  std::map<std::string, std::string> mirror;
  std::uint64_t mirrorChanges = 0;  // handler calls so far: the test waits on these, not on time
  std::atomic<int> badUpdates{0};
  informer.addHandler(ResourceEventHandler{
      [&](const ObjectPtr& o) {
        std::lock_guard<std::mutex> lock(mirrorMu);
        mirror[objectKey(*o)] = objectResourceVersion(*o);
        ++mirrorChanges;
        mirrorCv.notify_all();
      },
      [&](const ObjectPtr& oldObj, const ObjectPtr& o) {
        std::lock_guard<std::mutex> lock(mirrorMu);
        if (objectKey(*oldObj) != objectKey(*o)) {
          ++badUpdates;  // Catch2 assertions are not thread-safe: count here, check below
        }
        mirror[objectKey(*o)] = objectResourceVersion(*o);
        ++mirrorChanges;
        mirrorCv.notify_all();
      },
      [&](const ObjectPtr& o) {
        std::lock_guard<std::mutex> lock(mirrorMu);
        mirror.erase(objectKey(*o));
        ++mirrorChanges;
        mirrorCv.notify_all();
      }});
  informer.start();
  REQUIRE(informer.waitForSync(10s));

  constexpr int kThreads = 4;
  constexpr int kOpsPerThread = 2500;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(1000 + static_cast<unsigned>(t));
      std::map<std::string, nlohmann::json> mine;  // this writer owns its names
      for (int i = 0; i < kOpsPerThread; ++i) {
        const std::string name = "cm-" + std::to_string(t) + "-" + std::to_string(rng() % 60);
        auto it = mine.find(name);
        const unsigned dice = rng() % 10;
        if (it == mine.end()) {
          auto c = writer->create(gvr::configMaps(), ns, configMap(ns, name, i));
          c.ok() ? void(mine[name] = std::move(c).value()) : void(++failures);
        } else if (dice < 6) {
          nlohmann::json obj = it->second;
          obj["data"]["value"] = std::to_string(i);
          auto u = writer->update(gvr::configMaps(), ns, obj);
          u.ok() ? void(it->second = std::move(u).value()) : void(++failures);
        } else {
          auto d = writer->remove(gvr::configMaps(), ns, name);
          d.ok() ? void(mine.erase(it)) : void(++failures);
        }
      }
    });
  }
  // Chaos, every few hundred ms: end every watch after its next event while new watch
  // requests are held back 300 ms (writes go on); once the informer has asked to watch again,
  // let the writers move on for 30 ms and compact the history, so the held request carries a
  // version that is now too old (410). Each round switches between reporting expiry as HTTP
  // 410 and as a 200 + ERROR event. Independently, the double drops watch streams at random.
  std::atomic<bool> writing{true};
  std::atomic<int> chaosFailures{0};
  auto chaosClient = clientFor(api.config());
  std::thread chaos([&] {
    auto& c = chaosClient;
    std::mt19937 rng(77);
    auto faults = [&](const nlohmann::json& f) {
      if (!c->call("POST", "/_double/faults", f.dump(), "application/json").ok()) {
        ++chaosFailures;
      }
    };
    for (int cycle = 0; writing || cycle < 6; ++cycle) {  // at least 6 rounds of 410s
      std::this_thread::sleep_for(std::chrono::milliseconds(150 + rng() % 250));
      faults({{"delayMs", 300}, {"delayWatchesOnly", true}, {"dropWatchAfterEvents", 1}});
      const auto before = informer.stats().watches;
      const auto until = std::chrono::steady_clock::now() + 2s;
      while (writing && informer.stats().watches == before &&
             std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(2ms);
      }
      std::this_thread::sleep_for(30ms);
      if (!c->call("POST", "/_double/compact", "{}", "application/json").ok()) {
        ++chaosFailures;
      }
      faults({{"delayMs", 0},
              {"delayWatchesOnly", false},
              {"dropWatchAfterEvents", 0},
              {"expiredAsEvent", rng() % 2 == 0}});
    }
  });
  for (auto& th : threads) {
    th.join();
  }
  writing = false;
  chaos.join();
  CHECK(failures == 0);
  CHECK(chaosFailures == 0);
  const auto want = serverState(*writer, gvr::configMaps(), ns);
  // Converged? Re-checked after each change the handlers report (and once a second in case a
  // change reached the cache without one); 60 s is only the guard against a hang.
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  for (;;) {
    std::uint64_t seen = 0;
    {
      std::lock_guard<std::mutex> lock(mirrorMu);
      seen = mirrorChanges;
    }
    if (cacheState(informer.store()) == want || std::chrono::steady_clock::now() >= deadline) {
      break;
    }
    std::unique_lock<std::mutex> lock(mirrorMu);
    mirrorCv.wait_for(lock, 1s, [&] { return mirrorChanges != seen; });
  }
  const auto stats = informer.stats();
  const std::string lastRv = informer.lastResourceVersion();
  informer.stop();
  CAPTURE(stats.lists, stats.expired, stats.watches, stats.watchErrors, stats.eventsApplied,
          lastRv);
  const auto got = cacheState(informer.store());
  std::string diff;
  for (const auto& [k, v] : want) {
    auto it = got.find(k);
    if (it == got.end() || it->second != v) {
      diff += k + " server@" + v + " cache@" + (it == got.end() ? "-" : it->second) + "; ";
    }
  }
  for (const auto& [k, v] : got) {
    if (want.find(k) == want.end()) {
      diff += k + " server@- cache@" + v + "; ";
    }
  }
  INFO("differences: " << diff);
  CHECK(diff.empty());
  {
    std::lock_guard<std::mutex> lock(mirrorMu);
    CHECK(mirror == want);
  }
  CHECK(badUpdates == 0);
  // The faults really happened: several watches, at least one relist after a 410.
  CHECK(stats.watches > 3);
  CHECK(stats.expired > 0);
  CHECK(stats.lists > 1);
  // Indexes agree with the cache.
  CHECK(informer.store().byLabel("app", "conv").size() == want.size());
  CHECK(informer.store().byNamespace(ns).size() == want.size());
}

TEST_CASE("conflicts are surfaced and retried by the caller", "[kube][double]") {
  TempDir dir;
  DoubleProcess api(KC_APISERVER_DOUBLE_EXE, dir.path().string());
  auto a = clientFor(api.config());
  auto b = clientFor(api.config());
  REQUIRE(a->create(gvr::configMaps(), "default", configMap("default", "counter", 0)).ok());
  auto dup = b->create(gvr::configMaps(), "default", configMap("default", "counter", 0));
  REQUIRE_FALSE(dup.ok());
  CHECK(dup.error().isAlreadyExists());

  auto seenByA = a->get(gvr::configMaps(), "default", "counter");
  auto seenByB = b->get(gvr::configMaps(), "default", "counter");
  REQUIRE(seenByA.ok());
  REQUIRE(seenByB.ok());
  (*seenByA)["data"]["value"] = "1";
  REQUIRE(a->update(gvr::configMaps(), "default", *seenByA).ok());
  (*seenByB)["data"]["value"] = "2";
  auto stale = b->update(gvr::configMaps(), "default", *seenByB);
  REQUIRE_FALSE(stale.ok());
  CHECK(stale.error().isConflict());
  CHECK(stale.error().httpCode == 409);
  CHECK_THAT(stale.error().message, Catch::Contains("the object has been modified"));

  // Read-modify-write with retry on conflict from 4 threads: no increment is lost.
  std::atomic<int> conflicts{0};
  std::atomic<int> unexpected{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto& c = t % 2 == 0 ? *a : *b;
      for (int i = 0; i < 25; ++i) {
        for (;;) {
          auto cur = c.get(gvr::configMaps(), "default", "counter");
          if (!cur.ok()) {
            ++unexpected;
            return;
          }
          int v = std::stoi((*cur)["data"]["value"].get<std::string>());
          (*cur)["data"]["value"] = std::to_string(v + 1);
          auto u = c.update(gvr::configMaps(), "default", *cur);
          if (u.ok()) {
            break;
          }
          if (!u.error().isConflict()) {
            ++unexpected;
            return;
          }
          ++conflicts;
        }
      }
    });
  }
  for (auto& th : threads) {
    th.join();
  }
  CHECK(unexpected == 0);
  auto final = a->get(gvr::configMaps(), "default", "counter");
  REQUIRE(final.ok());
  CHECK((*final)["data"]["value"] == "101");
  INFO("conflicts retried: " << conflicts.load());

  // A merge patch carrying a stale resourceVersion is conditional too.
  auto patched =
      a->patch(gvr::configMaps(), "default", "counter", PatchType::kMerge,
               {{"metadata", {{"resourceVersion", (*seenByA)["metadata"]["resourceVersion"]}}},
                {"data", {{"value", "x"}}}});
  REQUIRE_FALSE(patched.ok());
  CHECK(patched.error().isConflict());
  // DELETE with a wrong UID precondition is refused, with the right one it succeeds.
  DeleteOptions wrong;
  wrong.preconditionUid = "not-the-uid";
  auto refused = a->remove(gvr::configMaps(), "default", "counter", wrong);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().isConflict());
  DeleteOptions right;
  right.preconditionUid = (*final)["metadata"]["uid"].get<std::string>();
  REQUIRE(a->remove(gvr::configMaps(), "default", "counter", right).ok());
  CHECK(a->get(gvr::configMaps(), "default", "counter").error().isNotFound());
}

TEST_CASE("a rotated token file is picked up", "[kube][double]") {
  TempDir dir;
  DoubleProcess api(KC_APISERVER_DOUBLE_EXE, dir.path().string());
  const std::string good = api.token();
  CHECK(api.config().token == good);
  REQUIRE_FALSE(good.empty());
  auto file = dir.write("sa-token", good + "\n");
  ClusterConfig cfg = api.config();
  cfg.token.clear();
  cfg.tokenFile = file;
  kc::testing::FakeClock clock;
  KubeClientOptions o;
  o.clock = &clock;
  o.maxRetries = 0;
  auto client = clientFor(cfg, o);
  REQUIRE(client->get(gvr::namespaces(), "", "default").ok());
  // The kubelet rewrites the file; within the minute the cached token is still used.
  dir.write("sa-token", "revoked-token\n");
  REQUIRE(client->get(gvr::namespaces(), "", "default").ok());
  clock.advance(61s);
  auto denied = client->get(gvr::namespaces(), "", "default");
  REQUIRE_FALSE(denied.ok());
  CHECK(denied.error().isUnauthorized());
  // The next rotation brings a valid token back; the 401 path re-reads at once.
  dir.write("sa-token", good);
  CHECK(client->get(gvr::namespaces(), "", "default").ok());
}

TEST_CASE("TLS with a wrong CA fails clearly and no token is a typed 401", "[kube][double]") {
  TempDir dirA;
  TempDir dirB;
  DoubleProcess a(KC_APISERVER_DOUBLE_EXE, dirA.path().string());
  DoubleProcess b(KC_APISERVER_DOUBLE_EXE, dirB.path().string());
  REQUIRE(a.config().server.rfind("https://", 0) == 0);
  ClusterConfig wrongCa = a.config();
  wrongCa.caPem = b.config().caPem;  // another double's self-signed CA
  KubeClientOptions o;
  o.maxRetries = 2;
  auto client = clientFor(wrongCa, o);
  auto res = client->get(gvr::namespaces(), "", "default");
  REQUIRE_FALSE(res.ok());
  CHECK(res.error().isTransport());
  CHECK(res.error().reason == "tls");
  CHECK_THAT(res.error().message, Catch::Contains("certificate", Catch::CaseSensitive::No));
  CHECK(client->stats().requests == 1);  // a verification failure is not retried

  ClusterConfig insecure = wrongCa;
  insecure.insecureSkipTlsVerify = true;
  CHECK(clientFor(insecure)->get(gvr::namespaces(), "", "default").ok());

  ClusterConfig anonymous = a.config();
  anonymous.token.clear();
  auto denied = clientFor(anonymous)->get(gvr::namespaces(), "", "default");
  REQUIRE_FALSE(denied.ok());
  CHECK(denied.error().isUnauthorized());
}

TEST_CASE("leader election: one leader at a time, hand-over within the lease", "[kube][double]") {
  // The electors run on a fake clock against the real double: the test moves time one retry
  // period at a time and waits until every elector has gone round its loop, so every check
  // below is exact in lease time and does not depend on how busy the machine is.
  TempDir dir;
  DoubleProcess api(KC_APISERVER_DOUBLE_EXE, dir.path().string());
  kc::testing::FakeClock clock;
  KubeClientOptions o;
  o.clock = &clock;  // the electors' call deadlines are on the same clock
  auto client = clientFor(api.config(), o);
  const auto lease = 3000ms;
  const auto renew = 2000ms;
  const auto retry = 300ms;

  std::atomic<int> leaders{0};
  std::atomic<int> maxLeaders{0};
  std::mutex mu;
  std::condition_variable cv;
  std::string current;
  auto makeCandidate = [&](const std::string& id, bool releaseOnStop) {
    LeaderElectionConfig cfg;
    cfg.ns = "default";
    cfg.name = "kube-test-lock";
    cfg.identity = id;
    cfg.leaseDuration = lease;
    cfg.renewDeadline = renew;
    cfg.retryPeriod = retry;
    cfg.releaseOnStop = releaseOnStop;
    cfg.rand01 = [] { return 0.0; };  // every wait is exactly one retry period
    cfg.onStartedLeading = [&, id] {
      int n = ++leaders;
      int prev = maxLeaders.load();
      while (n > prev && !maxLeaders.compare_exchange_weak(prev, n)) {
      }
      std::lock_guard<std::mutex> lock(mu);
      current = id;
      cv.notify_all();
    };
    cfg.onStoppedLeading = [&] {
      --leaders;
      std::lock_guard<std::mutex> lock(mu);
      current.clear();
    };
    auto e = LeaderElector::create(*client, cfg);
    REQUIRE(e.ok());
    return std::move(e).value();
  };
  // onStartedLeading runs on its own thread, so it may come a little after isLeader() turns
  // true: wait for the callback itself (30 s is only a guard against a hang).
  auto waitLeader = [&](const std::string& id) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, 30s, [&] { return current == id; });
  };
  // Electors blocked on the clock, each one wait per round.
  std::size_t running = 0;
  auto start = [&](LeaderElector& e) {
    const std::size_t asked = clock.requestedWaits().size();
    e.start();
    ++running;
    REQUIRE(clock.awaitWaiting(asked + 1, running));
  };
  auto stop = [&](LeaderElector& e) {
    e.stop();
    --running;
  };
  // One retry period of fake time; returns when every running elector waits again.
  auto step = [&] {
    const std::size_t asked = clock.requestedWaits().size();
    clock.advance(retry);
    REQUIRE(clock.awaitWaiting(asked + running, running));
  };

  // Invalid timing is refused.
  LeaderElectionConfig bad;
  bad.name = "x";
  bad.identity = "y";
  bad.leaseDuration = 1000ms;
  bad.renewDeadline = 2000ms;
  CHECK_FALSE(LeaderElector::create(*client, bad).ok());

  auto a = makeCandidate("candidate-a", false);
  auto b = makeCandidate("candidate-b", false);
  start(*a);
  start(*b);
  REQUIRE(waitLeader("candidate-a"));  // a created the lease before b was started
  // Stable: for more than a lease, the leader renews every retry period and the other
  // candidate never takes over.
  for (int i = 0; i < 12; ++i) {
    step();
    REQUIRE(a->isLeader());
    REQUIRE_FALSE(b->isLeader());
  }
  CHECK(leaders == 1);
  CHECK(b->observedHolder() == "candidate-a");
  CHECK(clock.requestedWaits() == std::vector<std::chrono::nanoseconds>(2 + 2 * 12, retry));

  // The leader dies without releasing: b takes over once the lease ran out on its own clock,
  // i.e. leaseDuration after it last saw the record change. That is the leader's last renew,
  // seen in the same round or (when b's GET went first there) one round later.
  stop(*a);
  int steps = 0;
  while (!b->isLeader() && steps < 20) {
    step();
    ++steps;
  }
  REQUIRE(b->isLeader());
  CHECK(waitLeader("candidate-b"));
  CHECK(steps * retry >= lease);  // never before the lease expired on b's clock
  CHECK(steps * retry <= lease + retry);

  // A candidate that joins while b renews stays out ...
  auto c = makeCandidate("candidate-c", true);
  start(*c);
  step();
  step();
  CHECK_FALSE(c->isLeader());
  // ... until b stops (without release): then after the lease.
  stop(*b);
  steps = 0;
  while (!c->isLeader() && steps < 20) {
    step();
    ++steps;
  }
  REQUIRE(c->isLeader());
  CHECK(waitLeader("candidate-c"));
  CHECK(steps * retry >= lease);
  CHECK(steps * retry <= lease + retry);
  // Graceful hand-over: c releases on stop, so d gets in at its next round.
  auto d = makeCandidate("candidate-d", true);
  start(*d);
  CHECK_FALSE(d->isLeader());
  stop(*c);
  step();
  CHECK(d->isLeader());
  CHECK(waitLeader("candidate-d"));
  stop(*d);
  CHECK(maxLeaders == 1);
  CHECK(leaders == 0);

  auto rec = client->get(gvr::leases(), "default", "kube-test-lock");
  REQUIRE(rec.ok());
  CHECK((*rec)["spec"]["holderIdentity"] == "");
  CHECK((*rec)["spec"]["leaseTransitions"].get<int>() == 3);  // a -> b -> c -> d
}

TEST_CASE(
    "leader election: a leader cut off from the API server steps down before a successor starts",
    "[kube][double]") {
  TempDir dir;
  DoubleProcess api(KC_APISERVER_DOUBLE_EXE, dir.path().string());
  const std::string server = api.config().server;
  const int upstreamPort = std::stoi(server.substr(server.rfind(':') + 1));
  kc::kube::testing::StallProxy proxy(upstreamPort);
  ClusterConfig viaProxy = api.config();
  viaProxy.server = "https://127.0.0.1:" + std::to_string(proxy.port());
  auto stalledClient = clientFor(viaProxy);  // default options: 30 s request timeout, 5 retries
  auto directClient = clientFor(api.config());
  const auto lease = 3000ms;
  const auto renew = 2000ms;
  const auto retry = 300ms;

  using Clock = std::chrono::steady_clock;
  std::mutex mu;
  std::condition_variable cv;
  std::optional<Clock::time_point> aStarted, aStopped, bStarted;
  auto candidate = [&](KubeClient& client, const std::string& id,
                       std::optional<Clock::time_point>& started,
                       std::optional<Clock::time_point>* stopped,
                       std::function<void(const std::string&)> onNewLeader = {}) {
    LeaderElectionConfig cfg;
    cfg.ns = "default";
    cfg.name = "stall-lock";
    cfg.identity = id;
    cfg.leaseDuration = lease;
    cfg.renewDeadline = renew;
    cfg.retryPeriod = retry;
    cfg.releaseOnStop = false;
    cfg.onNewLeader = std::move(onNewLeader);
    cfg.onStartedLeading = [&] {
      std::lock_guard<std::mutex> lock(mu);
      started = Clock::now();
      cv.notify_all();
    };
    cfg.onStoppedLeading = [&, stopped] {
      std::lock_guard<std::mutex> lock(mu);
      if (stopped != nullptr) {
        *stopped = Clock::now();
      }
      cv.notify_all();
    };
    auto e = LeaderElector::create(client, cfg);
    REQUIRE(e.ok());
    return std::move(e).value();
  };
  auto a = candidate(*stalledClient, "candidate-a", aStarted, &aStopped);
  bool bSawA = false;
  auto b =
      candidate(*directClient, "candidate-b", bStarted, nullptr, [&](const std::string& holder) {
        std::lock_guard<std::mutex> lock(mu);
        bSawA = bSawA || holder == "candidate-a";
        cv.notify_all();
      });
  a->start();
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, 5s, [&] { return aStarted.has_value(); }));
  }
  b->start();
  // B has seen A's lease (the event, not a sleep); A holds it.
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, 30s, [&] { return bSawA; }));
  }
  REQUIRE(a->isLeader());
  REQUIRE_FALSE(b->isLeader());

  const auto stallAt = Clock::now();
  proxy.stall(true);
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, lease + 5s, [&] { return bStarted.has_value(); }));
    REQUIRE(aStopped.has_value());
    CHECK(*aStopped < *bStarted);
    // A's last successful renew began before the stall, so it gives up within renewDeadline.
    CHECK(*aStopped - stallAt <= renew + 500ms);
  }
  CHECK_FALSE(a->isLeader());
  CHECK(b->isLeader());
  b->stop();
  a->stop();
  proxy.stall(false);
}
