#include "libcore/cli/leader_election.hpp"

#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "libcore/cli/flags.hpp"

using std::chrono::milliseconds;

TEST_CASE("durations: units, plain seconds, refusals", "[cli]") {
  const auto [text, ms] = GENERATE(table<std::string, std::int64_t>({
      {"15s", 15000},
      {"1500ms", 1500},
      {"1m30s", 90000},
      {"2h", 7200000},
      {"0.5s", 500},
      {"15", 15000},
      {"0.2", 200},
      {"0", 0},
  }));
  CAPTURE(text);
  const auto d = kc::cli::parseDuration(text);
  REQUIRE(d.ok());
  CHECK(d->count() == ms);
  for (const char* bad : {"", "-1s", "5x", "1s5", "s", "1.5.5s", "25h", "nan", "1e400"}) {
    CAPTURE(bad);
    CHECK_FALSE(kc::cli::parseDuration(bad).ok());
  }
  CHECK(kc::cli::formatDuration(milliseconds(15000)) == "15s");
  CHECK(kc::cli::formatDuration(milliseconds(1500)) == "1500ms");
}

namespace {

struct Daemon {
  CLI::App app{"daemon"};
  kc::cli::LeaderElectionFlags flags;
  Daemon() {
    flags.resourceNamespace = "kube-system";
    flags.resourceName = "d";
    kc::cli::addLeaderElectionFlags(app, flags, "so that one replica acts",
                                    {.leaderElectOff = "--no-leader-elect",
                                     .resourceNamespace = "--lease-namespace",
                                     .resourceName = "--lease-name",
                                     .leaseDuration = "--lease-duration-seconds",
                                     .renewDeadline = "--renew-deadline-seconds",
                                     .retryPeriod = "--retry-period-seconds"});
  }
  std::optional<int> parse(std::vector<std::string> words, std::string* err = nullptr) {
    std::vector<const char*> argv{"d"};
    for (const std::string& w : words) {
      argv.push_back(w.c_str());
    }
    std::ostringstream out, e;
    auto r = kc::cli::parse(app, static_cast<int>(argv.size()), argv.data(), out, e);
    if (err != nullptr) {
      *err = e.str();
    }
    return r;
  }
};

}  // namespace

TEST_CASE("leader election flags: kube-scheduler's names", "[cli]") {
  Daemon d;
  REQUIRE_FALSE(
      d.parse({"--leader-elect=false", "--leader-elect-lease-duration", "4s",
               "--leader-elect-renew-deadline=3000ms", "--leader-elect-retry-period", "0.2",
               "--leader-elect-resource-namespace", "team", "--leader-elect-resource-name", "l"})
          .has_value());
  CHECK_FALSE(d.flags.leaderElect);
  CHECK(d.flags.leaseDuration == milliseconds(4000));
  CHECK(d.flags.renewDeadline == milliseconds(3000));
  CHECK(d.flags.retryPeriod == milliseconds(200));
  CHECK(d.flags.resourceNamespace == "team");
  CHECK(d.flags.resourceName == "l");
  Daemon defaults;
  REQUIRE_FALSE(defaults.parse({}).has_value());
  CHECK(defaults.flags.leaderElect);
  CHECK(defaults.flags.leaseDuration == milliseconds(15000));
  const std::string help = defaults.app.help();
  CHECK(help.find("--leader-elect-lease-duration DURATION=15s") != std::string::npos);
  CHECK(help.find("Deprecated (removed in the next release)") != std::string::npos);
}

TEST_CASE("leader election flags: the old names still work, with a warning", "[cli]") {
  Daemon d;
  std::ostringstream warn;
  std::streambuf* old = std::cerr.rdbuf(warn.rdbuf());
  const auto r = d.parse({"--no-leader-elect", "--lease-namespace", "ns", "--lease-name", "n",
                          "--lease-duration-seconds", "2", "--renew-deadline-seconds", "1.5",
                          "--retry-period-seconds", "0.2"});
  std::cerr.rdbuf(old);
  REQUIRE_FALSE(r.has_value());
  CHECK_FALSE(d.flags.leaderElect);
  CHECK(d.flags.resourceNamespace == "ns");
  CHECK(d.flags.resourceName == "n");
  CHECK(d.flags.leaseDuration == milliseconds(2000));
  CHECK(d.flags.renewDeadline == milliseconds(1500));
  CHECK(d.flags.retryPeriod == milliseconds(200));
  CHECK(warn.str().find(
            "flag --lease-namespace is deprecated and will be removed in the next release; use "
            "--leader-elect-resource-namespace") != std::string::npos);
  CHECK(warn.str().find("flag --no-leader-elect is deprecated") != std::string::npos);
}

TEST_CASE("leader election flags: bad durations are usage errors naming the flag", "[cli]") {
  for (const std::vector<std::string>& words :
       {std::vector<std::string>{"--leader-elect-lease-duration", "soon"},
        {"--leader-elect-retry-period", "0s"},
        {"--lease-duration-seconds", "-1"},
        {"--leader-elect-renew-deadline", "2d"}}) {
    Daemon d;
    std::string err;
    CAPTURE(words);
    CHECK(d.parse(words, &err) == kc::cli::kExitUsage);
    CHECK_FALSE(err.empty());
  }
}
