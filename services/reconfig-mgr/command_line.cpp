#include "services/reconfig-mgr/command_line.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>

#include "libcore/cli/flags.hpp"
#include "libcore/cli/leader_election.hpp"

namespace kc::reconfig {
namespace {

constexpr const char* kDescription =
    "reconfig-mgr: the only client of the PCIe-fabric GPU chassis. For every GPUPool it\n"
    "reads the chassis inventory into the status (GPUs, node, health, draining, in use by),\n"
    "and moves GPUs to the node kubecomp-sched chose for a waiting pod (annotation\n"
    "kubecomp.io/dst-node): drain, wait for the device plugin's withdrawal, detach, attach,\n"
    "verify, each step journaled in the status. Moves on different chassis of a pool run in\n"
    "parallel (--moves-per-chassis, --moves-per-pool). One active replica (Lease).\n"
    "With --recompose-policy idle-gather it also moves free GPUs in the background while a\n"
    "pool's fabric is idle (toward the waiting head's node, or gathered for the recent\n"
    "arrivals' largest request), one at a time, cancelled when a real request needs the fabric.";

// Flag values as typed (seconds as doubles, counts), before they become ReconfigOptions.
struct RawFlags {
  double drainTimeout = 60;
  double draDrainSettle = 0.5;
  double nodeConfirmTimeout = 120;
  double attachHoldoff = 300;
  double moveFailureBackoff = 10;
  double serialAfterBusy = 600;
  double retryInitial = 0.5;
  double retryMax = 15;
  double readTimeout = 15;
  double moveTimeout = 45;
  std::uint32_t fabricAttempts = 3;
  double planMaxAge = 1;
  std::int64_t defaultRuntime = 300;  // as kubecomp-sched's, the paper's job length
  std::int64_t recomposeCooldown = 300;
};

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

// Which cluster, which pods and whose credentials.
void addClusterFlags(CLI::App& app, CommandLine& c) {
  ReconfigOptions& o = c.reconfig;
  app.add_option("--kubeconfig", c.kubeconfig, cli::kKubeconfigHelp);
  app.add_option("--identity", o.identity,
                 "Lease holder identity and Event source (default: <host>_<pid>)");
  app.add_option("--scheduler-name", o.schedulerName, "reconfigure for pods of this scheduler")
      ->capture_default_str();
  app.add_option("--secret-namespace", o.secretNamespace,
                 "namespace of a chassis credentialsSecret that names none")
      ->capture_default_str();
}

// Which GPUs move, and when besides a waiting pod's request.
void addPolicyFlags(CLI::App& app, ReconfigOptions& o, RawFlags& raw) {
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
  app.add_option("--default-runtime-seconds", raw.defaultRuntime,
                 "idle-gather: expected run time of a pod without annotation "
                 "kubecomp.io/expected-runtime-seconds or spec.activeDeadlineSeconds")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{10} * 366 * 24 * 3600))
      ->capture_default_str();
  app.add_option("--recompose-cooldown-seconds", raw.recomposeCooldown,
                 "idle-gather: a GPU a background move placed is not moved again in the "
                 "background for this long (no back and forth)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{86400}))
      ->capture_default_str();
  app.add_option("--moves-reprobe-seconds", o.movesReprobeSeconds,
                 "after the fabric refused a move as unsupported (MovesSupported=False), try the "
                 "next needed move again after this long (0: never)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{604800}))
      ->capture_default_str();
}

// How one move's phases are waited for and retried.
void addMoveFlags(CLI::App& app, ReconfigOptions& o, RawFlags& raw) {
  app.add_option(
         "--drain-timeout-seconds", raw.drainTimeout,
         "give a move up when the source node's device plugin has not confirmed the GPU withdrawn")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  app.add_option("--node-confirm-timeout-seconds", raw.nodeConfirmTimeout,
                 "give a move up when the destination node's agent, which checks its own host, "
                 "has not seen the attached GPU (hot-add, driver) within this long")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  app.add_option("--dra-drain-settle-seconds", raw.draDrainSettle,
                 "on a DRA pool, how long the published ResourceSlices must have withheld a GPU "
                 "before its drain counts as done (allocations made just before reach the claims)")
      ->check(CLI::Range(0.0, 600.0))
      ->capture_default_str();
  app.add_option("--move-failure-backoff-seconds", raw.moveFailureBackoff,
                 "a GPU whose move the fabric failed is not moved again for this long, doubling "
                 "per further failure up to --attach-failure-holdoff-seconds; two failures in a "
                 "row on one chassis hold back its GPUs alike (0: no backoff)")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  app.add_option("--attach-failure-holdoff-seconds", raw.attachHoldoff,
                 "on a DRA pool, how long a GPU whose attach for a claim failed is withheld from "
                 "the ResourceSlices (shown Unhealthy), so no allocator picks it again at once; "
                 "also the ceiling of --move-failure-backoff-seconds")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  app.add_option("--moves-per-chassis", o.runner.concurrency.perChassis,
                 "GPU moves in flight at once on one chassis (each chassis re-programs its switch "
                 "one assignment at a time: raise it only for a fabric measured to do more)")
      ->check(CLI::Range(1u, 64u))
      ->capture_default_str();
  app.add_option("--moves-per-pool", o.runner.concurrency.perPool,
                 "GPU moves in flight at once in one pool, across its chassis; 0 = no pool "
                 "limit (one per chassis), 1 = the paper's serial schedule")
      ->check(CLI::Range(0u, 1024u))
      ->capture_default_str();
  app.add_option("--serial-after-busy-seconds", raw.serialAfterBusy,
                 "a chassis answering unavailable (busy, 5xx) while other moves of its pool are in "
                 "flight makes the pool move one GPU at a time for this long (0: never)")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  app.add_option("--max-attempts", o.runner.maxAttempts,
                 "failed tries of one move phase before giving up")
      ->check(CLI::Range(1u, 100u))
      ->capture_default_str();
  app.add_option("--retry-initial-seconds", raw.retryInitial,
                 "first backoff between tries of a phase")
      ->check(CLI::Range(0.0, 600.0))
      ->capture_default_str();
  app.add_option("--retry-max-seconds", raw.retryMax, "longest backoff between tries")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
}

// The chassis requests: timeouts, tries and how fresh an inventory a plan needs.
void addFabricFlags(CLI::App& app, RawFlags& raw) {
  app.add_option("--fabric-read-timeout-seconds", raw.readTimeout, "per chassis inventory request")
      ->check(CLI::Range(0.05, 600.0))
      ->capture_default_str();
  app.add_option("--fabric-move-timeout-seconds", raw.moveTimeout,
                 "per chassis attach/detach request")
      ->check(CLI::Range(0.05, 3600.0))
      ->capture_default_str();
  app.add_option("--fabric-attempts", raw.fabricAttempts,
                 "tries of one chassis request (driver level)")
      ->check(CLI::Range(1u, 20u))
      ->capture_default_str();
  app.add_option("--plan-inventory-max-age-seconds", raw.planMaxAge,
                 "before planning a move, re-read the inventory if the last read is older")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
}

void addLeaderFlags(CLI::App& app, cli::LeaderElectionFlags& leader) {
  cli::addLeaderElectionFlags(app, leader, "so that only one replica moves GPUs",
                              {.leaderElectOff = "--no-leader-elect",
                               .resourceNamespace = "--lease-namespace",
                               .resourceName = "--lease-name",
                               .leaseDuration = "--lease-duration-seconds",
                               .renewDeadline = "--renew-deadline-seconds",
                               .retryPeriod = "--retry-period-seconds"});
}

// The parsed flag values into the options (durations, the leader-election group).
void applyFlags(const RawFlags& raw, const cli::LeaderElectionFlags& leader, ReconfigOptions& o) {
  o.runner.drainTimeout = ms(raw.drainTimeout);
  o.runner.nodeConfirmTimeout = ms(raw.nodeConfirmTimeout);
  o.draDrainSettle = ms(raw.draDrainSettle);
  o.attachFailureHoldoff = ms(raw.attachHoldoff);
  o.moveFailureBackoff = ms(raw.moveFailureBackoff);
  o.runner.serialAfterBusy = ms(raw.serialAfterBusy);
  o.runner.backoff.initial = ms(raw.retryInitial);
  o.runner.backoff.max = ms(raw.retryMax);
  o.callPolicy.readTimeout = ms(raw.readTimeout);
  o.callPolicy.moveTimeout = ms(raw.moveTimeout);
  o.callPolicy.attempts = raw.fabricAttempts;
  o.callPolicy.initialBackoff = std::min(o.callPolicy.initialBackoff, ms(raw.retryInitial));
  o.planInventoryMaxAge = ms(raw.planMaxAge);
  o.defaultRuntime = std::chrono::seconds(raw.defaultRuntime);
  o.recomposeCooldown = std::chrono::seconds(raw.recomposeCooldown);
  o.leaderElect = leader.leaderElect;
  o.leaseNamespace = leader.resourceNamespace;
  o.leaseName = leader.resourceName;
  o.leaseDuration = leader.leaseDuration;
  o.renewDeadline = leader.renewDeadline;
  o.retryPeriod = leader.retryPeriod;
}

}  // namespace

std::variant<int, CommandLine> parseCommandLine(int argc, const char* const* argv) {
  CLI::App app{kDescription};
  CommandLine c;
  ReconfigOptions& o = c.reconfig;
  o.identity = defaultIdentity();
  obs::DaemonFlags& daemon = c.daemon;
  daemon.port = 9420;
  RawFlags raw;
  cli::LeaderElectionFlags leader{.leaderElect = o.leaderElect,
                                  .resourceNamespace = o.leaseNamespace,
                                  .resourceName = o.leaseName,
                                  .leaseDuration = o.leaseDuration,
                                  .renewDeadline = o.renewDeadline,
                                  .retryPeriod = o.retryPeriod};

  // The order of the groups is the order of --help.
  addClusterFlags(app, c);
  addPolicyFlags(app, o, raw);
  addMoveFlags(app, o, raw);
  addFabricFlags(app, raw);
  addLeaderFlags(app, leader);
  obs::addServingFlags(app, daemon);
  obs::addLogFlags(app, daemon);
  cli::addVersionFlag(app, "reconfig-mgr");
  if (auto exit = obs::parseDaemonArgs(app, argc, argv)) {
    return *exit;
  }
  if (!obs::setupDaemonLogging("reconfig-mgr", daemon)) {
    return 2;
  }
  applyFlags(raw, leader, o);
  if (auto s = reconfig::validate(o); !s) {
    spdlog::critical("{}", s.error().message);
    return 2;
  }
  return c;
}

}  // namespace kc::reconfig
