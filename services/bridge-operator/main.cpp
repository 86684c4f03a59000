// bridge-operator: Metacontroller CompositeController hooks (/sync, /finalize) that turn each
// BridgeJob into a ConfigMap, a bridge pod and its RBAC, and copy the job's state back into
// the BridgeJob status. Thin main: command line (command_line.hpp) -> library -> run.

#include <spdlog/spdlog.h>

#include "libcore/base/clock.hpp"
#include "libcore/obs/daemon.hpp"
#include "libcore/obs/health.hpp"
#include "services/bridge-operator/command_line.hpp"
#include "services/bridge-operator/http_frontend.hpp"

int main(int argc, char** argv) {
  auto parsed = kc::bridge::parseCommandLine(argc, argv);
  if (const int* exit = std::get_if<int>(&parsed)) {
    return *exit;
  }
  const kc::bridge::CommandLine& c = std::get<kc::bridge::CommandLine>(parsed);
  kc::obs::Metrics metrics;
  kc::obs::HealthChecks health;
  kc::bridge::BridgeHttpFrontend frontend(c.decision, kc::systemClock(), metrics, health, c.server);
  auto bound = frontend.start();
  if (!bound) {
    spdlog::critical("cannot serve: {}", bound.error().message);
    return 1;
  }
  spdlog::info("bridge-operator serving on {} (max pod restarts {})", frontend.baseUrl(),
               c.decision.maxPodRestarts);
  return kc::obs::runUntilSignalled({.name = "bridge-operator",
                                     .steps = {.health = &health,
                                               .drain =
                                                   [&] {
                                                     kc::systemClock().sleepFor(c.shutdownDelay);
                                                     frontend.stop(c.drain);
                                                   }},
                                     .portFile = c.daemon.portFile,
                                     .port = *bound});
}
