#include "libcore/obs/daemon.hpp"

#include <spdlog/spdlog.h>

#include "libcore/obs/health.hpp"

namespace kc::obs {
namespace {

net::ServerOptions serverOptions(std::string name, std::string listen, std::uint16_t port) {
  net::ServerOptions so;
  so.bindAddress = std::move(listen);
  so.port = port;
  so.serverHeader = std::move(name);
  return so;
}

}  // namespace

DaemonHttp::DaemonHttp(std::string name, std::string listen, std::uint16_t port,
                       const HealthChecks& health, const Metrics& metrics)
    : server_(serverOptions(std::move(name), std::move(listen), port)) {
  installHealthEndpoints(server_, health);
  installMetricsEndpoint(server_, metrics, &health);
}

Result<std::uint16_t> DaemonHttp::start() {
  auto bound = server_.start();
  if (!bound) {
    spdlog::critical("cannot serve health/metrics: {}", bound.error().message);
  }
  return bound;
}

int runUntilSignalled(UntilSignalled run) {
  ShutdownHandler shutdown(std::move(run.steps));
  if (auto s = shutdown.install(); !s) {
    spdlog::critical("{}", s.error().message);
    return 1;
  }
  writePortFile(run.portFile, run.port);
  if (run.serving) {
    run.serving();
  }
  shutdown.wait();
  spdlog::info("{} stopped ({}){}", run.name, shutdown.reason(), run.stoppedNote);
  return 0;
}

}  // namespace kc::obs
