// Logging set-up: JSON lines that parse, text lines with key=value fields, level handling.
#include <catch2/catch.hpp>

#include <sstream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "libcore/obs/log.hpp"

using namespace kc;
using nlohmann::json;

namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    out.push_back(line);
  }
  return out;
}

// setupLoggingTo writes into a caller-owned string: put spdlog back on stderr before that
// string dies, so later tests in the same process do not log into freed memory.
struct RestoreStderrLogger {
  ~RestoreStderrLogger() { (void)obs::setupLogging(obs::LogOptions{}); }
};

}  // namespace

TEST_CASE("log: JSON mode writes one parseable object per line with fields", "[obs][log]") {
  RestoreStderrLogger restore;
  std::string out;
  obs::LogOptions options;
  options.name = "vni-webhook";
  options.format = obs::LogFormat::kJson;
  REQUIRE(obs::setupLoggingTo(options, &out).ok());

  spdlog::info("pod bound{}", obs::kv({{"pod", "ml/train-0"}, {"node", "node 1"}}));
  spdlog::warn("quote \" backslash \\ newline \n tab \t end");
  spdlog::error("envelope keys are not overwritten{}", obs::kv({{"msg", "x"}, {"level", "y"}}));
  spdlog::debug("below the level, not written");

  const auto got = lines(out);
  REQUIRE(got.size() == 3);
  std::vector<json> objs;
  for (const auto& l : got) {
    json j = json::parse(l, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    objs.push_back(j);
  }
  CHECK(objs[0]["level"] == "info");
  CHECK(objs[0]["logger"] == "vni-webhook");
  CHECK(objs[0]["msg"] == "pod bound");
  CHECK(objs[0]["pod"] == "ml/train-0");
  CHECK(objs[0]["node"] == "node 1");
  const std::string ts = objs[0]["ts"];
  CHECK(ts.size() == std::string("2026-11-22T21:00:00.123Z").size());
  CHECK(ts[10] == 'T');
  CHECK(ts.back() == 'Z');
  CHECK(objs[1]["level"] == "warn");
  CHECK(objs[1]["msg"] == "quote \" backslash \\ newline \n tab \t end");
  CHECK(objs[2]["level"] == "error");
  CHECK(objs[2]["msg"] == "envelope keys are not overwritten");
  CHECK(objs[2]["field.msg"] == "x");
  CHECK(objs[2]["field.level"] == "y");
}

TEST_CASE("log: text mode appends key=value, quoting values that need it", "[obs][log]") {
  RestoreStderrLogger restore;
  std::string out;
  obs::LogOptions options;
  options.name = "sched";
  options.level = "debug";
  REQUIRE(obs::setupLoggingTo(options, &out).ok());
  spdlog::debug("bound{}", obs::kv({{"pod", "ns/p"}, {"node", "n 1"}, {"empty", ""}}));
  const auto got = lines(out);
  REQUIRE(got.size() == 1);
  CHECK_THAT(got[0], Catch::EndsWith(" debug [sched] bound pod=ns/p node=\"n 1\" empty=\"\""));
  CHECK(got[0][10] == 'T');
}

TEST_CASE("log: unknown level or format is refused and changes nothing", "[obs][log]") {
  RestoreStderrLogger restore;
  std::string first;
  obs::LogOptions options;
  options.name = "first";
  REQUIRE(obs::setupLoggingTo(options, &first).ok());

  std::string second;
  obs::LogOptions bad;
  bad.name = "second";
  bad.level = "loud";
  auto s = obs::setupLoggingTo(bad, &second);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code == "invalid");
  CHECK_THAT(s.error().message, Catch::Contains("loud"));
  spdlog::info("still the first logger");
  CHECK_THAT(first, Catch::Contains("[first] still the first logger"));
  CHECK(second.empty());

  CHECK(obs::parseLogFormat("json").value() == obs::LogFormat::kJson);
  CHECK(obs::parseLogFormat("text").value() == obs::LogFormat::kText);
  auto f = obs::parseLogFormat("xml");
  REQUIRE_FALSE(f.ok());
  CHECK(f.error().code == "invalid");
}
