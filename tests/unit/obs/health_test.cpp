// /livez, /readyz, /healthz and /metrics served by a real HttpServer, read by HttpClient.
#include "libcore/obs/health.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "libcore/net/http_client.hpp"
#include "libcore/net/http_server.hpp"

using namespace kc;

namespace {

struct Served {
  obs::HealthChecks health;
  obs::Metrics metrics;
  net::HttpServer server;
  std::unique_ptr<net::HttpClient> client;

  Served() {
    obs::installHealthEndpoints(server, health);
    obs::installMetricsEndpoint(server, metrics);
    auto port = server.start();
    REQUIRE(port.ok());
    net::ClientOptions options;
    options.baseUrl = server.baseUrl();
    auto c = net::HttpClient::create(options);
    REQUIRE(c.ok());
    client = std::move(*c);
  }
  ~Served() { server.stop(std::chrono::milliseconds(100)); }

  net::Response get(const std::string& target) {
    auto r = client->request("GET", target);
    REQUIRE(r.ok());
    return *r;
  }
};

}  // namespace

TEST_CASE("health: no checks is ok on every endpoint", "[obs][health]") {
  Served s;
  for (const char* path : {"/livez", "/readyz", "/healthz"}) {
    INFO(path);
    auto r = s.get(path);
    CHECK(r.status == 200);
    CHECK(r.body == "ok");
  }
  auto verbose = s.get("/readyz?verbose");
  CHECK(verbose.status == 200);
  CHECK(verbose.body == "[+]shutdown ok\nreadyz check passed\n");
}

TEST_CASE("health: failing checks give 503 naming each check, exclude and per-check paths",
          "[obs][health]") {
  Served s;
  std::atomic<bool> synced{false};
  s.health.addLivenessCheck("loop", [] { return okStatus(); });
  s.health.addReadinessCheck("informer", [&]() -> Status {
    return synced ? okStatus() : Status(makeError("unavailable", "cache not synced"));
  });
  s.health.addReadinessCheck("db", [] { return okStatus(); });

  auto live = s.get("/livez?verbose");
  CHECK(live.status == 200);
  CHECK(live.body == "[+]loop ok\nlivez check passed\n");

  auto ready = s.get("/readyz");
  CHECK(ready.status == 503);
  CHECK(ready.body ==
        "[+]shutdown ok\n[-]informer failed: cache not synced\n[+]db ok\nreadyz check failed\n");
  CHECK(s.get("/healthz").status == 503);  // legacy alias of readiness
  CHECK(s.get("/readyz?exclude=informer").status == 200);
  CHECK(s.get("/readyz/informer").status == 503);
  CHECK(s.get("/readyz/db").status == 200);
  auto unknown = s.get("/readyz/nope");
  CHECK(unknown.status == 404);
  CHECK(nlohmann::json::parse(unknown.body)["error"] == "not_found");

  synced = true;
  CHECK(s.get("/readyz").status == 200);
}

TEST_CASE("health: a check that throws fails with the exception's text", "[obs][health]") {
  Served s;
  s.health.addLivenessCheck("boom", []() -> Status { throw std::runtime_error("disk gone"); });
  auto r = s.get("/livez");
  CHECK(r.status == 503);
  CHECK_THAT(r.body, Catch::Contains("[-]boom failed: check threw: disk gone"));
}

TEST_CASE("health: failReadiness fails readiness only, with its reason", "[obs][health]") {
  Served s;
  s.health.addLivenessCheck("loop", [] { return okStatus(); });
  CHECK_FALSE(s.health.shuttingDown());
  s.health.failReadiness("draining");
  CHECK(s.health.shuttingDown());
  auto ready = s.get("/readyz");
  CHECK(ready.status == 503);
  CHECK_THAT(ready.body, Catch::Contains("[-]shutdown failed: draining"));
  CHECK(s.get("/livez").status == 200);
  s.health.failReadiness("");
  CHECK_THAT(s.get("/readyz").body, Catch::Contains("[-]shutdown failed: shutting down"));
}

TEST_CASE("metrics: Prometheus text format 0.0.4 with escaped labels", "[obs][metrics]") {
  Served s;
  auto& family = prometheus::BuildCounter()
                     .Name("kc_test_requests_total")
                     .Help("Requests seen by the test.")
                     .Register(s.metrics.registry());
  family.Add({{"path", "/sync"}}).Increment(3);
  family.Add({{"path", "quote\" back\\ nl\n"}}).Increment();
  prometheus::BuildGauge()
      .Name("kc_test_free")
      .Help("Free things.")
      .Register(s.metrics.registry())
      .Add({})
      .Set(42);
  auto& hist = prometheus::BuildHistogram()
                   .Name("kc_test_latency_seconds")
                   .Help("Latency.")
                   .Register(s.metrics.registry())
                   .Add({}, prometheus::Histogram::BucketBoundaries{0.01, 0.1});
  hist.Observe(0.05);

  auto r = s.get("/metrics");
  CHECK(r.status == 200);
  REQUIRE(r.header("Content-Type"));
  CHECK_THAT(*r.header("Content-Type"), Catch::StartsWith("text/plain; version=0.0.4"));
  const std::string& t = r.body;
  CHECK_THAT(t, Catch::Contains("# HELP kc_test_requests_total Requests seen by the test.\n"));
  CHECK_THAT(t, Catch::Contains("# TYPE kc_test_requests_total counter\n"));
  CHECK_THAT(t, Catch::Contains("kc_test_requests_total{path=\"/sync\"} 3"));
  CHECK_THAT(t, Catch::Contains(R"(kc_test_requests_total{path="quote\" back\\ nl\n"} 1)"));
  CHECK_THAT(t, Catch::Contains("# TYPE kc_test_free gauge\n"));
  CHECK_THAT(t, Catch::Contains("kc_test_free 42"));
  CHECK_THAT(t, Catch::Contains("kc_test_latency_seconds_bucket{le=\"0.01\"} 0"));
  CHECK_THAT(t, Catch::Contains("kc_test_latency_seconds_bucket{le=\"0.1\"} 1"));
  CHECK_THAT(t, Catch::Contains("kc_test_latency_seconds_bucket{le=\"+Inf\"} 1"));
  CHECK_THAT(t, Catch::Contains("kc_test_latency_seconds_count 1"));
  CHECK(s.metrics.serialize() == t);
}

TEST_CASE("health: per-check paths take verbose and exclude is repeatable", "[obs][health]") {
  Served s;
  s.health.addLivenessCheck("loop", [] { return okStatus(); });
  s.health.addReadinessCheck("a", [] { return Status(makeError("unavailable", "a down")); });
  s.health.addReadinessCheck("b", [] { return Status(makeError("unavailable", "b down")); });
  s.health.addReadinessCheck("c", [] { return okStatus(); });

  auto one = s.get("/readyz/c?verbose");
  CHECK(one.status == 200);
  CHECK(one.body == "[+]c ok\nreadyz/c check passed\n");
  auto failing = s.get("/readyz/a");
  CHECK(failing.status == 503);
  CHECK(failing.body == "[-]a failed: a down\nreadyz/a check failed\n");
  CHECK(s.get("/livez/loop").body == "ok");
  // The shutdown pseudo-check is addressable like any other readiness check.
  CHECK(s.get("/readyz/shutdown").status == 200);
  // A liveness check is not a readiness check and vice versa.
  CHECK(s.get("/readyz/loop").status == 404);
  CHECK(s.get("/livez/a").status == 404);

  // Only excluding both failing checks makes readiness pass; the excluded ones are not listed.
  CHECK(s.get("/readyz?exclude=a").status == 503);
  auto both = s.get("/readyz?exclude=a&exclude=b&verbose");
  CHECK(both.status == 200);
  CHECK(both.body == "[+]shutdown ok\n[+]c ok\nreadyz check passed\n");
  // Excluding the shutdown pseudo-check hides a failReadiness() too (kube-apiserver does the same).
  s.health.failReadiness("draining");
  CHECK(s.get("/readyz?exclude=a&exclude=b").status == 503);
  CHECK(s.get("/readyz?exclude=a&exclude=b&exclude=shutdown").status == 200);
  // Liveness never lists the shutdown pseudo-check.
  CHECK(s.get("/livez?verbose").body == "[+]loop ok\nlivez check passed\n");
}

TEST_CASE("health: checks run on every request, outside the registry lock", "[obs][health]") {
  Served s;
  std::atomic<int> calls{0};
  // A check that itself reads the health state must not deadlock (checks run unlocked).
  s.health.addReadinessCheck("self", [&]() -> Status {
    ++calls;
    return s.health.shuttingDown() ? Status(makeError("unavailable", "nested")) : okStatus();
  });
  CHECK(s.get("/readyz").status == 200);
  CHECK(s.get("/readyz").status == 200);
  CHECK(calls == 2);
  s.health.failReadiness("bye");
  auto r = s.get("/readyz");
  CHECK(r.status == 503);
  CHECK(r.body == "[-]shutdown failed: bye\n[-]self failed: nested\nreadyz check failed\n");
}

TEST_CASE("metrics: HELP text is escaped and families registered later appear", "[obs][metrics]") {
  Served s;
  CHECK(s.get("/metrics").body.empty());
  prometheus::BuildCounter()
      .Name("kc_test_help_total")
      .Help("line one\nback\\slash")
      .Register(s.metrics.registry())
      .Add({{"a", "1"}, {"b", "2"}})
      .Increment(0.5);
  const std::string t = s.get("/metrics").body;
  // In text format 0.0.4 a HELP line escapes backslash and newline (not quotes).
  CHECK_THAT(t, Catch::Contains("# HELP kc_test_help_total line one\\nback\\\\slash\n"));
  CHECK_THAT(t, Catch::Contains("kc_test_help_total{a=\"1\",b=\"2\"} 0.5"));
  // Every line is a comment or a sample: no raw newline leaked from the help text.
  std::istringstream in(t);
  for (std::string line; std::getline(in, line);) {
    INFO(line);
    CHECK((line.rfind("# ", 0) == 0 || line.rfind("kc_test_help_total", 0) == 0));
  }
}

TEST_CASE("metrics: kubecomp_daemon_ready follows the readiness checks at each scrape",
          "[obs][metrics]") {
  obs::HealthChecks health;
  obs::Metrics metrics;
  net::HttpServer server;
  obs::installMetricsEndpoint(server, metrics, &health);
  REQUIRE(server.start().ok());
  net::ClientOptions options;
  options.baseUrl = server.baseUrl();
  auto client = net::HttpClient::create(options);
  REQUIRE(client.ok());
  const auto scrape = [&] {
    auto r = (*client)->request("GET", "/metrics");
    REQUIRE(r.ok());
    return r->body;
  };
  std::atomic<bool> synced{false};
  health.addReadinessCheck("informers", [&]() -> Status {
    return synced ? okStatus() : makeError(errc::kUnavailable, "not synced");
  });
  health.addLivenessCheck("loop", [] { return okStatus(); });
  const std::string head =
      "# HELP kubecomp_daemon_ready 1 while every readiness check passes (/readyz), else 0\n"
      "# TYPE kubecomp_daemon_ready gauge\n";
  CHECK(scrape() == head + "kubecomp_daemon_ready 0\n");
  synced = true;
  CHECK(scrape() == head + "kubecomp_daemon_ready 1\n");
  health.failReadiness("shutting down");
  CHECK(scrape() == head + "kubecomp_daemon_ready 0\n");
  server.stop(std::chrono::milliseconds(100));
}
