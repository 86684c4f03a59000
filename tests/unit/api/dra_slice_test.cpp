#include "libcore/api/dra_slice.hpp"

#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/support/text_mutator.hpp"

namespace {

using kc::api::buildPoolSlices;
using kc::api::draDeviceName;
using kc::api::PoolGpu;
using kc::api::ResourceSlice;
using nlohmann::json;

bool usable(const PoolGpu& g, const std::vector<std::string>& nodes) {
  return g.healthy && !g.draining &&
         (g.node.empty() || std::find(nodes.begin(), nodes.end(), g.node) != nodes.end());
}

struct RandomPool {
  std::vector<std::string> nodes;
  std::vector<PoolGpu> gpus;
};

RandomPool randomPool(std::mt19937& rng) {
  RandomPool p;
  const int nodeCount = 1 + static_cast<int>(rng() % 6);
  for (int n = 0; n < nodeCount; ++n) {
    p.nodes.push_back("node-" + std::to_string(n));
  }
  // Up to 300 GPUs: more than two slices' worth in one DRA pool now and then.
  const int gpuCount = static_cast<int>(rng() % 301);
  for (int g = 0; g < gpuCount; ++g) {
    PoolGpu gpu;
    gpu.chassis = "c" + std::to_string(g % 3);
    gpu.id = gpu.chassis + "." + std::to_string(1000 + g);
    gpu.uuid = rng() % 5 == 0 ? "" : "GPU-" + std::to_string(g);
    gpu.model = rng() % 4 == 0 ? "" : "A100";
    switch (rng() % 5) {
      case 0:
      case 1:
        break;  // unattached
      case 4:
        gpu.node = "elsewhere";  // attached to a node outside the pool
        break;
      default:
        gpu.node = p.nodes[rng() % p.nodes.size()];
    }
    gpu.healthy = rng() % 10 != 0;
    gpu.draining = rng() % 10 == 0;
    p.gpus.push_back(std::move(gpu));
  }
  return p;
}

PoolGpu gpu(std::string id, std::string chassis, std::string node = "", std::string uuid = "",
            std::string model = "") {
  PoolGpu g;
  g.id = std::move(id);
  g.chassis = std::move(chassis);
  g.node = std::move(node);
  g.uuid = std::move(uuid);
  g.model = std::move(model);
  return g;
}

}  // namespace

TEST_CASE("DRA slices: every usable GPU of a pool appears exactly once, where the model says",
          "[api][dra]") {
  std::mt19937 rng(20261128);
  for (int round = 0; round < 300; ++round) {
    const RandomPool p = randomPool(rng);
    const std::int64_t generation = static_cast<std::int64_t>(rng() % 100);
    kc::api::HeldDevices held;  // GPUs some claim holds: from the fabric pool or a node's
    for (const PoolGpu& g : p.gpus) {
      if (rng() % 10 == 0) {
        held[g.id] = "pool-a";
      } else if (rng() % 10 == 0 && !p.nodes.empty()) {
        held[g.id] = "pool-a/" + p.nodes[rng() % p.nodes.size()];
      }
    }
    auto heldAt = [&](const std::string& id) {
      auto h = held.find(id);
      return h == held.end() ? std::string() : h->second;
    };
    const auto slices = buildPoolSlices("pool-a", p.nodes, p.gpus, generation, held);
    std::map<std::string, int> seen;  // GPU id -> times published
    std::map<std::string, std::vector<const ResourceSlice*>> byPool;
    std::set<std::string> sliceNames;
    for (const ResourceSlice& s : slices) {
      CAPTURE(round, s.name);
      CHECK(s.devices.size() <= kc::api::kMaxDevicesPerSlice);
      CHECK(s.generation == generation);
      CHECK(s.gpuPool == "pool-a");
      CHECK(sliceNames.insert(s.name).second);
      CHECK(s.name.size() <= 253);
      byPool[s.poolName].push_back(&s);
      for (const auto& d : s.devices) {
        ++seen[d.id];
        const auto gpu = std::find_if(p.gpus.begin(), p.gpus.end(),
                                      [&](const PoolGpu& g) { return g.id == d.id; });
        REQUIRE(gpu != p.gpus.end());
        CHECK(d.name == draDeviceName(gpu->id));
        CHECK(d.uuid == gpu->uuid);
        CHECK(d.model == gpu->model);
        CHECK(d.chassis == gpu->chassis);
        if (!heldAt(gpu->id).empty()) {
          // Held: where its claim's allocation names it, whatever happened to it since.
          CHECK(s.poolName == heldAt(gpu->id));
          CHECK(d.bindsToNode == (heldAt(gpu->id) == "pool-a"));
        } else if (gpu->node.empty()) {
          // Fabric: attached on demand, only to a node the pool connects; a held GPU stays
          // where its claim's allocation names it.
          CHECK(d.bindsToNode);
          CHECK(s.nodeName.empty());
          CHECK(s.nodes == p.nodes);
          CHECK(s.poolName == "pool-a");
        } else {
          // Attached and usable on its node: no conditions, the allocator prefers it.
          CHECK_FALSE(d.bindsToNode);
          CHECK(s.nodeName == gpu->node);
          CHECK(s.poolName == "pool-a/" + gpu->node);
        }
      }
      // The writer's object reads back as written.
      auto back = kc::api::parseResourceSlice(kc::api::toJson(s));
      REQUIRE(back);
      CHECK(*back == s);
    }
    for (const PoolGpu& g : p.gpus) {
      CAPTURE(round, g.id, g.node, g.healthy, g.draining);
      CHECK(seen[g.id] == (held.contains(g.id) || usable(g, p.nodes) ? 1 : 0));
    }
    for (const auto& [pool, members] : byPool) {
      CAPTURE(round, pool);
      std::set<std::string> names;
      for (const ResourceSlice* s : members) {
        CHECK(s->sliceCount == static_cast<std::int64_t>(members.size()));
        for (const auto& d : s->devices) {
          CHECK(names.insert(d.name).second);  // device names unique in a DRA pool
        }
      }
    }
    // The fabric pool is always published (an emptied pool replaces what was there).
    CHECK(byPool.contains("pool-a"));
  }
}

TEST_CASE("DRA slices: the objects carry resource.k8s.io/v1's field names", "[api][dra]") {
  const PoolGpu attached = gpu("c0.7", "c0", "n1", "GPU-7", "V100");
  const PoolGpu fabric = gpu("c0.8", "c0", "", "", "V100");
  const auto slices = buildPoolSlices("p", {"n1", "n2"}, {attached, fabric}, 3);
  REQUIRE(slices.size() == 2);
  const json local = kc::api::toJson(slices[0]);
  CHECK(local["apiVersion"] == "resource.k8s.io/v1");
  CHECK(local["kind"] == "ResourceSlice");
  CHECK(local["metadata"]["labels"]["gpu.kubecomp.io/gpupool"] == "p");
  CHECK(local["spec"]["driver"] == "gpu.kubecomp.io");
  CHECK(local["spec"]["nodeName"] == "n1");
  CHECK(local["spec"]["pool"] ==
        json::parse(R"({"name":"p/n1","generation":3,"resourceSliceCount":1})"));
  CHECK(local["spec"]["devices"][0] ==
        json::parse(R"({"name":"c0-7-)" + draDeviceName("c0.7").substr(5) + R"(",
      "attributes":{"id":{"string":"c0.7"},"gpuPool":{"string":"p"},"chassis":{"string":"c0"},
                    "uuid":{"string":"GPU-7"},"model":{"string":"V100"}}})"));
  const json pool = kc::api::toJson(slices[1]);
  CHECK_FALSE(pool["spec"].contains("nodeName"));
  CHECK(pool["spec"]["nodeSelector"] == json::parse(R"({"nodeSelectorTerms":[{"matchExpressions":
      [{"key":"kubernetes.io/hostname","operator":"In","values":["n1","n2"]}]}]})"));
  const json& d = pool["spec"]["devices"][0];
  CHECK(d["bindsToNode"] == true);
  CHECK(d["bindingConditions"] == json::array({"gpu.kubecomp.io/attached"}));
  CHECK(d["bindingFailureConditions"] == json::array({"gpu.kubecomp.io/attach-failed"}));
  CHECK_FALSE(d["attributes"].contains("uuid"));  // unknown uuid: no attribute
}

TEST_CASE("DRA slices: a GPU a claim holds from the fabric pool stays there once attached",
          "[api][dra]") {
  // Attached to n1 for the claim (and, say, marked unhealthy since): still the fabric device
  // the allocation names, never also in n1's pool where it would look free.
  PoolGpu held = gpu("c0.7", "c0", "n1");
  held.healthy = false;
  const PoolGpu other = gpu("c0.8", "c0", "n1");
  const auto slices = buildPoolSlices("p", {"n1"}, {held, other}, 1, {{"c0.7", "p"}});
  REQUIRE(slices.size() == 2);
  CHECK(slices[0].poolName == "p/n1");
  REQUIRE(slices[0].devices.size() == 1);
  CHECK(slices[0].devices[0].id == "c0.8");
  CHECK(slices[1].poolName == "p");
  REQUIRE(slices[1].devices.size() == 1);
  CHECK(slices[1].devices[0].id == "c0.7");
  CHECK(slices[1].devices[0].bindsToNode);
  // Let go: it appears on its node (healthy) or nowhere (unhealthy).
  const auto released = buildPoolSlices("p", {"n1"}, {held, other}, 2);
  CHECK(released[1].devices.empty());
}

TEST_CASE("DRA slices: a GPU a claim holds from a node's pool stays there once moved",
          "[api][dra]") {
  // Idle on n1, allocated from n1's pool to a pod on n2 (the pool policy's choice), attached
  // to n2 since: still n1's device for as long as the claim holds it.
  const PoolGpu moved = gpu("c0.7", "c0", "n2");
  const auto slices = buildPoolSlices("p", {"n1", "n2"}, {moved}, 1, {{"c0.7", "p/n1"}});
  REQUIRE(slices.size() == 2);
  CHECK(slices[0].poolName == "p/n1");
  REQUIRE(slices[0].devices.size() == 1);
  CHECK_FALSE(slices[0].devices[0].bindsToNode);
  CHECK(slices[1].devices.empty());
  // A node pool of a node the GPUPool no longer has: the fabric pool keeps it.
  const auto gone = buildPoolSlices("p", {"n2"}, {moved}, 2, {{"c0.7", "p/n1"}});
  REQUIRE(gone.size() == 1);
  CHECK(gone[0].poolName == "p");
  CHECK(gone[0].devices.size() == 1);
}

TEST_CASE("DRA slices: a pool connecting no node offers nothing", "[api][dra]") {
  CHECK(buildPoolSlices("p", {}, {gpu("c0.1", "c0")}, 1).empty());
}

TEST_CASE("DRA device names: DNS labels, stable, distinct for distinct GPU ids", "[api][dra]") {
  CHECK(draDeviceName("gpu-1") == "gpu-1");
  CHECK(draDeviceName("c0.000100").starts_with("c0-000100-"));
  CHECK(draDeviceName("A.1") != draDeviceName("a-1"));
  CHECK(draDeviceName("A.1") != draDeviceName("a.1"));
  const std::string longId(63, 'X');
  CHECK(draDeviceName(longId).size() <= 63);
  std::mt19937 rng(7);
  const std::string alphabet = "abcXYZ019._:-";
  std::map<std::string, std::string> byName;
  for (int i = 0; i < 20000; ++i) {
    std::string id;
    for (std::size_t n = 1 + rng() % 20; n > 0; --n) {
      id += alphabet[rng() % alphabet.size()];
    }
    if (!kc::api::isValidGpuId(id)) {
      continue;
    }
    const std::string name = draDeviceName(id);
    CAPTURE(id, name);
    CHECK(name == draDeviceName(id));
    CHECK(name.size() <= 63);
    CHECK(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") == std::string::npos);
    CHECK(name.front() != '-');
    CHECK(name.back() != '-');
    auto [it, added] = byName.try_emplace(name, id);
    CHECK((added || it->second == id));
  }
}

TEST_CASE("DRA slices: the reader refuses what the writer would not write", "[api][dra]") {
  const auto slices = buildPoolSlices("p", {"n1"}, {gpu("c0.1", "c0")}, 1);
  const json good = kc::api::toJson(slices.at(0));
  REQUIRE(kc::api::parseResourceSlice(good));
  auto broken = [&](auto edit) {
    json j = good;
    edit(j);
    auto r = kc::api::parseResourceSlice(j);
    return r ? std::string() : r.error().message;
  };
  CHECK_THAT(broken([](json& j) { j["spec"]["driver"] = "gpu.nvidia.com"; }),
             Catch::Contains("spec.driver"));
  CHECK_THAT(broken([](json& j) { j["spec"].erase("pool"); }), Catch::Contains("spec.pool"));
  CHECK_THAT(broken([](json& j) { j["spec"]["pool"]["resourceSliceCount"] = 0; }),
             Catch::Contains("resourceSliceCount"));
  CHECK_THAT(broken([](json& j) { j["spec"].erase("nodeSelector"); }),
             Catch::Contains("nodeSelector"));
  CHECK_THAT(broken([](json& j) { j["spec"]["devices"][0]["name"] = "Bad.Name"; }),
             Catch::Contains("DNS label"));
  CHECK_THAT(
      broken([](json& j) { j["spec"]["devices"][0]["attributes"]["id"]["string"] = "c9.9"; }),
      Catch::Contains("GPU id"));
  CHECK_THAT(broken([](json& j) { j = json(5); }), Catch::Contains("no spec"));
}

TEST_CASE("DRA slices: corrupted slice documents never crash the reader", "[api][dra][fuzz]") {
  const PoolGpu a = gpu("c0.1", "c0", "n1", "GPU-1", "A100");
  const PoolGpu b = gpu("c0.2", "c0");
  std::string seeds;
  for (const auto& s : buildPoolSlices("p", {"n1", "n2"}, {a, b}, 4)) {
    seeds = kc::api::toJson(s).dump();
    std::mt19937 rng(static_cast<unsigned>(seeds.size()));
    for (int i = 0; i < 3000; ++i) {
      const std::string text = kc::testing::mutateText(seeds, rng, "{}[]\":,0123456789abn-.");
      const json j = json::parse(text, nullptr, false);
      if (j.is_discarded()) {
        continue;
      }
      auto r = kc::api::parseResourceSlice(j);  // must not throw
      if (r) {
        CHECK(r->sliceCount >= 1);
      }
    }
  }
}

TEST_CASE("a DRA pool name tells its GPUPool and node, one rule for every reader", "[dra]") {
  auto [pool, gpuPool, node, ofPoolA] =
      GENERATE(table<std::string, std::string, std::string, bool>({
          {"pool-a", "pool-a", "", true},
          {"pool-a/n1", "pool-a", "n1", true},
          {"pool-ab", "pool-ab", "", false},  // a longer GPUPool name is another pool
          {"pool-ab/n1", "pool-ab", "n1", false},
          {"pool", "pool", "", false},  // a prefix of the name is another pool too
          {"", "", "", false},
      }));
  CAPTURE(pool);
  const kc::api::DraPoolName split = kc::api::splitDraPool(pool);
  CHECK(split.gpuPool == gpuPool);
  CHECK(split.node == node);
  CHECK(kc::api::isDraPoolOf(pool, "pool-a") == ofPoolA);
  CHECK_FALSE(kc::api::isDraPoolOf(pool, ""));
}
