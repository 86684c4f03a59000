#pragma once
// bridge-pod's command line (issue 23, the options pattern): flags -> validated options, and
// the backend they choose. main() only builds and runs.

#include <chrono>
#include <string>
#include <variant>

#include "services/bridge-pod/backend.hpp"
#include "services/bridge-pod/quantum_backend.hpp"
#include "services/bridge-pod/runner.hpp"

namespace kc::bridge::pod {

// Which backend this image runs and how it reaches its service.
struct BackendSettings {
  std::string name;  // slurm | ray | quantum | lsf
  std::string credentialsDir = "/credentials";
  std::string caFile;
  std::chrono::seconds slurmTokenLifespan{600};
  std::string slurmSharedRoot;
  std::string slurmApiVersion = "auto";
  std::string iamUrl = kDefaultIamUrl;
};

struct CommandLine {
  BackendSettings backend;
  RunnerOptions runner;
  std::string configMap;
  std::string ns;
};

// Parses and validates argv (flags also from BRIDGE_*) and sets up logging from it. An int:
// the process ends with it (0 after --help / --version, 2 after a usage error).
std::variant<int, CommandLine> parseCommandLine(int argc, const char* const* argv);

// The factory runBridgePod calls with the job's parameters (its resourceURL).
BackendFactory makeBackendFactory(const BackendSettings& settings);

}  // namespace kc::bridge::pod
