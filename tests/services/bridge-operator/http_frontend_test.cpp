// The HTTP frontend in-process, on a FakeClock: what it hands the decision as "now" and how it
// times a request both come from the injected clock, not from the machine's.

#include "services/bridge-operator/http_frontend.hpp"

#include <catch2/catch.hpp>

#include "libcore/net/http_client.hpp"
#include "libcore/obs/health.hpp"
#include "tests/services/bridge-operator/hook_request_builder.hpp"
#include "tests/support/fakes/fake_clock.hpp"

using kc::bridge::testing::RequestBuilder;
using kc::bridge::testing::startedConfigMap;
using nlohmann::json;

TEST_CASE("the frontend stamps conditions with its clock's wall time and times requests on it",
          "[bridge]") {
  kc::testing::FakeClock clock;  // wall clock at 2026-01-01T00:00:00Z
  kc::obs::Metrics metrics;
  kc::obs::HealthChecks health;
  kc::bridge::BridgeHttpFrontend frontend({}, clock, metrics, health, kc::net::ServerOptions{});
  REQUIRE(frontend.start().ok());
  kc::net::ClientOptions co;
  co.baseUrl = frontend.baseUrl();
  auto client = kc::net::HttpClient::create(co);
  REQUIRE(client.ok());

  // Finished was True and is False now: only its transition time moves, to the clock's time.
  RequestBuilder b;
  b.configMap = startedConfigMap(b, {{"status.jobStatus", "RUNNING"}, {"id", "1"}});
  b.withPod(0, "Running");
  b.status = {
      {"attempts", 1},
      {"conditions",
       {{{"type", "Submitted"}, {"status", "True"}, {"lastTransitionTime", "2026-01-01T00:00:00Z"}},
        {{"type", "Finished"},
         {"status", "True"},
         {"lastTransitionTime", "2026-01-01T00:00:00Z"}}}}};
  clock.advance(std::chrono::seconds(90));
  auto r =
      (*client)->request("POST", "/sync", b.body().dump(), {{"Content-Type", "application/json"}});
  REQUIRE(r.ok());
  REQUIRE(r->status == 200);
  const json reply = json::parse(r->body);
  std::map<std::string, std::string> since;
  for (const json& c : reply["status"]["conditions"]) {
    since[c["type"].get<std::string>()] = c["lastTransitionTime"].get<std::string>();
  }
  CHECK(since.at("Submitted") == "2026-01-01T00:00:00Z");
  CHECK(since.at("Finished") == "2026-01-01T00:01:30Z");

  // The fake clock stood still while the request ran: one sync observed, taking 0 s.
  auto m = (*client)->request("GET", "/metrics", "", {});
  REQUIRE(m.ok());
  CAPTURE(m->body);
  CHECK(m->body.find("bridge_hook_request_duration_seconds_count{hook=\"sync\"} 1\n") !=
        std::string::npos);
  CHECK(m->body.find("bridge_hook_request_duration_seconds_sum{hook=\"sync\"} 0\n") !=
        std::string::npos);
  frontend.stop(std::chrono::milliseconds(0));
}
