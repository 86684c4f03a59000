// kubecomp-sched: a secondary scheduler for pods with spec.schedulerName kubecomp-sched that
// places them with the paper's Eq. 1 over GPU pools and asks reconfig-mgr for GPU moves through
// pod annotations. Thin main: command line (command_line.hpp) -> library -> run.

#include <spdlog/spdlog.h>

#include "libcore/kube/client_setup.hpp"
#include "libcore/obs/daemon.hpp"
#include "libcore/obs/health.hpp"
#include "libcore/obs/shutdown.hpp"
#include "services/kubecomp-sched/command_line.hpp"
#include "services/kubecomp-sched/scheduler.hpp"
#include "services/kubecomp-sched/shutdown_clock.hpp"

int main(int argc, char** argv) {
  auto parsed = kc::sched::parseCommandLine(argc, argv);
  if (const int* exit = std::get_if<int>(&parsed)) {
    return *exit;
  }
  const kc::sched::CommandLine& c = std::get<kc::sched::CommandLine>(parsed);
  // The client's rate-limit waits end when the stop's grace does (--stop-grace-seconds).
  kc::sched::ShutdownClock clientClock;
  kc::kube::KubeClientOptions clientOptions = c.client;
  clientOptions.clock = &clientClock;
  auto client = kc::kube::setUpClient(c.kubeconfig, clientOptions);
  if (!client) {
    spdlog::critical("{}", client.error().message);
    return 2;
  }

  kc::obs::Metrics metrics;
  kc::obs::HealthChecks health;
  kc::sched::SchedulerOptions options = c.scheduler;
  options.clientClock = &clientClock;
  kc::sched::Scheduler scheduler(options, **client, &metrics, &health);

  kc::obs::DaemonHttp http("kubecomp-sched", c.daemon.listen, c.daemon.port, health, metrics);
  auto bound = http.start();
  if (!bound) {
    return 1;
  }
  // SIGTERM is handled from here on, start-up included: scheduler.start() waits for the first
  // LISTs (up to a minute, e.g. before the GPUPool CRD exists) and gives up when stop() comes.
  kc::obs::ShutdownHandler shutdown(
      {.health = &health, .drain = [&] { scheduler.stop(); }, .stop = [&] { http.stop(); }});
  if (auto s = shutdown.install(); !s) {
    spdlog::critical("{}", s.error().message);
    http.stop(std::chrono::milliseconds(0));
    return 1;
  }
  kc::obs::writePortFile(c.daemon.portFile,
                         *bound);  // before the informers sync: /readyz tells when ready
  if (auto s = scheduler.start(); !s) {
    spdlog::critical("{}", s.error().message);
    http.stop(std::chrono::milliseconds(0));
    return 2;
  }
  if (!shutdown.triggered()) {
    spdlog::info("kubecomp-sched {} ({}, health/metrics on port {})", c.scheduler.lease.identity,
                 c.summary, *bound);
  }
  shutdown.wait();
  spdlog::info("kubecomp-sched stopped ({})", shutdown.reason());
  return 0;
}
