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

constexpr const char* kDescription =
    "kubecomp-sched: secondary scheduler for pods with spec.schedulerName kubecomp-sched.\n"
    "Places them with kube-scheduler's filters and the paper's Eq. 1 over the GPU pools\n"
    "(GPUPool status), binds through pods/binding, and when the chosen node lacks GPUs\n"
    "reserves it and asks reconfig-mgr for them with the pod annotations\n"
    "kubecomp.io/dst-node and kubecomp.io/demand (docs/sched.md).";

// The flags' values as given, before they are checked and converted into SchedulerOptions.
struct RawFlags {
  std::string policy{alloc::kDefaultNodePolicy};
  std::string mode = "composable";
  // The daemon's queue until now, which the testbed cross-check matched (docs/sched.md); the
  // simulator's default, fcfs, models the paper's strict queue.
  std::string queuePolicy{alloc::GreedyBackfillQueuePolicy::kName};
  double moveSeconds = 36;
  double slackFactor = alloc::kDefaultSlackFactor;
  CLI::Option* slackOpt = nullptr;
  std::int64_t defaultRuntime = 300;
  double reservationTimeout = 300;
  double bindingTimeout = 600;
  double draReleaseWait = 5;
  double initialBackoff = 1;
  double maxBackoff = 10;
  double stopGrace = 10;
  cli::LeaderElectionFlags leader{.resourceNamespace = "kube-system",
                                  .resourceName = "kubecomp-sched"};
};

// Placement: node policy, composability, and the queue policy with what it plans with.
void addPolicyFlags(CLI::App& app, RawFlags& f) {
  app.add_option("--node-policy", f.policy,
                 "node scoring policy from the policy registry (eq1, best-fit, least-demand, none)")
      ->capture_default_str();
  app.add_option(
         "--mode", f.mode,
         "composable: a node short of GPUs is reserved and reconfig-mgr asked to move them; "
         "preconfigured: GPUs never move, a pod goes only where its GPUs are attached now "
         "(the fixed settings of the paper's Fig. 8)")
      ->check(CLI::IsMember({"composable", "preconfigured"}))
      ->capture_default_str();
  app.add_option(
         "--queue-policy", f.queuePolicy,
         "queue policy from the policy registry: backfill (an unschedulable pod backs off, "
         "later pods are tried), fcfs (strict: a waiting head blocks every later pod), "
         "easy-backfill (the head gets a reservation; later pods start only if they do not "
         "delay it), slack-backfill (as easy-backfill, the head may slip by up to its own run "
         "time)")
      ->capture_default_str();
  app.add_option(
         "--move-seconds", f.moveSeconds,
         "easy-/slack-backfill: estimated time reconfig-mgr takes to move one GPU (measured on "
         "the testbed: 36 s, docs/demo.md)")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  f.slackOpt =
      app.add_option("--slack-factor", f.slackFactor,
                     "slack-backfill only: a later pod may delay the queue head by up to this many "
                     "times the head's own run time (1: the textbook bound; docs/results.md)")
          ->capture_default_str();
  app.add_option("--default-runtime-seconds", f.defaultRuntime,
                 "easy-/slack-backfill: expected run time of a pod without the annotation "
                 "kubecomp.io/expected-runtime-seconds or spec.activeDeadlineSeconds")
      ->check(CLI::Range(std::int64_t{1}, alloc::kMaxExpectedRuntimeSeconds))
      ->capture_default_str();
}

// Timing of retries and reservations, and the bind writers.
void addTimingFlags(CLI::App& app, RawFlags& f, SchedulerOptions& o) {
  app.add_option("--binding-timeout-seconds", f.bindingTimeout,
                 "DRA: how long a pod waits for its devices' binding conditions before the "
                 "allocation is cleared and the pod scheduled again (kube-scheduler's "
                 "bindingTimeout)")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  app.add_option("--dra-release-wait-seconds", f.draReleaseWait,
                 "DRA: how long after its pods finished a claim's devices count as about to be "
                 "free: a pod waits for them rather than having a GPU moved (0: never wait)")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  app.add_option("--reservation-timeout-seconds", f.reservationTimeout,
                 "how long a reserved node may take to show the GPUs before the request is "
                 "dropped and the pod scheduled again")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  app.add_option("--initial-backoff-seconds", f.initialBackoff,
                 "first retry delay of an unschedulable pod (doubles per attempt)")
      ->check(CLI::Range(0.01, 600.0))
      ->capture_default_str();
  app.add_option("--max-backoff-seconds", f.maxBackoff,
                 "longest retry delay of an unschedulable pod")
      ->check(CLI::Range(0.01, 3600.0))
      ->capture_default_str();
  app.add_option("--stop-grace-seconds", f.stopGrace,
                 "on SIGTERM, pending binds, annotation and condition writes and Events are "
                 "still sent for this long (through --kube-api-qps); what is left then is "
                 "dropped and counted in the log")
      ->check(CLI::Range(0.0, 120.0))
      ->capture_default_str();
  app.add_option(
         "--bind-workers", o.bindWorkers,
         "threads writing binds, annotations and conditions (one pod's writes stay in order)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
}

// Leader election and the API client.
void addClusterFlags(CLI::App& app, RawFlags& f, CommandLine& c) {
  cli::addLeaderElectionFlags(app, f.leader, "so that only one replica binds",
                              {.leaderElectOff = "",
                               .resourceNamespace = "--leader-elect-namespace",
                               .resourceName = "--leader-elect-name",
                               .leaseDuration = "--lease-duration-seconds",
                               .renewDeadline = "--renew-deadline-seconds",
                               .retryPeriod = "--retry-period-seconds"});
  app.add_option("--identity", c.scheduler.lease.identity,
                 "this replica's holder identity (default: host_pid)");
  app.add_option("--kube-api-qps", c.client.qps, "client-side rate limit of API requests (0: none)")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  app.add_option("--kube-api-burst", c.client.burst, "burst of the client-side rate limit")
      ->capture_default_str();
}

// The checks across flags and the conversion into the options; false (said why) on a usage
// error.
bool applyFlags(const RawFlags& f, CommandLine& c) {
  auto found = alloc::findNodePolicy(f.policy);
  if (!found) {
    spdlog::critical("--node-policy: {}", found.error().message);
    return false;
  }
  auto queue = alloc::findQueuePolicy(f.queuePolicy);
  if (!queue) {
    spdlog::critical("--queue-policy: {}", queue.error().message);
    return false;
  }
  if (auto s = alloc::checkSlackFactor(f.slackFactor); !s) {
    spdlog::critical("--slack-factor: {}", s.error().message);
    return false;
  }
  if (f.slackOpt->count() > 0 && queue->discipline != alloc::QueueDiscipline::SlackBackfill) {
    spdlog::critical(
        "--slack-factor applies to --queue-policy slack-backfill only (queue policy is {})",
        f.queuePolicy);
    return false;
  }
  if (f.maxBackoff < f.initialBackoff) {
    spdlog::critical("--max-backoff-seconds must not be below --initial-backoff-seconds");
    return false;
  }
  SchedulerOptions& o = c.scheduler;
  o.cache.placement.policy = *found;
  o.cache.placement.mode = f.mode == "preconfigured" ? alloc::Composability::Preconfigured
                                                     : alloc::Composability::Composable;
  o.cache.queue = *queue;
  o.cache.moveTime = seconds(f.moveSeconds);
  o.cache.defaultRuntime = std::chrono::seconds(f.defaultRuntime);
  o.cache.slackFactor = f.slackFactor;
  o.cache.reservationTimeout = seconds(f.reservationTimeout);
  o.cache.bindingTimeout = seconds(f.bindingTimeout);
  o.cache.draReleaseWait = seconds(f.draReleaseWait);
  o.cache.initialBackoff = seconds(f.initialBackoff);
  o.cache.maxBackoff = seconds(f.maxBackoff);
  o.stopGrace = seconds(f.stopGrace);
  o.leaderElect = f.leader.leaderElect;
  o.lease.ns = f.leader.resourceNamespace;
  o.lease.name = f.leader.resourceName;
  o.lease.leaseDuration = f.leader.leaseDuration;
  o.lease.renewDeadline = f.leader.renewDeadline;
  o.lease.retryPeriod = f.leader.retryPeriod;
  o.instance = o.lease.identity;
  c.client.userAgent = "kubecomp-sched/" + std::string(cli::projectVersion());
  c.summary = fmt::format("policy {}, queue {}, {}", f.policy, f.queuePolicy, f.mode);
  return true;
}

}  // namespace

std::variant<int, CommandLine> parseCommandLine(int argc, const char* const* argv) {
  CLI::App app{kDescription};
  CommandLine c;
  RawFlags f;
  c.daemon.port = 10270;
  c.scheduler.lease.identity = defaultIdentity();

  app.add_option("--kubeconfig", c.kubeconfig, cli::kKubeconfigHelp);
  addPolicyFlags(app, f);
  addTimingFlags(app, f, c.scheduler);
  addClusterFlags(app, f, c);
  obs::addServingFlags(app, c.daemon);
  obs::addLogFlags(app, c.daemon);
  cli::addVersionFlag(app, "kubecomp-sched");
  if (auto exit = obs::parseDaemonArgs(app, argc, argv)) {
    return *exit;
  }
  if (!obs::setupDaemonLogging("kubecomp-sched", c.daemon)) {
    return cli::kExitUsage;
  }
  if (!applyFlags(f, c)) {
    return cli::kExitUsage;
  }
  return c;
}

}  // namespace kc::sched
