// vni-webhook shut down by SIGTERM, as kubelet does when the pod stops: readiness fails at
// once, requests keep being served for --shutdown-delay-seconds, then the listener closes and
// a request already in flight (headers read, body still arriving) is answered before the
// process exits 0. Every allocation answered is in the database after a restart.

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "tests/services/vni-webhook/hook_request_builder.hpp"
#include "tests/services/vni-webhook/loopback_client.hpp"
#include "tests/services/vni-webhook/webhook_process.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wait.hpp"
#include "tests/unit/net/raw_socket.hpp"

using kc::testing::TempDir;
using kc::vni::HookKind;
using kc::vni::testing::LoopbackClient;
using kc::vni::testing::makeParent;
using kc::vni::testing::WebhookProcess;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

std::int64_t syncVni(LoopbackClient& client, const std::string& job) {
  auto r = client.request("POST", "/sync", makeParent("Job", job).optIn().body(HookKind::kSync));
  REQUIRE(r.ok());
  REQUIRE(r->status == 200);
  return json::parse(r->body)["attachments"][0]["spec"]["vni"].get<std::int64_t>();
}

}  // namespace

TEST_CASE("SIGTERM drains: readiness fails, in-flight requests are answered, exit 0, nothing lost",
          "[vni][shutdown]") {
  TempDir dir;
  WebhookProcess server(dir.path().string(),
                        {"--shutdown-delay-seconds", "1.5", "--drain-seconds", "10"});
  const std::uint16_t port = server.start();
  LoopbackClient client("127.0.0.1", port);
  const std::int64_t before = syncVni(client, "before");
  auto ready = client.request("GET", "/readyz", "");
  REQUIRE(ready.ok());
  CHECK(ready->status == 200);

  // A request in flight: headers read by the server (it answered 100 Continue), half the body.
  const std::string body = makeParent("Job", "in-flight").optIn().body(HookKind::kSync);
  kc::net::test::RawSocket inflight(port, 15000);
  REQUIRE(inflight.connected());
  REQUIRE(
      inflight.send("POST /sync HTTP/1.1\r\nHost: vni\r\nContent-Type: application/json\r\n"
                    "Expect: 100-continue\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\n\r\n"));
  CHECK_THAT(inflight.readUntil("\r\n\r\n"), Catch::StartsWith("HTTP/1.1 100"));
  REQUIRE(inflight.send(body.substr(0, body.size() / 2)));

  server.signal(SIGTERM);

  // Readiness fails at once while requests are still served (the shutdown delay).
  std::string readyBody;
  CHECK(kc::testing::eventually(
      [&] {
        auto r = client.request("GET", "/readyz?verbose", "");
        if (r.ok() && r->status == 503) {
          readyBody = r->body;
          return true;
        }
        return false;
      },
      1000ms, 5ms));
  CHECK_THAT(readyBody, Catch::Contains("[-]shutdown failed: shutting down (signal SIGTERM)"));
  auto live = client.request("GET", "/livez", "");
  REQUIRE(live.ok());
  CHECK(live->status == 200);
  LoopbackClient lateClient("127.0.0.1", port);
  const std::int64_t late = syncVni(lateClient, "late");

  // After the delay the listener closes: new connections are refused...
  CHECK(kc::testing::eventually([&] { return !kc::net::test::RawSocket(port, 1000).connected(); },
                                5000ms, 5ms));
  // ...but the request in flight is still answered, then its connection closes.
  REQUIRE(inflight.send(body.substr(body.size() / 2)));
  bool closedByPeer = false;
  const std::string reply = inflight.readAll(&closedByPeer);
  CHECK(closedByPeer);
  REQUIRE_THAT(reply, Catch::StartsWith("HTTP/1.1 200"));
  const auto headerEnd = reply.find("\r\n\r\n");
  REQUIRE(headerEnd != std::string::npos);
  CHECK_THAT(reply.substr(0, headerEnd),
             Catch::Contains("Connection: close", Catch::CaseSensitive::No));
  const json answer = json::parse(reply.substr(headerEnd + 4), nullptr, false);
  REQUIRE_FALSE(answer.is_discarded());
  const std::int64_t inFlight = answer["attachments"][0]["spec"]["vni"].get<std::int64_t>();

  CHECK(server.waitExit(15000ms) == 0);

  // Every VNI answered before and during the shutdown was committed.
  WebhookProcess again(dir.path().string(), {});
  LoopbackClient after("127.0.0.1", again.start());
  CHECK(syncVni(after, "before") == before);
  CHECK(syncVni(after, "late") == late);
  CHECK(syncVni(after, "in-flight") == inFlight);
  CHECK(std::set<std::int64_t>{before, late, inFlight}.size() == 3);
  CHECK(again.terminate() == 0);
}

TEST_CASE("A second SIGTERM during the shutdown delay exits at once with 143", "[vni][shutdown]") {
  TempDir dir;
  WebhookProcess server(dir.path().string(), {"--shutdown-delay-seconds", "30"});
  LoopbackClient client("127.0.0.1", server.start());
  syncVni(client, "j");
  server.signal(SIGTERM);
  // The bound only ends a failing run (readiness flips at once; a loaded machine may be slow
  // to schedule the probe); the 30 s delay leaves room.
  CHECK(kc::testing::eventually(
      [&] {
        auto r = client.request("GET", "/readyz", "");
        return r.ok() && r->status == 503;
      },
      10000ms, 5ms));
  server.signal(SIGTERM);
  CHECK(server.waitExit(5000ms) == 128 + SIGTERM);
}

TEST_CASE("SIGTERM under load: every request is answered 200 or refused, every 200 is durable",
          "[vni][shutdown]") {
  TempDir dir;
  WebhookProcess server(dir.path().string(),
                        {"--shutdown-delay-seconds", "0", "--drain-seconds", "10"});
  const std::uint16_t port = server.start();

  // Clients sync distinct jobs back to back over keep-alive connections until the server goes.
  constexpr int kClients = 6;
  constexpr int kMaxPerClient = 3000;  // bound; the signal comes long before
  struct Outcome {
    std::vector<std::pair<std::string, std::int64_t>> answered;
    std::vector<std::string> bad;  // non-200 answers or unparseable bodies
    std::string lastError;
  };
  std::vector<Outcome> outcomes(kClients);
  std::atomic<int> answeredTotal{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      LoopbackClient client("127.0.0.1", port);
      Outcome& out = outcomes[c];
      for (int i = 0; i < kMaxPerClient; ++i) {
        const std::string job = "load-" + std::to_string(c) + "-" + std::to_string(i);
        auto r =
            client.request("POST", "/sync", makeParent("Job", job).optIn().body(HookKind::kSync));
        if (!r.ok()) {
          out.lastError = r.error().code + ": " + r.error().message;
          return;  // refused or connection lost: the server is going away
        }
        const json j = json::parse(r->body, nullptr, false);
        if (r->status != 200 || j.is_discarded() ||
            !j["attachments"][0]["spec"]["vni"].is_number_integer()) {
          out.bad.push_back(job + " -> " + std::to_string(r->status) + " " + r->body);
          return;
        }
        out.answered.emplace_back(job, j["attachments"][0]["spec"]["vni"].get<std::int64_t>());
        ++answeredTotal;
      }
    });
  }
  // Signal once the load is really running (bounded wait on a condition, not a fixed sleep).
  const bool loaded =
      kc::testing::eventually([&] { return answeredTotal.load() >= 60; }, 20000ms, 5ms);
  server.signal(SIGTERM);
  for (auto& t : clients) {
    t.join();
  }
  REQUIRE(loaded);
  const int status = server.waitExit(15000ms);
  CHECK(status == 0);

  std::map<std::string, std::int64_t> answered;
  std::set<std::int64_t> vnis;
  for (const auto& out : outcomes) {
    for (const auto& bad : out.bad) {
      FAIL_CHECK("a request got a bad answer during the drain: " << bad);
    }
    CHECK_FALSE(out.lastError.empty());  // every client stopped because the server went away
    for (const auto& [job, vni] : out.answered) {
      answered.emplace(job, vni);
      vnis.insert(vni);
    }
  }
  CHECK(answered.size() >= 60);
  CHECK(vnis.size() == answered.size());  // distinct jobs, distinct VNIs

  // Every answer given is committed: after a restart each job gets the VNI it was told.
  WebhookProcess again(dir.path().string(), {});
  LoopbackClient after("127.0.0.1", again.start());
  std::size_t mismatched = 0;
  for (const auto& [job, vni] : answered) {
    if (syncVni(after, job) != vni) {
      ++mismatched;
    }
  }
  CHECK(mismatched == 0);
  CHECK(again.terminate() == 0);
}
