// bridge-operator over real HTTP: the binary runs as a child process on an ephemeral port.
// Covers the hook contract (200 with the response fields, 400 with a JSON error and nothing
// decided, 405, 413), health and metrics, flag validation (exit 2), --help, and SIGTERM.

#include <signal.h>

#include <catch2/catch.hpp>
#include <set>

#include "libcore/net/http_client.hpp"
#include "tests/services/bridge-operator/hook_request_builder.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/temp_dir.hpp"

using kc::bridge::testing::RequestBuilder;
using kc::bridge::testing::startedConfigMap;
using nlohmann::json;

namespace {

kc::testing::ChildProcess startOperator(std::vector<std::string> args) {
  args.insert(args.begin(), BRIDGE_OPERATOR_BIN);
  return kc::testing::ChildProcess(std::move(args));
}

std::uint16_t waitForPort(const std::string& portFile, kc::testing::ChildProcess& p) {
  std::uint16_t port = 0;
  p.waitUntil(
      [&] {
        port = kc::testing::readPortFile(portFile).value_or(0);
        return port != 0;
      },
      std::chrono::seconds(20), "bridge-operator port file");
  return port;
}

std::unique_ptr<kc::net::HttpClient> clientFor(std::uint16_t port) {
  kc::net::ClientOptions o;
  o.baseUrl = "http://127.0.0.1:" + std::to_string(port);
  auto c = kc::net::HttpClient::create(o);
  REQUIRE(c.ok());
  return std::move(c).value();
}

kc::net::Response post(kc::net::HttpClient& c, const std::string& path, const std::string& body) {
  auto r = c.request("POST", path, body, {{"Content-Type", "application/json"}});
  REQUIRE(r.ok());
  return std::move(r).value();
}

}  // namespace

TEST_CASE("bridge-operator serves the CompositeController hooks over HTTP", "[bridge]") {
  kc::testing::TempDir dir;
  const std::string portFile = dir.file("port");
  auto p = startOperator({"--bind-address", "127.0.0.1", "--port", "0", "--port-file", portFile,
                          "--log-level", "warn", "--max-pod-restarts", "1", "--max-body-bytes",
                          "65536"});
  auto client = clientFor(waitForPort(portFile, p));

  // A running job whose pod died: a replacement (attempt 1 of at most 1 restart).
  RequestBuilder b;
  b.version = kc::metacontroller::HookVersion::kV2;
  b.configMap = startedConfigMap(b, {{"id", "31"}, {"status.jobStatus", "RUNNING"}});
  b.withPod(0, "Failed").withAttempts(1);
  auto sync = post(*client, "/sync", b.body().dump());
  REQUIRE(sync.status == 200);
  CHECK(kc::net::findHeader(sync.headers, "Content-Type").value_or("") == "application/json");
  json out = json::parse(sync.body);
  std::set<std::string> fields;
  for (const auto& [k, v] : out.items()) {
    fields.insert(k);
  }
  CHECK(fields == std::set<std::string>{"status", "children", "resyncAfterSeconds"});
  std::vector<std::string> pods;
  for (const json& c : out["children"]) {
    if (c["kind"] == "Pod") {
      pods.push_back(c["metadata"]["name"]);
    }
  }
  CHECK(pods == std::vector<std::string>{"job1-bridge-0", "job1-bridge-1"});
  CHECK(out["status"]["remoteJobId"] == "31");

  // The --max-pod-restarts flag reached the decision: the replacement died too -> FAILED.
  b.withPod(1, "Failed").withAttempts(2);
  out = json::parse(post(*client, "/sync", b.body().dump()).body);
  CHECK(out["status"]["jobStatus"] == "FAILED");

  // finalize while the remote job runs.
  RequestBuilder f;
  f.deleting = true;
  f.configMap = startedConfigMap(f, {{"id", "31"}, {"status.jobStatus", "RUNNING"}});
  f.withPod(0, "Running").withAttempts(1);
  auto fin = post(*client, "/finalize", f.body().dump());
  REQUIRE(fin.status == 200);
  json finOut = json::parse(fin.body);
  CHECK(finOut["finalized"] == false);
  CHECK(finOut["resyncAfterSeconds"].get<double>() > 0);

  // Bad input: 400, a JSON error, nothing decided.
  for (const std::string& bad :
       {std::string("{"), std::string("[1]"), std::string(R"({"parent": {"kind": "Job"}})")}) {
    CAPTURE(bad);
    auto r = post(*client, "/sync", bad);
    CHECK(r.status == 400);
    json err = json::parse(r.body);
    CHECK(err["error"] == "invalid");
    CHECK_FALSE(err["message"].get<std::string>().empty());
    CHECK_FALSE(err.contains("children"));
  }
  // Refusal (nothing renderable after the start): 422, Metacontroller keeps the children.
  RequestBuilder broken = f;
  broken.deleting = false;
  broken.configMap->erase("image");
  broken.withSpec("image", "");
  auto refused = post(*client, "/sync", broken.body().dump());
  CHECK(refused.status == 422);
  CHECK(json::parse(refused.body)["error"] == "unprocessable");

  auto get = client->request("GET", "/sync");
  REQUIRE(get.ok());
  CHECK(get->status == 405);
  auto big = post(*client, "/sync", std::string(70000, ' '));
  CHECK(big.status == 413);

  for (const char* path : {"/livez", "/readyz"}) {
    auto r = client->request("GET", path);
    REQUIRE(r.ok());
    CHECK(r->status == 200);
  }
  auto metrics = client->request("GET", "/metrics");
  REQUIRE(metrics.ok());
  CHECK_THAT(metrics->body,
             Catch::Contains("bridge_hook_requests_total{code=\"400\",hook=\"sync\"} 3"));
  CHECK_THAT(metrics->body,
             Catch::Contains("bridge_hook_requests_total{code=\"200\",hook=\"finalize\"} 1"));

  p.signal(SIGTERM);
  CHECK(p.waitExit(std::chrono::seconds(20)) == std::optional<int>(0));
}

TEST_CASE("bridge-operator flags: --help exits 0, bad flags exit 2", "[bridge]") {
  {
    auto help = startOperator({"--help"});
    CHECK(help.waitExit(std::chrono::seconds(20)) == std::optional<int>(0));
  }
  const std::vector<std::vector<std::string>> bad = {
      {"--port", "http"},
      {"--max-pod-restarts", "-1"},
      {"--max-pod-restarts", "101"},
      {"--log-format", "xml"},
      {"--log-level", "loud"},
      {"--io-threads", "0"},
      {"--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/key.pem"},
      {"--no-such-flag"},
  };
  for (const auto& args : bad) {
    CAPTURE(args);
    auto p = startOperator(args);
    CHECK(p.waitExit(std::chrono::seconds(20)) == std::optional<int>(2));
  }
}
