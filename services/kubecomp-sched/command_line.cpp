#include "services/kubecomp-sched/command_line.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include "libcore/alloc/policy_registry.hpp"
#include "libcore/alloc/queue_pass.hpp"
#include "libcore/cli/flags.hpp"
#include "libcore/cli/leader_election.hpp"
#include "libcore/cli/version.hpp"

namespace kc::sched {
namespace {

std::chrono::milliseconds seconds(double s) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(s * 1000));
}

std::string defaultIdentity() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) {
    host[0] = '\0';
  }
  return std::string(host) + "_" + std::to_string(getpid());
}

}  // namespace

std::variant<int, CommandLine> parseCommandLine(int argc, const char* const* argv) {
  CLI::App app{
      "kubecomp-sched: secondary scheduler for pods with spec.schedulerName kubecomp-sched.\n"
      "Places them with kube-scheduler's filters and the paper's Eq. 1 over the GPU pools\n"
      "(GPUPool status), binds through pods/binding, and when the chosen node lacks GPUs\n"
      "reserves it and asks reconfig-mgr for them with the pod annotations\n"
      "kubecomp.io/dst-node and kubecomp.io/demand (docs/sched.md)."};
  CommandLine c;
  SchedulerOptions& o = c.scheduler;
  std::string policy(alloc::kDefaultNodePolicy);
  std::string mode = "composable";
  // The daemon's queue until now, which the testbed cross-check matched (docs/sched.md); the
  // simulator's default, fcfs, models the paper's strict queue.
  std::string queuePolicy(alloc::GreedyBackfillQueuePolicy::kName);
  double moveSeconds = 36;
  double slackFactor = alloc::kDefaultSlackFactor;
  std::int64_t defaultRuntime = 300;
  double reservationTimeout = 300;
  double initialBackoff = 1;
  double maxBackoff = 10;
  obs::DaemonFlags& daemon = c.daemon;
  daemon.port = 10270;
  cli::LeaderElectionFlags leader{.resourceNamespace = "kube-system",
                                  .resourceName = "kubecomp-sched"};
  o.lease.identity = defaultIdentity();

  app.add_option("--kubeconfig", c.kubeconfig,
                 "kubeconfig file (default: in-cluster config, else $KUBECONFIG / ~/.kube/config)");
  app.add_option("--node-policy", policy,
                 "node scoring policy from the policy registry (eq1, best-fit, least-demand, none)")
      ->capture_default_str();
  app.add_option(
         "--mode", mode,
         "composable: a node short of GPUs is reserved and reconfig-mgr asked to move them; "
         "preconfigured: GPUs never move, a pod goes only where its GPUs are attached now "
         "(the fixed settings of the paper's Fig. 8)")
      ->check(CLI::IsMember({"composable", "preconfigured"}))
      ->capture_default_str();
  app.add_option(
         "--queue-policy", queuePolicy,
         "queue policy from the policy registry: backfill (an unschedulable pod backs off, "
         "later pods are tried), fcfs (strict: a waiting head blocks every later pod), "
         "easy-backfill (the head gets a reservation; later pods start only if they do not "
         "delay it), slack-backfill (as easy-backfill, the head may slip by up to its own run "
         "time)")
      ->capture_default_str();
  app.add_option(
         "--move-seconds", moveSeconds,
         "easy-/slack-backfill: estimated time reconfig-mgr takes to move one GPU (measured on "
         "the testbed: 36 s, docs/demo.md)")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  auto* slackOpt =
      app.add_option("--slack-factor", slackFactor,
                     "slack-backfill only: a later pod may delay the queue head by up to this many "
                     "times the head's own run time (1: the textbook bound; docs/results.md)")
          ->capture_default_str();
  app.add_option("--default-runtime-seconds", defaultRuntime,
                 "easy-/slack-backfill: expected run time of a pod without the annotation "
                 "kubecomp.io/expected-runtime-seconds or spec.activeDeadlineSeconds")
      ->check(CLI::Range(std::int64_t{1}, alloc::kMaxExpectedRuntimeSeconds))
      ->capture_default_str();
  app.add_option("--reservation-timeout-seconds", reservationTimeout,
                 "how long a reserved node may take to show the GPUs before the request is "
                 "dropped and the pod scheduled again")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  app.add_option("--initial-backoff-seconds", initialBackoff,
                 "first retry delay of an unschedulable pod (doubles per attempt)")
      ->check(CLI::Range(0.01, 600.0))
      ->capture_default_str();
  app.add_option("--max-backoff-seconds", maxBackoff, "longest retry delay of an unschedulable pod")
      ->check(CLI::Range(0.01, 3600.0))
      ->capture_default_str();
  app.add_option(
         "--bind-workers", o.bindWorkers,
         "threads writing binds, annotations and conditions (one pod's writes stay in order)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cli::addLeaderElectionFlags(app, leader, "so that only one replica binds",
                              {.leaderElectOff = "",
                               .resourceNamespace = "--leader-elect-namespace",
                               .resourceName = "--leader-elect-name",
                               .leaseDuration = "--lease-duration-seconds",
                               .renewDeadline = "--renew-deadline-seconds",
                               .retryPeriod = "--retry-period-seconds"});
  app.add_option("--identity", o.lease.identity,
                 "this replica's holder identity (default: host_pid)");
  app.add_option("--kube-api-qps", c.client.qps, "client-side rate limit of API requests (0: none)")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  app.add_option("--kube-api-burst", c.client.burst, "burst of the client-side rate limit")
      ->capture_default_str();
  obs::addServingFlags(app, daemon);
  obs::addLogFlags(app, daemon);
  cli::addVersionFlag(app, "kubecomp-sched");
  if (auto exit = obs::parseDaemonArgs(app, argc, argv)) {
    return *exit;
  }
  if (!obs::setupDaemonLogging("kubecomp-sched", daemon)) {
    return 2;
  }
  auto found = alloc::findNodePolicy(policy);
  if (!found) {
    spdlog::critical("--node-policy: {}", found.error().message);
    return 2;
  }
  auto queue = alloc::findQueuePolicy(queuePolicy);
  if (!queue) {
    spdlog::critical("--queue-policy: {}", queue.error().message);
    return 2;
  }
  if (auto s = alloc::checkSlackFactor(slackFactor); !s) {
    spdlog::critical("--slack-factor: {}", s.error().message);
    return 2;
  }
  if (slackOpt->count() > 0 && queue->discipline != alloc::QueueDiscipline::SlackBackfill) {
    spdlog::critical(
        "--slack-factor applies to --queue-policy slack-backfill only (queue policy is {})",
        queuePolicy);
    return 2;
  }
  if (maxBackoff < initialBackoff) {
    spdlog::critical("--max-backoff-seconds must not be below --initial-backoff-seconds");
    return 2;
  }
  o.cache.placement.policy = *found;
  o.cache.placement.mode = mode == "preconfigured" ? alloc::Composability::Preconfigured
                                                   : alloc::Composability::Composable;
  o.cache.queue = *queue;
  o.cache.moveTime = seconds(moveSeconds);
  o.cache.defaultRuntime = std::chrono::seconds(defaultRuntime);
  o.cache.slackFactor = slackFactor;
  o.cache.reservationTimeout = seconds(reservationTimeout);
  o.cache.initialBackoff = seconds(initialBackoff);
  o.cache.maxBackoff = seconds(maxBackoff);
  o.leaderElect = leader.leaderElect;
  o.lease.ns = leader.resourceNamespace;
  o.lease.name = leader.resourceName;
  o.lease.leaseDuration = leader.leaseDuration;
  o.lease.renewDeadline = leader.renewDeadline;
  o.lease.retryPeriod = leader.retryPeriod;
  o.instance = o.lease.identity;
  c.client.userAgent = "kubecomp-sched/" + std::string(cli::projectVersion());
  c.summary = fmt::format("policy {}, queue {}, {}", policy, queuePolicy, mode);
  return c;
}

}  // namespace kc::sched
