// reconfig-mgr on the DRA path (docs/dra.md) as a process with the API server double (which
// serves resource.k8s.io/v1), chassis-sim, kubelet stand-ins and the real device plugins: the
// pool's ResourceSlices follow the inventory and the pool's allocationPath, and a GPU is never
// offered on both paths.

#include <catch2/catch.hpp>

#include "libcore/api/dra_slice.hpp"
#include "tests/services/reconfig-mgr/cluster.hpp"
#include "tests/support/wait.hpp"

using kc::reconfig::testing::ClusterSpec;
using kc::reconfig::testing::SimCluster;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// host01: two GPUs, host02: one, and one unattached.
ClusterSpec small() {
  ClusterSpec s;
  s.nodes = {"host01", "host02"};
  s.chassis["c0"] = {{"01", "host01"}, {"02", "host01"}, {"03", "host02"}, {"04", ""}};
  return s;
}

// The pool's slices by DRA pool name: device GPU ids, and whether they bind to a node.
struct Published {
  std::map<std::string, std::vector<std::string>> ids;
  std::map<std::string, bool> fabric;
  std::set<std::int64_t> generations;
};

Published published(SimCluster& c) {
  Published out;
  kc::kube::ListOptions opts;
  opts.labelSelector = "gpu.kubecomp.io/gpupool=pool-a";
  auto list = c.client().listAll(kc::api::gvr::resourceSlices(), "", opts);
  if (!list) {
    return out;
  }
  for (const json& item : list->items) {
    auto s = kc::api::parseResourceSlice(item);
    if (!s) {
      continue;
    }
    out.generations.insert(s->generation);
    auto& ids = out.ids[s->poolName];
    for (const auto& d : s->devices) {
      ids.push_back(d.id);
      out.fabric[d.id] = d.bindsToNode;
    }
  }
  return out;
}

void setPath(SimCluster& c, const std::string& path) {
  const json patch = {{"spec", {{"allocationPath", path}}}};
  REQUIRE(
      c.client().patch(kc::api::gvr::gpuPools(), "", "pool-a", kc::kube::PatchType::kMerge, patch));
}

}  // namespace

TEST_CASE("reconfig-mgr: a DRA pool's GPUs are ResourceSlices, not device-plugin resources",
          "[reconfig][dra][e2e]") {
  SimCluster c(small());
  c.startManager();
  REQUIRE(c.poolUntil([](const json& st) { return st.value("totalGPUs", 0) == 4; }));
  REQUIRE(c.waitAllocatable("host01", 2));
  CHECK(published(c).ids.empty());  // the device-plugin path publishes no slices

  setPath(c, "DRA");
  const bool shown = kc::testing::eventually(
      [&] {
        Published p = published(c);
        return p.ids["pool-a/host01"] == std::vector<std::string>{"c0.01", "c0.02"} &&
               p.ids["pool-a/host02"] == std::vector<std::string>{"c0.03"} &&
               p.ids["pool-a"] == std::vector<std::string>{"c0.04"};
      },
      30s);
  const Published p = published(c);
  CAPTURE(p.ids);
  REQUIRE(shown);
  CHECK(p.fabric.at("c0.04"));  // unattached: attached on demand
  CHECK_FALSE(p.fabric.at("c0.01"));
  CHECK(p.generations.size() == 1);  // one generation for the whole pool
  // The device plugins withdraw the pool: a GPU is offered on one path only.
  CHECK(kc::testing::eventually([&] { return c.allocatable("host01") == 0; }, 30s));

  // A spec reconfig-mgr cannot read (an API server that does not check the CRD's enum) changes
  // nothing: the pool reports the error and what was published stays.
  setPath(c, "Both");
  REQUIRE(c.poolUntil([](const json& st) {
    for (const auto& cond : st.value("conditions", json::array())) {
      if (cond.value("type", "") == "SpecValid" && cond.value("status", "") == "False") {
        return true;
      }
    }
    return false;
  }));
  // The status and the slices are written in the same pass: give a removal time to show.
  CHECK_FALSE(kc::testing::eventually([&] { return published(c).ids.size() != 3; }, 3s));

  // Back to the device plugin: the slices go, kubelet advertises the GPUs again.
  setPath(c, "DevicePlugin");
  CHECK(kc::testing::eventually([&] { return published(c).ids.empty(); }, 30s));
  CHECK(c.waitAllocatable("host01", 2));

  // DRA again, then the pool is deleted: nothing of it stays published.
  setPath(c, "DRA");
  REQUIRE(kc::testing::eventually([&] { return published(c).ids.size() == 3; }, 30s));
  REQUIRE(c.client().remove(kc::api::gvr::gpuPools(), "", "pool-a"));
  CHECK(kc::testing::eventually([&] { return published(c).ids.empty(); }, 30s));
}
