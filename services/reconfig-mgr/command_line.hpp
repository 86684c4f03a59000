#pragma once
// reconfig-mgr's command line (issue 23, the options pattern): flags -> validated options.
// main() only builds and runs what this returns.

#include <string>
#include <variant>

#include "libcore/obs/daemon_flags.hpp"
#include "services/reconfig-mgr/reconfig.hpp"

namespace kc::reconfig {

struct CommandLine {
  ReconfigOptions reconfig;
  std::string kubeconfig;
  obs::DaemonFlags daemon;
};

// Parses and validates argv and sets up logging from it. An int: the process ends with it
// (0 after --help / --version, 2 after a usage error, written to stdout / stderr).
std::variant<int, CommandLine> parseCommandLine(int argc, const char* const* argv);

}  // namespace kc::reconfig
