#include "libcore/obs/daemon_flags.hpp"

#include <CLI/CLI.hpp>
#include <iostream>

#include "libcore/cli/flags.hpp"
#include "libcore/obs/log.hpp"

namespace kc::obs {
namespace {

// The presentation every shared flag gets: its environment variable, its default in --help.
CLI::Option* styled(CLI::Option* option, const DaemonFlagStyle& style, std::string_view envSuffix) {
  if (!style.envPrefix.empty() && !envSuffix.empty()) {
    option->envname(style.envPrefix + std::string(envSuffix));
  }
  if (style.showDefaults) {
    option->capture_default_str();
  }
  return option;
}

}  // namespace

void addListenFlags(CLI::App& app, DaemonFlags& flags) {
  const DaemonFlagStyle& s = flags.style;
  styled(app.add_option(s.listenFlag, flags.listen, s.listenHelp), s, "LISTEN");
  if (s.listenFlag == "--bind-address") {
    // The daemons' name for it until this release.
    cli::addDeprecatedFlag(app, "--listen", "--bind-address",
                           [&flags](const std::string& v) { flags.listen = v; });
  }
  styled(app.add_option(s.portFlag, flags.port, s.portHelp), s, "PORT");
}

void addPortFileFlag(CLI::App& app, DaemonFlags& flags) {
  // No default to show (none written) and no environment variable: tests pass it explicitly.
  app.add_option("--port-file", flags.portFile, flags.style.portFileHelp);
}

void addServingFlags(CLI::App& app, DaemonFlags& flags) {
  addListenFlags(app, flags);
  addPortFileFlag(app, flags);
}

void addLogFlags(CLI::App& app, DaemonFlags& flags) {
  const DaemonFlagStyle& s = flags.style;
  styled(app.add_option("--log-level", flags.logLevel, s.logLevelHelp), s, "LOG_LEVEL");
  CLI::Option* format =
      styled(app.add_option("--log-format", flags.logFormat, "text or json"), s, "LOG_FORMAT");
  if (s.checkLogFormat) {
    format->check(CLI::IsMember({"text", "json"}));
  }
}

std::optional<int> parseDaemonArgs(CLI::App& app, int argc, const char* const* argv,
                                   std::ostream& out, std::ostream& err) {
  return cli::parse(app, argc, argv, out, err);
}

std::optional<int> parseDaemonArgs(CLI::App& app, int argc, const char* const* argv) {
  return parseDaemonArgs(app, argc, argv, std::cout, std::cerr);
}

bool setupDaemonLogging(std::string_view name, const DaemonFlags& flags, std::ostream& err) {
  auto format = parseLogFormat(flags.logFormat);
  if (!format || !setupLogging({std::string(name), flags.logLevel, *format})) {
    err << flags.style.errorPrefix << "bad --log-level or --log-format\n";
    return false;
  }
  return true;
}

bool setupDaemonLogging(std::string_view name, const DaemonFlags& flags) {
  return setupDaemonLogging(name, flags, std::cerr);
}

}  // namespace kc::obs
