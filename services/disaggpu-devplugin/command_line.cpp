#include "services/disaggpu-devplugin/command_line.hpp"

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdlib>

#include "libcore/cli/flags.hpp"

namespace kc::devplugin {

std::variant<int, CommandLine> parseCommandLine(int argc, const char* const* argv) {
  CLI::App app{
      "disaggpu-devplugin: kubelet device plugin (v1beta1) advertising the composable GPUs that\n"
      "the GPUPool status shows attached to this node (resource kubecomp.io/gpu). Runs as a\n"
      "DaemonSet, one per node; reads GPUPools from the API server, in-use devices from\n"
      "kubelet's PodResources API, and publishes usage on its Node (annotation\n"
      "kubecomp.io/gpu-usage) for reconfig-mgr."};
  CommandLine c;
  DevPluginOptions& o = c.plugin;
  obs::DaemonFlags& daemon = c.daemon;
  daemon.port = 9410;
  double pollSec = 1.0;
  double stopGraceSec = 2.0;
  bool noInotify = false;
  app.add_option("--node-name", o.nodeName, "this node's name")->envname("NODE_NAME");
  app.add_option("--kubeconfig", c.kubeconfig, cli::kKubeconfigHelp);
  app.add_option("--device-plugin-dir", o.registrar.pluginDir,
                 "kubelet's device-plugin directory (our socket and kubelet.sock live here)")
      ->capture_default_str();
  app.add_option("--socket-name", o.registrar.socketName,
                 "our socket's file name in --device-plugin-dir")
      ->capture_default_str();
  app.add_option("--kubelet-socket", o.registrar.kubeletSocket,
                 "kubelet's Registration socket (default: <device-plugin-dir>/kubelet.sock)");
  app.add_option("--resource-name", o.registrar.resourceName, "extended resource advertised")
      ->capture_default_str();
  app.add_option("--pod-resources-socket", o.podResourcesSocket,
                 "kubelet's PodResources API socket")
      ->capture_default_str();
  app.add_option("--pod-resources-interval-seconds", pollSec,
                 "read PodResources at least this often (and at once on any change)")
      ->check(CLI::Range(0.05, 3600.0))
      ->capture_default_str();
  app.add_flag("--no-inotify", noInotify,
               "notice kubelet restarts by checking the sockets every 200 ms only");
  obs::addServingFlags(app, daemon);
  app.add_option("--stop-grace-seconds", stopGraceSec,
                 "on SIGTERM, in-flight gRPC calls get this long")
      ->check(CLI::Range(0.0, 60.0))
      ->capture_default_str();
  obs::addLogFlags(app, daemon);
  cli::addVersionFlag(app, "disaggpu-devplugin");
  if (auto exit = obs::parseDaemonArgs(app, argc, argv)) {
    return *exit;
  }
  if (!obs::setupDaemonLogging("disaggpu-devplugin", daemon)) {
    return 2;
  }
  o.usage.pollInterval = std::chrono::milliseconds(static_cast<std::int64_t>(pollSec * 1000));
  o.registrar.useInotify = !noInotify;
  o.registrar.stopGrace = std::chrono::milliseconds(static_cast<std::int64_t>(stopGraceSec * 1000));
  if (o.nodeName.empty()) {
    spdlog::critical("no node name: set --node-name or NODE_NAME (fieldRef spec.nodeName)");
    return 2;
  }
  if (auto s = devplugin::validate(o.registrar); !s) {
    spdlog::critical("{}", s.error().message);
    return 2;
  }
  return c;
}

}  // namespace kc::devplugin
