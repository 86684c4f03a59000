// bridge-pod: runs one BridgeJob on its remote workload manager (one backend per image,
// chosen with --backend / BRIDGE_BACKEND). Reads and writes only its ConfigMap, and records
// Events about its BridgeJob (job_events.hpp). Thin main:
// command line (command_line.hpp) -> backend + store -> runBridgePod (SIGTERM stops it early,
// runner.hpp). Exit 0: the job is DONE; 1: any other end; 2: bad flags.

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <array>

#include "libcore/kube/client.hpp"
#include "libcore/kube/config.hpp"
#include "libcore/obs/shutdown.hpp"
#include "services/bridge-pod/command_line.hpp"
#include "services/bridge-pod/job_events.hpp"
#include "services/bridge-pod/job_store.hpp"
#include "services/bridge-pod/runner.hpp"

int main(int argc, char** argv) {
  auto parsed = kc::bridge::pod::parseCommandLine(argc, argv);
  if (const int* exit = std::get_if<int>(&parsed)) {
    return *exit;
  }
  const kc::bridge::pod::CommandLine& c = std::get<kc::bridge::pod::CommandLine>(parsed);
  auto cluster = kc::kube::loadDefaultConfig(kc::kube::processEnv());
  if (!cluster.ok()) {
    spdlog::error("Kubernetes API configuration: {}", cluster.error().message);
    return 1;
  }
  auto kube = kc::kube::KubeClient::create(*cluster);
  if (!kube.ok()) {
    spdlog::error("Kubernetes client: {}", kube.error().message);
    return 1;
  }
  kc::bridge::pod::ConfigMapStore store(**kube, c.ns, c.configMap);

  // SIGTERM (the pod deleted or evicted): the runner stops at its next wait and releases the
  // backend's session; the remote job keeps running for a replacement pod.
  kc::bridge::pod::StopRequest stop;
  kc::obs::ShutdownHandler shutdown({.stop = [&] { stop.request(); }});
  if (auto s = shutdown.install(); !s.ok()) {
    spdlog::error("signal handling: {}", s.error().message);
    return 1;
  }
  // Events about the BridgeJob (an expired credential), reported as this pod (its host name).
  std::array<char, 256> host{};
  ::gethostname(host.data(), host.size() - 1);
  kc::bridge::pod::KubeJobEvents events(**kube, host.data());
  kc::bridge::pod::RunnerOptions runner = c.runner;
  runner.stop = &stop;
  runner.events = &events;
  return kc::bridge::pod::runBridgePod(store, kc::bridge::pod::makeBackendFactory(c.backend),
                                       runner);
}
