// Logging set-up: JSON lines that parse, text lines with key=value fields, level handling.
#include "libcore/obs/log.hpp"

#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

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

TEST_CASE("log: JSON lines stay whole and valid under concurrent logging and odd bytes",
          "[obs][log]") {
  RestoreStderrLogger restore;
  std::string out;
  obs::LogOptions options;
  options.name = "conc";
  options.format = obs::LogFormat::kJson;
  REQUIRE(obs::setupLoggingTo(options, &out).ok());

  constexpr int kThreads = 4;
  constexpr int kPerThread = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < kPerThread; ++i) {
        spdlog::info("line {}{}", i,
                     obs::kv({{"thread", std::to_string(t)}, {"i", std::to_string(i)}}));
      }
    });
  }
  for (auto& th : threads) {
    th.join();
  }
  // Invalid UTF-8, a control character and the kv() marker bytes inside user text.
  spdlog::info("bad \xff\xfe utf8 \x01 ctl{}", obs::kv({{"k\x1e", "v\x1f\x1d"}}));
  // Two kv() groups in one message both become fields.
  spdlog::info("two groups{}{}", obs::kv({{"x", "1"}}), obs::kv({{"y", "2"}}));

  const auto got = lines(out);
  REQUIRE(got.size() == kThreads * kPerThread + 2);
  std::set<std::pair<std::string, std::string>> seen;
  for (std::size_t n = 0; n < kThreads * kPerThread; ++n) {
    const json j = json::parse(got[n], nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    CHECK(j["level"] == "info");
    CHECK(j["msg"] == "line " + j["i"].get<std::string>());
    seen.emplace(j["thread"], j["i"]);
  }
  CHECK(seen.size() == kThreads * kPerThread);  // every line exactly once

  const json odd = json::parse(got[kThreads * kPerThread], nullptr, false);
  REQUIRE_FALSE(odd.is_discarded());
  const std::string msg = odd["msg"];
  CHECK_THAT(msg, Catch::StartsWith("bad "));
  CHECK_THAT(msg, Catch::EndsWith(" utf8 \x01 ctl"));
  CHECK(odd["k?"] == "v??");  // marker bytes in keys/values are neutralised, not misparsed

  const json two = json::parse(got.back(), nullptr, false);
  REQUIRE_FALSE(two.is_discarded());
  CHECK(two["msg"] == "two groups");
  CHECK(two["x"] == "1");
  CHECK(two["y"] == "2");
}

TEST_CASE("log: the level filter applies in JSON mode and warnings are flushed", "[obs][log]") {
  RestoreStderrLogger restore;
  std::string out;
  obs::LogOptions options;
  options.format = obs::LogFormat::kJson;
  options.level = GENERATE(as<std::string>{}, "warn", "warning");
  REQUIRE(obs::setupLoggingTo(options, &out).ok());
  spdlog::info("dropped");
  spdlog::warn("kept");
  spdlog::critical("also kept");
  const auto got = lines(out);
  REQUIRE(got.size() == 2);
  CHECK(json::parse(got[0])["level"] == "warn");
  CHECK(json::parse(got[0])["logger"] == "kubecomp");
  CHECK(json::parse(got[1])["level"] == "critical");
}
