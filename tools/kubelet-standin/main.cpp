// kubelet-standin: a kubelet TEST DOUBLE for one simulated node. Thin main: flags -> library
// -> run. See docs/kubelet-standin.md.

#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <iostream>
#include <thread>
#include <variant>

#include "libcore/cli/flags.hpp"
#include "libcore/kube/client_setup.hpp"
#include "libcore/obs/daemon.hpp"
#include "libcore/obs/daemon_flags.hpp"
#include "libcore/obs/health.hpp"
#include "tools/kubelet-standin/command_line.hpp"
#include "tools/kubelet-standin/control.hpp"
#include "tools/kubelet-standin/standin.hpp"

int main(int argc, char** argv) {
  auto parsed = kc::kubelet::parseCommandLine(argc, argv);
  if (const int* exit = std::get_if<int>(&parsed)) {
    return *exit;
  }
  auto& c = std::get<kc::kubelet::CommandLine>(parsed);
  const kc::kubelet::StandinOptions& o = c.standin;
  const kc::obs::DaemonFlags& daemon = c.daemon;

  auto client = kc::kube::setUpClient(c.kubeconfig, {}, kc::kube::processEnv(), "kubeconfig");
  if (!client) {
    std::cerr << "kubelet-standin: " << client.error().message << "\n";
    return kc::cli::kExitUsage;
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
  kc::kubelet::installControlEndpoints(http.server(), standin, c.debugging);
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
