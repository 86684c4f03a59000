#pragma once
// kubecomp-sched's command line (issue 23, the options pattern): flags -> validated options.
// main() only builds and runs what this returns.

#include <string>
#include <variant>

#include "libcore/kube/client.hpp"
#include "libcore/obs/daemon_flags.hpp"
#include "services/kubecomp-sched/scheduler.hpp"

namespace kc::sched {

struct CommandLine {
  SchedulerOptions scheduler;
  kube::KubeClientOptions client;  // qps, burst, user agent
  std::string kubeconfig;
  obs::DaemonFlags daemon;
  std::string summary;  // "policy eq1, queue backfill, composable", for the start line
};

// Parses and validates argv and sets up logging from it. An int: the process ends with it
// (0 after --help / --version, 2 after a usage error, written to stdout / stderr).
std::variant<int, CommandLine> parseCommandLine(int argc, const char* const* argv);

}  // namespace kc::sched
