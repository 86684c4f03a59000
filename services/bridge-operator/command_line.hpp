#pragma once
// bridge-operator's command line (issue 23, the options pattern): flags -> validated options.
// main() only builds and runs what this returns.

#include <chrono>
#include <variant>

#include "libcore/net/http_server.hpp"
#include "libcore/obs/daemon_flags.hpp"
#include "services/bridge-operator/hook_decision.hpp"

namespace kc::bridge {

struct CommandLine {
  DecisionConfig decision;
  net::ServerOptions server;  // address, port, limits, TLS
  obs::DaemonFlags daemon;
  std::chrono::milliseconds shutdownDelay{0};  // SIGTERM: keep serving with /readyz failing
  std::chrono::milliseconds drain{10'000};     // then wait for in-flight requests
};

// Parses and validates argv (flags also from BRIDGE_OPERATOR_*) and sets up logging from it.
// An int: the process ends with it (0 after --help / --version, 2 after a usage error).
std::variant<int, CommandLine> parseCommandLine(int argc, const char* const* argv);

}  // namespace kc::bridge
