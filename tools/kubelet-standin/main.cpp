// kubelet-standin: a kubelet TEST DOUBLE for one simulated node. Thin main: flags -> library
// -> run. See docs/kubelet-standin.md.

#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <iostream>
#include <thread>

#include "libcore/alloc/quantity.hpp"
#include "libcore/cli/flags.hpp"
#include "libcore/kube/client_setup.hpp"
#include "libcore/obs/daemon.hpp"
#include "libcore/obs/daemon_flags.hpp"
#include "libcore/obs/health.hpp"
#include "tools/kubelet-standin/admission.hpp"
#include "tools/kubelet-standin/control.hpp"
#include "tools/kubelet-standin/flags.hpp"
#include "tools/kubelet-standin/standin.hpp"

namespace {

int fail(const std::string& message) {
  std::cerr << "kubelet-standin: " << message << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
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
      "--pod-resources-socket. SIGHUP (or POST /debug/simulate-restart with "
      "--enable-debugging-handlers)\n"
      "simulates a kubelet restart: plugin sockets deleted, plugins must register again.",
      "kubelet-standin"};
  kc::kubelet::StandinOptions o;
  std::string kubeconfig;
  std::string statusFreq = "10s";
  std::string reportFreq = "5m";
  std::string stopGrace = "5m";
  int leaseDuration = 40;
  std::string cpu = "8";
  std::string memory = "32Gi";
  std::string ephemeral = "100Gi";
  std::int64_t maxPods = 110;
  std::string nodeLabels;
  std::string taints;
  // kubelet's names for the health endpoint's address and port.
  kc::obs::DaemonFlags daemon{
      .listen = "127.0.0.1",
      .port = 10248,
      .style = {.listenFlag = "--address",
                .listenHelp = "address of the health/metrics endpoint",
                .portFlag = "--healthz-port",
                .portHelp = "port of /healthz /livez /readyz /metrics /debug (0 = ephemeral)",
                .portFileHelp = "write the bound healthz port here once ready (tests)",
                .errorPrefix = "kubelet-standin: "}};
  bool debugging = false;

  app.add_option("--hostname-override,--node-name", o.nodeName,
                 "name of the Node this process plays")
      ->required();
  app.add_option("--kubeconfig", kubeconfig, kc::cli::kKubeconfigHelp);
  app.add_option("--device-plugin-dir", o.devicePluginDir,
                 "device plugin socket directory (kubelet.sock is served here)")
      ->capture_default_str();
  app.add_option("--pod-resources-socket", o.podResourcesSocket, "PodResources v1 socket")
      ->capture_default_str();
  app.add_option("--root-dir", o.rootDir, "state directory (device assignment checkpoint)")
      ->capture_default_str();
  app.add_option("--node-ip", o.nodeIp,
                 "InternalIP address reported for the node and hostIP of its pods")
      ->capture_default_str();
  app.add_option("--node-status-update-frequency,--status-sync-period", statusFreq,
                 "how often the node status is computed and posted if changed (Go duration)")
      ->capture_default_str();
  app.add_option("--node-status-report-frequency", reportFreq,
                 "post the node status at least this often even unchanged")
      ->capture_default_str();
  app.add_option("--node-lease-duration-seconds", leaseDuration,
                 "Lease leaseDurationSeconds; renewed every quarter of it")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.add_option("--device-plugin-stop-grace", stopGrace,
                 "how long a gone plugin's devices stay in capacity (kubelet: 5m)")
      ->capture_default_str();
  app.add_option("--time-scale", o.timeScale,
                 "divides every pod run duration (300 s jobs at 100 run 3 s)")
      ->check(CLI::Range(0.001, 1e6))
      ->capture_default_str();
  app.add_option("--cpu", cpu, "cpu capacity (quantity)")->capture_default_str();
  app.add_option("--memory", memory, "memory capacity (quantity)")->capture_default_str();
  app.add_option("--ephemeral-storage", ephemeral, "ephemeral-storage capacity (quantity)")
      ->capture_default_str();
  app.add_option("--max-pods", maxPods, "pods capacity")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  app.add_option("--node-labels", nodeLabels, "extra labels, key=value,...");
  app.add_option("--register-with-taints", taints, "taints, key[=value]:Effect,...");
  kc::obs::addServingFlags(app, daemon);
  app.add_flag("--enable-debugging-handlers", debugging,
               "serve POST /debug/simulate-restart and POST /debug/sync-node-status");
  kc::obs::addLogFlags(app, daemon);
  kc::cli::addVersionFlag(app, "kubelet-standin");
  if (auto exit = kc::cli::parse(app, argc, argv)) {
    return *exit;
  }

  if (!kc::obs::setupDaemonLogging("kubelet-standin", daemon)) {
    return 2;
  }
  if (!kc::kubelet::isDnsSubdomain(o.nodeName)) {
    return fail("--node-name '" + o.nodeName + "' is not a valid Node name (DNS-1123 subdomain)");
  }
  auto parseDuration = [](const std::string& flag, const std::string& text,
                          std::chrono::milliseconds& out) -> std::string {
    auto d = kc::kubelet::parseGoDuration(text);
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
       {std::tuple{"--node-status-update-frequency", &statusFreq, &o.nodeStatusUpdateFrequency},
        std::tuple{"--node-status-report-frequency", &reportFreq, &o.nodeStatusReportFrequency},
        std::tuple{"--device-plugin-stop-grace", &stopGrace, &o.endpointStopGrace}}) {
    if (auto err = parseDuration(flag, *text, *out); !err.empty()) {
      return fail(err);
    }
  }
  o.leaseDurationSeconds = leaseDuration;
  o.leaseRenewInterval = std::chrono::milliseconds(leaseDuration * 250);
  for (auto [name, text] : {std::pair{"cpu", &cpu}, std::pair{"memory", &memory},
                            std::pair{"ephemeral-storage", &ephemeral}}) {
    auto amount = kc::alloc::parseResourceAmount(name, *text);
    if (!amount) {
      return fail(std::string("--") + name + ": " + amount.error().message);
    }
    o.capacity[name] = *amount;
  }
  o.capacity["pods"] = maxPods;
  auto labels = kc::kubelet::parseLabels(nodeLabels);
  if (!labels) {
    return fail("--node-labels: " + labels.error().message);
  }
  o.labels = *labels;
  auto taintList = kc::kubelet::parseTaints(taints);
  if (!taintList) {
    return fail("--register-with-taints: " + taintList.error().message);
  }
  o.taints = *taintList;
  for (const auto* p : {&o.devicePluginDir, &o.podResourcesSocket, &o.rootDir}) {
    if (p->empty() || p->front() != '/') {
      return fail("'" + *p + "' is not an absolute path");
    }
  }

  auto client = kc::kube::setUpClient(kubeconfig, {}, kc::kube::processEnv(), "kubeconfig");
  if (!client) {
    return fail(client.error().message);
  }

  // SIGHUP = simulated restart, picked up by a thread below; blocked before any thread exists.
  sigset_t hup;
  sigemptyset(&hup);
  sigaddset(&hup, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &hup, nullptr);

  kc::obs::Metrics metrics;
  kc::obs::HealthChecks health;
  kc::kubelet::KubeletStandin standin(**client, o, &metrics);
  health.addReadinessCheck("node-registered-and-pods-listed", [&standin]() -> kc::Status {
    if (standin.ready()) {
      return kc::okStatus();
    }
    return kc::makeError(kc::errc::kUnavailable, "node not registered or pods not listed yet");
  });
  if (auto st = standin.start(); !st) {
    std::cerr << "kubelet-standin: " << st.error().message << "\n";
    return 1;
  }
  kc::obs::DaemonHttp http("kubelet-standin", daemon.listen, daemon.port, health, metrics);
  kc::kubelet::installControlEndpoints(http.server(), standin, debugging);
  auto port = http.server().start();  // its own error line below, as kubelet's
  if (!port) {
    standin.stop();
    std::cerr << "kubelet-standin: cannot serve on " << daemon.listen << ":" << daemon.port << ": "
              << port.error().message << "\n";
    return 1;
  }

  std::atomic<bool> done{false};
  std::thread hupThread([&] {
    timespec tick{0, 200'000'000};
    while (!done.load()) {
      if (sigtimedwait(&hup, nullptr, &tick) == SIGHUP) {
        if (auto st = standin.simulateRestart(); !st) {
          spdlog::error("simulated restart failed: {}", st.error().message);
        }
      }
    }
  });

  // Ready for tests once the port file is there: the sockets exist; the Node appears within one
  // API round trip.
  const int status =
      kc::obs::runUntilSignalled({.name = "kubelet-standin",
                                  .steps = {.health = &health,
                                            .stop =
                                                [&] {
                                                  standin.stop();
                                                  http.stop(std::chrono::seconds(2));
                                                }},
                                  .portFile = daemon.portFile,
                                  .port = *port,
                                  .serving = [&] {
                                    std::cout << "kubelet-standin (TEST DOUBLE) node=" << o.nodeName
                                              << " healthz=" << http.baseUrl()
                                              << " registration=" << standin.registrationSocket()
                                              << " pod-resources=" << o.podResourcesSocket
                                              << std::endl;
                                  }});
  done = true;
  hupThread.join();
  return status;
}
