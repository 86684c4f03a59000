// End to end: the API server double, kubelet-standin and the real disaggpu-devplugin binary,
// all as processes. The GPUPool status (as reconfig-mgr writes it) decides the node's GPUs;
// the plugin registers with the stand-in, the stand-in reflects the healthy count into the
// Node at its status sync, admits a GPU pod, calls the plugin's Allocate (the envs are read
// back from the stand-in's /debug/pods) and serves PodResources, which the plugin reads back
// into its usage annotation. A simulated kubelet restart must see the plugin register again
// within 1 s (issue 11).

#include <grpcpp/client_context.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "libcore/api/names.hpp"
#include "libcore/base/yaml_json.hpp"
#include "libcore/grpc/channel.hpp"
#include "libcore/kube/client.hpp"
#include "libcore/kube/informer.hpp"
#include "podresources/v1/api.grpc.pb.h"
#include "tests/services/disaggpu-devplugin/pool_builder.hpp"
#include "tests/services/kubelet-standin/standin_process.hpp"
#include "tests/services/kubelet-standin/watch.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/manifests.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/kube/double_process.hpp"

using kc::kubelet::testing::StandinProcess;
using kc::kubelet::testing::Watcher;
using kc::testing::eventually;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

constexpr const char* kGpu = "kubecomp.io/gpu";

const kc::kube::GroupVersionResource kGpuPools = kc::api::gvr::gpuPools();

std::string nodeAllocatable(const kc::kube::Store& nodes, const std::string& node) {
  auto n = nodes.get("", node);
  if (!n || !n->contains("status") || !(*n)["status"].contains("allocatable")) {
    return {};
  }
  return (*n)["status"]["allocatable"].value(kGpu, std::string());
}

bool pluginConnected(StandinProcess& s) {
  const json state = s.debugPods();
  for (const auto& r : state["connectedPlugins"]) {
    if (r == kGpu) {
      return true;
    }
  }
  return false;
}

}  // namespace

TEST_CASE(
    "kubelet-standin + disaggpu-devplugin: GPUPool -> Node allocatable -> GPU pod with UUIDs -> "
    "PodResources, re-registration < 1 s after a kubelet restart",
    "[devplugin][e2e]") {
  kc::testing::TempDir dir;
  kc::kube::testing::DoubleProcess api(KC_APISERVER_DOUBLE_EXE, dir.path().string());
  auto client = std::move(kc::kube::KubeClient::create(api.config()).value());

  // The GPUPool CRD from the chart, served before anyone watches it.
  kc::testing::installCrd(
      *client, kc::testing::loadYamlFile(std::string(KC_SOURCE_DIR) +
                                         "/charts/kubecomp/crds/gpupools.kubecomp.io.yaml"));

  std::filesystem::create_directories(dir.path() / "n1");
  StandinProcess standin(KUBELET_STANDIN_EXE, api.kubeconfigPath(), (dir.path() / "n1").string(),
                         "n1", {"--status-sync-period", "200ms"});
  Watcher nodes(*client, kc::kube::gvr::nodes());
  Watcher pods(*client, kc::kube::gvr::pods());

  // reconfig-mgr's inventory: two GPUs on n1, one on n2.
  const json pool = kc::testing::PoolBuilder("pool-a").json();
  REQUIRE(client->create(kGpuPools, "", pool));
  const json status = kc::testing::PoolBuilder("pool-a")
                          .gpu("c0.1", "n1", {.uuid = "GPU-11111111-0000-0000-0000-000000000001"})
                          .gpu("c0.2", "n1", {.uuid = "GPU-11111111-0000-0000-0000-000000000002"})
                          .gpu("c0.3", "n2", {.uuid = "GPU-11111111-0000-0000-0000-000000000003"})
                          .json()["status"];
  REQUIRE(client->patch(kGpuPools, "", "pool-a", kc::kube::PatchType::kMerge, {{"status", status}},
                        "status"));

  const std::string pluginPortFile = (dir.path() / "plugin-port").string();
  kc::testing::ChildProcess plugin(
      {DISAGGPU_DEVPLUGIN_EXE, "--node-name", "n1", "--kubeconfig", api.kubeconfigPath(),
       "--device-plugin-dir", standin.pluginDir(), "--pod-resources-socket",
       standin.podResourcesSocket(), "--pod-resources-interval-seconds", "0.1", "--port", "0",
       "--port-file", pluginPortFile, "--host-check=false"});
  plugin.waitUntil([&] { return kc::testing::readPortFile(pluginPortFile).has_value(); }, 20s,
                   "disaggpu-devplugin's port file");

  // Registered, listed, and at a status sync on the Node: the two GPUs of n1.
  REQUIRE(nodes.until([](const kc::kube::Store& st) { return nodeAllocatable(st, "n1") == "2"; }));

  // A GPU pod: admitted, Allocate answered with the GPU's UUID.
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "train"}, {"namespace", "default"}}},
              {"spec",
               {{"nodeName", "n1"},
                {"containers",
                 {{{"name", "main"},
                   {"image", "cuda"},
                   {"resources", {{"requests", {{kGpu, "1"}}}, {"limits", {{kGpu, "1"}}}}}}}}}}};
  REQUIRE(client->create(kc::kube::gvr::pods(), "default", pod));
  REQUIRE(pods.until([](const kc::kube::Store& st) {
    auto p = st.get("default", "train");
    return p && p->contains("status") && (*p)["status"].value("phase", "") == "Running";
  }));
  const json state = standin.debugPods();
  REQUIRE(state["pods"].size() == 1);
  const json devices = state["pods"][0]["devices"];
  REQUIRE(devices.size() == 1);
  REQUIRE(devices[0]["ids"].size() == 1);
  const std::string id = devices[0]["ids"][0];
  const std::map<std::string, std::string> uuidOf = {
      {"c0.1", "GPU-11111111-0000-0000-0000-000000000001"},
      {"c0.2", "GPU-11111111-0000-0000-0000-000000000002"}};
  REQUIRE(uuidOf.count(id) == 1);
  CHECK(devices[0]["envs"]["NVIDIA_VISIBLE_DEVICES"] == uuidOf.at(id));
  CHECK(devices[0]["envs"]["KUBECOMP_GPU_IDS"] == id);

  // PodResources shows it, and the plugin reads it back into its usage report on the Node.
  {
    auto stub = v1::PodResourcesLister::NewStub(kc::grpcx::dialUnix(standin.podResourcesSocket()));
    grpc::ClientContext ctx;
    kc::grpcx::setTimeout(ctx, 5s);
    v1::ListPodResourcesRequest req;
    v1::ListPodResourcesResponse resp;
    REQUIRE(stub->List(&ctx, req, &resp).ok());
    REQUIRE(resp.pod_resources_size() == 1);
    CHECK(resp.pod_resources(0).name() == "train");
    REQUIRE(resp.pod_resources(0).containers_size() == 1);
    REQUIRE(resp.pod_resources(0).containers(0).devices_size() == 1);
    CHECK(resp.pod_resources(0).containers(0).devices(0).resource_name() == kGpu);
    CHECK(std::vector<std::string>(
              resp.pod_resources(0).containers(0).devices(0).device_ids().begin(),
              resp.pod_resources(0).containers(0).devices(0).device_ids().end()) ==
          std::vector<std::string>{id});
  }
  CHECK(nodes.until([&](const kc::kube::Store& st) {
    auto n = st.get("", "n1");
    if (!n) {
      return false;
    }
    const auto annotations = (*n)["metadata"].value("annotations", json::object());
    if (!annotations.contains("kubecomp.io/gpu-usage")) {
      return false;
    }
    const json usage =
        json::parse(annotations["kubecomp.io/gpu-usage"].get<std::string>(), nullptr, false);
    return usage.is_object() && usage.contains("inUse") && usage["inUse"].contains(id) &&
           usage["inUse"][id] == json::array({"default/train"});
  }));

  // A GPU attached to n1 at runtime: allocatable follows at the next sync.
  const json grown = kc::testing::PoolBuilder("pool-a")
                         .gpu("c0.1", "n1", {.uuid = "GPU-11111111-0000-0000-0000-000000000001"})
                         .gpu("c0.2", "n1", {.uuid = "GPU-11111111-0000-0000-0000-000000000002"})
                         .gpu("c0.3", "n1", {.uuid = "GPU-11111111-0000-0000-0000-000000000003"})
                         .json()["status"];
  REQUIRE(client->patch(kGpuPools, "", "pool-a", kc::kube::PatchType::kMerge, {{"status", grown}},
                        "status"));
  CHECK(nodes.until([](const kc::kube::Store& st) { return nodeAllocatable(st, "n1") == "3"; }));

  // kubelet restarts: its plugin sockets go; the plugin must register again within 1 s.
  REQUIRE(pluginConnected(standin));
  const auto restartAt = std::chrono::steady_clock::now();
  REQUIRE(standin.post("/debug/simulate-restart") == 200);
  REQUIRE(eventually([&] { return pluginConnected(standin); }, 10s));
  const auto reRegistered = std::chrono::steady_clock::now() - restartAt;
  CAPTURE(std::chrono::duration_cast<std::chrono::milliseconds>(reRegistered).count());
  CHECK(reRegistered < 1s);
  CHECK(eventually([&] { return standin.debugPods()["resources"][kGpu]["allocatable"] == 3; }));
  // The running pod kept its GPU; a second pod gets another one.
  pod["metadata"]["name"] = "second";
  REQUIRE(client->create(kc::kube::gvr::pods(), "default", pod));
  REQUIRE(pods.until([](const kc::kube::Store& st) {
    auto p = st.get("default", "second");
    return p && p->contains("status") && (*p)["status"].value("phase", "") == "Running";
  }));
  const json after = standin.debugPods();
  std::set<std::string> held;
  for (const auto& p : after["pods"]) {
    for (const auto& d : p["devices"]) {
      for (const auto& i : d["ids"]) {
        held.insert(i.get<std::string>());
      }
    }
  }
  CHECK(held.size() == 2);
  CHECK(held.count(id) == 1);

  CHECK(plugin.terminate(5s) == 0);
}
