// rt-kubelet-shim: a CRI proxy between kubelet and containerd / CRI-O that gives real-time pods
// (annotations rt.kubecomp.io/runtime-us, period-us, cpus) their cores and cgroup RT budget
// before the workload starts. Thin main: command line (command_line.hpp) -> ShimServer
// (shim_server.hpp) -> run.

#include <spdlog/spdlog.h>

#include "libcore/kube/client_setup.hpp"
#include "libcore/obs/daemon.hpp"
#include "libcore/obs/health.hpp"
#include "services/rt-kubelet-shim/command_line.hpp"
#include "services/rt-kubelet-shim/shim_server.hpp"

int main(int argc, char** argv) {
  auto parsed = kc::rtshim::parseCommandLine(argc, argv);
  if (const int* exit = std::get_if<int>(&parsed)) {
    return *exit;
  }
  const kc::rtshim::CommandLine& c = std::get<kc::rtshim::CommandLine>(parsed);
  std::unique_ptr<kc::kube::KubeClient> client;
  if (!c.noApi) {
    auto made = kc::kube::setUpClient(c.kubeconfig);
    if (!made) {
      spdlog::critical("{}", made.error().message);
      return 2;
    }
    client = std::move(*made);
  }
  kc::obs::Metrics metrics;
  kc::obs::HealthChecks health;
  auto server = kc::rtshim::ShimServer::create(c, client.get(), &metrics, health);
  if (!server) {
    spdlog::critical("{}", server.error().message);
    return 1;
  }
  kc::obs::DaemonHttp http("rt-kubelet-shim", c.daemon.listen, c.daemon.port, health, metrics);
  auto bound = http.start();
  if (!bound) {
    return 1;
  }
  if (auto s = (*server)->start(); !s) {
    spdlog::critical("{}", s.error().message);
    http.stop(std::chrono::milliseconds(0));
    return 1;
  }
  spdlog::info("rt-kubelet-shim serving {} -> {} (health/metrics on port {})", c.socket, c.runtime,
               *bound);
  return kc::obs::runUntilSignalled(
      {.name = "rt-kubelet-shim",
       .steps = {&health, [&] { (*server)->stop(c.stopGrace); }, [&] { http.stop(); }},
       .portFile = c.daemon.portFile,
       .port = *bound,
       .stoppedNote = "; reservations stay in the cgroups for the next start"});
}
