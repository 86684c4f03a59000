#include "services/bridge-operator/command_line.hpp"

#include <CLI/CLI.hpp>
#include <iostream>

#include "libcore/cli/flags.hpp"

namespace kc::bridge {

std::variant<int, CommandLine> parseCommandLine(int argc, const char* const* argv) {
  CLI::App app{
      "bridge-operator: Metacontroller CompositeController hook server for BridgeJobs\n"
      "(bridge.kubecomp.io/v1alpha1). POST /sync and /finalize; /livez /readyz /metrics."};
  // Its port serves the hooks as well as health and metrics; every flag but --port-file also
  // from BRIDGE_OPERATOR_*.
  CommandLine c;
  obs::DaemonFlags& daemon = c.daemon;
  daemon =
      obs::DaemonFlags{.port = 8843,
                       .style = {.listenHelp = "bind address",
                                 .portHelp = "TCP port (0 = ephemeral)",
                                 .portFileHelp = "write the bound port here once serving (tests)",
                                 .envPrefix = "BRIDGE_OPERATOR_",
                                 .checkLogFormat = true}};
  std::size_t bodyLimit = 8u << 20;
  unsigned ioThreads = 2;
  std::string tlsCert, tlsKey;
  double shutdownDelaySec = 0;
  double drainSec = 10;
  DecisionConfig& decision = c.decision;

  obs::addListenFlags(app, daemon);
  app.add_option("--max-pod-restarts", decision.maxPodRestarts,
                 "bridge pods started again after one stopped before the job finished; "
                 "then the BridgeJob is FAILED")
      ->check(CLI::Range(0, 100))
      ->envname("BRIDGE_OPERATOR_MAX_POD_RESTARTS")
      ->capture_default_str();
  app.add_option("--finalize-resync-seconds", decision.finalizeResyncSec,
                 "while a deleted BridgeJob's remote job is being cancelled, ask again after this")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  app.add_option("--pod-cpu-request", decision.podCpuRequest, "bridge pod CPU request")
      ->capture_default_str();
  app.add_option("--pod-memory-request", decision.podMemoryRequest, "bridge pod memory request")
      ->capture_default_str();
  app.add_option("--pod-memory-limit", decision.podMemoryLimit, "bridge pod memory limit")
      ->capture_default_str();
  app.add_option("--pod-run-as-user", decision.podRunAsUser, "bridge pod UID, GID and fsGroup")
      ->check(CLI::Range(1, 2147483647))
      ->capture_default_str();
  app.add_option("--max-body-bytes", bodyLimit, "request body limit (413 beyond)")
      ->check(CLI::Range(std::size_t{1024}, std::size_t{1} << 30))
      ->capture_default_str();
  app.add_option("--io-threads", ioThreads, "HTTP io threads")
      ->check(CLI::Range(1u, 64u))
      ->capture_default_str();
  app.add_option("--tls-cert", tlsCert, "PEM certificate (enables HTTPS)")
      ->envname("BRIDGE_OPERATOR_TLS_CERT")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-key", tlsKey, "PEM private key")
      ->envname("BRIDGE_OPERATOR_TLS_KEY")
      ->check(CLI::ExistingFile);
  obs::addLogFlags(app, daemon);
  obs::addPortFileFlag(app, daemon);
  app.add_option("--shutdown-delay-seconds", shutdownDelaySec,
                 "on SIGTERM keep serving this long with /readyz failing")
      ->check(CLI::Range(0.0, 600.0))
      ->capture_default_str();
  app.add_option("--drain-seconds", drainSec, "then wait this long for in-flight requests")
      ->check(CLI::Range(0.0, 600.0))
      ->capture_default_str();
  cli::addVersionFlag(app, "bridge-operator");
  if (auto exit = obs::parseDaemonArgs(app, argc, argv)) {
    return *exit;
  }
  if (!obs::setupDaemonLogging("bridge-operator", daemon)) {
    return 2;
  }
  if (tlsCert.empty() != tlsKey.empty()) {
    std::cerr << "error: --tls-cert and --tls-key go together\n";
    return 2;
  }
  c.server.bindAddress = daemon.listen;
  c.server.port = daemon.port;
  c.server.bodyLimit = bodyLimit;
  c.server.ioThreads = ioThreads;
  c.server.serverHeader = "bridge-operator";
  if (!tlsCert.empty()) {
    net::ServerTlsOptions tls;
    tls.certFile = tlsCert;
    tls.keyFile = tlsKey;
    c.server.tls = tls;
  }
  const auto toMillis = [](double sec) {
    return std::chrono::milliseconds(static_cast<std::int64_t>(sec * 1000));
  };
  c.shutdownDelay = toMillis(shutdownDelaySec);
  c.drain = toMillis(drainSec);
  return c;
}

}  // namespace kc::bridge
