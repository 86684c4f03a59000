#include "libcore/api/usage_report.hpp"

#include <catch2/catch.hpp>
#include <random>
#include <string>

#include "tests/support/text_mutator.hpp"

TEST_CASE("usage report round-trips and rejects what is not one", "[api]") {
  kc::api::UsageReport r;
  r.pool = "pool-a";
  r.advertised = {"c0.1", "c0.3"};
  r.withdrawn = {"c0.2"};
  r.inUse = {{"c0.1", {"ns/p1"}}, {"c0.3", {std::string(kc::api::kAllocatingPod)}}};
  r.registered = true;
  auto back = kc::api::parseUsageReport(kc::api::serialize(r));
  REQUIRE(back.ok());
  CHECK(*back == r);
  // The field names the reader expects, as the writer spells them.
  const auto expected = nlohmann::json::parse(
      R"json({"pool":"pool-a","advertised":["c0.1","c0.3"],"withdrawn":["c0.2"],
      "inUse":{"c0.1":["ns/p1"],"c0.3":["(allocating)"]},"registered":true})json");
  CHECK(nlohmann::json::parse(kc::api::serialize(r)) == expected);

  const auto [text, field] = GENERATE(table<std::string, std::string>({
      {"", "JSON"},
      {"[]", "JSON object"},
      {R"({"pool":3})", "pool"},
      {R"({"advertised":"x"})", "advertised"},
      {R"({"withdrawn":[1]})", "withdrawn"},
      {R"({"inUse":[]})", "inUse"},
      {R"({"inUse":{"a":"ns/p"}})", "inUse"},
      {R"({"registered":"yes"})", "registered"},
      {R"({"hostChecked":1})", "hostChecked"},
      {R"({"hostVisible":{}})", "hostVisible"},
      {R"({"notVisible":["c0.1"]})", "notVisible"},
      {R"({"notVisible":{"c0.1":false}})", "notVisible"},
      {R"({"removeBlocked":{"c0.1":1}})", "removeBlocked"},
      {std::string(40, '[') + std::string(40, ']'), "deeper"},
      {R"({"pool":")" + std::string(300 * 1024, 'x') + R"("})", "over the limit"},
  }));
  CAPTURE(text.substr(0, 80));
  auto bad = kc::api::parseUsageReport(text);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == "invalid");
  CHECK(bad.error().message.find(field) != std::string::npos);
}

TEST_CASE("usage report: the host view's fields round-trip and are absent when unchecked",
          "[api]") {
  kc::api::UsageReport r;
  r.advertised = {"c0.1"};
  r.hostChecked = true;
  r.hostVisible = {"c0.1"};
  r.notVisible = {{"c0.2", "not on the PCI bus"}};
  r.removeBlocked = {{"c0.3", "held open by pid 42 (python3)"}};
  const auto written = nlohmann::json::parse(kc::api::serialize(r));
  CHECK(written["hostChecked"] == true);
  CHECK(written["hostVisible"] == nlohmann::json::array({"c0.1"}));
  CHECK(written["notVisible"]["c0.2"] == "not on the PCI bus");
  auto back = kc::api::parseUsageReport(written.dump());
  REQUIRE(back.ok());
  CHECK(*back == r);
  // A report without the host view keeps the shape older readers know.
  r.hostChecked = false;
  r.hostVisible.clear();
  r.notVisible.clear();
  const auto old = nlohmann::json::parse(kc::api::serialize(r));
  CHECK_FALSE(old.contains("hostChecked"));
  CHECK_FALSE(old.contains("notVisible"));
}

TEST_CASE("usage report: every field is optional and unknown fields are ignored", "[api]") {
  auto r = kc::api::parseUsageReport(R"({"future":{"x":1}})");
  REQUIRE(r.ok());
  CHECK(*r == kc::api::UsageReport{});
}

TEST_CASE("usage report: fuzzed annotations never crash the reader", "[api][fuzz]") {
  std::mt19937 rng(1128);
  kc::api::UsageReport seedReport;
  seedReport.pool = "p";
  seedReport.advertised = {"c0.1"};
  seedReport.withdrawn = {"c0.2"};
  seedReport.inUse = {{"c0.1", {"ns/a", "ns/b"}}};
  seedReport.registered = true;
  const std::string seed = kc::api::serialize(seedReport);
  const std::string alphabet = "{}[]\":,01tfnul \\a";
  int accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string text = kc::testing::mutateText(seed, rng, alphabet, 5);
    auto r = kc::api::parseUsageReport(text);
    if (r.ok()) {
      ++accepted;
      // What was accepted writes back to a report that reads the same.
      auto again = kc::api::parseUsageReport(kc::api::serialize(*r));
      REQUIRE(again.ok());
      CHECK(*again == *r);
    }
  }
  CHECK(accepted > 0);
}
