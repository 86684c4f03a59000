#pragma once
// The start of every daemon's main(), in one place: the flags all of them have (where the
// health/metrics HTTP server listens, the port file tests wait for, how it logs), parsing the
// command line into main()'s exit code, and the logging set-up from those flags.
//
//   kc::obs::DaemonFlags daemon{.port = 9420};
//   ... app.add_option(...) for the daemon's own flags ...
//   kc::obs::addServingFlags(app, daemon);   // --listen --port --port-file
//   kc::obs::addLogFlags(app, daemon);       // --log-level --log-format
//   if (auto exit = kc::obs::parseDaemonArgs(app, argc, argv)) return *exit;
//   if (!kc::obs::setupDaemonLogging("reconfig-mgr", daemon)) return 2;
//
// The flags are added in separate groups because --help lists options in the order they were
// added, and each daemon keeps its own order.

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

namespace CLI {
class App;
}

namespace kc::obs {

// How the shared flags read in --help. The defaults are those of the daemons whose port serves
// only /livez /readyz /metrics; the hook servers (bridge-operator, vni-webhook) serve their API
// on it too, and kubelet-standin keeps kubelet's flag names.
struct DaemonFlagStyle {
  std::string listenFlag = "--bind-address";  // kube-scheduler's name; --listen is its old one
  std::string listenHelp = "bind address of /livez /readyz /metrics";
  std::string portFlag = "--port";
  std::string portHelp = "HTTP port of /livez /readyz /metrics (0 = ephemeral)";
  std::string portFileHelp = "write the bound HTTP port here once serving (tests)";
  std::string logLevelHelp = "trace, debug, info, warn, error, critical or off";
  // Non-empty ("BRIDGE_OPERATOR_"): --listen, --port, --log-level and --log-format are also
  // read from <prefix>LISTEN, <prefix>PORT, <prefix>LOG_LEVEL, <prefix>LOG_FORMAT.
  std::string envPrefix{};
  bool showDefaults = true;             // "--port UINT=9420" rather than "--port UINT"
  bool checkLogFormat = false;          // a --log-format other than text/json is a parse error
  std::string errorPrefix = "error: ";  // before "bad --log-level or --log-format" on stderr
};

// Members have default initializers so that designated initializers may leave any out.
struct DaemonFlags {
  std::string listen = "0.0.0.0";
  std::uint16_t port = 0;  // each daemon sets its own; 0 = ephemeral
  std::string portFile{};  // empty: none written
  std::string logLevel = "info";
  std::string logFormat = "text";
  DaemonFlagStyle style{};
};

// --listen and --port.
void addListenFlags(CLI::App& app, DaemonFlags& flags);
// --port-file.
void addPortFileFlag(CLI::App& app, DaemonFlags& flags);
// --listen, --port, --port-file, in this order.
void addServingFlags(CLI::App& app, DaemonFlags& flags);
// --log-level, --log-format.
void addLogFlags(CLI::App& app, DaemonFlags& flags);

// Parses argv. nullopt: go on. Otherwise main()'s exit code, after CLI11 has written the help
// (to `out`) or what was wrong (to `err`): 0 after --help, 2 after any bad flag or value
// (CLI11's own codes vary by error).
std::optional<int> parseDaemonArgs(CLI::App& app, int argc, const char* const* argv,
                                   std::ostream& out, std::ostream& err);
std::optional<int> parseDaemonArgs(CLI::App& app, int argc,
                                   const char* const* argv);  // std::cout, std::cerr

// Sets up spdlog from --log-level / --log-format under the logger name `name`. On a bad level
// or format writes "<errorPrefix>bad --log-level or --log-format" to `err`, changes nothing and
// returns false (the daemon exits 2).
bool setupDaemonLogging(std::string_view name, const DaemonFlags& flags, std::ostream& err);
bool setupDaemonLogging(std::string_view name, const DaemonFlags& flags);  // err: std::cerr

}  // namespace kc::obs
