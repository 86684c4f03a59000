// The daemons' shared ending: DaemonHttp (/livez /readyz /metrics under the daemon's name) and
// runUntilSignalled (the port file follows the installed handler, steps in order, exit codes, the
// "stopped" line). Real signals in forked children.
#include "libcore/obs/daemon.hpp"

#include <prometheus/counter.h>
#include <prometheus/registry.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "libcore/net/http_client.hpp"
#include "libcore/obs/health.hpp"
#include "libcore/obs/log.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/obs/in_child.hpp"

using namespace kc;
using namespace std::chrono_literals;

using obs::testing::inChild;
using obs::testing::readUntil;
using obs::testing::say;

namespace {

std::unique_ptr<net::HttpClient> clientFor(const std::string& baseUrl) {
  net::ClientOptions options;
  options.baseUrl = baseUrl;
  auto c = net::HttpClient::create(options);
  REQUIRE(c.ok());
  return std::move(*c);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// setupLoggingTo writes into a caller-owned string: put spdlog back on stderr before it dies.
struct RestoreStderrLogger {
  ~RestoreStderrLogger() { (void)obs::setupLogging(obs::LogOptions{}); }
};

// In a forked child: spdlog writes into `log` from now on (exit 3 if it cannot).
void logInto(std::string& log) {
  if (!obs::setupLoggingTo({"t", "info", obs::LogFormat::kText}, &log).ok()) {
    ::_exit(3);
  }
}

}  // namespace

TEST_CASE("daemon http: health and metrics under the daemon's name, on the address asked for",
          "[obs][daemon]") {
  obs::HealthChecks health;
  obs::Metrics metrics;
  auto& family = prometheus::BuildCounter()
                     .Name("kc_daemon_test_total")
                     .Help("test")
                     .Register(metrics.registry());
  family.Add({}).Increment(3);
  std::atomic<bool> ready{false};
  health.addReadinessCheck("warm", [&]() -> Status {
    return ready ? okStatus() : Status(makeError(errc::kUnavailable, "still warming"));
  });

  obs::DaemonHttp http("some-daemon", "127.0.0.1", 0, health, metrics);
  auto port = http.start();
  REQUIRE(port.ok());
  CHECK(*port != 0);
  CHECK(http.baseUrl() == "http://127.0.0.1:" + std::to_string(*port));
  auto client = clientFor(http.baseUrl());

  auto live = client->request("GET", "/livez");
  REQUIRE(live.ok());
  CHECK(live->status == 200);
  CHECK(live->header("Server") == std::optional<std::string>("some-daemon"));

  auto notReady = client->request("GET", "/readyz");
  REQUIRE(notReady.ok());
  CHECK(notReady->status == 503);
  CHECK(notReady->body.find("[-]warm failed: still warming") != std::string::npos);
  ready = true;
  CHECK(client->request("GET", "/readyz")->status == 200);
  CHECK(client->request("GET", "/healthz")->status == 200);
  CHECK(client->request("GET", "/readyz/warm")->status == 200);

  auto m = client->request("GET", "/metrics");
  REQUIRE(m.ok());
  CHECK(m->status == 200);
  CHECK(m->body.find("kc_daemon_test_total 3") != std::string::npos);

  // More routes go on the underlying server.
  http.server().route("GET", "/debug/x",
                      [](const net::Request&) { return net::Response::text(200, "x"); });
  CHECK(client->request("GET", "/debug/x")->body == "x");

  http.stop();
  CHECK_FALSE(http.server().running());
  CHECK_FALSE(
      clientFor("http://127.0.0.1:" + std::to_string(*port))->request("GET", "/livez").ok());
}

TEST_CASE("daemon http: a busy port fails start and says why", "[obs][daemon]") {
  obs::HealthChecks health;
  obs::Metrics metrics;
  obs::DaemonHttp first("a", "127.0.0.1", 0, health, metrics);
  auto port = first.start();
  REQUIRE(port.ok());

  std::string log;
  RestoreStderrLogger restore;
  REQUIRE(obs::setupLoggingTo({"t", "info", obs::LogFormat::kText}, &log).ok());
  obs::DaemonHttp second("b", "127.0.0.1", *port, health, metrics);
  auto again = second.start();
  REQUIRE_FALSE(again.ok());
  CHECK(log.find("critical") != std::string::npos);
  CHECK(log.find("cannot serve health/metrics: " + again.error().message) != std::string::npos);
  // The first one is untouched.
  CHECK(clientFor(first.baseUrl())->request("GET", "/livez")->status == 200);
}

TEST_CASE(
    "runUntilSignalled: handler installed and port file written before serving, steps in order, "
    "exit 0",
    "[obs][daemon]") {
  testing::TempDir dir;
  const std::string portFile = dir.file("port");
  auto r = inChild(
      [&](int fd) {
        std::string log;
        logInto(log);
        obs::HealthChecks health;
        const int rc = obs::runUntilSignalled(
            {.name = "some-daemon",
             .steps = {&health,
                       [&] { say(fd, health.shuttingDown() ? "drain " : "drain-while-ready "); },
                       [&] { say(fd, "stop "); }},
             .portFile = portFile,
             .port = 4321,
             .serving =
                 [&] {
                   struct sigaction now {};
                   ::sigaction(SIGTERM, nullptr, &now);
                   say(fd, now.sa_handler != SIG_DFL && now.sa_handler != SIG_IGN ? "handler "
                                                                                  : "no-handler ");
                   say(fd, "port=" + slurp(portFile));
                   say(fd, "serving ");
                 },
             .stoppedNote = "; note"});
        say(fd, "rc=" + std::to_string(rc) + " ");
        say(fd, log.find("some-daemon stopped (signal SIGTERM); note") != std::string::npos
                    ? "logged"
                    : log);
        ::_exit(rc);
      },
      [](pid_t pid, int fd, std::string& out) {
        readUntil(fd, out, "serving ");
        ::kill(pid, SIGTERM);
      });
  CHECK(r.status == 0);
  CHECK(r.output == "handler port=4321\nserving drain stop rc=0 logged");
}

TEST_CASE(
    "runUntilSignalled: no port file (it follows the handler), no steps, exit 1 when the handler "
    "cannot be installed",
    "[obs][daemon]") {
  testing::TempDir dir;
  const std::string portFile = dir.file("port");
  auto r = inChild(
      [&](int fd) {
        obs::ShutdownHandler other({});  // the process's one handler slot is taken
        if (!other.install().ok()) {
          ::_exit(4);
        }
        std::string log;
        logInto(log);
        const int rc = obs::runUntilSignalled(
            {.name = "some-daemon",
             .steps = {nullptr, [&] { say(fd, "drain "); }, [&] { say(fd, "stop "); }},
             .portFile = portFile,
             .port = 4321,
             .serving = [&] { say(fd, "serving "); }});
        say(fd, "rc=" + std::to_string(rc) + " ");
        say(fd, std::filesystem::exists(portFile) ? "port-file " : "no-port-file ");
        say(fd,
            log.find("critical") != std::string::npos &&
                    log.find("another ShutdownHandler is already installed") != std::string::npos
                ? "logged"
                : log);
        ::_exit(0);
      },
      [](pid_t, int, std::string&) {});
  CHECK(r.status == 0);
  CHECK(r.output == "rc=1 no-port-file logged");
}

TEST_CASE("runUntilSignalled: without a port file nothing is written, and SIGINT stops too",
          "[obs][daemon]") {
  testing::TempDir dir;
  auto r = inChild(
      [&](int fd) {
        const int rc = obs::runUntilSignalled(
            {.name = "some-daemon", .port = 4321, .serving = [&] { say(fd, "serving "); }});
        say(fd, std::filesystem::is_empty(dir.path()) ? "empty" : "written");
        ::_exit(rc);
      },
      [](pid_t pid, int fd, std::string& out) {
        readUntil(fd, out, "serving ");
        ::kill(pid, SIGINT);
      });
  CHECK(r.status == 0);
  CHECK(r.output == "serving empty");
}
