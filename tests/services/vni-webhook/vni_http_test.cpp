// vni-webhook over real HTTP: the binary runs as a child process, clients talk HTTP/1.1 on
// loopback. Covers the HTTP contract, the 64-thread load with the database checked while it
// runs, and the same load with the server killed by SIGKILL 10 times.

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "services/vni-webhook/vni_store.hpp"
#include "tests/services/vni-webhook/hook_request_builder.hpp"
#include "tests/services/vni-webhook/loopback_client.hpp"
#include "tests/services/vni-webhook/webhook_process.hpp"
#include "tests/support/temp_dir.hpp"

using kc::testing::TempDir;
using kc::vni::HookKind;
using kc::vni::testing::LoopbackClient;
using kc::vni::testing::makeParent;
using kc::vni::testing::WebhookProcess;
using nlohmann::json;

namespace {

// The issue's figures. Lower them here (and say so in docs/vni.md) if the suite gets too slow.
constexpr int kClientThreads = 64;
constexpr int kTotalOps = 100'000;
constexpr int kOwners = 5'000;
constexpr int kKills = 10;

json parseBody(const kc::vni::testing::LoopbackReply& r) {
  json j = json::parse(r.body, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  return j;
}

// ---- load model ------------------------------------------------------------------------------

enum class Phase { kNone, kLive, kReleased };

struct Slot {
  int generation = 0;
  Phase phase = Phase::kNone;
  std::int64_t vni = 0;
  bool finalizing = false;  // a finalize for the live VNI was sent (maybe committed)
  std::uint64_t version = 0;
};

std::string slotUid(int slot, int generation) {
  return "uid-" + std::to_string(slot) + "-" + std::to_string(generation);
}

struct LoadModel {
  std::mutex mutex;  // guards slots, holder, violations
  std::vector<Slot> slots = std::vector<Slot>(kOwners);
  std::map<std::int64_t, int> holder;  // vni -> slot that the clients believe holds it
  std::vector<std::string> violations;
  std::atomic<std::int64_t> progress{0};  // completed operations
};

struct LoadResult {
  std::int64_t ops = 0;
  std::int64_t retries = 0;
  int dbChecks = 0;
};

// One hook call, retried (as Metacontroller does) until the server answers 200; null after
// 30 s of failures (the caller records that as a violation instead of hanging).
json callUntilOk(LoopbackClient& client, const std::atomic<std::uint16_t>& port,
                 std::uint16_t& usedPort, const char* path, const std::string& body,
                 std::int64_t& retries) {
  for (int attempt = 0; attempt < 3000; ++attempt) {
    if (usedPort != port.load()) {
      usedPort = port.load();
      client.setPort(usedPort);
    }
    auto r = client.request("POST", path, body);
    if (r.ok() && r->status == 200) {
      return json::parse(r->body);
    }
    ++retries;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return json();
}

// Checks the database against what the clients know: every slot that is live and untouched
// across the read holds exactly its VNI in the table; no VNI appears twice.
void checkDatabase(LoadModel& model, const std::string& db, int& checks) {
  std::map<int, std::pair<std::uint64_t, std::int64_t>> before;
  {
    std::lock_guard<std::mutex> lock(model.mutex);
    for (int i = 0; i < kOwners; ++i) {
      const Slot& s = model.slots[i];
      if (s.phase == Phase::kLive && !s.finalizing) {
        before[i] = {s.version, s.vni};
      }
    }
  }
  auto rows = kc::vni::readAllocations(db);
  if (!rows.ok()) {
    return;  // the file may be mid-restart; try again next round
  }
  ++checks;
  std::map<std::string, std::int64_t> byUid;
  std::set<std::int64_t> seen;
  std::lock_guard<std::mutex> lock(model.mutex);
  for (const auto& row : *rows) {
    if (!seen.insert(row.vni).second) {
      model.violations.push_back("duplicate VNI in table: " + std::to_string(row.vni));
    }
    byUid[row.uid] = row.vni;
  }
  for (const auto& [i, versionAndVni] : before) {
    const Slot& s = model.slots[i];
    if (s.version != versionAndVni.first) {
      continue;  // changed while we read
    }
    auto it = byUid.find(slotUid(i, s.generation));
    if (it == byUid.end() || it->second != s.vni) {
      model.violations.push_back("live owner " + slotUid(i, s.generation) + " holds VNI " +
                                 std::to_string(s.vni) + " but the table says " +
                                 (it == byUid.end() ? "nothing" : std::to_string(it->second)));
    }
  }
}

LoadResult runLoad(LoadModel& model, const std::atomic<std::uint16_t>& port, const std::string& db,
                   const std::function<void()>& duringLoad) {
  std::atomic<std::int64_t> ops{0};
  std::atomic<std::int64_t> retries{0};
  std::atomic<bool> done{false};
  int checks = 0;
  std::thread checker([&] {
    while (!done.load()) {
      checkDatabase(model, db, checks);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::thread chaos(duringLoad);
  std::vector<std::thread> clients;
  for (int t = 0; t < kClientThreads; ++t) {
    clients.emplace_back([&, t] {
      std::mt19937 rng(1000 + t);
      LoopbackClient client("127.0.0.1", port.load());
      std::uint16_t usedPort = port.load();
      std::int64_t myRetries = 0;
      // Slots t, t+64, ... belong to this thread only: one owner is never handled by two
      // threads at once, as in Metacontroller's work queue.
      std::vector<int> mine;
      for (int i = t; i < kOwners; i += kClientThreads) {
        mine.push_back(i);
      }
      std::uniform_int_distribution<std::size_t> pick(0, mine.size() - 1);
      const int myOps = kTotalOps / kClientThreads + (t < kTotalOps % kClientThreads ? 1 : 0);
      for (int n = 0; n < myOps; ++n) {
        const int i = mine[pick(rng)];
        Slot s;
        {
          std::lock_guard<std::mutex> lock(model.mutex);
          s = model.slots[i];
        }
        auto parent = makeParent("Job", "job-" + std::to_string(i))
                          .uid(slotUid(i, s.generation))
                          .ns("ns-" + std::to_string(i % 17))
                          .optIn()
                          .hookVersion(i % 2 == 0 ? "v1" : "v2");
        if (s.phase == Phase::kNone || (s.phase == Phase::kLive && rng() % 2 == 0)) {
          if (s.phase == Phase::kLive) {
            parent.vniObserved(s.vni);
          }
          json r =
              callUntilOk(client, port, usedPort, "/sync", parent.body(HookKind::kSync), myRetries);
          if (r.is_null()) {
            std::lock_guard<std::mutex> lock(model.mutex);
            model.violations.push_back("sync kept failing for " + slotUid(i, s.generation));
            continue;
          }
          const std::int64_t v = r["attachments"][0]["spec"]["vni"].get<std::int64_t>();
          std::lock_guard<std::mutex> lock(model.mutex);
          Slot& slot = model.slots[i];
          if (slot.phase == Phase::kLive && slot.vni != v) {
            model.violations.push_back("sync changed the VNI of " + slotUid(i, slot.generation));
          }
          auto h = model.holder.find(v);
          if (h != model.holder.end() && h->second != i && !model.slots[h->second].finalizing) {
            model.violations.push_back("VNI " + std::to_string(v) + " given to " +
                                       slotUid(i, slot.generation) + " while live owner slot " +
                                       std::to_string(h->second) + " holds it");
          }
          model.holder[v] = i;
          slot.phase = Phase::kLive;
          slot.vni = v;
          ++slot.version;
        } else {
          if (s.phase == Phase::kLive) {
            parent.vniObserved(s.vni);
            std::lock_guard<std::mutex> lock(model.mutex);
            model.slots[i].finalizing = true;
            ++model.slots[i].version;
          }
          json r = callUntilOk(client, port, usedPort, "/finalize",
                               parent.body(HookKind::kFinalize), myRetries);
          std::lock_guard<std::mutex> lock(model.mutex);
          Slot& slot = model.slots[i];
          if (r.is_null()) {
            model.violations.push_back("finalize kept failing for " + slotUid(i, slot.generation));
            continue;
          }
          if (slot.phase == Phase::kLive) {
            if (r["finalized"] != false) {
              model.violations.push_back("finalized while the VNI object was observed");
            }
            auto h = model.holder.find(slot.vni);
            if (h != model.holder.end() && h->second == i) {
              model.holder.erase(h);
            }
            slot.phase = Phase::kReleased;
          } else if (r["finalized"] == true) {
            slot.phase = Phase::kNone;
            ++slot.generation;  // the job is gone; a new one takes the slot
          } else {
            model.violations.push_back("finalize without the object did not finish");
          }
          slot.finalizing = false;
          ++slot.version;
        }
        ++ops;
        ++model.progress;
      }
      retries += myRetries;
    });
  }
  for (auto& c : clients) {
    c.join();
  }
  chaos.join();
  done = true;
  checker.join();
  checkDatabase(model, db, checks);
  return LoadResult{ops.load(), retries.load(), checks};
}

// End state: the table holds exactly the live owners' VNIs (no leak, nothing lost).
void checkNoLeak(LoadModel& model, const std::string& db) {
  auto rows = kc::vni::readAllocations(db);
  REQUIRE(rows.ok());
  std::map<std::string, std::int64_t> expected;
  for (int i = 0; i < kOwners; ++i) {
    const Slot& s = model.slots[i];
    if (s.phase == Phase::kLive) {
      expected[slotUid(i, s.generation)] = s.vni;
    }
  }
  std::map<std::string, std::int64_t> actual;
  for (const auto& row : *rows) {
    actual[row.uid] = row.vni;
  }
  CHECK(actual.size() == expected.size());
  CHECK(actual == expected);
}

std::vector<std::string> loadArgs() {
  // A range not much larger than the owner count, so values are reused many times; no
  // cooldown, the hardest case for uniqueness.
  return {"--vni-min", "1024", "--vni-max", "9216", "--cooldown-seconds", "0"};
}

}  // namespace

TEST_CASE("HTTP contract: status codes, JSON errors, health and metrics", "[vni]") {
  TempDir dir;
  WebhookProcess server(dir.path().string(),
                        {"--vni-min", "1024", "--vni-max", "1026", "--max-body-bytes", "65536"});
  const std::uint16_t port = server.start();
  LoopbackClient client("127.0.0.1", port);
  auto a = makeParent("Job", "a").optIn().hookVersion("v2");

  auto ok = client.request("POST", "/sync", a.body(HookKind::kSync));
  REQUIRE(ok.ok());
  CHECK(ok->status == 200);
  CHECK(parseBody(*ok)["attachments"][0]["spec"]["vni"] == 1024);

  auto bad = client.request("POST", "/sync", "{nope");
  REQUIRE(bad.ok());
  CHECK(bad->status == 400);
  CHECK(parseBody(*bad)["error"] == "invalid");

  auto version = client.request(
      "POST", "/finalize", R"({"controller":{"spec":{"hooks":{"finalize":{"version":"v7"}}}}})");
  REQUIRE(version.ok());
  CHECK(version->status == 400);
  CHECK_THAT(parseBody(*version)["message"].get<std::string>(), Catch::Contains("v7"));

  auto method = client.request("GET", "/sync", "");
  REQUIRE(method.ok());
  CHECK(method->status == 405);
  CHECK(parseBody(*method).contains("error"));

  auto big = client.request("POST", "/sync", std::string(70'000, ' '));
  REQUIRE(big.ok());
  CHECK(big->status == 413);
  client.setPort(port);  // the server closes the connection after a 413

  (void)client.request("POST", "/sync", makeParent("Job", "b").optIn().body(HookKind::kSync));
  auto full = client.request("POST", "/sync", makeParent("Job", "c").optIn().body(HookKind::kSync));
  REQUIRE(full.ok());
  CHECK(full->status == 503);
  const json fullBody = parseBody(*full);
  CHECK(fullBody["error"] == "exhausted");
  CHECK(fullBody["range"] == json{{"min", 1024}, {"max", 1026}});
  CHECK(fullBody["held"] == 2);

  auto customize = client.request("POST", "/customize", a.body(HookKind::kCustomize));
  REQUIRE(customize.ok());
  CHECK(customize->status == 200);
  CHECK(parseBody(*customize)["relatedResources"][0]["resource"] == "pods");

  for (const char* path : {"/livez", "/readyz"}) {
    auto r = client.request("GET", path, "");
    REQUIRE(r.ok());
    CHECK(r->status == 200);
  }
  auto metrics = client.request("GET", "/metrics", "");
  REQUIRE(metrics.ok());
  CHECK_THAT(metrics->body, Catch::Contains("vni_allocated 2"));
  CHECK_THAT(metrics->body, Catch::Contains("vni_exhausted_errors_total 1"));
  CHECK_THAT(metrics->body, Catch::Contains("vni_hook_request_duration_seconds"));
  auto rows = kc::vni::readAllocations(server.db());
  REQUIRE(rows.ok());
  CHECK(rows->size() == 2);  // none of the errors wrote anything
  CHECK(server.terminate() == 0);
}

TEST_CASE("Restart of the process keeps every allocation", "[vni]") {
  TempDir dir;
  std::map<std::string, std::int64_t> got;
  {
    WebhookProcess server(dir.path().string(), {});
    LoopbackClient client("127.0.0.1", server.start());
    for (int i = 0; i < 20; ++i) {
      auto p = makeParent("Job", "j" + std::to_string(i)).optIn();
      auto r = client.request("POST", "/sync", p.body(HookKind::kSync));
      REQUIRE(r.ok());
      got[p.uidValue()] = parseBody(*r)["attachments"][0]["spec"]["vni"].get<std::int64_t>();
    }
    server.kill(SIGKILL);
  }
  WebhookProcess server(dir.path().string(), {});
  LoopbackClient client("127.0.0.1", server.start());
  for (int i = 0; i < 20; ++i) {
    auto p = makeParent("Job", "j" + std::to_string(i)).optIn();
    auto r = client.request("POST", "/sync", p.body(HookKind::kSync));
    REQUIRE(r.ok());
    CHECK(parseBody(*r)["attachments"][0]["spec"]["vni"] == got[p.uidValue()]);
  }
}

TEST_CASE("64 clients, 100,000 mixed sync/finalize over 5,000 owners: no duplicate, no leak",
          "[vni][load]") {
  TempDir dir;
  WebhookProcess server(dir.path().string(), loadArgs());
  std::atomic<std::uint16_t> port{server.start()};
  LoadModel model;
  const LoadResult result = runLoad(model, port, server.db(), [] {});
  CAPTURE(result.ops, result.retries, result.dbChecks);
  CHECK(result.ops == kTotalOps);
  CHECK(result.dbChecks >= 2);
  CHECK(model.violations.empty());
  for (std::size_t i = 0; i < std::min<std::size_t>(model.violations.size(), 5); ++i) {
    UNSCOPED_INFO(model.violations[i]);
  }
  checkNoLeak(model, server.db());
}

TEST_CASE("The same load with the server killed by SIGKILL 10 times keeps the invariants",
          "[vni][load]") {
  TempDir dir;
  WebhookProcess server(dir.path().string(), loadArgs());
  std::atomic<std::uint16_t> port{server.start()};
  LoadModel model;
  std::atomic<int> kills{0};
  const LoadResult result = runLoad(model, port, server.db(), [&] {
    // Kill at evenly spread points of the run, measured in completed operations.
    for (int k = 0; k < kKills; ++k) {
      while (model.progress.load() < (k + 1) * kTotalOps / (kKills + 1)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      server.kill(SIGKILL);
      port = server.start();
      ++kills;
    }
  });
  CAPTURE(result.ops, result.retries, result.dbChecks, kills.load());
  CHECK(kills.load() == kKills);
  CHECK(result.retries > 0);  // the kills did hit in-flight requests
  CHECK(model.violations.empty());
  for (std::size_t i = 0; i < std::min<std::size_t>(model.violations.size(), 5); ++i) {
    UNSCOPED_INFO(model.violations[i]);
  }
  checkNoLeak(model, server.db());
}
