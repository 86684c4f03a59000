#pragma once
// The DRA manager half of kubelet (pkg/kubelet/cm/dra, v1.34): before a pod's containers
// start, every ResourceClaim it names is fetched, checked (reserved for the pod, allocated,
// its drivers registered) and prepared by each driver of its allocation with
// NodePrepareResources; after the pod ends, a claim no other pod on the node uses is
// unprepared with NodeUnprepareResources. The claim info cache (claims, the pods using them and
// the devices each driver prepared) is checkpointed in <root-dir>/dra_manager_state, so a
// restart neither forgets what to unprepare nor loses the CDI devices of running pods.
//
// Behaviour copied from kubelet:
// - Every check happens before the cache changes, so a pod whose driver is missing leaves
//   nothing to unprepare. A claim already prepared for another pod of the node is not prepared
//   again: the pod is only added to its users.
// - One NodePrepareResources per driver with every claim of the pod for it. A claim-level
//   error, a result for an unknown claim or a claim left out fails the whole preparation;
//   the pod does not start and is tried again (kubelet: at its pod worker's next sync).
// - Unprepare runs for a pod's claims once the pod has ended: a claim still used by another
//   pod only loses this pod; otherwise its drivers are called and, on success, the claim
//   leaves the cache. Failures (a driver gone, an error) are retried.
// - Whether a claim is prepared is not checkpointed: after a restart a pod that had not
//   started yet prepares again; running pods are not prepared again (kubelet prepares only
//   before it creates a pod's sandbox).
// Error texts are kubelet's, starting "prepare dynamic resources: ".
//
// Threads: one worker thread makes every call to the plugins (so a slow plugin never holds up
// the node's status or lease); the caller queues work and is called back.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "libcore/base/result.hpp"
#include "tools/kubelet-standin/dra_plugins.hpp"
#include "tools/kubelet-standin/dra_rules.hpp"

namespace kc::kubelet {

struct DraManagerOptions {
  std::string checkpointPath;  // "" = no checkpoint
  std::chrono::milliseconds retryPeriod{std::chrono::seconds(10)};
};

struct DraCallbacks {
  // GET of a ResourceClaim; the error message as client-go prints it.
  std::function<Result<nlohmann::json>(const std::string& ns, const std::string& name)> getClaim;
  // A pod's claims are prepared: it may start.
  std::function<void(const std::string& podKey)> prepared;
  // A preparation failed (kubelet's Event FailedPrepareDynamicResources).
  std::function<void(const nlohmann::json& pod, const std::string& error)> prepareFailed;
};

class DraManager {
 public:
  DraManager(DraManagerOptions options, DraPlugins& plugins, DraCallbacks callbacks);
  ~DraManager();
  DraManager(const DraManager&) = delete;
  DraManager& operator=(const DraManager&) = delete;

  // Reads the checkpoint (missing = fresh node). Error "invalid" for a corrupt one.
  Status restore();
  void start();
  void stop();

  // Queues (or refreshes with the pod's newest object) the preparation of a pod's claims;
  // tried at once, then every retryPeriod until it succeeds or the pod ends.
  void requestPrepare(const nlohmann::json& pod);
  // Whether requestPrepare succeeded for this pod uid.
  bool podPrepared(const std::string& podUid) const;
  // The pod ended (or is gone): a pending preparation is dropped and its claims unprepared.
  void requestUnprepare(const std::string& podUid);
  // After a restart: unprepares the claims of every pod in the cache not in `activeUids`.
  void retainOnly(const std::set<std::string>& activeUids);

  // A claim in the cache ("" ns/name unknown), for PodResources.
  std::optional<ClaimInfo> claim(const std::string& ns, const std::string& name) const;
  // {"claims": [...], "drivers": [...], counters} for GET /debug/pods.
  nlohmann::json debugState() const;

  // One preparation / unpreparation now, on the caller's thread (the worker's steps).
  Status prepare(const nlohmann::json& pod);
  Status unprepare(const std::string& podUid);

 private:
  struct PrepareWork {
    std::string key;
    nlohmann::json pod;
    std::chrono::steady_clock::time_point due;
  };

  void run();
  bool runOneDue();
  Result<std::vector<ClaimInfo>> checkPodClaims(const nlohmann::json& pod);
  Result<std::map<std::string, std::vector<std::string>>> addPodLocked(
      const std::string& podUid, const std::vector<ClaimInfo>& claims);
  Status callPrepare(const std::string& driver, const std::vector<std::string>& claimKeys);
  void writeCheckpointLocked();

  DraManagerOptions opts_;
  DraPlugins& plugins_;
  DraCallbacks callbacks_;
  std::thread worker_;

  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<std::string, ClaimInfo> cache_;                                    // "ns/name" -> claim
  std::map<std::string, PrepareWork> toPrepare_;                              // pod uid -> work
  std::map<std::string, std::chrono::steady_clock::time_point> toUnprepare_;  // pod uid -> due
  std::set<std::string> preparedPods_;
  std::uint64_t prepareFailures_ = 0;
  std::uint64_t unprepareFailures_ = 0;
};

}  // namespace kc::kubelet
