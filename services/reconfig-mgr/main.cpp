// reconfig-mgr: the only client of the PCIe fabric. Writes every GPUPool's inventory into its
// status and moves GPUs to the nodes kubecomp-sched chose for waiting pods, safely (drain,
// confirm withdrawn, detach, attach, verify, journaled). Thin main: command line
// (command_line.hpp) -> library -> run.

#include <spdlog/spdlog.h>

#include "libcore/kube/client_setup.hpp"
#include "libcore/obs/daemon.hpp"
#include "libcore/obs/health.hpp"
#include "services/reconfig-mgr/command_line.hpp"
#include "services/reconfig-mgr/reconfig.hpp"

int main(int argc, char** argv) {
  auto parsed = kc::reconfig::parseCommandLine(argc, argv);
  if (const int* exit = std::get_if<int>(&parsed)) {
    return *exit;
  }
  const kc::reconfig::CommandLine& c = std::get<kc::reconfig::CommandLine>(parsed);
  auto client = kc::kube::setUpClient(c.kubeconfig);
  if (!client) {
    spdlog::critical("{}", client.error().message);
    return 2;
  }

  kc::obs::Metrics metrics;
  kc::obs::HealthChecks health;
  kc::reconfig::ReconfigManager manager(c.reconfig, **client, &metrics, &health);

  kc::obs::DaemonHttp http("reconfig-mgr", c.daemon.listen, c.daemon.port, health, metrics);
  auto bound = http.start();
  if (!bound) {
    return 1;
  }
  if (auto s = manager.start(); !s) {
    spdlog::critical("{}", s.error().message);
    http.stop(std::chrono::milliseconds(0));
    return 1;
  }
  spdlog::info("reconfig-mgr {} started (policy {}, recompose {}, health/metrics on port {})",
               c.reconfig.identity, c.reconfig.gpuPolicy, c.reconfig.recomposePolicy, *bound);
  return kc::obs::runUntilSignalled(
      {.name = "reconfig-mgr",
       .steps = {&health, [&] { manager.stop(); }, [&] { http.stop(); }},
       .portFile = c.daemon.portFile,
       .port = *bound});
}
