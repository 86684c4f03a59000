#include "libcore/cli/flags.hpp"

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

}  // namespace kc::cli
