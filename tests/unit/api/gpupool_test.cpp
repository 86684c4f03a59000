#include "libcore/api/gpupool.hpp"

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "tests/support/text_mutator.hpp"

namespace {

using kc::api::parsePoolGpus;
using kc::api::PoolGpu;
using nlohmann::json;

json pool(json gpus) {
  return {{"metadata", {{"name", "p"}}}, {"status", {{"gpus", std::move(gpus)}}}};
}

PoolGpu full() {
  return PoolGpu{.id = "c0.000100",
                 .uuid = "GPU-1",
                 .model = "V100",
                 .chassis = "c0",
                 .node = "n1",
                 .hostPort = "c0/30h",
                 .healthy = false,
                 .healthDetail = "lost",
                 .draining = true,
                 .inUseBy = {"ns/p1", "(allocating)"}};
}

}  // namespace

TEST_CASE("GPUPool status.gpus: what the writer writes, the reader reads back", "[api]") {
  PoolGpu unattached;
  unattached.id = "c1.2";
  unattached.uuid = "GPU-2";
  unattached.chassis = "c1";
  const json written = pool(json::array({kc::api::toJson(full()), kc::api::toJson(unattached)}));
  // The field names as the CRD (charts/kubecomp/crds/gpupools.kubecomp.io.yaml) spells them.
  const json expected = json::parse(R"json({"id":"c0.000100","uuid":"GPU-1","model":"V100",
      "chassis":"c0","node":"n1","hostPort":"c0/30h","health":"Unhealthy","healthDetail":"lost",
      "draining":true,"inUseBy":["ns/p1","(allocating)"]})json");
  CHECK(written["status"]["gpus"][0] == expected);
  CHECK_FALSE(written["status"]["gpus"][1].contains("healthDetail"));
  const auto back = parsePoolGpus(written);
  CHECK(back.pool == "p");
  CHECK(back.problems.empty());
  REQUIRE(back.gpus.size() == 2);
  CHECK(back.gpus[0] == full());
  CHECK(back.gpus[1] == unattached);
}

TEST_CASE("GPUPool status.gpus: a pool without an inventory yet has no GPUs and no problem",
          "[api]") {
  for (const json& p :
       {json{{"metadata", {{"name", "p"}}}}, json{{"status", nullptr}},
        json{{"status", json::object()}}, json{{"status", {{"gpus", nullptr}}}}, json(5)}) {
    CAPTURE(p.dump());
    const auto r = parsePoolGpus(p);
    CHECK(r.gpus.empty());
    CHECK(r.problems.empty());
  }
}

TEST_CASE("GPUPool status.gpus: malformed entries are dropped or defaulted, with a problem each",
          "[api]") {
  // (entry, kept?, healthy when kept, problems)
  const auto [entry, kept, healthy, problems] = GENERATE(table<json, bool, bool, std::size_t>({
      {json{{"id", "c0.1"}, {"health", "Healthy"}}, true, true, 0},
      {json{{"id", "c0.1"}}, true, true, 0},  // health defaults to Healthy
      {json{{"id", "c0.1"}, {"health", "Unhealthy"}}, true, false, 0},
      {json{{"id", "c0.1"}, {"health", "OK"}}, true, false, 1},
      {json{{"id", "c0.1"}, {"health", 1}}, true, false, 1},
      {json{{"id", "c0.1"}, {"health", ""}}, true, false, 1},
      {json{{"id", "c0.1"}, {"uuid", 7}}, true, true, 1},  // read as ""
      {json{{"id", "c0.1"}, {"node", json::array()}}, true, true, 1},
      {json{{"id", "c0.1"}, {"draining", "yes"}}, true, true, 1},  // read as false
      {json{{"id", "c0.1"}, {"inUseBy", "ns/p"}}, true, true, 1},
      {json{{"id", "c0.1"}, {"inUseBy", json::array({"ns/p", 3})}}, true, true, 1},
      {json{{"uuid", "GPU-1"}}, false, false, 1},  // no id
      {json{{"id", 7}}, false, false, 1},
      {json{{"id", ""}}, false, false, 1},
      {json{{"id", "has space"}}, false, false, 1},
      {json{{"id", std::string(64, 'a')}}, false, false, 1},
      {json("c0.1"), false, false, 1},
  }));
  CAPTURE(entry.dump());
  const auto r = parsePoolGpus(pool(json::array({entry})));
  REQUIRE(r.gpus.size() == (kept ? 1u : 0u));
  CHECK(r.problems.size() == problems);
  for (const std::string& p : r.problems) {
    CHECK(p.rfind("GPUPool p: ", 0) == 0);  // every problem names the pool
  }
  if (kept) {
    CHECK(r.gpus[0].healthy == healthy);
  }
}

TEST_CASE("GPUPool status.gpus: an id listed twice is dropped entirely", "[api]") {
  const auto r = parsePoolGpus(pool(
      json::array({{{"id", "a"}, {"node", "n1"}}, {{"id", "b"}}, {{"id", "a"}, {"node", "n2"}}})));
  REQUIRE(r.gpus.size() == 1);
  CHECK(r.gpus[0].id == "b");
  REQUIRE(r.problems.size() == 1);
  CHECK(r.problems[0].find("GPU id a appears 2 times") != std::string::npos);
}

TEST_CASE("GPUPool status.gpus: status or gpus of the wrong type is one problem", "[api]") {
  CHECK(parsePoolGpus(json{{"metadata", {{"name", "p"}}}, {"status", "x"}}).problems.size() == 1);
  CHECK(parsePoolGpus(pool("x")).problems.size() == 1);
  CHECK(parsePoolGpus(pool(json::object())).problems.size() == 1);
}

TEST_CASE("GPU ids: what kubelet and the annotations can carry", "[api]") {
  CHECK(kc::api::isValidGpuId("c0.000100"));
  CHECK(kc::api::isValidGpuId("A-Z_0:9"));
  CHECK(kc::api::isValidGpuId(std::string(63, 'x')));
  CHECK_FALSE(kc::api::isValidGpuId(std::string(64, 'x')));
  CHECK_FALSE(kc::api::isValidGpuId(""));
  CHECK_FALSE(kc::api::isValidGpuId("a,b"));
  CHECK_FALSE(kc::api::isValidGpuId("a/b"));
}

TEST_CASE("GPUPool status.gpus: fuzzed documents never crash the reader", "[api][fuzz]") {
  std::mt19937 rng(20261128);
  const std::string seed =
      pool(json::array({kc::api::toJson(full()), {{"id", "c0.2"}, {"node", "n2"}}})).dump();
  const std::string alphabet = "{}[]\":,01tfnul \\aegh.";
  for (int i = 0; i < 3000; ++i) {
    const std::string text = kc::testing::mutateText(seed, rng, alphabet);
    const json doc = json::parse(text, nullptr, false);
    if (doc.is_discarded()) {
      continue;
    }
    const auto r = parsePoolGpus(doc);  // must not throw
    for (const PoolGpu& g : r.gpus) {
      CHECK(kc::api::isValidGpuId(g.id));
    }
  }
}
