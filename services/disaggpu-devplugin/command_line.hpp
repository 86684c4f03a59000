#pragma once
// disaggpu-devplugin's command line (issue 23, the options pattern): flags -> validated
// options. main() only builds and runs what this returns.

#include <string>
#include <variant>

#include "libcore/obs/daemon_flags.hpp"
#include "services/disaggpu-devplugin/devplugin.hpp"
#include "services/disaggpu-devplugin/dra_node.hpp"

namespace kc::devplugin {

struct CommandLine {
  // "device-plugin" (kubelet's device plugin API, resource kubecomp.io/gpu) or "dra" (kubelet's
  // DRA plugin API for driver gpu.kubecomp.io). One node runs one of them.
  std::string mode = "device-plugin";
  DevPluginOptions plugin;
  DraNodeOptions dra;
  std::string kubeconfig;
  obs::DaemonFlags daemon;
};

// Parses and validates argv (the node name defaults to $NODE_NAME) and sets up logging from it.
// An int: the process ends with it (0 after --help / --version, 2 after a usage error).
std::variant<int, CommandLine> parseCommandLine(int argc, const char* const* argv);

}  // namespace kc::devplugin
