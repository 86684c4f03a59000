#pragma once
// kubelet-standin's command line (the options pattern of docs/architecture.md): flags ->
// validated options; main() only builds and runs what this returns.

#include <string>
#include <variant>

#include "libcore/obs/daemon_flags.hpp"
#include "tools/kubelet-standin/standin.hpp"

namespace kc::kubelet {

struct CommandLine {
  StandinOptions standin;
  std::string kubeconfig;
  obs::DaemonFlags daemon;  // kubelet's names: --address, --healthz-port
  bool debugging = false;   // --enable-debugging-handlers
};

// Parses and validates argv and sets up logging from it. An int: the process ends with it
// (0 after --help / --version, 2 after a usage error, written to stdout / stderr).
std::variant<int, CommandLine> parseCommandLine(int argc, const char* const* argv);

}  // namespace kc::kubelet
