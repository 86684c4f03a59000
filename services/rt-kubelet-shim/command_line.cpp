#include "services/rt-kubelet-shim/command_line.hpp"

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdlib>

#include "libcore/alloc/rt_pod.hpp"
#include "libcore/cli/flags.hpp"

namespace kc::rtshim {
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

std::variant<int, CommandLine> parseCommandLine(int argc, const char* const* argv) {
  CLI::App app{
      "rt-kubelet-shim: CRI proxy for real-time containers. kubelet's\n"
      "--container-runtime-endpoint points at --socket; every runtime.v1 call is forwarded\n"
      "unchanged to --runtime-endpoint (containerd, CRI-O). For pods annotated\n"
      "rt.kubecomp.io/runtime-us, period-us, cpus it chooses cores, sets the cpuset and gives the\n"
      "container cgroup its RT budget (cgroup v1, top-down) before the container starts.\n"
      "Publishes RT capability on its Node (label rt.kubecomp.io/capable) and the cores each\n"
      "pod holds (pod annotation rt.kubecomp.io/assigned)."};
  CommandLine c;
  std::string& socket = c.socket;
  std::string& runtime = c.runtime;
  ShimOptions& o = c.shim;
  RtCgroupOptions& cg = c.cgroups;
  obs::DaemonFlags& daemon = c.daemon;
  daemon.port = 9420;
  double stopGraceSec = 5.0;
  double connectSec = 10.0;
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
  app.add_option("--node-name", o.nodeName, "this node's name")->envname("NODE_NAME");
  app.add_option("--kubeconfig", c.kubeconfig, cli::kKubeconfigHelp);
  app.add_flag("--no-api", c.noApi, "publish nothing to the API server (node-local use, tests)");
  app.add_option("--runtime-connect-seconds", connectSec, "wait this long for the runtime at start")
      ->check(CLI::Range(0.1, 600.0))
      ->capture_default_str();
  obs::addServingFlags(app, daemon);
  app.add_option("--stop-grace-seconds", stopGraceSec,
                 "on SIGTERM, in-flight CRI calls get this long")
      ->check(CLI::Range(0.0, 120.0))
      ->capture_default_str();
  obs::addLogFlags(app, daemon);
  cli::addVersionFlag(app, "rt-kubelet-shim");
  if (auto exit = obs::parseDaemonArgs(app, argc, argv)) {
    return *exit;
  }
  if (!obs::setupDaemonLogging("rt-kubelet-shim", daemon)) {
    return 2;
  }
  socket = stripUnix(socket);
  runtime = stripUnix(runtime);
  if (auto s = rtshim::RtShim::validate(o); !s) {
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
    if (auto l = alloc::parseCpuList(cg.rtCores); !l) {
      spdlog::critical("--rt-cores: {}", l.error().message);
      return 2;
    }
  }
  if (!c.noApi && o.nodeName.empty()) {
    spdlog::critical("no node name: set --node-name or NODE_NAME (or --no-api)");
    return 2;
  }
  c.stopGrace = std::chrono::milliseconds(static_cast<std::int64_t>(stopGraceSec * 1000));
  c.runtimeConnect = std::chrono::milliseconds(static_cast<std::int64_t>(connectSec * 1000));
  return c;
}

}  // namespace kc::rtshim
