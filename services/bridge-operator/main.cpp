// bridge-operator: Metacontroller CompositeController hooks (/sync, /finalize) that turn each
// BridgeJob into a ConfigMap, a bridge pod and its RBAC, and copy the job's state back into
// the BridgeJob status. Thin main: flags -> library -> run.

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <thread>

#include "libcore/cli/flags.hpp"
#include "libcore/obs/daemon.hpp"
#include "libcore/obs/daemon_flags.hpp"
#include "libcore/obs/health.hpp"
#include "services/bridge-operator/http_frontend.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "bridge-operator: Metacontroller CompositeController hook server for BridgeJobs\n"
      "(bridge.kubecomp.io/v1alpha1). POST /sync and /finalize; /livez /readyz /metrics."};
  // Its port serves the hooks as well as health and metrics; every flag but --port-file also
  // from BRIDGE_OPERATOR_*.
  kc::obs::DaemonFlags daemon{
      .port = 8843,
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
  kc::bridge::DecisionConfig decision;

  kc::obs::addListenFlags(app, daemon);
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
  kc::obs::addLogFlags(app, daemon);
  kc::obs::addPortFileFlag(app, daemon);
  app.add_option("--shutdown-delay-seconds", shutdownDelaySec,
                 "on SIGTERM keep serving this long with /readyz failing")
      ->check(CLI::Range(0.0, 600.0))
      ->capture_default_str();
  app.add_option("--drain-seconds", drainSec, "then wait this long for in-flight requests")
      ->check(CLI::Range(0.0, 600.0))
      ->capture_default_str();
  kc::cli::addVersionFlag(app, "bridge-operator");
  if (auto exit = kc::obs::parseDaemonArgs(app, argc, argv)) {
    return *exit;
  }
  if (!kc::obs::setupDaemonLogging("bridge-operator", daemon)) {
    return 2;
  }
  if (tlsCert.empty() != tlsKey.empty()) {
    std::cerr << "error: --tls-cert and --tls-key go together\n";
    return 2;
  }

  kc::obs::Metrics metrics;
  kc::obs::HealthChecks health;
  kc::net::ServerOptions serverOptions;
  serverOptions.bindAddress = daemon.listen;
  serverOptions.port = daemon.port;
  serverOptions.bodyLimit = bodyLimit;
  serverOptions.ioThreads = ioThreads;
  serverOptions.serverHeader = "bridge-operator";
  if (!tlsCert.empty()) {
    kc::net::ServerTlsOptions tls;
    tls.certFile = tlsCert;
    tls.keyFile = tlsKey;
    serverOptions.tls = tls;
  }
  kc::bridge::BridgeHttpFrontend frontend(
      decision, [] { return std::chrono::system_clock::now(); }, metrics, health, serverOptions);
  auto bound = frontend.start();
  if (!bound) {
    spdlog::critical("cannot serve: {}", bound.error().message);
    return 1;
  }
  spdlog::info("bridge-operator serving on {} (max pod restarts {})", frontend.baseUrl(),
               decision.maxPodRestarts);

  const auto toMillis = [](double sec) {
    return std::chrono::milliseconds(static_cast<std::int64_t>(sec * 1000));
  };
  return kc::obs::runUntilSignalled({.name = "bridge-operator",
                                     .steps = {.health = &health,
                                               .drain =
                                                   [&] {
                                                     std::this_thread::sleep_for(
                                                         toMillis(shutdownDelaySec));
                                                     frontend.stop(toMillis(drainSec));
                                                   }},
                                     .portFile = daemon.portFile,
                                     .port = *bound});
}
