#include "libcore/cli/flags.hpp"

#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "libcore/cli/version.hpp"

namespace {

struct Args {
  std::vector<std::string> words;
  std::vector<const char*> argv;
  explicit Args(std::vector<std::string> w) : words(std::move(w)) {
    argv.push_back("prog");
    for (const std::string& s : words) {
      argv.push_back(s.c_str());
    }
  }
  int argc() const { return static_cast<int>(argv.size()); }
};

struct App {
  CLI::App app{"test program"};
  std::string name;
  int count = 0;
  bool flag = false;
  App() {
    app.add_option("--name", name)->required();
    app.add_option("-c,--count", count);
    app.add_flag("--flag", flag);
    auto* sub = app.add_subcommand("admin", "a subcommand");
    sub->add_option("--db", name);
    kc::cli::addVersionFlag(app, "prog");
  }
};

}  // namespace

TEST_CASE("cli: an unknown flag is named, before a missing required flag", "[cli]") {
  const auto [words, unknown] = GENERATE(table<std::vector<std::string>, std::string>({
      {{"--bogus"}, "--bogus"},
      {{"--name", "x", "--bogus=3"}, "--bogus"},
      {{"-z"}, "-z"},
      {{"-zvalue"}, "-z"},
      {{"--name", "x", "--count", "3", "--colour"}, "--colour"},
  }));
  App a;
  Args args(words);
  CAPTURE(words);
  REQUIRE(kc::cli::unknownFlag(a.app, args.argc(), args.argv.data()) == unknown);
  std::ostringstream out, err;
  CHECK(kc::cli::parse(a.app, args.argc(), args.argv.data(), out, err) == kc::cli::kExitUsage);
  CHECK(err.str().rfind("unknown flag " + unknown + "\n", 0) == 0);
  CHECK(out.str().empty());
}

TEST_CASE("cli: known flags, values that look like flags, subcommand flags", "[cli]") {
  const auto words = GENERATE(values<std::vector<std::string>>({
      {"--name", "x"},
      {"--name=x", "-c", "-5"},
      {"--name", "x", "--count=-2", "--flag"},
      {"--name", "x", "--", "--not-a-flag"},
      {"admin", "--db", "f", "--name", "x"},
      {"--help"},
      {"-h"},
      {"--version"},
  }));
  App a;
  Args args(words);
  CAPTURE(words);
  CHECK_FALSE(kc::cli::unknownFlag(a.app, args.argc(), args.argv.data()).has_value());
}

TEST_CASE("cli: --version and --help answer on stdout with 0, usage errors give 2", "[cli]") {
  {
    App a;
    Args args({"--version"});
    std::ostringstream out, err;
    CHECK(kc::cli::parse(a.app, args.argc(), args.argv.data(), out, err) == kc::cli::kExitOk);
    CHECK(out.str() == kc::cli::versionLine("prog") + "\n");
    CHECK(out.str().rfind("prog " + std::string(kc::cli::projectVersion()) + " (git ", 0) == 0);
  }
  {
    App a;
    Args args({"--help"});
    std::ostringstream out, err;
    CHECK(kc::cli::parse(a.app, args.argc(), args.argv.data(), out, err) == kc::cli::kExitOk);
    CHECK(out.str().find("--version") != std::string::npos);
  }
  for (const std::vector<std::string>& words : {std::vector<std::string>{},
                                                {"--name"},
                                                {"--name", "x", "--count", "many"},
                                                {"--name", "x", "stray"}}) {
    App a;
    Args args(words);
    CAPTURE(words);
    std::ostringstream out, err;
    CHECK(kc::cli::parse(a.app, args.argc(), args.argv.data(), out, err) == kc::cli::kExitUsage);
    CHECK_FALSE(err.str().empty());
  }
  App a;
  Args ok({"--name", "x", "-c", "4"});
  std::ostringstream out, err;
  CHECK_FALSE(kc::cli::parse(a.app, ok.argc(), ok.argv.data(), out, err).has_value());
  CHECK(a.count == 4);
}
