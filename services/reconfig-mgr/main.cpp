// reconfig-mgr: the only client of the PCIe fabric. Writes every GPUPool's inventory into its
// status and moves GPUs to the nodes kubecomp-sched chose for waiting pods, safely (drain,
// confirm withdrawn, detach, attach, verify, journaled). Thin main: flags -> library -> run.

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>

#include "libcore/cli/flags.hpp"
#include "libcore/kube/client_setup.hpp"
#include "libcore/obs/daemon.hpp"
#include "libcore/obs/daemon_flags.hpp"
#include "libcore/obs/health.hpp"
#include "services/reconfig-mgr/reconfig.hpp"

namespace {

std::chrono::milliseconds ms(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}

std::string defaultIdentity() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) {
    host[0] = '\0';
  }
  return std::string(host[0] != '\0' ? host : "reconfig-mgr") + "_" + std::to_string(getpid());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "reconfig-mgr: the only client of the PCIe-fabric GPU chassis. For every GPUPool it\n"
      "reads the chassis inventory into the status (GPUs, node, health, draining, in use by),\n"
      "and moves GPUs to the node kubecomp-sched chose for a waiting pod (annotation\n"
      "kubecomp.io/dst-node): drain, wait for the device plugin's withdrawal, detach, attach,\n"
      "verify, each step journaled in the status. One active replica (Lease).\n"
      "With --recompose-policy idle-gather it also moves free GPUs in the background while a\n"
      "pool's fabric is idle (toward the waiting head's node, or gathered for the recent\n"
      "arrivals' largest request), one at a time, cancelled when a real request needs the fabric."};
  kc::reconfig::ReconfigOptions o;
  o.identity = defaultIdentity();
  std::string kubeconfig;
  kc::obs::DaemonFlags daemon{.port = 9420};
  double drainTimeout = 60;
  double retryInitial = 0.5;
  double retryMax = 15;
  double readTimeout = 15;
  double moveTimeout = 45;
  std::uint32_t fabricAttempts = 3;
  double planMaxAge = 1;
  std::int64_t defaultRuntime = 300;  // as kubecomp-sched's, the paper's job length
  std::int64_t recomposeCooldown = 300;
  bool noLeaderElect = false;
  double leaseDuration = 15;
  double renewDeadline = 10;
  double retryPeriod = 2;

  app.add_option("--kubeconfig", kubeconfig,
                 "kubeconfig file (default: in-cluster config, else $KUBECONFIG / ~/.kube/config)");
  app.add_option("--identity", o.identity,
                 "Lease holder identity and Event source (default: <host>_<pid>)");
  app.add_option("--scheduler-name", o.schedulerName, "reconfigure for pods of this scheduler")
      ->capture_default_str();
  app.add_option("--secret-namespace", o.secretNamespace,
                 "namespace of a chassis credentialsSecret that names none")
      ->capture_default_str();
  app.add_option(
         "--gpu-policy", o.gpuPolicy,
         "source GPU choice: unattached-first, alg1 (paper Algorithm 1 as the original), random, "
         "first-fit")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the random policy")->capture_default_str();
  app.add_option("--recompose-policy", o.recomposePolicy,
                 "idle-time recomposition: none (the paper: GPUs move only for a waiting pod) or "
                 "idle-gather (background moves while a pool's fabric is idle; libcore/alloc, "
                 "the same code as kubecomp-sim --recompose)")
      ->capture_default_str();
  app.add_option("--default-runtime-seconds", defaultRuntime,
                 "idle-gather: expected run time of a pod without annotation "
                 "kubecomp.io/expected-runtime-seconds or spec.activeDeadlineSeconds")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{10} * 366 * 24 * 3600))
      ->capture_default_str();
  app.add_option("--recompose-cooldown-seconds", recomposeCooldown,
                 "idle-gather: a GPU a background move placed is not moved again in the "
                 "background for this long (no back and forth)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{86400}))
      ->capture_default_str();
  app.add_option("--moves-reprobe-seconds", o.movesReprobeSeconds,
                 "after the fabric refused a move as unsupported (MovesSupported=False), try the "
                 "next needed move again after this long (0: never)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{604800}))
      ->capture_default_str();
  app.add_option(
         "--drain-timeout-seconds", drainTimeout,
         "give a move up when the source node's device plugin has not confirmed the GPU withdrawn")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  app.add_option("--max-attempts", o.runner.maxAttempts,
                 "failed tries of one move phase before giving up")
      ->check(CLI::Range(1u, 100u))
      ->capture_default_str();
  app.add_option("--retry-initial-seconds", retryInitial, "first backoff between tries of a phase")
      ->check(CLI::Range(0.0, 600.0))
      ->capture_default_str();
  app.add_option("--retry-max-seconds", retryMax, "longest backoff between tries")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  app.add_option("--fabric-read-timeout-seconds", readTimeout, "per chassis inventory request")
      ->check(CLI::Range(0.05, 600.0))
      ->capture_default_str();
  app.add_option("--fabric-move-timeout-seconds", moveTimeout, "per chassis attach/detach request")
      ->check(CLI::Range(0.05, 3600.0))
      ->capture_default_str();
  app.add_option("--fabric-attempts", fabricAttempts, "tries of one chassis request (driver level)")
      ->check(CLI::Range(1u, 20u))
      ->capture_default_str();
  app.add_option("--plan-inventory-max-age-seconds", planMaxAge,
                 "before planning a move, re-read the inventory if the last read is older")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  app.add_flag("--no-leader-elect", noLeaderElect, "act without a Lease (a single replica only)");
  app.add_option("--lease-namespace", o.leaseNamespace, "namespace of the Lease")
      ->capture_default_str();
  app.add_option("--lease-name", o.leaseName, "name of the Lease")->capture_default_str();
  app.add_option("--lease-duration-seconds", leaseDuration)
      ->check(CLI::Range(0.1, 600.0))
      ->capture_default_str();
  app.add_option("--renew-deadline-seconds", renewDeadline)
      ->check(CLI::Range(0.1, 600.0))
      ->capture_default_str();
  app.add_option("--retry-period-seconds", retryPeriod)
      ->check(CLI::Range(0.05, 600.0))
      ->capture_default_str();
  kc::obs::addServingFlags(app, daemon);
  kc::obs::addLogFlags(app, daemon);
  kc::cli::addVersionFlag(app, "reconfig-mgr");
  if (auto exit = kc::obs::parseDaemonArgs(app, argc, argv)) {
    return *exit;
  }
  if (!kc::obs::setupDaemonLogging("reconfig-mgr", daemon)) {
    return 2;
  }
  o.runner.drainTimeout = ms(drainTimeout);
  o.runner.backoff.initial = ms(retryInitial);
  o.runner.backoff.max = ms(retryMax);
  o.callPolicy.readTimeout = ms(readTimeout);
  o.callPolicy.moveTimeout = ms(moveTimeout);
  o.callPolicy.attempts = fabricAttempts;
  o.callPolicy.initialBackoff = std::min(o.callPolicy.initialBackoff, ms(retryInitial));
  o.planInventoryMaxAge = ms(planMaxAge);
  o.defaultRuntime = std::chrono::seconds(defaultRuntime);
  o.recomposeCooldown = std::chrono::seconds(recomposeCooldown);
  o.leaderElect = !noLeaderElect;
  o.leaseDuration = ms(leaseDuration);
  o.renewDeadline = ms(renewDeadline);
  o.retryPeriod = ms(retryPeriod);
  if (auto s = kc::reconfig::validate(o); !s) {
    spdlog::critical("{}", s.error().message);
    return 2;
  }

  auto client = kc::kube::setUpClient(kubeconfig);
  if (!client) {
    spdlog::critical("{}", client.error().message);
    return 2;
  }

  kc::obs::Metrics metrics;
  kc::obs::HealthChecks health;
  kc::reconfig::ReconfigManager manager(o, **client, &metrics, &health);

  kc::obs::DaemonHttp http("reconfig-mgr", daemon.listen, daemon.port, health, metrics);
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
               o.identity, o.gpuPolicy, o.recomposePolicy, *bound);
  return kc::obs::runUntilSignalled(
      {.name = "reconfig-mgr",
       .steps = {&health, [&] { manager.stop(); }, [&] { http.stop(); }},
       .portFile = daemon.portFile,
       .port = *bound});
}
