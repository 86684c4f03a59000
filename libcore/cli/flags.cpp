#include "libcore/cli/flags.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>

#include "libcore/cli/version.hpp"

namespace kc::cli {

std::string versionLine(std::string_view binary) {
  return std::string(binary) + " " + std::string(projectVersion()) + " (git " +
         std::string(gitRevision()) + ")";
}

void addVersionFlag(CLI::App& app, std::string_view binary) {
  app.set_version_flag("--version", versionLine(binary),
                       "Print the version and the git revision, then exit");
}

namespace {

bool looksLikeNumber(std::string_view s) {
  if (s.size() < 2 || s[0] != '-') {
    return false;
  }
  char* end = nullptr;
  const std::string text(s);
  std::strtod(text.c_str(), &end);
  return end != nullptr && *end == '\0';
}

bool knows(const CLI::App& app, const std::string& flag) {
  if (app.get_option_no_throw(flag) != nullptr) {
    return true;
  }
  if (flag == "--help" || flag == "-h") {
    return app.get_help_ptr() != nullptr;
  }
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (knows(*sub, flag)) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::optional<std::string> unknownFlag(const CLI::App& app, int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg(argv[i]);
    if (arg == "--") {
      break;
    }
    if (arg.size() < 2 || arg[0] != '-' || looksLikeNumber(arg)) {
      continue;
    }
    std::string flag(arg.substr(0, arg.find('=')));
    if (flag.size() > 2 && flag[1] != '-') {
      flag = flag.substr(0, 2);  // -xVALUE
    }
    if (!knows(app, flag)) {
      return flag;
    }
  }
  return std::nullopt;
}

std::optional<int> parse(CLI::App& app, int argc, const char* const* argv, std::ostream& out,
                         std::ostream& err) {
  if (const auto unknown = unknownFlag(app, argc, argv)) {
    err << "unknown flag " << *unknown << "\nRun with --help for more information.\n";
    return kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e, out, err) == 0 ? kExitOk : kExitUsage;
  }
  return std::nullopt;
}

std::optional<int> parse(CLI::App& app, int argc, const char* const* argv) {
  return parse(app, argc, argv, std::cout, std::cerr);
}

using std::chrono::milliseconds;

Result<milliseconds> parseDuration(std::string_view text) {
  const auto bad = [&](std::string_view why) -> Result<milliseconds> {
    return makeError(kc::errc::kInvalid, "duration '" + std::string(text) + "' " +
                                             std::string(why) +
                                             " (want e.g. 15s, 1500ms, 1m30s, or seconds)");
  };
  if (text.empty()) {
    return bad("is empty");
  }
  double totalMs = 0;
  std::string_view rest = text;
  bool anyUnit = false;
  while (!rest.empty()) {
    double value = 0;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
    if (ec != std::errc() || !std::isfinite(value) || value < 0) {
      return bad("is not a non-negative number");
    }
    rest.remove_prefix(static_cast<std::size_t>(end - rest.data()));
    std::size_t unitLen = 0;
    while (unitLen < rest.size() && rest[unitLen] >= 'a' && rest[unitLen] <= 'z') {
      ++unitLen;
    }
    const std::string_view unit = rest.substr(0, unitLen);
    rest.remove_prefix(unitLen);
    if (unit.empty()) {
      if (anyUnit || !rest.empty()) {
        return bad("has a number without a unit");
      }
      totalMs += value * 1000;  // plain seconds
      break;
    }
    anyUnit = true;
    if (unit == "ms") {
      totalMs += value;
    } else if (unit == "s") {
      totalMs += value * 1000;
    } else if (unit == "m") {
      totalMs += value * 60'000;
    } else if (unit == "h") {
      totalMs += value * 3'600'000;
    } else {
      return bad("has an unknown unit");
    }
  }
  if (totalMs > 86'400'000.0) {
    return bad("is over a day");
  }
  return milliseconds(static_cast<std::int64_t>(std::llround(totalMs)));
}

std::string formatDuration(milliseconds d) {
  if (d.count() % 1000 == 0) {
    return std::to_string(d.count() / 1000) + "s";
  }
  return std::to_string(d.count()) + "ms";
}

void addDeprecatedFlag(CLI::App& app, const std::string& oldName, const std::string& newName,
                       std::function<void(const std::string&)> set, bool takesValue,
                       std::ostream* warn) {
  auto warnOnce = [oldName, newName, warn]() {
    (warn != nullptr ? *warn : std::cerr)
        << "flag " << oldName << " is deprecated and will be removed in the next release; use "
        << newName << "\n";
  };
  const std::string help = "deprecated: use " + newName;
  CLI::Option* opt = nullptr;
  if (takesValue) {
    opt = app.add_option_function<std::string>(
        oldName,
        [set, warnOnce](const std::string& v) {
          warnOnce();
          set(v);
        },
        help);
  } else {
    opt = app.add_flag_function(
        oldName,
        [set, warnOnce](std::int64_t) {
          warnOnce();
          set("");
        },
        help);
  }
  opt->group(std::string(kDeprecatedGroup));
}

}  // namespace kc::cli
