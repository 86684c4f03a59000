#pragma once
// KubeletStandin: a TEST DOUBLE of kubelet for one simulated node, covering what the KubeComp
// daemons touch: the Node object and its heartbeat Lease, the device-plugin Registration
// service and the plugins' ListAndWatch/Allocate, pod admission, simulated pod runs with real
// phases and conditions, kubelet's DRA side (plugin watcher, NodePrepareResources before a pod
// starts, NodeUnprepareResources after it ends) and the PodResources API. It runs no containers.
//
// Threads: the pod informer's thread only queues pod keys; one sync thread admits, starts,
// completes and stops pods, posts the node status every nodeStatusUpdateFrequency and renews
// the Lease (so every API write for pods and the node comes from one place, in order);
// gRPC's threads serve Registration and PodResources; the DRA side has a plugin-watcher thread
// and a worker that makes the DRA plugin calls (dra_side.hpp).

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "libcore/base/result.hpp"
#include "tools/kubelet-standin/admission.hpp"
#include "tools/kubelet-standin/device_manager.hpp"
#include "tools/kubelet-standin/dra_side.hpp"
#include "tools/kubelet-standin/grpc_services.hpp"

namespace kc::kube {
class KubeClient;
class Informer;
class EventRecorder;
}  // namespace kc::kube

namespace kc::grpcx {
class UnixServer;
}

namespace kc::obs {
class Metrics;
}

namespace kc::kubelet {

struct StandinOptions {
  std::string nodeName;
  std::string devicePluginDir = "/var/lib/kubelet/device-plugins";
  std::string podResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock";
  std::string rootDir = "/var/lib/kubelet";  // holds the device and DRA checkpoints
  // Where DRA plugins register; "" = <rootDir>/plugins_registry, as kubelet derives it.
  std::string pluginsRegistryDir;
  std::chrono::milliseconds draCallTimeout{std::chrono::seconds(45)};  // NodePrepareResources...
  // A pod whose claims could not be prepared (or unprepared) is tried again this often.
  std::chrono::milliseconds draRetryPeriod{std::chrono::seconds(10)};
  std::string nodeIp = "127.0.0.1";
  std::chrono::milliseconds nodeStatusUpdateFrequency{std::chrono::seconds(10)};
  // Without a change the status is still posted this often (kubelet: 5 min with leases).
  std::chrono::milliseconds nodeStatusReportFrequency{std::chrono::minutes(5)};
  std::chrono::milliseconds leaseRenewInterval{std::chrono::seconds(10)};
  std::int32_t leaseDurationSeconds = 40;
  std::chrono::milliseconds endpointStopGrace{std::chrono::minutes(5)};
  double timeScale = 1.0;  // pod run durations are divided by this
  ResourceList capacity{
      {"cpu", 8000}, {"memory", 32LL << 30}, {"pods", 110}, {"ephemeral-storage", 100LL << 30}};
  std::map<std::string, std::string> labels;  // added to the kubernetes.io/* ones
  nlohmann::json taints = nlohmann::json::array();
  std::string kubeletVersion = "v1.29.0-kubecomp-standin";
};

// Path of the device checkpoint under rootDir.
std::string checkpointPath(const StandinOptions& o);
// Path of the DRA claim checkpoint under rootDir (kubelet's dra_manager_state).
std::string draCheckpointPath(const StandinOptions& o);

class KubeletStandin {
 public:
  KubeletStandin(kube::KubeClient& client, StandinOptions options, obs::Metrics* metrics = nullptr);
  ~KubeletStandin();
  KubeletStandin(const KubeletStandin&) = delete;
  KubeletStandin& operator=(const KubeletStandin&) = delete;

  // Restores the checkpoint, clears the plugin directory's sockets (as kubelet on start),
  // serves Registration and PodResources, registers the Node, starts the informers and the
  // sync thread. Errors: "invalid" (checkpoint, socket paths), "unavailable" (cannot serve).
  Status start();
  // Stops everything (plugin streams, servers, informers, sync thread). Idempotent.
  void stop();

  // A simulated kubelet restart: Registration stops, every plugin is forgotten, every socket
  // in the device-plugin directory deleted, Registration serves again on a new kubelet.sock.
  // Pods keep running with their checkpointed devices; plugins must register again.
  Status simulateRestart();

  // Node registered and pods listed.
  bool ready() const;
  std::string registrationSocket() const;
  // Pods, their state and devices with Allocate's envs (GET /debug/pods).
  nlohmann::json debugState() const;
  std::vector<ActivePod> activePods() const;
  DeviceManager& devices() { return *devices_; }

  // Asks the sync thread for a node status sync now (in order with its other work).
  void requestNodeStatusSync();

 private:
  // kPreparing: admitted, waiting for its ResourceClaims to be prepared (containers not
  // started).
  enum class PodPhase { kPreparing, kRunning, kTerminated };
  struct PodRecord {
    std::string ns;
    std::string name;
    std::string uid;
    PodPhase phase = PodPhase::kRunning;
    ResourceList requests;
    std::vector<std::string> containers;
    std::optional<std::chrono::steady_clock::time_point> finishAt;
    std::string startTime;
    std::string startedAt;
    std::string podIp;
    std::map<std::string, std::vector<std::string>> claimsByContainer;  // for PodResources
  };

  void runSync();
  void enqueue(const std::string& key);
  void syncPod(const std::string& key);
  void admit(const nlohmann::json& pod);
  void reject(const nlohmann::json& pod, const Rejection& rejection);
  void resume(const nlohmann::json& pod);
  void startContainers(const std::string& key, const nlohmann::json& pod);
  // The DRA side (standin_dra.cpp): built with callbacks into this object; an admitted pod
  // with claims waits in kPreparing until they are prepared, then starts.
  std::unique_ptr<DraSide> makeDraSide();
  void waitForClaims(const std::string& key, const nlohmann::json& pod);
  void syncPreparing(const std::string& key, const nlohmann::json& pod);
  void releasePod(const std::string& uid);
  void prepareFailed(const nlohmann::json& pod, const std::string& error);
  void completeDue();
  void stopPod(const std::string& key, const nlohmann::json& pod, bool deleteAfter);
  Status patchPodStatus(const nlohmann::json& pod, const nlohmann::json& status);
  Status registerNode();
  void renewLease();
  nlohmann::json currentNode() const;
  ResourceList admissionAllocatable() const;
  Status serveRegistration();
  void removePluginSockets();
  void syncNodeStatus();

  kube::KubeClient& client_;
  StandinOptions opts_;
  obs::Metrics* metrics_;
  std::unique_ptr<DeviceManager> devices_;
  std::unique_ptr<DraSide> dra_;
  std::unique_ptr<RegistrationService> registration_;
  std::unique_ptr<PodResourcesService> podResources_;
  std::unique_ptr<grpcx::UnixServer> registrationServer_;
  std::unique_ptr<grpcx::UnixServer> podResourcesServer_;
  std::unique_ptr<kube::Informer> podInformer_;
  std::unique_ptr<kube::Informer> nodeInformer_;
  std::unique_ptr<kube::EventRecorder> events_;
  struct Counters;
  std::unique_ptr<Counters> counters_;

  std::mutex restartMu_;  // one simulated restart at a time; guards registrationServer_ swaps

  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::set<std::string> queue_;            // pod keys to sync
  std::map<std::string, PodRecord> pods_;  // key "ns/name" -> record
  ResourceList postedAllocatable_;         // allocatable of the last status we posted
  nlohmann::json lastPostedStatus_;        // without heartbeat times, for change detection
  std::chrono::steady_clock::time_point lastPosted_{};
  std::string nodeUid_;
  bool nodeRegistered_ = false;
  bool stopping_ = false;
  bool syncRequested_ = false;
  bool started_ = false;
  std::thread sync_;
};

}  // namespace kc::kubelet
