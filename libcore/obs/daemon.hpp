#pragma once
// The end of every daemon's main(), in one place:
//   - DaemonHttp: the HTTP server of /livez /readyz /healthz /metrics on --listen:--port;
//   - runUntilSignalled: install the SIGTERM/SIGINT ShutdownHandler, write --port-file, block
//     until the orderly stop has run, log "<name> stopped (<reason>)", give main()'s exit code.
//
//   kc::obs::DaemonHttp http("reconfig-mgr", listen, port, health, metrics);
//   auto bound = http.start();          // logs "cannot serve health/metrics: ..." on failure
//   if (!bound) return 1;
//   ... start the daemon's own work, log that it serves ...
//   return kc::obs::runUntilSignalled({.name = "reconfig-mgr",
//                                      .steps = {&health, [&] { manager.stop(); }, [&] {
//                                      http.stop(); }}, .portFile = portFile, .port = *bound});

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "libcore/base/result.hpp"
#include "libcore/net/http_server.hpp"
#include "libcore/obs/shutdown.hpp"

namespace kc::obs {

class HealthChecks;
class Metrics;

// GET /livez /readyz /healthz (and /livez/<check>, /readyz/<check>) for `health` and
// /metrics for `metrics` (plus kubecomp_daemon_ready from `health`'s readiness checks), on
// `listen`:`port` (0 = ephemeral), Server header `name`.
// `health` and `metrics` must outlive the server (or at least its stop()).
class DaemonHttp {
 public:
  static constexpr std::chrono::milliseconds kStopDrain{1000};

  DaemonHttp(std::string name, std::string listen, std::uint16_t port, const HealthChecks& health,
             const Metrics& metrics);
  DaemonHttp(const DaemonHttp&) = delete;
  DaemonHttp& operator=(const DaemonHttp&) = delete;

  // For more routes (kubelet-standin's /debug handlers), best before start(). Starting it
  // directly starts without DaemonHttp's log line (for a daemon that reports it otherwise).
  net::HttpServer& server() { return server_; }

  // Binds and serves; the bound port. On failure logs "cannot serve health/metrics: <why>"
  // (critical) and returns the error.
  Result<std::uint16_t> start();

  // Stops accepting and lets in-flight requests finish for up to `drain` (see HttpServer).
  void stop(std::chrono::milliseconds drain = kStopDrain) { server_.stop(drain); }

  std::string baseUrl() const { return server_.baseUrl(); }

 private:
  net::HttpServer server_;
};

// Members have default initializers so that designated initializers may leave any out.
struct UntilSignalled {
  std::string name{};              // the daemon's name: "<name> stopped (<reason>)" at the end
  ShutdownHandler::Steps steps{};  // readiness, drain, stop: run in this order on the signal
  std::string portFile{};          // written with `port` once the handler is installed; empty: none
  unsigned port = 0;
  std::function<void()> serving{};  // optional; runs after the port file, before waiting
  std::string stoppedNote{};        // appended to the "stopped" line
};

// Installs a ShutdownHandler (SIGTERM, SIGINT) with `run.steps`, then writes the port file
// (so a test that read it may signal at once), runs `run.serving`, blocks until the shutdown
// sequence has completed and logs "<name> stopped (<reason>)<stoppedNote>". Returns main()'s
// exit code: 0, or 1 (logged critical, no port file) when the handler cannot be installed.
int runUntilSignalled(UntilSignalled run);

}  // namespace kc::obs
