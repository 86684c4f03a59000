// kubelet-standin as a real process against the API server double, with a fake device plugin
// (C++ gRPC on a unix socket in a temp dir). Every wait is on an event: an informer change,
// a gRPC answer, or (for the stand-in's own debug state and socket files) a condition polled
// until a deadline.

#include "tests/services/kubelet-standin/standin_process.hpp"

#include <grpcpp/client_context.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "libcore/base/rfc3339.hpp"
#include "libcore/grpc/channel.hpp"
#include "libcore/kube/client.hpp"
#include "libcore/kube/informer.hpp"
#include "podresources/v1/api.grpc.pb.h"
#include "tests/services/kubelet-standin/fake_device_plugin.hpp"
#include "tests/services/kubelet-standin/watch.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/kube/double_process.hpp"

using kc::kubelet::testing::FakeDevicePlugin;
using kc::kubelet::testing::StandinProcess;
using kc::kubelet::testing::Watcher;
using kc::testing::eventually;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

constexpr const char* kGpu = "kubecomp.io/gpu";

struct Cluster {
  kc::testing::TempDir dir;
  kc::kube::testing::DoubleProcess api{KC_APISERVER_DOUBLE_EXE, dir.path().string()};
  std::unique_ptr<kc::kube::KubeClient> client =
      std::move(kc::kube::KubeClient::create(api.config()).value());

  std::unique_ptr<StandinProcess> standin(const std::string& node,
                                          std::vector<std::string> extra = {}) {
    std::filesystem::create_directories(dir.path() / node);
    return std::make_unique<StandinProcess>(KUBELET_STANDIN_EXE, api.kubeconfigPath(),
                                            (dir.path() / node).string(), node, std::move(extra));
  }
};

json makePod(const std::string& name, const std::string& node, const std::string& cpu, int gpus,
             const std::string& runSeconds = {}, bool holdFinalizer = false) {
  json resources = {{"requests", {{"cpu", cpu}}}};
  if (gpus > 0) {
    resources["requests"][kGpu] = std::to_string(gpus);
    resources["limits"] = {{kGpu, std::to_string(gpus)}};
  }
  json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"namespace", "default"}}},
      {"spec",
       {{"nodeName", node},
        {"containers", {{{"name", "c"}, {"image", "busybox"}, {"resources", resources}}}}}}};
  if (!runSeconds.empty()) {
    pod["metadata"]["annotations"] = {{"kubecomp.io/run-seconds", runSeconds}};
  }
  if (holdFinalizer) {
    pod["metadata"]["finalizers"] = {"kubecomp.io/test-hold"};
  }
  return pod;
}

std::string phaseOf(const kc::kube::ObjectPtr& pod) {
  if (!pod || !pod->contains("status")) {
    return {};
  }
  return (*pod)["status"].value("phase", std::string());
}

std::string nodeResource(const kc::kube::Store& nodes, const std::string& node, const char* field,
                         const std::string& resource) {
  auto n = nodes.get("", node);
  if (!n || !n->contains("status") || !(*n)["status"].contains(field)) {
    return {};
  }
  return (*n)["status"][field].value(resource, std::string());
}

v1::ListPodResourcesResponse listPodResources(const std::string& socket) {
  auto stub = v1::PodResourcesLister::NewStub(kc::grpcx::dialUnix(socket));
  grpc::ClientContext ctx;
  kc::grpcx::setTimeout(ctx, 5s);
  v1::ListPodResourcesRequest req;
  v1::ListPodResourcesResponse resp;
  const grpc::Status st = stub->List(&ctx, req, &resp);
  REQUIRE(st.ok());
  return resp;
}

// pod name -> device IDs of resource kubecomp.io/gpu (all containers).
std::map<std::string, std::set<std::string>> gpuHolders(const std::string& socket) {
  std::map<std::string, std::set<std::string>> out;
  const auto resp = listPodResources(socket);
  for (const auto& p : resp.pod_resources()) {
    auto& ids = out[p.name()];
    for (const auto& c : p.containers()) {
      for (const auto& d : c.devices()) {
        if (d.resource_name() == kGpu) {
          ids.insert(d.device_ids().begin(), d.device_ids().end());
        }
      }
    }
  }
  return out;
}

bool connected(StandinProcess& s, const std::string& resource) {
  const auto plugins = s.debugPods()["connectedPlugins"];
  return std::find(plugins.begin(), plugins.end(), resource) != plugins.end();
}

std::int64_t debugAllocatable(StandinProcess& s, const std::string& resource) {
  const auto r = s.debugPods()["resources"];
  return r.contains(resource) ? r[resource]["allocatable"].get<std::int64_t>() : -1;
}

// Directory events, as a plugin watching the device-plugin directory sees them.
class DirEvents {
 public:
  explicit DirEvents(const std::string& dir) : fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    REQUIRE(fd_ >= 0);
    REQUIRE(::inotify_add_watch(fd_, dir.c_str(), IN_CREATE | IN_DELETE) >= 0);
  }
  ~DirEvents() { ::close(fd_); }
  DirEvents(const DirEvents&) = delete;
  DirEvents& operator=(const DirEvents&) = delete;

  // Waits for `mask` (IN_CREATE / IN_DELETE) on `name` and consumes the earliest such event
  // not consumed yet (so DELETE then CREATE of one name are matched in their order).
  bool waitFor(const std::string& name, std::uint32_t mask,
               std::chrono::milliseconds timeout = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      for (auto it = pending_.begin(); it != pending_.end(); ++it) {
        if ((it->second & mask) != 0 && it->first == name) {
          pending_.erase(it);
          return true;
        }
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        return false;
      }
      pollfd p{fd_, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(left.count()));
      alignas(inotify_event) char buf[4096];
      const ssize_t n = ::read(fd_, buf, sizeof buf);
      for (ssize_t off = 0; off < n;) {
        const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
        pending_.emplace_back(ev->len > 0 ? std::string(ev->name) : std::string(), ev->mask);
        off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
      }
    }
  }

 private:
  int fd_;
  std::vector<std::pair<std::string, std::uint32_t>> pending_;  // (name, mask) not consumed yet
};

}  // namespace

TEST_CASE("registration: kubelet's checks on version, resource name and endpoint", "[devplugin]") {
  Cluster c;
  auto s = c.standin("n1");
  FakeDevicePlugin plugin(s->pluginDir(), "gpu.sock");
  plugin.setDevices({{"g0", true}});
  REQUIRE(plugin.start());

  struct Row {
    const char* version;
    const char* resource;
    const char* endpoint;
    const char* message;
  };
  const Row rows[] = {
      {"v1alpha1", kGpu, "",
       "requested API version \"v1alpha1\" is not supported by kubelet. Supported versions are "
       "[\"v1beta1\"]"},
      {"v1beta1", "gpu", "", "the ResourceName \"gpu\" is invalid"},
      {"v1beta1", "kubernetes.io/gpu", "", "the ResourceName \"kubernetes.io/gpu\" is invalid"},
      {"v1beta1", "kubecomp.io/Bad Name", "",
       "the ResourceName \"kubecomp.io/Bad Name\" is invalid"},
      {"v1beta1", kGpu, "../gpu.sock", "invalid endpoint \"../gpu.sock\""},
  };
  for (const auto& row : rows) {
    CAPTURE(row.version, row.resource, row.endpoint);
    const grpc::Status st =
        plugin.registerWith(s->kubeletSocket(), row.resource, row.version, row.endpoint);
    CHECK(st.error_code() == grpc::StatusCode::UNKNOWN);
    CHECK(st.error_message().find(row.message) != std::string::npos);
  }
  CHECK(plugin.streamsOpened() == 0);
  CHECK(s->debugPods()["connectedPlugins"].empty());

  const grpc::Status ok = plugin.registerWith(s->kubeletSocket(), kGpu);
  REQUIRE(ok.ok());
  CHECK(connected(*s, kGpu));
  const json stats = s->debugPods()["deviceManager"];
  CHECK(stats["registrations"] == 1);
  CHECK(stats["registrationsRefused"] == std::size(rows));
  CHECK(plugin.waitListed(5s));
  CHECK(eventually([&] { return debugAllocatable(*s, kGpu) == 1; }));
}

TEST_CASE("device counts reach the Node only on a node status sync", "[devplugin]") {
  Cluster c;
  auto s = c.standin("n1", {"--node-status-update-frequency", "1h"});
  Watcher nodes(*c.client, kc::kube::gvr::nodes());
  REQUIRE(nodes.until([](const kc::kube::Store& st) {
    return !nodeResource(st, "n1", "allocatable", "cpu").empty();
  }));

  FakeDevicePlugin plugin(s->pluginDir(), "gpu.sock");
  plugin.setDevices({{"g0", true}, {"g1", true}, {"g2", false}});
  REQUIRE(plugin.start());
  REQUIRE(plugin.registerWith(s->kubeletSocket(), kGpu).ok());
  REQUIRE(plugin.waitListed(5s));
  REQUIRE(eventually([&] { return debugAllocatable(*s, kGpu) == 2; }));
  // The device manager knows; the Node does not until the next sync (period 1 h here).
  auto node = c.client->get(kc::kube::gvr::nodes(), "", "n1");
  REQUIRE(node);
  CHECK_FALSE((*node)["status"]["allocatable"].contains(kGpu));

  REQUIRE(s->post("/debug/sync-node-status") == 202);
  CHECK(nodes.until([](const kc::kube::Store& st) {
    return nodeResource(st, "n1", "allocatable", kGpu) == "2" &&
           nodeResource(st, "n1", "capacity", kGpu) == "3";
  }));

  // A device recovers: again only the sync moves it to the Node.
  plugin.setDevices({{"g0", true}, {"g1", true}, {"g2", true}});
  REQUIRE(plugin.waitListed(5s));
  REQUIRE(eventually([&] { return debugAllocatable(*s, kGpu) == 3; }));
  node = c.client->get(kc::kube::gvr::nodes(), "", "n1");
  REQUIRE(node);
  CHECK((*node)["status"]["allocatable"][kGpu] == "2");
  REQUIRE(s->post("/debug/sync-node-status") == 202);
  CHECK(nodes.until([](const kc::kube::Store& st) {
    return nodeResource(st, "n1", "allocatable", kGpu) == "3";
  }));

  // The plugin goes away: capacity stays (grace period), allocatable drops to 0.
  plugin.stop();
  REQUIRE(eventually([&] { return debugAllocatable(*s, kGpu) == 0; }));
  REQUIRE(s->post("/debug/sync-node-status") == 202);
  CHECK(nodes.until([](const kc::kube::Store& st) {
    return nodeResource(st, "n1", "allocatable", kGpu) == "0" &&
           nodeResource(st, "n1", "capacity", kGpu) == "3";
  }));
}

TEST_CASE("node status sync and lease run on their own period", "[devplugin]") {
  Cluster c;
  auto s =
      c.standin("n1", {"--node-status-update-frequency", "300ms", "--node-lease-duration-seconds",
                       "2", "--node-labels", "pool=gpu,kubecomp.io/chassis=c1",
                       "--register-with-taints", "pool=gpu:NoSchedule"});
  Watcher nodes(*c.client, kc::kube::gvr::nodes());
  Watcher leases(*c.client, kc::kube::gvr::leases());
  FakeDevicePlugin plugin(s->pluginDir(), "gpu.sock");
  plugin.setDevices({{"g0", true}});
  REQUIRE(plugin.start());
  REQUIRE(plugin.registerWith(s->kubeletSocket(), kGpu).ok());
  CHECK(nodes.until([](const kc::kube::Store& st) {
    return nodeResource(st, "n1", "allocatable", kGpu) == "1";
  }));
  auto node = nodes.get("", "n1");
  REQUIRE(node);
  CHECK((*node)["metadata"]["labels"]["kubernetes.io/hostname"] == "n1");
  CHECK((*node)["metadata"]["labels"]["pool"] == "gpu");
  CHECK((*node)["metadata"]["labels"]["kubecomp.io/chassis"] == "c1");
  CHECK((*node)["spec"]["taints"][0] ==
        json({{"key", "pool"}, {"value", "gpu"}, {"effect", "NoSchedule"}}));
  std::set<std::string> types;
  for (const auto& cond : (*node)["status"]["conditions"]) {
    types.insert(cond["type"].get<std::string>());
    CHECK(cond.contains("lastHeartbeatTime"));
  }
  CHECK(types == std::set<std::string>{"Ready", "MemoryPressure", "DiskPressure", "PIDPressure"});
  CHECK((*node)["status"]["nodeInfo"]["kubeletVersion"].get<std::string>().rfind("v1.29", 0) == 0);

  // Renewed every quarter of leaseDurationSeconds: two different renewTimes.
  std::string first;
  REQUIRE(leases.until([&](const kc::kube::Store& st) {
    auto l = st.get("kube-node-lease", "n1");
    if (!l) {
      return false;
    }
    first = (*l)["spec"]["renewTime"].get<std::string>();
    return true;
  }));
  CHECK(leases.until(
      [&](const kc::kube::Store& st) {
        auto l = st.get("kube-node-lease", "n1");
        return l && (*l)["spec"]["renewTime"] != first &&
               (*l)["spec"]["leaseDurationSeconds"] == 2 && (*l)["spec"]["holderIdentity"] == "n1";
      },
      5s));
}

namespace {

// A stand-in with a fast status sync, a plugin with `devices` registered, and the Node
// showing them: the common start of the pod tests.
struct GpuNode {
  Cluster& c;
  std::unique_ptr<StandinProcess> s;
  FakeDevicePlugin plugin;
  Watcher nodes;
  Watcher pods;

  GpuNode(Cluster& cluster, std::vector<std::pair<std::string, bool>> devices,
          std::vector<std::string> extra = {})
      : c(cluster),
        s(startStandin(cluster, std::move(extra))),
        plugin(s->pluginDir(), "gpu.sock"),
        nodes(*cluster.client, kc::kube::gvr::nodes()),
        pods(*cluster.client, kc::kube::gvr::pods()) {
    std::int64_t healthy = 0;
    for (const auto& [id, h] : devices) {
      healthy += h ? 1 : 0;
    }
    plugin.setDevices(std::move(devices));
    REQUIRE(plugin.start());
    REQUIRE(plugin.registerWith(s->kubeletSocket(), kGpu).ok());
    REQUIRE(nodes.until([healthy](const kc::kube::Store& st) {
      return nodeResource(st, "n1", "allocatable", kGpu) == std::to_string(healthy);
    }));
  }

  static std::unique_ptr<StandinProcess> startStandin(Cluster& c, std::vector<std::string> extra) {
    std::vector<std::string> args = {"--status-sync-period", "200ms"};
    args.insert(args.end(), extra.begin(), extra.end());
    return c.standin("n1", args);
  }

  kc::kube::ObjectPtr create(const json& pod) {
    auto created = c.client->create(kc::kube::gvr::pods(), "default", pod);
    REQUIRE(created);
    return std::make_shared<const json>(*created);
  }
  // Waits until the pod reaches `phase`; returns it as the watch saw it then.
  kc::kube::ObjectPtr waitPhase(const std::string& name, const std::string& phase,
                                std::chrono::milliseconds timeout = 10s) {
    kc::kube::ObjectPtr seen;
    const bool ok = pods.until(
        [&](const kc::kube::Store& st) {
          seen = st.get("default", name);
          return phaseOf(seen) == phase;
        },
        timeout);
    CAPTURE(name, phase, seen ? seen->dump() : std::string("(absent)"));
    REQUIRE(ok);
    return seen;
  }
  // The devices the stand-in's /debug/pods reports for a pod (container "c").
  json debugDevices(const std::string& name) {
    const json state = s->debugPods();
    for (const auto& p : state["pods"]) {
      if (p["name"] == name) {
        return p["devices"];
      }
    }
    return nullptr;
  }
};

std::map<std::string, std::string> conditionsOf(const json& pod) {
  std::map<std::string, std::string> out;
  for (const auto& cnd : pod["status"].value("conditions", json::array())) {
    out[cnd["type"].get<std::string>()] = cnd["status"].get<std::string>();
  }
  return out;
}

std::chrono::system_clock::time_point timeOf(const json& v) {
  auto t = kc::parseRfc3339(v.get<std::string>());
  REQUIRE(t);
  return *t;
}

}  // namespace

TEST_CASE(
    "a pod runs for its kubecomp.io/run-seconds with kubelet's phases and conditions, then "
    "Succeeded",
    "[devplugin]") {
  Cluster c;
  GpuNode n(c, {{"g0", true}, {"g1", true}});
  n.create(makePod("job", "n1", "500m", 1, "1"));

  auto running = n.waitPhase("job", "Running");
  CHECK(conditionsOf(*running) ==
        std::map<std::string, std::string>{{"PodReadyToStartContainers", "True"},
                                           {"Initialized", "True"},
                                           {"Ready", "True"},
                                           {"ContainersReady", "True"},
                                           {"PodScheduled", "True"}});
  const auto& cs = (*running)["status"]["containerStatuses"];
  REQUIRE(cs.size() == 1);
  CHECK(cs[0]["name"] == "c");
  CHECK(cs[0]["ready"] == true);
  CHECK(cs[0]["state"]["running"].contains("startedAt"));
  CHECK((*running)["status"]["hostIP"] == "127.0.0.1");
  CHECK((*running)["status"].contains("startTime"));

  // One Allocate with the device the PodResources API and /debug/pods report.
  const auto calls = n.plugin.allocateCalls();
  REQUIRE(calls.size() == 1);
  REQUIRE(calls[0].size() == 1);
  const std::string id = calls[0][0];
  CHECK((id == "g0" || id == "g1"));
  CHECK(gpuHolders(n.s->podResourcesSocket()) ==
        std::map<std::string, std::set<std::string>>{{"job", {id}}});
  const json devs = n.debugDevices("job");
  REQUIRE(devs.size() == 1);
  CHECK(devs[0]["ids"] == json::array({id}));
  CHECK(devs[0]["envs"]["KUBECOMP_GPU_IDS"] == id);

  auto done = n.waitPhase("job", "Succeeded");
  const auto& term = (*done)["status"]["containerStatuses"][0]["state"]["terminated"];
  CHECK(term["exitCode"] == 0);
  CHECK(term["reason"] == "Completed");
  CHECK(timeOf(term["finishedAt"]) - timeOf(term["startedAt"]) >= 1s);
  CHECK(conditionsOf(*done)["Ready"] == "False");
  CHECK(conditionsOf(*done)["PodScheduled"] == "True");
  // Terminated pods hold nothing: not listed, and both devices can be handed out again.
  CHECK(gpuHolders(n.s->podResourcesSocket()).empty());
  n.create(makePod("both", "n1", "100m", 2));
  n.waitPhase("both", "Running");
  CHECK(gpuHolders(n.s->podResourcesSocket()) ==
        std::map<std::string, std::set<std::string>>{{"both", {"g0", "g1"}}});
}

TEST_CASE("a pod without run-seconds runs until deleted, deletion stops it and frees its devices",
          "[devplugin]") {
  Cluster c;
  GpuNode n(c, {{"g0", true}, {"g1", true}, {"g2", false}});
  n.create(makePod("server", "n1", "1", 1, {}, /*holdFinalizer=*/true));
  n.create(makePod("other", "n1", "1", 1));
  n.waitPhase("server", "Running");
  n.waitPhase("other", "Running");
  auto holders = gpuHolders(n.s->podResourcesSocket());
  REQUIRE(holders.size() == 2);
  CHECK(holders["server"].size() == 1);
  CHECK(holders["other"].size() == 1);
  CHECK(holders["server"] != holders["other"]);
  CHECK_FALSE(holders["server"].count("g2"));  // unhealthy: never allocated
  CHECK_FALSE(holders["other"].count("g2"));

  // Every device the plugin listed, healthy or not.
  {
    auto stub = v1::PodResourcesLister::NewStub(kc::grpcx::dialUnix(n.s->podResourcesSocket()));
    grpc::ClientContext ctx;
    kc::grpcx::setTimeout(ctx, 5s);
    v1::AllocatableResourcesRequest req;
    v1::AllocatableResourcesResponse resp;
    REQUIRE(stub->GetAllocatableResources(&ctx, req, &resp).ok());
    REQUIRE(resp.devices_size() == 1);
    CHECK(resp.devices(0).resource_name() == kGpu);
    std::set<std::string> ids(resp.devices(0).device_ids().begin(),
                              resp.devices(0).device_ids().end());
    CHECK(ids == std::set<std::string>{"g0", "g1", "g2"});
  }

  // Deleted (held by a finalizer, so the stand-in sees deletionTimestamp): the workload is
  // stopped with SIGTERM's status and its device is free again.
  REQUIRE(c.client->remove(kc::kube::gvr::pods(), "default", "server", {}));
  auto stopped = n.waitPhase("server", "Failed");
  CHECK((*stopped)["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 143);
  CHECK(gpuHolders(n.s->podResourcesSocket()) ==
        std::map<std::string, std::set<std::string>>{{"other", holders["other"]}});
  // Deleted outright: gone from PodResources too.
  REQUIRE(c.client->remove(kc::kube::gvr::pods(), "default", "other", {}));
  CHECK(eventually([&] { return gpuHolders(n.s->podResourcesSocket()).empty(); }));
  REQUIRE(c.client->patch(kc::kube::gvr::pods(), "default", "server", kc::kube::PatchType::kMerge,
                          {{"metadata", {{"finalizers", nullptr}}}}));
}

TEST_CASE(
    "an init container's devices are reused by the app container, PodResources lists app "
    "containers",
    "[devplugin]") {
  Cluster c;
  GpuNode n(c, {{"g0", true}});
  json pod = makePod("init", "n1", "100m", 1);
  pod["spec"]["initContainers"] = {
      {{"name", "setup"},
       {"image", "busybox"},
       {"resources", {{"requests", {{kGpu, "1"}}}, {"limits", {{kGpu, "1"}}}}}}};
  n.create(pod);
  auto running = n.waitPhase("init", "Running");
  // One GPU on the node and both containers asked for one: the same device, two Allocates.
  CHECK(n.plugin.allocateCalls() == std::vector<std::vector<std::string>>{{"g0"}, {"g0"}});
  CHECK((*running)["status"]["initContainerStatuses"][0]["state"]["terminated"]["reason"] ==
        "Completed");
  const auto resp = listPodResources(n.s->podResourcesSocket());
  REQUIRE(resp.pod_resources_size() == 1);
  REQUIRE(resp.pod_resources(0).containers_size() == 1);
  CHECK(resp.pod_resources(0).containers(0).name() == "c");
  REQUIRE(resp.pod_resources(0).containers(0).devices_size() == 1);
  CHECK(resp.pod_resources(0).containers(0).devices(0).device_ids(0) == "g0");
}

TEST_CASE("GetPreferredAllocation is asked when the plugin offers it, and its choice is taken",
          "[devplugin]") {
  Cluster c;
  auto s = c.standin("n1", {"--status-sync-period", "200ms"});
  Watcher nodes(*c.client, kc::kube::gvr::nodes());
  Watcher pods(*c.client, kc::kube::gvr::pods());
  FakeDevicePlugin plugin(s->pluginDir(), "gpu.sock", /*offersPreferred=*/true);
  plugin.setDevices({{"g0", true}, {"g1", true}, {"g2", true}});
  plugin.setPreferred({"g2", "g0"});
  REQUIRE(plugin.start());
  REQUIRE(plugin.registerWith(s->kubeletSocket(), kGpu).ok());
  REQUIRE(nodes.until([](const kc::kube::Store& st) {
    return nodeResource(st, "n1", "allocatable", kGpu) == "3";
  }));
  REQUIRE(c.client->create(kc::kube::gvr::pods(), "default", makePod("pref", "n1", "100m", 1)));
  REQUIRE(pods.until(
      [](const kc::kube::Store& st) { return phaseOf(st.get("default", "pref")) == "Running"; }));
  CHECK(plugin.preferredCalls() == 1);
  // Without the plugin's preference the ID order would give g0.
  CHECK(plugin.allocateCalls() == std::vector<std::vector<std::string>>{{"g2"}});
}

TEST_CASE("run-seconds are divided by --time-scale", "[devplugin]") {
  Cluster c;
  GpuNode n(c, {{"g0", true}}, {"--time-scale", "20"});
  n.create(makePod("scaled", "n1", "100m", 0, "20"));  // 1 s at scale 20
  auto done = n.waitPhase("scaled", "Succeeded", 15s);
  const auto& term = (*done)["status"]["containerStatuses"][0]["state"]["terminated"];
  const auto ran = timeOf(term["finishedAt"]) - timeOf(term["startedAt"]);
  CHECK(ran >= 1s);
  CHECK(ran < 10s);
}

TEST_CASE("admission rejects like kubelet: OutOf<resource>, UnexpectedAdmissionError",
          "[devplugin]") {
  Cluster c;
  GpuNode n(c, {{"g0", true}, {"g1", true}}, {"--cpu", "4", "--max-pods", "4"});

  n.create(makePod("big", "n1", "3", 1));
  n.waitPhase("big", "Running");

  n.create(makePod("cpu-short", "n1", "2", 0));
  auto p = n.waitPhase("cpu-short", "Failed");
  CHECK((*p)["status"]["reason"] == "OutOfcpu");
  CHECK((*p)["status"]["message"] ==
        "Pod was rejected: Node didn't have enough resource: cpu, requested: 2000, used: 3000, "
        "capacity: 4000");
  // ... and a Warning Event on the pod from "kubelet" on n1, as kubelet records.
  {
    Watcher events(*c.client, kc::kube::gvr::events());
    CHECK(events.until([](const kc::kube::Store& st) {
      for (const auto& e : st.list()) {
        if ((*e)["involvedObject"].value("name", "") == "cpu-short" &&
            (*e).value("reason", "") == "OutOfcpu" && (*e).value("type", "") == "Warning" &&
            (*e)["source"].value("component", "") == "kubelet" &&
            (*e)["source"].value("host", "") == "n1") {
          return true;
        }
      }
      return false;
    }));
  }

  // The device manager is short: kubelet's "unexpected" admission error, nothing allocated.
  n.create(makePod("gpu-short", "n1", "100m", 2));
  p = n.waitPhase("gpu-short", "Failed");
  CHECK((*p)["status"]["reason"] == "UnexpectedAdmissionError");
  CHECK((*p)["status"]["message"] ==
        "Pod was rejected: Allocate failed due to requested number of devices unavailable for "
        "kubecomp.io/gpu. "
        "Requested: 2, Available: 1, which is unexpected");
  CHECK(n.plugin.allocateCalls().size() == 1);  // only "big"'s

  // The plugin's Allocate fails: the same reason with the gRPC error as Go prints it.
  n.plugin.failAllocate(true);
  n.create(makePod("alloc-fails", "n1", "100m", 1));
  p = n.waitPhase("alloc-fails", "Failed");
  CHECK((*p)["status"]["reason"] == "UnexpectedAdmissionError");
  CHECK((*p)["status"]["message"] ==
        "Pod was rejected: Allocate failed due to rpc error: code = Internal desc = injected "
        "allocate failure, "
        "which is unexpected");
  n.plugin.failAllocate(false);
  CHECK(gpuHolders(n.s->podResourcesSocket()).size() ==
        1);  // "big" only: the failed pod holds nothing

  // A node-level extended resource someone else advertised (kubelet keeps it, allocatable =
  // capacity): a pod asking for more is OutOf<name>.
  REQUIRE(c.client->patch(kc::kube::gvr::nodes(), "", "n1", kc::kube::PatchType::kMerge,
                          {{"status", {{"capacity", {{"example.com/dongle", "1"}}}}}}, "status"));
  REQUIRE(n.nodes.until([](const kc::kube::Store& st) {
    return nodeResource(st, "n1", "allocatable", "example.com/dongle") == "1";
  }));
  json dongle = makePod("dongle", "n1", "100m", 0);
  dongle["spec"]["containers"][0]["resources"]["requests"]["example.com/dongle"] = "2";
  n.create(dongle);
  p = n.waitPhase("dongle", "Failed");
  CHECK((*p)["status"]["reason"] == "OutOfexample.com/dongle");

  // max-pods 4: "big" runs, so three more fit and the fourth does not.
  for (const char* name : {"p1", "p2", "p3"}) {
    n.create(makePod(name, "n1", "10m", 0));
    n.waitPhase(name, "Running");
  }
  n.create(makePod("p4", "n1", "10m", 0));
  p = n.waitPhase("p4", "Failed");
  CHECK((*p)["status"]["reason"] == "OutOfpods");

  // A bad run-seconds annotation is refused rather than guessed.
  n.create(makePod("bad-run", "n1", "10m", 0, "soon"));
  CHECK(n.waitPhase("bad-run", "Failed"));
}

TEST_CASE(
    "simulated restart: plugin sockets deleted, kubelet.sock re-created, plugins register again",
    "[devplugin]") {
  Cluster c;
  GpuNode n(c, {{"g0", true}, {"g1", true}});
  n.create(makePod("keeps", "n1", "100m", 1));
  n.waitPhase("keeps", "Running");
  const auto held = gpuHolders(n.s->podResourcesSocket());
  REQUIRE(held.at("keeps").size() == 1);

  REQUIRE(std::filesystem::exists(n.plugin.socketPath()));
  DirEvents events(n.s->pluginDir());
  SECTION("through the debug endpoint") {
    REQUIRE(n.s->post("/debug/simulate-restart") == 200);
  }
  SECTION("through SIGHUP") {
    n.s->signal(SIGHUP);
  }
  CHECK(events.waitFor("gpu.sock", IN_DELETE));
  CHECK(events.waitFor("kubelet.sock", IN_DELETE));
  CHECK(events.waitFor("kubelet.sock", IN_CREATE));
  CHECK_FALSE(std::filesystem::exists(n.plugin.socketPath()));
  CHECK_FALSE(connected(*n.s, kGpu));
  // Until the plugin is back the resource has no devices: 0 at the next status sync.
  CHECK(n.nodes.until([](const kc::kube::Store& st) {
    return nodeResource(st, "n1", "allocatable", kGpu) == "0";
  }));
  // The running pod keeps its device (checkpoint) through the restart.
  CHECK(gpuHolders(n.s->podResourcesSocket()) == held);

  // The plugin notices (here: the test plays it), serves again and registers.
  n.plugin.stop();
  REQUIRE(n.plugin.start());
  REQUIRE(n.plugin.registerWith(n.s->kubeletSocket(), kGpu).ok());
  CHECK(connected(*n.s, kGpu));
  CHECK(n.nodes.until([](const kc::kube::Store& st) {
    return nodeResource(st, "n1", "allocatable", kGpu) == "2";
  }));
  // The free device is the other one.
  n.create(makePod("after", "n1", "100m", 1));
  n.waitPhase("after", "Running");
  const auto now = gpuHolders(n.s->podResourcesSocket());
  REQUIRE(now.size() == 2);
  CHECK(now.at("keeps") == held.at("keeps"));
  CHECK(now.at("after") != held.at("keeps"));
}

TEST_CASE("a real restart of the process: running pods resumed with their checkpointed devices",
          "[devplugin]") {
  Cluster c;
  GpuNode n(c, {{"g0", true}, {"g1", true}});
  n.create(makePod("long", "n1", "100m", 1));
  n.create(makePod("gone", "n1", "100m", 1));
  n.waitPhase("long", "Running");
  n.waitPhase("gone", "Running");
  auto held = gpuHolders(n.s->podResourcesSocket());
  REQUIRE(held.size() == 2);
  REQUIRE(n.s->stop() == 0);  // SIGTERM: clean exit
  // Deleted while kubelet is down: its devices are freed when kubelet is back.
  REQUIRE(c.client->remove(kc::kube::gvr::pods(), "default", "gone", {}));
  const auto freed = held.at("gone");
  held.erase("gone");
  n.s->start();
  CHECK(eventually([&] { return gpuHolders(n.s->podResourcesSocket()) == held; }));
  CHECK(n.plugin.allocateCalls().size() == 2);  // "long" was not allocated again
  // kubelet's start deleted the plugin's socket too: it registers again, and the freed
  // device goes to the next pod.
  n.plugin.stop();
  REQUIRE(n.plugin.start());
  REQUIRE(n.plugin.registerWith(n.s->kubeletSocket(), kGpu).ok());
  REQUIRE(
      eventually([&] { return debugAllocatable(*n.s, kGpu) == 2; }));  // the stand-in has the list
  n.create(makePod("next", "n1", "100m", 1));
  n.waitPhase("next", "Running");
  CHECK(gpuHolders(n.s->podResourcesSocket()).at("next") == freed);
}

TEST_CASE("a corrupt device checkpoint stops the start with a clear error", "[devplugin]") {
  Cluster c;
  const std::string bodies[] = {
      "{not json",
      R"({"kind":"KubeletStandinDeviceCheckpoint","version":1,"data":{"registeredDevices":{},"podDeviceEntries":[]},"checksum":1})",
  };
  for (const auto& body : bodies) {
    CAPTURE(body);
    const auto root = c.dir.path() / "n1" / "root";
    c.dir.write("n1/root/kubelet-standin-device-checkpoint.json", body);
    kc::testing::ChildProcess p(
        {KUBELET_STANDIN_EXE, "--node-name", "n1", "--kubeconfig", c.api.kubeconfigPath(),
         "--device-plugin-dir", (c.dir.path() / "n1" / "dp").string(), "--pod-resources-socket",
         (c.dir.path() / "n1" / "pr" / "kubelet.sock").string(), "--root-dir", root.string(),
         "--healthz-port", "0"},
        kc::testing::ChildOutput::kCaptureMerged);
    const std::string text = p.readAll();
    CAPTURE(text);
    CHECK(p.wait() == 1);
    CHECK(text.find("kubelet-standin-device-checkpoint.json is corrupt") != std::string::npos);
  }
}

TEST_CASE("a plugin gone for longer than --device-plugin-stop-grace: its resource drops to 0",
          "[devplugin]") {
  Cluster c;
  GpuNode n(c, {{"g0", true}, {"g1", true}}, {"--device-plugin-stop-grace", "300ms"});
  n.plugin.stop();
  CHECK(n.nodes.until([](const kc::kube::Store& st) {
    return nodeResource(st, "n1", "capacity", kGpu) == "0" &&
           nodeResource(st, "n1", "allocatable", kGpu) == "0";
  }));
}

TEST_CASE("bad flags: a clear message and exit status 2", "[devplugin]") {
  struct Row {
    std::vector<std::string> args;
    const char* message;
  };
  const Row rows[] = {
      {{"--node-name", "Bad_Name"}, "--node-name 'Bad_Name' is not a valid Node name"},
      {{"--node-name", "n1", "--status-sync-period", "10"}, "--node-status-update-frequency"},
      {{"--node-name", "n1", "--cpu", "lots"}, "--cpu: "},
      {{"--node-name", "n1", "--device-plugin-dir", "relative/dir"},
       "'relative/dir' is not an absolute path"},
      {{"--node-name", "n1", "--register-with-taints", "k=v:Sometimes"}, "--register-with-taints"},
      {{"--node-name", "n1", "--plugins-registry-dir", "registry"},
       "'registry' is not an absolute path"},
      {{"--node-name", "n1", "--dra-call-timeout", "45"}, "--dra-call-timeout: "},
      {{"--node-name", "n1", "--dra-retry-period", "0s"}, "--dra-retry-period: must be positive"},
  };
  for (const auto& row : rows) {
    std::vector<std::string> argv = {KUBELET_STANDIN_EXE};
    argv.insert(argv.end(), row.args.begin(), row.args.end());
    argv.insert(argv.end(), {"--kubeconfig", "/nonexistent"});
    kc::testing::ChildProcess p(argv, kc::testing::ChildOutput::kCaptureMerged);
    const std::string text = p.readAll();
    CAPTURE(row.args, text);
    CHECK(p.wait() == 2);
    CHECK(text.find(row.message) != std::string::npos);
  }
}

TEST_CASE("flag --help says it is a test double", "[devplugin]") {
  kc::testing::ChildProcess p({KUBELET_STANDIN_EXE, "--help"}, kc::testing::ChildOutput::kCapture);
  const std::string text = p.readAll();
  CHECK(p.wait() == 0);
  CHECK(text.find("TEST DOUBLE") != std::string::npos);
  CHECK(text.find("--status-sync-period") != std::string::npos);
}
