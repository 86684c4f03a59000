// The daemons' shared start: the common flags (values, environment variables, how --help shows
// them), parseDaemonArgs' exit codes, and the logging set-up from the flags.
#include "libcore/obs/daemon_flags.hpp"

#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <CLI/CLI.hpp>
#include <catch2/catch.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "libcore/obs/log.hpp"

using namespace kc;

namespace {

// What parseDaemonArgs gave and wrote.
struct Parsed {
  std::optional<int> exit;
  std::string out;
  std::string err;
};

// argv for CLI11: the program name, then `args`.
Parsed parseOutput(CLI::App& app, std::vector<std::string> args) {
  args.insert(args.begin(), "daemon");
  std::vector<const char*> argv;
  for (const auto& a : args) {
    argv.push_back(a.c_str());
  }
  std::ostringstream out;
  std::ostringstream err;
  Parsed p;
  p.exit = obs::parseDaemonArgs(app, static_cast<int>(argv.size()), argv.data(), out, err);
  p.out = out.str();
  p.err = err.str();
  return p;
}

std::optional<int> parse(CLI::App& app, std::vector<std::string> args) {
  return parseOutput(app, std::move(args)).exit;
}

// An app with the shared flags around one of the daemon's own, as the daemons add them.
struct DaemonApp {
  explicit DaemonApp(obs::DaemonFlags start) : flags(std::move(start)) {
    obs::addListenFlags(app, flags);
    app.add_option("--own", own, "the daemon's own flag");
    obs::addLogFlags(app, flags);
    obs::addPortFileFlag(app, flags);
  }
  CLI::App app{"test daemon"};
  obs::DaemonFlags flags;
  std::string own;
};

// Sets an environment variable for the scope.
struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedEnv() { ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

struct RestoreStderrLogger {
  ~RestoreStderrLogger() { (void)obs::setupLogging(obs::LogOptions{}); }
};

}  // namespace

TEST_CASE("daemon flags: values from the command line, the daemon's defaults otherwise",
          "[obs][flags]") {
  DaemonApp d({.port = 9420});
  SECTION("none given") {
    CHECK_FALSE(parse(d.app, {}).has_value());
    CHECK(d.flags.listen == "0.0.0.0");
    CHECK(d.flags.port == 9420);
    CHECK(d.flags.portFile.empty());
    CHECK(d.flags.logLevel == "info");
    CHECK(d.flags.logFormat == "text");
  }
  SECTION("the old name --listen still sets the address (deprecated, one release)") {
    CHECK_FALSE(parse(d.app, {"--listen", "127.0.0.3"}).has_value());
    CHECK(d.flags.listen == "127.0.0.3");
  }
  SECTION("all given") {
    CHECK_FALSE(parse(d.app, {"--bind-address", "127.0.0.2", "--port", "0", "--port-file", "/tmp/p",
                              "--own", "x", "--log-level", "debug", "--log-format", "json"})
                    .has_value());
    CHECK(d.flags.listen == "127.0.0.2");
    CHECK(d.flags.port == 0);
    CHECK(d.flags.portFile == "/tmp/p");
    CHECK(d.flags.logLevel == "debug");
    CHECK(d.flags.logFormat == "json");
    CHECK(d.own == "x");
  }
}

TEST_CASE("daemon flags: --help exits 0, every bad flag or value exits 2", "[obs][flags]") {
  auto [args, checked, expected, says] =
      GENERATE(table<std::vector<std::string>, bool, std::optional<int>, std::string>({
          {{"--help"}, false, 0, "--port-file TEXT"},
          {{"-h"}, false, 0, "test daemon"},
          {{"--bogus"}, false, 2, "unknown flag --bogus"},  // named first (libcore/cli)
          {{"--port", "abc"}, false, 2, "--port = abc"},
          {{"--port", "65536"}, false, 2, "--port = 65536"},
          {{"--port", "-1"}, false, 2, "--port"},
          {{"--listen"}, false, 2, "--listen"},
          {{"--bind-address"}, false, 2, "--bind-address"},
          {{"--port-file"}, false, 2, "--port-file"},
          {{"stray"}, false, 2, "stray"},
          // Unchecked, a bad format passes the parse and fails at the logging set-up.
          {{"--log-format", "xml"}, false, std::nullopt, ""},
          {{"--log-format", "xml"}, true, 2, "xml not in {text,json}"},
          {{"--log-format", "json"}, true, std::nullopt, ""},
          {{"--port", "65535"}, false, std::nullopt, ""},
      }));
  CAPTURE(args, checked);
  DaemonApp d({.port = 1, .style = {.checkLogFormat = checked}});
  const Parsed p = parseOutput(d.app, args);
  CHECK(p.exit == expected);
  if (expected == 0) {
    CHECK_THAT(p.out, Catch::Contains(says));
    CHECK(p.err.empty());
  } else if (expected == 2) {
    CHECK_THAT(p.err, Catch::Contains(says));
    CHECK(p.out.empty());
  } else {
    CHECK(p.out.empty());
    CHECK(p.err.empty());
  }
}

TEST_CASE("daemon flags: an environment prefix reads all but --port-file from the environment",
          "[obs][flags]") {
  ScopedEnv listen("KC_FLAGTEST_LISTEN", "10.0.0.1");
  ScopedEnv port("KC_FLAGTEST_PORT", "4321");
  ScopedEnv level("KC_FLAGTEST_LOG_LEVEL", "warn");
  ScopedEnv format("KC_FLAGTEST_LOG_FORMAT", "json");
  ScopedEnv portFile("KC_FLAGTEST_PORT_FILE", "/tmp/never");
  SECTION("with the prefix") {
    DaemonApp d({.port = 1, .style = {.envPrefix = "KC_FLAGTEST_"}});
    REQUIRE_FALSE(parse(d.app, {}).has_value());
    CHECK(d.flags.listen == "10.0.0.1");
    CHECK(d.flags.port == 4321);
    CHECK(d.flags.logLevel == "warn");
    CHECK(d.flags.logFormat == "json");
    CHECK(d.flags.portFile.empty());
  }
  SECTION("the command line wins") {
    DaemonApp d({.port = 1, .style = {.envPrefix = "KC_FLAGTEST_"}});
    REQUIRE_FALSE(parse(d.app, {"--port", "5"}).has_value());
    CHECK(d.flags.port == 5);
  }
  SECTION("a bad value from the environment is a bad flag") {
    ScopedEnv bad("KC_FLAGTEST_PORT", "abc");
    DaemonApp d({.port = 1, .style = {.envPrefix = "KC_FLAGTEST_"}});
    CHECK(parse(d.app, {}) == 2);
  }
  SECTION("without a prefix the environment is not read") {
    DaemonApp d({.port = 1});
    REQUIRE_FALSE(parse(d.app, {}).has_value());
    CHECK(d.flags.listen == "0.0.0.0");
    CHECK(d.flags.port == 1);
  }
}

TEST_CASE("daemon flags: --help shows the style's names, texts and defaults, in the order added",
          "[obs][flags]") {
  SECTION("health/metrics-only daemon") {
    DaemonApp d({.port = 9420});
    const std::string help = d.app.help();
    CAPTURE(help);
    CHECK(help.find("--bind-address TEXT=0.0.0.0 bind address of /livez /readyz /metrics\n") !=
          std::string::npos);
    CHECK(help.find("--listen TEXT") > help.find("Deprecated (removed in the next release)"));
    CHECK(
        help.find(
            "--port UINT=9420            HTTP port of /livez /readyz /metrics (0 = ephemeral)\n") !=
        std::string::npos);
    CHECK(
        help.find(
            "--port-file TEXT            write the bound HTTP port here once serving (tests)\n") !=
        std::string::npos);
    CHECK(help.find("--log-format TEXT=text      text or json\n") != std::string::npos);
    CHECK(help.find("Env:") == std::string::npos);
    CHECK(help.find("--port UINT") < help.find("--own"));
    CHECK(help.find("--own") < help.find("--log-level"));
    CHECK(help.find("--log-format") < help.find("--port-file"));
  }
  SECTION("kubelet's names, no defaults shown, environment and a checked format") {
    DaemonApp d({.listen = "127.0.0.1",
                 .port = 10248,
                 .style = {.listenFlag = "--address",
                           .portFlag = "--healthz-port",
                           .logLevelHelp = "trace, debug, info, warn, error",
                           .envPrefix = "KC_FLAGTEST_",
                           .showDefaults = false,
                           .checkLogFormat = true}});
    const std::string help = d.app.help();
    CAPTURE(help);
    CHECK(help.find("--address TEXT (Env:KC_FLAGTEST_LISTEN)") != std::string::npos);
    CHECK(help.find("--healthz-port UINT (Env:KC_FLAGTEST_PORT)") != std::string::npos);
    CHECK(help.find("--log-format TEXT:{text,json} (Env:KC_FLAGTEST_LOG_FORMAT)") !=
          std::string::npos);
    CHECK(help.find("trace, debug, info, warn, error") != std::string::npos);
    CHECK(help.find("--listen") == std::string::npos);
    CHECK(help.find("=127.0.0.1") == std::string::npos);
    REQUIRE_FALSE(parse(d.app, {"--address", "::1", "--healthz-port", "7"}).has_value());
    CHECK(d.flags.listen == "::1");
    CHECK(d.flags.port == 7);
  }
}

TEST_CASE("daemon flags: logging from the flags, or one error line and nothing changed",
          "[obs][flags]") {
  RestoreStderrLogger restore;
  REQUIRE(obs::setupLogging({"before", "info", obs::LogFormat::kText}).ok());
  auto [level, format, prefix, ok] = GENERATE(table<std::string, std::string, std::string, bool>({
      {"debug", "json", "error: ", true},
      {"warn", "text", "error: ", true},
      {"loud", "text", "error: ", false},
      {"info", "xml", "error: ", false},
      {"info", "", "kubelet-standin: ", false},
  }));
  CAPTURE(level, format, prefix);
  obs::DaemonFlags flags{.logLevel = level, .logFormat = format, .style = {.errorPrefix = prefix}};
  std::ostringstream err;
  CHECK(obs::setupDaemonLogging("some-daemon", flags, err) == ok);
  if (ok) {
    CHECK(err.str().empty());
    CHECK(spdlog::default_logger()->name() == "some-daemon");
    CHECK(spdlog::default_logger()->level() == spdlog::level::from_str(level));
  } else {
    CHECK(err.str() == prefix + "bad --log-level or --log-format\n");
    CHECK(spdlog::default_logger()->name() == "before");
  }
}
