// rt-kubelet-shim: a CRI proxy between kubelet and containerd / CRI-O that gives real-time pods
// (annotations rt.kubecomp.io/runtime-us, period-us, cpus) their cores and cgroup RT budget
// before the workload starts. Thin main: flags -> library -> run.

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdlib>

#include "libcore/cli/flags.hpp"
#include "libcore/grpc/channel.hpp"
#include "libcore/grpc/unix_server.hpp"
#include "libcore/kube/client_setup.hpp"
#include "libcore/obs/daemon.hpp"
#include "libcore/obs/daemon_flags.hpp"
#include "libcore/obs/health.hpp"
#include "services/rt-kubelet-shim/cri_proxy.hpp"
#include "services/rt-kubelet-shim/shim.hpp"

namespace {
std::string stripUnix(std::string s) {
  if (s.starts_with("unix://")) {
    return s.substr(7);
  }
  if (s.starts_with("unix:")) {
    return s.substr(5);
  }
  return s;
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "rt-kubelet-shim: CRI proxy for real-time containers. kubelet's\n"
      "--container-runtime-endpoint points at --socket; every runtime.v1 call is forwarded\n"
      "unchanged to --runtime-endpoint (containerd, CRI-O). For pods annotated\n"
      "rt.kubecomp.io/runtime-us, period-us, cpus it chooses cores, sets the cpuset and gives the\n"
      "container cgroup its RT budget (cgroup v1, top-down) before the container starts.\n"
      "Publishes RT capability on its Node (label rt.kubecomp.io/capable) and the cores each\n"
      "pod holds (pod annotation rt.kubecomp.io/assigned)."};
  std::string socket = "/var/run/rt-kubelet-shim/cri.sock";
  std::string runtime = "/run/containerd/containerd.sock";
  kc::rtshim::ShimOptions o;
  kc::rtshim::RtCgroupOptions cg;
  std::string kubeconfig;
  bool noApi = false;
  kc::obs::DaemonFlags daemon{.port = 9420};
  double stopGraceSec = 5.0;
  double connectSec = 10.0;
  if (const char* n = std::getenv("NODE_NAME"); n != nullptr) {
    o.nodeName = n;
  }
  app.add_option("--socket", socket, "our CRI socket (kubelet's --container-runtime-endpoint)")
      ->capture_default_str();
  app.add_option("--runtime-endpoint", runtime, "the real runtime's CRI socket")
      ->capture_default_str();
  app.add_option("--packing", o.packing,
                 "core choice: first-fit (agrees with kubecomp-sched) or worst-fit")
      ->capture_default_str();
  app.add_option("--rt-cores", cg.rtCores, "CPUs offered to RT containers (default: all online)");
  app.add_option("--cgroup-cpu-root", cg.cpuRoot, "cgroup v1 cpu controller mount")
      ->capture_default_str();
  app.add_option("--cgroup-cpuset-root", cg.cpusetRoot, "cgroup v1 cpuset controller mount")
      ->capture_default_str();
  app.add_option("--node-name", o.nodeName, "this node's name (default: $NODE_NAME)");
  app.add_option("--kubeconfig", kubeconfig,
                 "kubeconfig file (default: in-cluster config, else $KUBECONFIG / ~/.kube/config)");
  app.add_flag("--no-api", noApi, "publish nothing to the API server (node-local use, tests)");
  app.add_option("--runtime-connect-seconds", connectSec, "wait this long for the runtime at start")
      ->check(CLI::Range(0.1, 600.0))
      ->capture_default_str();
  kc::obs::addServingFlags(app, daemon);
  app.add_option("--stop-grace-seconds", stopGraceSec,
                 "on SIGTERM, in-flight CRI calls get this long")
      ->check(CLI::Range(0.0, 120.0))
      ->capture_default_str();
  kc::obs::addLogFlags(app, daemon);
  kc::cli::addVersionFlag(app, "rt-kubelet-shim");
  if (auto exit = kc::obs::parseDaemonArgs(app, argc, argv)) {
    return *exit;
  }
  if (!kc::obs::setupDaemonLogging("rt-kubelet-shim", daemon)) {
    return 2;
  }
  socket = stripUnix(socket);
  runtime = stripUnix(runtime);
  if (auto s = kc::rtshim::RtShim::validate(o); !s) {
    spdlog::critical("{}", s.error().message);
    return 2;
  }
  if (runtime.empty() || runtime.front() != '/') {
    spdlog::critical("--runtime-endpoint must be an absolute unix socket path, got '{}'", runtime);
    return 2;
  }
  if (runtime == socket) {
    spdlog::critical("--runtime-endpoint and --socket are the same path");
    return 2;
  }
  if (!cg.rtCores.empty()) {
    if (auto l = kc::alloc::parseCpuList(cg.rtCores); !l) {
      spdlog::critical("--rt-cores: {}", l.error().message);
      return 2;
    }
  }
  std::unique_ptr<kc::kube::KubeClient> client;
  if (!noApi) {
    if (o.nodeName.empty()) {
      spdlog::critical("no node name: set --node-name or NODE_NAME (or --no-api)");
      return 2;
    }
    auto c = kc::kube::setUpClient(kubeconfig);
    if (!c) {
      spdlog::critical("{}", c.error().message);
      return 2;
    }
    client = std::move(*c);
  }

  const kc::rtshim::RtSupport support = kc::rtshim::detectRtSupport(cg);
  if (support.capable) {
    spdlog::info("RT support: {}", support.reason);
  } else {
    spdlog::warn("no RT support, real-time pods will be refused: {}", support.reason);
  }

  kc::obs::Metrics metrics;
  kc::obs::HealthChecks health;
  kc::rtshim::RtShim shim(o, support, cg, client.get(), &metrics);

  auto channel = kc::grpcx::dialUnix(runtime);
  if (auto s = kc::grpcx::waitConnected(
          *channel, std::chrono::milliseconds(static_cast<std::int64_t>(connectSec * 1000)),
          "runtime " + runtime);
      !s) {
    spdlog::critical("{}", s.error().message);
    return 1;
  }
  if (auto s = shim.rebuild(*channel); !s) {
    spdlog::critical("{}", s.error().message);
    return 1;
  }
  kc::rtshim::CriProxy proxy(
      channel, &shim,
      [&](const std::string& m, grpc::StatusCode c, double s) { shim.observeCall(m, c, s); });
  kc::grpcx::UnixServerOptions so;
  so.path = socket;
  so.maxReceiveBytes = 16 << 20;
  kc::grpcx::UnixServer server(so);
  server.setGenericService(&proxy);

  health.addLivenessCheck("cri-socket", [&]() -> kc::Status {
    if (!server.socketPresent()) {
      return kc::makeError(kc::errc::kUnavailable, "our socket " + socket + " is gone");
    }
    return kc::okStatus();
  });
  health.addReadinessCheck("runtime", [&]() -> kc::Status {
    const auto st = channel->GetState(true);
    if (st == GRPC_CHANNEL_TRANSIENT_FAILURE || st == GRPC_CHANNEL_SHUTDOWN) {
      return kc::makeError(kc::errc::kUnavailable, "runtime " + runtime + " unreachable");
    }
    return kc::okStatus();
  });
  health.addReadinessCheck("rebuilt", [&]() -> kc::Status {
    return shim.ready() ? kc::okStatus() : kc::makeError(kc::errc::kUnavailable, "rebuilding");
  });

  kc::obs::DaemonHttp http("rt-kubelet-shim", daemon.listen, daemon.port, health, metrics);
  auto bound = http.start();
  if (!bound) {
    return 1;
  }
  if (auto s = server.start(); !s) {
    spdlog::critical("{}", s.error().message);
    http.stop(std::chrono::milliseconds(0));
    return 1;
  }
  spdlog::info("rt-kubelet-shim serving {} -> {} (health/metrics on port {})", socket, runtime,
               *bound);
  return kc::obs::runUntilSignalled(
      {.name = "rt-kubelet-shim",
       .steps = {&health,
                 [&] {
                   server.stop(
                       std::chrono::milliseconds(static_cast<std::int64_t>(stopGraceSec * 1000)));
                   shim.stop();
                 },
                 [&] { http.stop(); }},
       .portFile = daemon.portFile,
       .port = *bound,
       .stoppedNote = "; reservations stay in the cgroups for the next start"});
}
