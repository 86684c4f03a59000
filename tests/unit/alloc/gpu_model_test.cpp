// GPU model constraints (gpu_model.hpp) and the selection and GPU choice that honour them.
// Expected answers are worked out by hand from the fixture below, not by the code under test.

#include "libcore/alloc/gpu_model.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "libcore/alloc/gpu_candidate.hpp"
#include "libcore/alloc/node_score.hpp"
#include "libcore/alloc/policy_registry.hpp"

using namespace kc::alloc;

namespace {

GpuModelFilter filter(const std::string& text, char sep = ',') {
  auto f = GpuModelFilter::parse(text, sep);
  REQUIRE(f.ok());
  return *f;
}

// One pool: n0 holds g0,g1 (A100), n1 holds g2,g3 (V100), g4 (V100) and g5 (A100) are
// unattached, g6 (model unknown) is unattached too. Every node has room for any pod.
ClusterState mixedPool() {
  ClusterState s;
  REQUIRE(s.addPool("p0").ok());
  for (const char* n : {"n0", "n1"}) {
    REQUIRE(
        s.addNode(
             NodeSpec{.name = n, .pool = 0, .cpuMilliCapacity = 64'000, .memoryMiBCapacity = 1'024})
            .ok());
  }
  struct G {
    const char* id;
    const char* model;
    NodeIndex node;
  };
  for (const G& g : {G{"g0", "A100", 0}, G{"g1", "A100", 0}, G{"g2", "V100", 1}, G{"g3", "V100", 1},
                     G{"g4", "V100", kNoNode}, G{"g5", "A100", kNoNode}, G{"g6", "", kNoNode}}) {
    REQUIRE(s.addGpu(GpuSpec{.id = g.id, .model = g.model, .pool = 0, .node = g.node}).ok());
  }
  return s;
}

const NodePolicy& eq1() {
  static const NodePolicy p = *findNodePolicy("eq1");
  return p;
}

}  // namespace

TEST_CASE("GPU model lists parse with either separator into a sorted set", "[alloc][gpu-model]") {
  auto [text, sep, models] = GENERATE(table<std::string, char, std::vector<std::string>>({
      {"V100M16|V100M32", '|', {"V100M16", "V100M32"}},
      {"G2", '|', {"G2"}},
      {"", '|', {}},
      {"  ", ',', {}},
      {"H100, A100 ,H100", ',', {"A100", "H100"}},
      {"NVIDIA-A100-SXM4-80GB,t4_x.1", ',', {"NVIDIA-A100-SXM4-80GB", "t4_x.1"}},
      // As inventories and nvidia-smi name them.
      {"Tesla V100-PCIE-32GB, NVIDIA RTX 6000 Ada Generation",
       ',',
       {"NVIDIA RTX 6000 Ada Generation", "Tesla V100-PCIE-32GB"}},
  }));
  CAPTURE(text);
  auto f = GpuModelFilter::parse(text, sep);
  REQUIRE(f.ok());
  CHECK(f->models() == models);
  CHECK(f->acceptsAny() == models.empty());
}

TEST_CASE("bad GPU model lists are refused, naming the bad part", "[alloc][gpu-model]") {
  auto [text, sep, fragment] = GENERATE(table<std::string, char, std::string>({
      {"A100,", ',', "has an empty name"},
      {"|V100", '|', "has an empty name"},
      {"A100||V100", '|', "has an empty name"},
      {"A  100", ',', "'A  100' is not a GPU model name"},
      {"A100|V100", ',', "'A100|V100' is not a GPU model name"},
      {"A100;80", ',', "'A100;80' is not a GPU model name"},
      {std::string(65, 'x'), ',', "is not a GPU model name"},
  }));
  CAPTURE(text);
  auto f = GpuModelFilter::parse(text, sep);
  REQUIRE_FALSE(f.ok());
  CHECK(f.error().code == "invalid");
  CHECK_THAT(f.error().message, Catch::Contains(fragment));
  CHECK(validGpuModelName(std::string(64, 'x')));
  CHECK_FALSE(validGpuModelName(""));
}

TEST_CASE("a filter accepts listed models only, the default accepts any", "[alloc][gpu-model]") {
  const GpuModelFilter any;
  CHECK(any.accepts("A100"));
  CHECK(any.accepts(""));
  const GpuModelFilter two = filter("V100M16|V100M32", '|');
  CHECK(two.accepts("V100M16"));
  CHECK(two.accepts("V100M32"));
  CHECK_FALSE(two.accepts("V100"));     // exact names, no prefix match
  CHECK_FALSE(two.accepts("v100m16"));  // case-sensitive
  CHECK_FALSE(two.accepts(""));         // a GPU of unknown model serves no constraint
  CHECK(two.toString(',') == "V100M16,V100M32");
  CHECK(kGpuModelsAnnotation == "kubecomp.io/gpu-models");
}

TEST_CASE("the pool model keeps each GPU's model and refuses a bad one", "[alloc][gpu-model]") {
  ClusterState s = mixedPool();
  CHECK(s.gpu(0).model == "A100");
  CHECK(s.gpu(4).model == "V100");
  CHECK(s.gpu(6).model.empty());
  auto bad = s.addGpu(GpuSpec{.id = "g9", .model = "A100,V100", .pool = 0});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == "invalid");
  CHECK(s.gpuCount() == 7);
}

TEST_CASE("free GPUs per node and pool counted over accepted models", "[alloc][gpu-model]") {
  ClusterState s = mixedPool();
  REQUIRE(s.allocateGpu(2).ok());  // one V100 of n1 in use
  const ModelFreeGpus v = countFreeGpus(s, filter("V100"));
  CHECK(v.node == std::vector<std::uint32_t>{0, 1});
  CHECK(v.pool == std::vector<std::uint32_t>{2});  // g3, g4
  const ModelFreeGpus a = countFreeGpus(s, filter("A100"));
  CHECK(a.node == std::vector<std::uint32_t>{2, 0});
  CHECK(a.pool == std::vector<std::uint32_t>{3});  // g0, g1, g5
  const ModelFreeGpus all = countFreeGpus(s, GpuModelFilter{});
  CHECK(all.pool == std::vector<std::uint32_t>{6});  // every free GPU, g6 included
}

TEST_CASE("node selection and GPU choice honour the accepted models", "[alloc][gpu-model]") {
  const ClusterState s = mixedPool();
  const auto composable = Composability::Composable;
  // Hand-derived, eq1 (best-fit, then least-demand, ties by name):
  //   V100 x2: n1 holds 2 V100 -> n1, nothing to move.
  //   V100 x3: n1 has 2 (deficit 1), n0 has 0 (deficit 3): least-demand -> n1, move g4.
  //   A100 x3: n0 has 2 (deficit 1) -> n0, move g5 (n1's V100 are not candidates).
  //   any  x3: n0 and n1 both have 2: tie, name -> n0, deficit 1.
  //   V100 x4: the pool has 3 V100 -> unschedulable although 7 GPUs are free.
  struct Row {
    const char* models;
    std::uint32_t gpus;
    const char* node;
    std::uint32_t deficit;
    std::vector<std::string> moved;
  };
  for (const Row& r : {Row{"V100", 2, "n1", 0, {}}, Row{"V100", 3, "n1", 1, {"g4"}},
                       Row{"A100", 3, "n0", 1, {"g5"}}, Row{"", 3, "n0", 1, {}}}) {
    CAPTURE(r.models, r.gpus);
    const GpuModelFilter f = filter(r.models);
    const PodRequest pod{1'000, 1, r.gpus};
    auto choice = selectNodeForModels(s, pod, f, eq1(), composable);
    REQUIRE(choice.ok());
    CHECK(s.node(choice->node).name == r.node);
    CHECK(choice->deficit == r.deficit);
    if (!f.acceptsAny()) {
      auto moved = chooseGpus(s, choice->node, choice->deficit, *findGpuPolicy("unattached-first"),
                              nullptr, f);
      REQUIRE(moved.ok());
      std::vector<std::string> ids;
      for (GpuIndex g : *moved) {
        ids.push_back(s.gpu(g).id);
      }
      CHECK(ids == r.moved);
    }
  }
  auto none = selectNodeForModels(s, PodRequest{1'000, 1, 4}, filter("V100"), eq1(), composable);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().code == "unschedulable");
  CHECK_THAT(none.error().message, Catch::Contains("accepting only GPU models V100"));
  CHECK_THAT(none.error().message, Catch::Contains("2 pool lacks free GPUs"));
  CHECK_FALSE(
      selectNodeForModels(s, PodRequest{1'000, 1, 1}, filter("H100"), eq1(), composable).ok());
  // Preconfigured: nothing moves, so only a node holding the models itself qualifies.
  auto pre = selectNodeForModels(s, PodRequest{1'000, 1, 2}, filter("A100"), eq1(),
                                 Composability::Preconfigured);
  REQUIRE(pre.ok());
  CHECK(s.node(pre->node).name == "n0");
  CHECK_FALSE(selectNodeForModels(s, PodRequest{1'000, 1, 3}, filter("A100"), eq1(),
                                  Composability::Preconfigured)
                  .ok());
}

TEST_CASE("GPU candidates of a target are filtered by model", "[alloc][gpu-model]") {
  const ClusterState s = mixedPool();
  auto ids = [&](const std::vector<GpuIndex>& gs) {
    std::vector<std::string> out;
    for (GpuIndex g : gs) {
      out.push_back(s.gpu(g).id);
    }
    return out;
  };
  CHECK(ids(gpuCandidates(s, 0)) == std::vector<std::string>{"g2", "g3", "g4", "g5", "g6"});
  CHECK(ids(gpuCandidates(s, 0, filter("V100"))) == std::vector<std::string>{"g2", "g3", "g4"});
  CHECK(ids(gpuCandidates(s, 1, filter("A100"))) == std::vector<std::string>{"g0", "g1", "g5"});
  auto short1 = chooseGpus(s, 0, 2, *findGpuPolicy("first-fit"), nullptr, filter("A100"));
  REQUIRE_FALSE(short1.ok());
  CHECK(short1.error().code == "insufficient");
  CHECK_THAT(short1.error().message, Catch::Contains("1 free GPUs elsewhere of the models A100"));
}
