#pragma once
// disaggpu-devplugin's command line (issue 23, the options pattern): flags -> validated
// options. main() only builds and runs what this returns.

#include <string>
#include <variant>

#include "libcore/obs/daemon_flags.hpp"
#include "services/disaggpu-devplugin/devplugin.hpp"

namespace kc::devplugin {

struct CommandLine {
  DevPluginOptions plugin;
  std::string kubeconfig;
  obs::DaemonFlags daemon;
};

// Parses and validates argv (the node name defaults to $NODE_NAME) and sets up logging from it.
// An int: the process ends with it (0 after --help / --version, 2 after a usage error).
std::variant<int, CommandLine> parseCommandLine(int argc, const char* const* argv);

}  // namespace kc::devplugin
