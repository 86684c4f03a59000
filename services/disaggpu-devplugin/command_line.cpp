#include "services/disaggpu-devplugin/command_line.hpp"

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>

#include "libcore/cli/flags.hpp"
#include "libcore/node/host_scan.hpp"
#include "services/disaggpu-devplugin/host_check.hpp"

namespace kc::devplugin {

namespace {

// --mode and the DRA mode's directories.
void addModeFlags(CLI::App& app, CommandLine& c) {
  app.add_option("--mode", c.mode,
                 "device-plugin: kubelet's device plugin API (resource kubecomp.io/gpu); dra: "
                 "kubelet's DRA plugin API for driver gpu.kubecomp.io (Kubernetes >= 1.34; "
                 "v1beta1 for 1.32-1.33)")
      ->check(CLI::IsMember({"device-plugin", "dra"}))
      ->capture_default_str();
  app.add_option("--plugins-registry-dir", c.dra.registryDir,
                 "dra: kubelet's plugin watcher directory (our registration socket goes here)")
      ->capture_default_str();
  app.add_option("--dra-plugin-dir", c.dra.pluginDir,
                 "dra: our directory (dra.sock, checkpoint.json); must exist")
      ->capture_default_str();
}

// The host view and how devices are named to the runtime (both modes).
void addHostFlags(CLI::App& app, DevPluginOptions& o, double& hostScanSec, double& rescanSec,
                  std::string& strategy) {
  app.add_flag("--hot-remove", o.hostActions.hotRemove,
               "remove a drained, unused GPU from the PCI bus before reconfig-mgr detaches it "
               "(never one whose device node a process holds open; needs the host's /proc, "
               "CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH to see every process, and a writable /sys)");
  app.add_option("--rescan-after-seconds", rescanSec,
                 "rescan the PCI bus when a GPU the GPUPool says is attached here has not shown "
                 "on the host for this long (0: never; needs a writable /sys)")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  app.add_option("--host-check", o.hostCheck,
                 "offer a GPU only when this host sees it (sysfs, /proc/driver/nvidia) with the "
                 "UUID the GPUPool names; false only on development nodes without GPUs")
      ->default_str("true");
  app.add_option("--sysfs-root", o.host.roots.sysfs, "where sysfs is mounted (host view)")
      ->capture_default_str();
  app.add_option("--procfs-root", o.host.roots.procfs, "where the host's procfs is mounted")
      ->capture_default_str();
  app.add_option("--dev-root", o.host.roots.dev, "the host's /dev (device nodes in CDI specs)")
      ->capture_default_str();
  app.add_option("--host-scan-interval-seconds", hostScanSec,
                 "scan the host view this often (a GPU gone from the bus turns Unhealthy)")
      ->check(CLI::Range(0.05, 3600.0))
      ->capture_default_str();
  app.add_option("--device-list-strategy", strategy,
                 "how Allocate names devices: envvar (NVIDIA_VISIBLE_DEVICES) or cdi-cri (also "
                 "CDI names; kubelet >= 1.28 and a CDI-enabled runtime; needs --host-check)")
      ->check(CLI::IsMember({"envvar", "cdi-cri"}))
      ->capture_default_str();
  app.add_option("--cdi-spec-dir", o.cdiDir, "where CDI specs are written")->capture_default_str();
}

// The chosen mode's options from the shared ones, validated. False: a message was logged.
bool finishMode(CommandLine& c) {
  const DevPluginOptions& o = c.plugin;
  if (c.mode != "dra") {
    if (auto s = devplugin::validate(o.registrar); !s) {
      spdlog::critical("{}", s.error().message);
      return false;
    }
    return true;
  }
  c.dra.nodeName = o.nodeName;
  c.dra.host = o.host;
  c.dra.hostActions = o.hostActions;
  c.dra.cdiDir = o.cdiDir;
  c.dra.stopGrace = o.registrar.stopGrace;
  if (!o.hostCheck) {
    spdlog::critical(
        "--mode dra needs --host-check=true (a claim's CDI spec names each GPU's "
        "device node, known only from the host view)");
    return false;
  }
  if (auto s = devplugin::validate(c.dra); !s) {
    spdlog::critical("{}", s.error().message);
    return false;
  }
  return true;
}

}  // namespace

std::variant<int, CommandLine> parseCommandLine(int argc, const char* const* argv) {
  CLI::App app{
      "disaggpu-devplugin: kubelet device plugin (v1beta1) advertising the composable GPUs that\n"
      "the GPUPool status shows attached to this node (resource kubecomp.io/gpu). Runs as a\n"
      "DaemonSet, one per node; reads GPUPools from the API server, in-use devices from\n"
      "kubelet's PodResources API, and publishes usage on its Node (annotation\n"
      "kubecomp.io/gpu-usage) for reconfig-mgr. With --mode dra it is instead the kubelet DRA\n"
      "plugin of driver gpu.kubecomp.io (plugin watcher registration, NodePrepareResources\n"
      "writing CDI specs). Either way a GPU is offered only when this host sees it."};
  CommandLine c;
  DevPluginOptions& o = c.plugin;
  obs::DaemonFlags& daemon = c.daemon;
  daemon.port = 9410;
  double pollSec = 1.0;
  double stopGraceSec = 2.0;
  bool noInotify = false;
  app.add_option("--node-name", o.nodeName, "this node's name")->envname("NODE_NAME");
  addModeFlags(app, c);
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
  double hostScanSec = 1.0;
  std::string strategy = "envvar";
  double rescanSec = 0;
  addHostFlags(app, o, hostScanSec, rescanSec, strategy);
  obs::addServingFlags(app, daemon);
  app.add_option("--stop-grace-seconds", stopGraceSec,
                 "on SIGTERM, in-flight gRPC calls get this long")
      ->check(CLI::Range(0.0, 60.0))
      ->capture_default_str();
  obs::addLogFlags(app, daemon);
  bool printHostView = false;
  app.add_flag("--print-host-view", printHostView,
               "print what this host shows of its NVIDIA GPUs (JSON, from --sysfs-root and "
               "--procfs-root) and exit");
  cli::addVersionFlag(app, "disaggpu-devplugin");
  if (auto exit = obs::parseDaemonArgs(app, argc, argv)) {
    return *exit;
  }
  if (printHostView) {
    std::cout << hostViewJson(node::scanHost(o.host.roots)).dump(2) << "\n";
    return 0;
  }
  if (!obs::setupDaemonLogging("disaggpu-devplugin", daemon)) {
    return 2;
  }
  o.usage.pollInterval = std::chrono::milliseconds(static_cast<std::int64_t>(pollSec * 1000));
  o.host.interval = std::chrono::milliseconds(static_cast<std::int64_t>(hostScanSec * 1000));
  o.hostActions.rescanAfter =
      std::chrono::milliseconds(static_cast<std::int64_t>(rescanSec * 1000));
  o.strategy = strategy == "cdi-cri" ? DeviceListStrategy::kCdiCri : DeviceListStrategy::kEnvvar;
  if ((o.hostActions.hotRemove || o.hostActions.rescanAfter.count() > 0) && !o.hostCheck) {
    spdlog::critical("--hot-remove and --rescan-after-seconds need --host-check=true");
    return 2;
  }
  if (o.strategy == DeviceListStrategy::kCdiCri && !o.hostCheck) {
    spdlog::critical("--device-list-strategy cdi-cri needs --host-check=true (device minors)");
    return 2;
  }
  o.registrar.useInotify = !noInotify;
  o.registrar.stopGrace = std::chrono::milliseconds(static_cast<std::int64_t>(stopGraceSec * 1000));
  if (o.nodeName.empty()) {
    spdlog::critical("no node name: set --node-name or NODE_NAME (fieldRef spec.nodeName)");
    return 2;
  }
  if (!finishMode(c)) {
    return 2;
  }
  return c;
}

}  // namespace kc::devplugin
