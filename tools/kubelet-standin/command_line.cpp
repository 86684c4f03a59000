#include "tools/kubelet-standin/command_line.hpp"

#include <CLI/CLI.hpp>
#include <iostream>
#include <tuple>

#include "libcore/alloc/quantity.hpp"
#include "libcore/cli/flags.hpp"
#include "tools/kubelet-standin/admission.hpp"
#include "tools/kubelet-standin/flags.hpp"

namespace kc::kubelet {
namespace {

constexpr const char* kDescription =
    "kubelet-standin: a kubelet TEST DOUBLE for one simulated node (tests and the local demo; it "
    "runs no\n"
    "containers and is not a kubelet). It registers and updates its Node (capacity, allocatable, "
    "conditions)\n"
    "every --status-sync-period and renews its Lease in kube-node-lease; serves the "
    "device-plugin\n"
    "Registration service on <device-plugin-dir>/kubelet.sock and runs each plugin's "
    "ListAndWatch and\n"
    "Allocate; admits pods bound to the node like kubelet (OutOf<resource>, "
    "UnexpectedAdmissionError);\n"
    "\"runs\" admitted pods for the seconds in annotation kubecomp.io/run-seconds divided by "
    "--time-scale\n"
    "(absent: until deleted) with real phases and conditions; serves PodResources v1 on\n"
    "--pod-resources-socket; watches --plugins-registry-dir for DRA plugins and calls their\n"
    "NodePrepareResources before a pod with ResourceClaims starts (NodeUnprepareResources after "
    "it ends).\n"
    "SIGHUP (or POST /debug/simulate-restart with --enable-debugging-handlers)\n"
    "simulates a kubelet restart: plugin sockets deleted, plugins must register again.";

// The flags' values as given, before they are checked and converted into StandinOptions.
struct RawFlags {
  std::string statusFreq = "10s";
  std::string reportFreq = "5m";
  std::string stopGrace = "5m";
  std::string draCallTimeout = "45s";
  std::string draRetryPeriod = "10s";
  int leaseDuration = 40;
  std::string cpu = "8";
  std::string memory = "32Gi";
  std::string ephemeral = "100Gi";
  std::int64_t maxPods = 110;
  std::string nodeLabels;
  std::string taints;
};

int usage(const std::string& message) {
  std::cerr << "kubelet-standin: " << message << "\n";
  return cli::kExitUsage;
}

// Checks the flags and converts them into `o`: 0, or the exit code after saying why.
int applyFlags(const RawFlags& f, StandinOptions& o) {
  if (!isDnsSubdomain(o.nodeName)) {
    return usage("--node-name '" + o.nodeName + "' is not a valid Node name (DNS-1123 subdomain)");
  }
  auto parseDuration = [](const std::string& flag, const std::string& text,
                          std::chrono::milliseconds& out) -> std::string {
    auto d = parseGoDuration(text);
    if (!d) {
      return flag + ": " + d.error().message;
    }
    if (d->count() <= 0) {
      return flag + ": must be positive";
    }
    out = *d;
    return {};
  };
  for (auto [flag, text, out] :
       {std::tuple{"--node-status-update-frequency", &f.statusFreq, &o.nodeStatusUpdateFrequency},
        std::tuple{"--node-status-report-frequency", &f.reportFreq, &o.nodeStatusReportFrequency},
        std::tuple{"--device-plugin-stop-grace", &f.stopGrace, &o.endpointStopGrace},
        std::tuple{"--dra-call-timeout", &f.draCallTimeout, &o.draCallTimeout},
        std::tuple{"--dra-retry-period", &f.draRetryPeriod, &o.draRetryPeriod}}) {
    if (auto err = parseDuration(flag, *text, *out); !err.empty()) {
      return usage(err);
    }
  }
  o.leaseDurationSeconds = f.leaseDuration;
  o.leaseRenewInterval = std::chrono::milliseconds(f.leaseDuration * 250);
  for (auto [name, text] : {std::pair{"cpu", &f.cpu}, std::pair{"memory", &f.memory},
                            std::pair{"ephemeral-storage", &f.ephemeral}}) {
    auto amount = alloc::parseResourceAmount(name, *text);
    if (!amount) {
      return usage(std::string("--") + name + ": " + amount.error().message);
    }
    o.capacity[name] = *amount;
  }
  o.capacity["pods"] = f.maxPods;
  auto labels = parseLabels(f.nodeLabels);
  if (!labels) {
    return usage("--node-labels: " + labels.error().message);
  }
  o.labels = *labels;
  auto taintList = parseTaints(f.taints);
  if (!taintList) {
    return usage("--register-with-taints: " + taintList.error().message);
  }
  o.taints = *taintList;
  for (const auto* p :
       {&o.devicePluginDir, &o.podResourcesSocket, &o.rootDir, &o.pluginsRegistryDir}) {
    if (p == &o.pluginsRegistryDir && p->empty()) {
      continue;  // <root-dir>/plugins_registry
    }
    if (p->empty() || p->front() != '/') {
      return usage("'" + *p + "' is not an absolute path");
    }
  }
  return 0;
}

}  // namespace

std::variant<int, CommandLine> parseCommandLine(int argc, const char* const* argv) {
  CLI::App app{kDescription, "kubelet-standin"};
  CommandLine c;
  StandinOptions& o = c.standin;
  RawFlags f;
  // kubelet's names for the health endpoint's address and port.
  c.daemon = obs::DaemonFlags{
      .listen = "127.0.0.1",
      .port = 10248,
      .style = {.listenFlag = "--address",
                .listenHelp = "address of the health/metrics endpoint",
                .portFlag = "--healthz-port",
                .portHelp = "port of /healthz /livez /readyz /metrics /debug (0 = ephemeral)",
                .portFileHelp = "write the bound healthz port here once ready (tests)",
                .errorPrefix = "kubelet-standin: "}};

  app.add_option("--hostname-override,--node-name", o.nodeName,
                 "name of the Node this process plays")
      ->required();
  app.add_option("--kubeconfig", c.kubeconfig, cli::kKubeconfigHelp);
  app.add_option("--device-plugin-dir", o.devicePluginDir,
                 "device plugin socket directory (kubelet.sock is served here)")
      ->capture_default_str();
  app.add_option("--pod-resources-socket", o.podResourcesSocket, "PodResources v1 socket")
      ->capture_default_str();
  app.add_option("--root-dir", o.rootDir,
                 "state directory (device assignment and DRA claim checkpoints)")
      ->capture_default_str();
  app.add_option("--plugins-registry-dir", o.pluginsRegistryDir,
                 "where DRA plugins create their registration sockets (plugin watcher; default: "
                 "<root-dir>/plugins_registry, as kubelet)");
  app.add_option("--dra-call-timeout", f.draCallTimeout,
                 "deadline of NodePrepareResources / NodeUnprepareResources (kubelet: 45s)")
      ->capture_default_str();
  app.add_option("--dra-retry-period", f.draRetryPeriod,
                 "how often a pod whose claims could not be prepared or unprepared is tried again")
      ->capture_default_str();
  app.add_option("--node-ip", o.nodeIp,
                 "InternalIP address reported for the node and hostIP of its pods")
      ->capture_default_str();
  app.add_option("--node-status-update-frequency,--status-sync-period", f.statusFreq,
                 "how often the node status is computed and posted if changed (Go duration)")
      ->capture_default_str();
  app.add_option("--node-status-report-frequency", f.reportFreq,
                 "post the node status at least this often even unchanged")
      ->capture_default_str();
  app.add_option("--node-lease-duration-seconds", f.leaseDuration,
                 "Lease leaseDurationSeconds; renewed every quarter of it")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.add_option("--device-plugin-stop-grace", f.stopGrace,
                 "how long a gone plugin's devices stay in capacity (kubelet: 5m)")
      ->capture_default_str();
  app.add_option("--time-scale", o.timeScale,
                 "divides every pod run duration (300 s jobs at 100 run 3 s)")
      ->check(CLI::Range(0.001, 1e6))
      ->capture_default_str();
  app.add_option("--cpu", f.cpu, "cpu capacity (quantity)")->capture_default_str();
  app.add_option("--memory", f.memory, "memory capacity (quantity)")->capture_default_str();
  app.add_option("--ephemeral-storage", f.ephemeral, "ephemeral-storage capacity (quantity)")
      ->capture_default_str();
  app.add_option("--max-pods", f.maxPods, "pods capacity")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  app.add_option("--node-labels", f.nodeLabels, "extra labels, key=value,...");
  app.add_option("--register-with-taints", f.taints, "taints, key[=value]:Effect,...");
  obs::addServingFlags(app, c.daemon);
  app.add_flag("--enable-debugging-handlers", c.debugging,
               "serve POST /debug/simulate-restart and POST /debug/sync-node-status");
  obs::addLogFlags(app, c.daemon);
  cli::addVersionFlag(app, "kubelet-standin");
  if (auto exit = cli::parse(app, argc, argv)) {
    return *exit;
  }

  if (!obs::setupDaemonLogging("kubelet-standin", c.daemon)) {
    return cli::kExitUsage;
  }
  if (int rc = applyFlags(f, o); rc != 0) {
    return rc;
  }
  return c;
}

}  // namespace kc::kubelet
