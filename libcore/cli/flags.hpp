#pragma once
// What every binary of the suite does the same way with its command line (daemons, test
// doubles, tools): --version, and one set of exit codes for parsing:
//   0  --help or --version answered (on stdout)
//   2  a usage error: an unknown flag (named, before anything else is checked), a missing or
//      bad value; what was wrong on stderr
//   1  (the binary's own) failure after parsing
// Environment-variable fallbacks are declared with envFlag so --help shows them as "(env NAME)".

#include <CLI/CLI.hpp>
#include <chrono>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

#include "libcore/base/result.hpp"

namespace kc::cli {

// --kubeconfig as every binary that talks to an API server describes it (the loader,
// libcore/kube/config.hpp, falls back in this order).
inline constexpr const char* kKubeconfigHelp =
    "kubeconfig file (default: in-cluster config, else $KUBECONFIG / ~/.kube/config)";

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// --version: prints versionLine(binary) and exits 0.
void addVersionFlag(CLI::App& app, std::string_view binary);

// The first argument that looks like a flag (-x, --name, --name=value) that neither `app` nor
// any of its subcommands defines; nullopt when there is none. Arguments after "--" and
// negative numbers are values.
std::optional<std::string> unknownFlag(const CLI::App& app, int argc, const char* const* argv);

// Parses argv. nullopt: go on. Otherwise main()'s exit code, after the help or version text
// (to `out`) or what was wrong (to `err`): 0 after --help / --version, 2 after any usage
// error; an unknown flag is reported as "unknown flag --name" even when a required flag is
// also missing.
std::optional<int> parse(CLI::App& app, int argc, const char* const* argv, std::ostream& out,
                         std::ostream& err);
std::optional<int> parse(CLI::App& app, int argc, const char* const* argv);  // std::cout, std::cerr

// Help group of the old names.
inline constexpr std::string_view kDeprecatedGroup = "Deprecated (removed in the next release)";

// "15s", "1500ms", "1m30s", "2h", "0.5s", "15" (seconds). Error "invalid" otherwise (negative,
// empty, an unknown unit, over a day).
Result<std::chrono::milliseconds> parseDuration(std::string_view text);
// 15000 ms -> "15s", 1500 ms -> "1500ms".
std::string formatDuration(std::chrono::milliseconds d);

// An old flag name kept for one release: it sets what `set` sets and writes
// "flag OLD is deprecated and will be removed in the next release; use NEW" to `warn` when
// given. A value-less old flag (a switch) has takesValue false and `set` gets "".
void addDeprecatedFlag(CLI::App& app, const std::string& oldName, const std::string& newName,
                       std::function<void(const std::string&)> set, bool takesValue = true,
                       std::ostream* warn = nullptr);

}  // namespace kc::cli
