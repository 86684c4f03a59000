#pragma once
// A whole simulated composable-GPU cluster for reconfig-mgr's process tests, every part a real
// process: the API server double, chassis-sim (H3 dialect, one chassis "c0"), per node a
// kubelet-standin and the real disaggpu-devplugin, and reconfig-mgr replicas. The TEST plays
// kubecomp-sched: it creates a pending pod, annotates it with kubecomp.io/dst-node, waits until
// the node's allocatable shows the GPUs and binds it.
//
// invariants() checks after every scenario: every GPU attached to one node or none (the
// chassis' truth), none lost (same ids, healthy unless the test quarantined it), none held by
// two pods, and every running pod's GPUs attached to its own node.

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "libcore/api/names.hpp"
#include "libcore/kube/client.hpp"
#include "libcore/net/http_client.hpp"
#include "tests/services/kubelet-standin/standin_process.hpp"
#include "tests/services/kubelet-standin/watch.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/manifests.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/kube/double_process.hpp"

// Checks: Catch's when a test includes Catch first, exceptions otherwise (tools/bench).
#ifdef CATCH_VERSION_MAJOR
#define KC_CLUSTER_REQUIRE(...) REQUIRE(__VA_ARGS__)
#define KC_CLUSTER_CHECK(...) CHECK(__VA_ARGS__)
#define KC_CLUSTER_CAPTURE(...) CAPTURE(__VA_ARGS__)
#define KC_CLUSTER_FAIL(msg) FAIL(msg)
#else
#define KC_CLUSTER_REQUIRE(...)                                   \
  do {                                                            \
    if (!(__VA_ARGS__)) {                                         \
      throw std::runtime_error("cluster: failed: " #__VA_ARGS__); \
    }                                                             \
  } while (false)
#define KC_CLUSTER_CHECK(...) KC_CLUSTER_REQUIRE(__VA_ARGS__)
#define KC_CLUSTER_CAPTURE(...) (void)0
#define KC_CLUSTER_FAIL(msg) throw std::runtime_error("cluster: failed")
#endif

namespace kc::reconfig::testing {

using nlohmann::json;
using namespace std::chrono_literals;

inline const kube::GroupVersionResource kGpuPools = api::gvr::gpuPools();

// One GPU of the topology: id "<chassis>.<gid>", host = node name or "" (unattached).
struct SimGpu {
  std::string gid;
  std::string node;
  std::string model = "V100";
  bool healthy = true;  // false: the chassis reports it unhealthy from the start
};

struct ClusterSpec {
  std::vector<std::string> nodes;                      // host port = index + 1
  std::map<std::string, std::vector<SimGpu>> chassis;  // chassis name -> GPUs
  double latencyScale = 0;                             // of the measured H3 latencies
  // Pools: name -> nodes; empty: one pool "pool-a" with every node and chassis. A pool has
  // every chassis whose name starts with the pool's name + "-" (or all, for pool-a alone).
  std::map<std::string, std::vector<std::string>> pools;
  // "h3", or "redfish" (classic profile, basic auth, credentials from a Secret the pool names;
  // a node's host is its ComputerSystem Id, which is the node name here).
  std::string dialect = "h3";
  std::string statusSyncPeriod = "100ms";  // the stand-ins' node status sync
  // The node agents judge their GPUs by a host view: chassis-sim writes each node's sysfs and
  // procfs under <dir>/hosts/<node> (--host-root) and the plugins read them. Off: the plugins
  // run with --host-check=false.
  bool hostView = false;
  int hostVisibleDelayMs = 300;          // chassis-sim: hot-add time after an attach
  bool hostNeedsRescan = false;          // chassis-sim: an attached GPU shows only after a rescan
  std::vector<std::string> pluginFlags;  // more disaggpu-devplugin flags (--hot-remove, ...)
  // More flags for one node's agent only (after pluginFlags): nodes that differ, e.g. one
  // that rescans its PCI bus and one that does not.
  std::map<std::string, std::vector<std::string>> nodePluginFlags;
  // The node agents as kubelet DRA plugins (--mode dra, registered through the stand-ins'
  // plugin watchers) instead of device plugins: what serves the nodes of a DRA pool.
  bool draNodes = false;
};

class SimCluster {
 public:
  explicit SimCluster(ClusterSpec spec) : spec_(std::move(spec)) {
    api_ = std::make_unique<kube::testing::DoubleProcess>(KC_APISERVER_DOUBLE_EXE,
                                                          dir_.path().string());
    client_ = std::move(kube::KubeClient::create(api_->config()).value());
    kc::testing::installCrd(
        *client_, kc::testing::loadYamlFile(std::string(KC_SOURCE_DIR) +
                                            "/charts/kubecomp/crds/gpupools.kubecomp.io.yaml"));
    KC_CLUSTER_REQUIRE(client_->create(
        kube::gvr::namespaces(), "",
        {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "kubecomp"}}}}));
    startSim();
    for (const auto& node : spec_.nodes) {
      const std::string d = (dir_.path() / node).string();
      std::filesystem::create_directories(d);
      standins_[node] = std::make_unique<kubelet::testing::StandinProcess>(
          KUBELET_STANDIN_EXE, api_->kubeconfigPath(), d, node,
          std::vector<std::string>{"--status-sync-period", spec_.statusSyncPeriod});
      startPlugin(node);
    }
    pods_ = std::make_unique<kubelet::testing::Watcher>(*client_, kube::gvr::pods());
    nodesW_ = std::make_unique<kubelet::testing::Watcher>(*client_, kube::gvr::nodes());
    createPools();
    poolsW_ = std::make_unique<kubelet::testing::Watcher>(*client_, kGpuPools);
    initial_ = simGpus();
  }
  ~SimCluster() {
    for (auto& [id, r] : managers_) {
      r->terminate(5s);
    }
  }

  kube::KubeClient& client() { return *client_; }
  kubelet::testing::Watcher& pods() { return *pods_; }
  kubelet::testing::Watcher& nodes() { return *nodesW_; }
  kubelet::testing::Watcher& pools() { return *poolsW_; }
  kubelet::testing::StandinProcess& standin(const std::string& node) { return *standins_.at(node); }
  const std::string& dir() const { return dirStr_; }
  // Where chassis-sim keeps `node`'s host tree (spec.hostView): <root>/{sys,proc,dev}.
  std::string hostRoot(const std::string& node) const { return dirStr_ + "/hosts/" + node; }

  // Starts a reconfig-mgr replica; returns its id. Extra flags are appended.
  int startManager(std::vector<std::string> extra = {}) {
    const int id = nextManager_++;
    const std::string portFile = dir_.file("reconfig-port-" + std::to_string(id));
    std::vector<std::string> args = {RECONFIG_MGR_EXE,
                                     "--kubeconfig",
                                     api_->kubeconfigPath(),
                                     "--identity",
                                     "replica-" + std::to_string(id),
                                     "--port",
                                     "0",
                                     "--port-file",
                                     portFile,
                                     "--leader-elect-lease-duration",
                                     "2",
                                     "--leader-elect-renew-deadline",
                                     "1.5",
                                     "--leader-elect-retry-period",
                                     "0.2",
                                     "--drain-timeout-seconds",
                                     "20",
                                     "--retry-initial-seconds",
                                     "0.1",
                                     "--retry-max-seconds",
                                     "1",
                                     "--fabric-read-timeout-seconds",
                                     "2",
                                     "--fabric-move-timeout-seconds",
                                     "3",
                                     "--fabric-attempts",
                                     "2",
                                     "--plan-inventory-max-age-seconds",
                                     "0.2"};
    args.insert(args.end(), extra.begin(), extra.end());
    managers_[id] = std::make_unique<kc::testing::ChildProcess>(std::move(args));
    managers_[id]->waitUntil([&] { return kc::testing::readPortFile(portFile).has_value(); }, 20s,
                             "reconfig-mgr port file");
    managerPorts_[id] = *kc::testing::readPortFile(portFile);
    return id;
  }
  kc::testing::ChildProcess& manager(int id) { return *managers_.at(id); }

#ifdef KUBECOMP_SCHED_EXE
  // The real kubecomp-sched (instead of the test playing it).
  void startScheduler(std::vector<std::string> extra = {}) {
    const std::string portFile = dir_.file("sched-port");
    std::vector<std::string> args = {KUBECOMP_SCHED_EXE,
                                     "--kubeconfig",
                                     api_->kubeconfigPath(),
                                     "--identity",
                                     "sched-0",
                                     "--port",
                                     "0",
                                     "--port-file",
                                     portFile,
                                     "--initial-backoff-seconds",
                                     "0.1",
                                     "--max-backoff-seconds",
                                     "1",
                                     "--leader-elect-resource-namespace",
                                     "kubecomp",
                                     "--leader-elect-lease-duration",
                                     "2",
                                     "--leader-elect-renew-deadline",
                                     "1.5",
                                     "--leader-elect-retry-period",
                                     "0.2"};
    args.insert(args.end(), extra.begin(), extra.end());
    scheduler_ = std::make_unique<kc::testing::ChildProcess>(std::move(args));
    scheduler_->waitUntil([&] { return kc::testing::readPortFile(portFile).has_value(); }, 20s,
                          "kubecomp-sched port file");
  }
  void killScheduler() {
    scheduler_->kill(SIGKILL);
    scheduler_.reset();
  }
#endif
  void killManager(int id) {
    managers_.at(id)->kill(SIGKILL);
    managers_.erase(id);
  }
  // Stops the node's device plugin: its last usage report stays on the Node and never
  // confirms a withdrawal, so a move from this node stays Draining.
  void stopPlugin(const std::string& node) {
    plugins_.at(node)->terminate(5s);
    plugins_.erase(node);
  }
  std::string metrics(int id) {
    return httpGet(managerPorts_.at(id), "/metrics");
  }

  // --- the test as kubecomp-sched ---
  void createPod(const std::string& name, int gpus, const std::string& dstNode = {},
                 const std::string& models = {},
                 const std::string& schedulerName = "kubecomp-sched") {
    json annotations = json::object();
    if (!dstNode.empty()) {
      annotations["kubecomp.io/dst-node"] = dstNode;
      annotations["kubecomp.io/demand"] = std::to_string(gpus);
    }
    if (!models.empty()) {
      annotations["kubecomp.io/gpu-models"] = models;
    }
    json pod = {
        {"apiVersion", "v1"},
        {"kind", "Pod"},
        {"metadata", {{"name", name}, {"namespace", "default"}, {"annotations", annotations}}},
        {"spec",
         {{"schedulerName", schedulerName},
          {"containers",
           {{{"name", "main"},
             {"image", "cuda"},
             {"resources",
              {{"requests", {{"kubecomp.io/gpu", std::to_string(gpus)}}},
               {"limits", {{"kubecomp.io/gpu", std::to_string(gpus)}}}}}}}}}}};
    KC_CLUSTER_REQUIRE(client_->create(kube::gvr::pods(), "default", pod));
  }
  // A pod placed directly on a node (already running work that holds GPUs).
  void runPodOn(const std::string& name, int gpus, const std::string& node) {
    createPod(name, gpus);
    bindAndWaitRunning(name, node);
  }
  void annotate(const std::string& pod, const std::string& dstNode) {
    json patch = {{"metadata", {{"annotations", {{"kubecomp.io/dst-node", dstNode}}}}}};
    KC_CLUSTER_REQUIRE(
        client_->patch(kube::gvr::pods(), "default", pod, kube::PatchType::kMerge, patch));
  }
  int allocatable(const std::string& node) {
    auto n = nodesW_->get("", node);
    if (!n) {
      return -1;
    }
    const std::string v = (*n).value("status", json::object())
                              .value("allocatable", json::object())
                              .value("kubecomp.io/gpu", "0");
    return std::stoi(v);
  }
  // What kubecomp-sched does once the GPUs show: waits for allocatable, binds, waits Running.
  bool waitAllocatable(const std::string& node, int atLeast,
                       std::chrono::milliseconds limit = 30s) {
    return nodesW_->until([&](const kube::Store&) { return allocatable(node) >= atLeast; }, limit);
  }
  void bindAndWaitRunning(const std::string& pod, const std::string& node) {
    KC_CLUSTER_REQUIRE(client_->bindPod("default", pod, node));
    KC_CLUSTER_REQUIRE(pods_->until(
        [&](const kube::Store& st) {
          auto p = st.get("default", pod);
          return p && (*p).value("status", json::object()).value("phase", "") == "Running";
        },
        30s));
  }
  std::string phaseOf(const std::string& pod) {
    auto p = pods_->get("default", pod);
    return p ? (*p).value("status", json::object()).value("phase", "") : std::string("<gone>");
  }

  // --- the chassis ---
  // GPU id -> node ("" unattached), from the simulator's true state.
  std::map<std::string, std::string> simGpus() {
    const json st = json::parse(httpGet(simPort_, "/sim/v1/state"));
    std::map<std::string, std::string> out;
    for (const auto& c : st["chassis"]) {
      for (const auto& g : c["gpus"]) {
        std::string node;
        if (!g["host"].is_null()) {
          node = nodeOfPort(g["host"].get<int>());
        }
        out[c["name"].get<std::string>() + "." + g["gid"].get<std::string>()] = node;
      }
    }
    return out;
  }
  // How many `op` requests ("assign", "unassign") the chassis have answered, all together.
  int simCounter(const std::string& op) {
    const json st = json::parse(httpGet(simPort_, "/sim/v1/state"));
    int n = 0;
    for (const auto& c : st["chassis"]) {
      n += c.value("counters", json::object()).value(op, 0);
    }
    return n;
  }
  std::set<std::string> unhealthySimGpus() {
    const json st = json::parse(httpGet(simPort_, "/sim/v1/state"));
    std::set<std::string> out;
    for (const auto& c : st["chassis"]) {
      for (const auto& g : c["gpus"]) {
        if (!g["healthy"].get<bool>()) {
          out.insert(c["name"].get<std::string>() + "." + g["gid"].get<std::string>());
        }
      }
    }
    return out;
  }
  void fault(const json& f) {
    KC_CLUSTER_REQUIRE(httpRequest(simPort_, "POST", "/sim/v1/faults", f.dump()) == 201);
  }
  void clearFaults() {
    httpRequest(simPort_, "DELETE", "/sim/v1/faults", "");
  }
  int simPort() const {
    return simPort_;
  }

  // The GPUPool status of `pool` as the watch shows it.
  json poolStatus(const std::string& pool = "pool-a") {
    auto p = poolsW_->get("", pool);
    return p ? (*p).value("status", json::object()) : json::object();
  }
  bool poolUntil(const std::function<bool(const json&)>& pred,
                 std::chrono::milliseconds limit = 30s, const std::string& pool = "pool-a") {
    return poolsW_->until(
        [&](const kube::Store& st) {
          auto p = st.get("", pool);
          return p && pred((*p).value("status", json::object()));
        },
        limit);
  }
  // The pod's GPU ids, from the stand-in of its node.
  std::vector<std::string> podGpus(const std::string& pod, const std::string& node) {
    std::vector<std::string> out;
    const json state = standins_.at(node)->debugPods();
    for (const auto& p : state["pods"]) {
      if (p.value("name", "") != pod) {
        continue;
      }
      for (const auto& d : p["devices"]) {
        for (const auto& i : d["ids"]) {
          out.push_back(i.get<std::string>());
        }
      }
    }
    return out;
  }

  // The invariants of issue 12, after every scenario. `quarantined`: GPUs the scenario
  // expects to be out of use.
  void invariants(const std::set<std::string>& mayBeUnhealthy = {}) {
    // Quiescent first: in every pool no move in flight and the status showing what the
    // chassis shows (read afresh each time the status changes).
    for (const auto& pool : poolNames()) {
      KC_CLUSTER_CAPTURE(pool);
      KC_CLUSTER_CHECK(poolUntil(
          [&](const json& st) {
            for (const auto& m : st.value("moves", json::array())) {
              const std::string p = m.value("phase", "");
              if (p != "Succeeded" && p != "Failed") {
                return false;
              }
            }
            if (!st.contains("gpus")) {
              return false;
            }
            const auto truth = simGpus();
            for (const auto& g : st["gpus"]) {
              const std::string id = g.value("id", "");
              if (!truth.count(id) || truth.at(id) != g.value("node", "")) {
                return false;
              }
            }
            return true;
          },
          30s, pool));
    }
    const std::map<std::string, std::string> now = simGpus();
    std::set<std::string> before;
    std::set<std::string> after;
    for (const auto& [id, node] : initial_) {
      before.insert(id);
    }
    for (const auto& [id, node] : now) {
      after.insert(id);
    }
    KC_CLUSTER_CHECK(before ==
                     after);  // none lost (the simulator's model holds each GPU on <= 1 host)
    for (const auto& id : unhealthySimGpus()) {
      KC_CLUSTER_CAPTURE(id);
      KC_CLUSTER_CHECK(mayBeUnhealthy.count(id) == 1);
    }
    std::map<std::string, std::string> holder;
    for (const auto& [node, s] : standins_) {
      const json state = s->debugPods();
      for (const auto& p : state["pods"]) {
        const std::string name = p.value("name", "");
        for (const auto& d : p["devices"]) {
          for (const auto& i : d["ids"]) {
            const std::string id = i.get<std::string>();
            KC_CLUSTER_CAPTURE(id, name, node);
            KC_CLUSTER_CHECK(holder.count(id) == 0);  // never two pods on one GPU
            holder[id] = name;
            KC_CLUSTER_CHECK(now.count(id) == 1);
            KC_CLUSTER_CHECK(now.at(id) == node);  // a running pod's GPU is attached to its node
          }
        }
      }
    }
  }

 private:
  std::vector<std::string> poolNames() const {
    std::vector<std::string> out;
    for (const auto& [pool, nodes] : spec_.pools) {
      out.push_back(pool);
    }
    if (out.empty()) {
      out.push_back("pool-a");
    }
    return out;
  }
  std::string nodeOfPort(int port) const {
    return port >= 1 && port <= static_cast<int>(spec_.nodes.size())
               ? spec_.nodes[port - 1]
               : "port-" + std::to_string(port);
  }
  int portOfNode(const std::string& node) const {
    for (std::size_t i = 0; i < spec_.nodes.size(); ++i) {
      if (spec_.nodes[i] == node) {
        return static_cast<int>(i) + 1;
      }
    }
    KC_CLUSTER_FAIL("unknown node " + node);
    return 0;
  }

  void startSim() {
    json topo = {{"chassis", json::array()}};
    for (const auto& [name, gpus] : spec_.chassis) {
      json c = {{"name", name}, {"hosts", json::array()}, {"gpus", json::array()}};
      for (std::size_t i = 0; i < spec_.nodes.size(); ++i) {
        c["hosts"].push_back({{"port", i + 1}, {"system", spec_.nodes[i]}});
      }
      int n = 0;
      for (const SimGpu& g : gpus) {
        char uuid[64];
        std::snprintf(uuid, sizeof(uuid), "GPU-00000000-0000-4000-8000-%012d", ++uuidSeq_);
        json gj = {{"gid", g.gid}, {"uuid", uuid}, {"model", g.model}};
        if (!g.node.empty()) {
          gj["host"] = portOfNode(g.node);
        }
        if (!g.healthy) {
          gj["healthy"] = false;
        }
        c["gpus"].push_back(gj);
        ++n;
      }
      topo["chassis"].push_back(c);
    }
    const std::string path = dir_.file("topology.json");
    std::ofstream(path) << topo.dump(2);
    std::ostringstream scale;
    scale << spec_.latencyScale;
    std::vector<std::string> args = {CHASSIS_SIM_EXE, "--topology", path,
                                     "--port",        "0",          "--latency-scale",
                                     scale.str(),     "--dialect",  spec_.dialect};
    if (spec_.dialect == "redfish") {
      args.insert(args.end(), {"--basic-auth", "operator:s3cret"});
    }
    if (spec_.hostView) {
      args.insert(args.end(), {"--host-root", dirStr_ + "/hosts", "--host-visible-delay-ms",
                               std::to_string(spec_.hostVisibleDelayMs)});
      if (spec_.hostNeedsRescan) {
        args.emplace_back("--host-needs-rescan");
      }
    }
    sim_ = std::make_unique<kc::testing::ChildProcess>(std::move(args),
                                                       kc::testing::ChildOutput::kCapture);
    const auto line = sim_->readLine(20s);
    KC_CLUSTER_REQUIRE(line);
    const auto at = line->find("http://127.0.0.1:");
    KC_CLUSTER_REQUIRE(at != std::string::npos);
    simPort_ = std::stoi(line->substr(at + 17));
    simBase_ = "http://127.0.0.1:" + std::to_string(simPort_);
  }

  void startPlugin(const std::string& node) {
    const std::string portFile = dir_.file("plugin-port-" + node);
    auto& s = *standins_.at(node);
    std::vector<std::string> args = {DISAGGPU_DEVPLUGIN_EXE,
                                     "--node-name",
                                     node,
                                     "--kubeconfig",
                                     api_->kubeconfigPath(),
                                     "--port",
                                     "0",
                                     "--port-file",
                                     portFile};
    if (spec_.draNodes) {
      const std::string pluginDir = s.rootDir() + "/plugins/gpu.kubecomp.io";
      std::filesystem::create_directories(pluginDir);
      args.insert(args.end(),
                  {"--mode", "dra", "--plugins-registry-dir", s.pluginsRegistryDir(),
                   "--dra-plugin-dir", pluginDir, "--cdi-spec-dir", s.rootDir() + "/cdi"});
    } else {
      args.insert(args.end(), {"--device-plugin-dir", s.pluginDir(), "--pod-resources-socket",
                               s.podResourcesSocket(), "--pod-resources-interval-seconds", "0.1"});
    }
    if (spec_.hostView) {
      const std::string root = hostRoot(node);
      args.insert(args.end(), {"--sysfs-root", root + "/sys", "--procfs-root", root + "/proc",
                               "--dev-root", root + "/dev", "--host-scan-interval-seconds", "0.1"});
      args.insert(args.end(), spec_.pluginFlags.begin(), spec_.pluginFlags.end());
    } else {
      args.emplace_back("--host-check=false");  // no host: the pool's word is all there is
    }
    if (const auto it = spec_.nodePluginFlags.find(node); it != spec_.nodePluginFlags.end()) {
      args.insert(args.end(), it->second.begin(), it->second.end());
    }
    plugins_[node] = std::make_unique<kc::testing::ChildProcess>(std::move(args));
    plugins_[node]->waitUntil([&] { return kc::testing::readPortFile(portFile).has_value(); }, 20s,
                              "devplugin port file");
  }

  void createPools() {
    std::map<std::string, std::vector<std::string>> pools = spec_.pools;
    if (pools.empty()) {
      pools["pool-a"] = spec_.nodes;
    }
    if (spec_.dialect == "redfish") {
      // The chassis credentials, as an operator would store them.
      json secret = {{"apiVersion", "v1"},
                     {"kind", "Secret"},
                     {"metadata", {{"name", "chassis-cred"}, {"namespace", "kubecomp"}}},
                     {"data", {{"username", "b3BlcmF0b3I="}, {"password", "czNjcmV0"}}}};  // base64
      KC_CLUSTER_REQUIRE(client_->create(kube::GroupVersionResource{"", "v1", "secrets", true},
                                         "kubecomp", secret));
    }
    for (const auto& [pool, nodes] : pools) {
      json chassis = json::array();
      for (const auto& [name, gpus] : spec_.chassis) {
        if (pools.size() > 1 && name.rfind(pool + "-", 0) != 0) {
          continue;
        }
        json cj = {
            {"name", name}, {"driver", spec_.dialect}, {"endpoint", simBase_ + "/chassis/" + name}};
        if (spec_.dialect == "h3") {
          cj["gpuModel"] = gpus.empty() ? "V100" : gpus.front().model;
        } else {
          cj["auth"] = "basic";
          cj["credentialsSecret"] = {{"name", "chassis-cred"}};
        }
        chassis.push_back(cj);
      }
      json n = json::array();
      for (const auto& node : nodes) {
        n.push_back(
            {{"name", node},
             {"hostPort", spec_.dialect == "h3" ? std::to_string(portOfNode(node)) : node}});
      }
      json obj = {{"apiVersion", "kubecomp.io/v1alpha1"},
                  {"kind", "GPUPool"},
                  {"metadata", {{"name", pool}}},
                  {"spec", {{"chassis", chassis}, {"nodes", n}, {"pollIntervalSeconds", 1}}}};
      KC_CLUSTER_REQUIRE(client_->create(kGpuPools, "", obj));
    }
  }

  static std::string httpGet(int port, const std::string& path) {
    net::ClientOptions o;
    o.baseUrl = "http://127.0.0.1:" + std::to_string(port);
    auto c = std::move(net::HttpClient::create(o).value());
    auto r = c->request("GET", path);
    KC_CLUSTER_REQUIRE(r);
    return r->body;
  }
  static unsigned httpRequest(int port, const std::string& method, const std::string& path,
                              const std::string& body) {
    net::ClientOptions o;
    o.baseUrl = "http://127.0.0.1:" + std::to_string(port);
    auto c = std::move(net::HttpClient::create(o).value());
    net::Headers h;
    h.emplace_back("Content-Type", "application/json");
    auto r = c->request(method, path, body, h);
    KC_CLUSTER_REQUIRE(r);
    return r->status;
  }

  ClusterSpec spec_;
  kc::testing::TempDir dir_;
  std::string dirStr_ = dir_.path().string();
  std::unique_ptr<kube::testing::DoubleProcess> api_;
  std::unique_ptr<kube::KubeClient> client_;
  std::unique_ptr<kc::testing::ChildProcess> sim_;
  int simPort_ = 0;
  std::string simBase_;
  int uuidSeq_ = 0;
  std::map<std::string, std::unique_ptr<kubelet::testing::StandinProcess>> standins_;
  std::map<std::string, std::unique_ptr<kc::testing::ChildProcess>> plugins_;
  std::unique_ptr<kubelet::testing::Watcher> pods_;
  std::unique_ptr<kubelet::testing::Watcher> nodesW_;
  std::unique_ptr<kubelet::testing::Watcher> poolsW_;
  std::map<int, std::unique_ptr<kc::testing::ChildProcess>> managers_;
  std::unique_ptr<kc::testing::ChildProcess> scheduler_;
  std::map<int, int> managerPorts_;
  int nextManager_ = 0;
  std::map<std::string, std::string> initial_;
};

}  // namespace kc::reconfig::testing
