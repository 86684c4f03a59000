#pragma once
// The cluster a kubecomp-sched test runs against: the API test double with the GPUPool CRD from
// the chart, and builders for Nodes (status.allocatable set by the test, as kubelet would),
// GPUPools (status written by the test, playing reconfig-mgr) and Pods. Tests only.

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "libcore/kube/client.hpp"
#include "services/kubecomp-sched/scheduler.hpp"
#include "tests/support/manifests.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wait.hpp"
#include "tests/unit/kube/double_process.hpp"

namespace kc::testing {

using nlohmann::json;

struct NodeOpts {
  std::string cpu = "64";
  std::string memory = "256Gi";
  std::int64_t gpus = 0;  // status.allocatable kubecomp.io/gpu
  std::map<std::string, std::string> labels{};
  json taints = json::array();
};

struct PodOpts {
  std::int64_t gpus = 0;
  std::string cpu = "1";
  std::string scheduler = "kubecomp-sched";
  std::map<std::string, std::string> annotations{};
  std::map<std::string, std::string> nodeSelector{};
  json initContainers = json::array();
  json extraContainers = json::array();
};

// One GPU of a GPUPool status.
struct PoolGpu {
  std::string id;
  std::string node;  // "" unattached
  std::string model = "";
  bool inUse = false;
};

inline json gpuLimits(std::int64_t gpus, const std::string& cpu) {
  json r = {{"cpu", cpu}, {"memory", "1Gi"}};
  if (gpus > 0) {
    r["kubecomp.io/gpu"] = std::to_string(gpus);
  }
  return r;
}

class SchedCluster {
 public:
  SchedCluster() {
    auto c = kube::KubeClient::create(api.config(), fastClient());
    REQUIRE(c.ok());
    client = std::move(*c);
    installCrd(*client,
               loadYamlFile(KC_SOURCE_DIR "/charts/kubecomp/crds/gpupools.kubecomp.io.yaml"));
    REQUIRE(client->create(kube::gvr::namespaces(), "", {{"metadata", {{"name", "team"}}}}).ok());
  }

  static kube::KubeClientOptions fastClient() {
    kube::KubeClientOptions o;
    o.qps = 0;
    return o;
  }

  void node(const std::string& name, const NodeOpts& o = {}) {
    json alloc = {{"cpu", o.cpu}, {"memory", o.memory}, {"pods", "110"}};
    alloc["kubecomp.io/gpu"] = std::to_string(o.gpus);
    json labels = json::object();
    labels["kubernetes.io/hostname"] = name;
    for (const auto& [k, v] : o.labels) {
      labels[k] = v;
    }
    json n = {{"metadata", {{"name", name}, {"labels", labels}}},
              {"spec", {{"taints", o.taints}}},
              {"status", {{"allocatable", alloc}, {"capacity", alloc}}}};
    auto r = client->create(kube::gvr::nodes(), "", n);
    REQUIRE(r.ok());
  }

  // Kubelet raising (or lowering) what the node advertises.
  void setAllocatableGpus(const std::string& name, std::int64_t gpus) {
    json patch = {{"status", {{"allocatable", {{"kubecomp.io/gpu", std::to_string(gpus)}}}}}};
    auto r = client->patch(kube::gvr::nodes(), "", name, kube::PatchType::kMerge, patch, "status");
    REQUIRE(r.ok());
  }

  void labelNode(const std::string& name, const std::string& key, const std::string& value) {
    json patch = {{"metadata", {{"labels", {{key, value}}}}}};
    REQUIRE(client->patch(kube::gvr::nodes(), "", name, kube::PatchType::kMerge, patch).ok());
  }

  // A GPUPool over `nodes` with the inventory `gpus` (reconfig-mgr's status).
  void pool(const std::string& name, const std::vector<std::string>& nodes,
            const std::vector<PoolGpu>& gpus) {
    json spec = {
        {"chassis", {{{"name", "c0"}, {"driver", "h3"}, {"endpoint", "http://127.0.0.1:1"}}}},
        {"nodes", json::array()}};
    int port = 1;
    for (const auto& n : nodes) {
      spec["nodes"].push_back({{"name", n}, {"hostPort", std::to_string(port++)}});
    }
    json obj = {{"apiVersion", "kubecomp.io/v1alpha1"},
                {"kind", "GPUPool"},
                {"metadata", {{"name", name}}},
                {"spec", spec}};
    REQUIRE(client->create(kc::api::gvr::gpuPools(), "", obj).ok());
    setPoolGpus(name, gpus);
  }

  void setPoolGpus(const std::string& name, const std::vector<PoolGpu>& gpus) {
    json list = json::array();
    for (const auto& g : gpus) {
      json e = {{"id", g.id},
                {"uuid", "GPU-" + g.id},
                {"chassis", "c0"},
                {"health", "Healthy"},
                {"draining", false}};
      if (!g.node.empty()) {
        e["node"] = g.node;
      }
      if (!g.model.empty()) {
        e["model"] = g.model;
      }
      if (g.inUse) {
        e["inUseBy"] = json::array({"team/someone"});
      }
      list.push_back(std::move(e));
    }
    json patch = {{"status", {{"gpus", list}}}};
    auto r =
        client->patch(kc::api::gvr::gpuPools(), "", name, kube::PatchType::kMerge, patch, "status");
    REQUIRE(r.ok());
  }

  void pod(const std::string& name, const PodOpts& o = {}) {
    json containers = json::array(
        {{{"name", "main"},
          {"image", "busybox"},
          {"resources",
           {{"limits", gpuLimits(o.gpus, o.cpu)}, {"requests", gpuLimits(o.gpus, o.cpu)}}}}});
    for (const auto& c : o.extraContainers) {
      containers.push_back(c);
    }
    json meta = {{"name", name}, {"namespace", "team"}};
    if (!o.annotations.empty()) {
      meta["annotations"] = o.annotations;
    }
    json spec = {{"schedulerName", o.scheduler}, {"containers", containers}};
    if (!o.initContainers.empty()) {
      spec["initContainers"] = o.initContainers;
    }
    if (!o.nodeSelector.empty()) {
      spec["nodeSelector"] = o.nodeSelector;
    }
    auto r = client->create(kube::gvr::pods(), "team", {{"metadata", meta}, {"spec", spec}});
    INFO((r.ok() ? std::string() : r.error().message));
    REQUIRE(r.ok());
  }

  json getPod(const std::string& name) {
    auto r = client->get(kube::gvr::pods(), "team", name);
    REQUIRE(r.ok());
    return *r;
  }

  std::string nodeOf(const std::string& name) {
    json p = getPod(name);
    return p["spec"].value("nodeName", std::string());
  }

  std::string annotationOf(const std::string& pod, const std::string& key) {
    json p = getPod(pod);
    auto a = p["metadata"].find("annotations");
    if (a == p["metadata"].end() || !a->contains(key)) {
      return "<none>";
    }
    return (*a)[key].get<std::string>();
  }

  json condition(const std::string& pod) {
    json p = getPod(pod);
    for (const auto& c : p.value("status", json::object()).value("conditions", json::array())) {
      if (c.value("type", "") == "PodScheduled") {
        return c;
      }
    }
    return json();
  }

  // Events on the pod with this reason (their messages, with counts).
  std::vector<std::pair<std::string, std::int64_t>> events(const std::string& pod,
                                                           const std::string& reason) {
    kube::ListOptions lo;
    lo.fieldSelector = "involvedObject.name=" + pod;
    auto r = client->list(kube::gvr::events(), "team", lo);
    REQUIRE(r.ok());
    std::vector<std::pair<std::string, std::int64_t>> out;
    for (const auto& e : r->items) {
      if (e.value("reason", "") == reason) {
        out.emplace_back(e.value("message", ""), e.value("count", std::int64_t{1}));
      }
    }
    return out;
  }

  sched::SchedulerOptions options(const std::string& identity = "replica-a") {
    sched::SchedulerOptions o;
    o.cache.initialBackoff = std::chrono::milliseconds(100);
    o.cache.maxBackoff = std::chrono::milliseconds(400);
    o.cache.reservationTimeout = std::chrono::seconds(60);
    o.lease.ns = "team";
    o.lease.name = "kubecomp-sched";
    o.lease.identity = identity;
    o.lease.leaseDuration = std::chrono::milliseconds(1500);
    o.lease.renewDeadline = std::chrono::milliseconds(1000);
    o.lease.retryPeriod = std::chrono::milliseconds(200);
    o.instance = identity;
    o.bindWorkers = 2;
    return o;
  }

  std::unique_ptr<sched::Scheduler> startScheduler(sched::SchedulerOptions o) {
    auto s = std::make_unique<sched::Scheduler>(std::move(o), *client, nullptr, nullptr);
    REQUIRE(s->start().ok());
    return s;
  }

  TempDir dir;
  kube::testing::DoubleProcess api{KC_APISERVER_DOUBLE_EXE, dir.path()};
  std::unique_ptr<kube::KubeClient> client;
};

}  // namespace kc::testing
