#pragma once
// rt-kubelet-shim's command line (issue 23, the options pattern): flags -> validated options.
// main() only builds (shim_server.hpp) and runs.

#include <chrono>
#include <string>
#include <variant>

#include "libcore/obs/daemon_flags.hpp"
#include "services/rt-kubelet-shim/rt_cgroups.hpp"
#include "services/rt-kubelet-shim/shim.hpp"

namespace kc::rtshim {

struct CommandLine {
  std::string socket;   // ours, kubelet's --container-runtime-endpoint (no unix:// prefix)
  std::string runtime;  // the real runtime's CRI socket (no unix:// prefix)
  ShimOptions shim;
  RtCgroupOptions cgroups;
  std::string kubeconfig;
  bool noApi = false;  // publish nothing to the API server
  obs::DaemonFlags daemon;
  std::chrono::milliseconds stopGrace{5000};        // SIGTERM: in-flight CRI calls get this long
  std::chrono::milliseconds runtimeConnect{10000};  // wait this long for the runtime at start
};

// Parses and validates argv (the node name defaults to $NODE_NAME) and sets up logging from it.
// An int: the process ends with it (0 after --help / --version, 2 after a usage error).
std::variant<int, CommandLine> parseCommandLine(int argc, const char* const* argv);

}  // namespace kc::rtshim
