#pragma once
// reconfig-mgr's worker for one GPUPool: its driver, inventory, journal, status writes, move
// planning and the thread that runs them (pool_worker.cpp: the move environment and the loop;
// pool_worker_status.cpp: spec, driver, inventory and status; pool_worker_plan.cpp: requests
// and plans). Internal to reconfig-mgr.

#include <spdlog/spdlog.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "libcore/alloc/idle_recompose.hpp"
#include "libcore/api/dra_binding.hpp"
#include "libcore/api/dra_claim.hpp"
#include "libcore/base/clock.hpp"
#include "libcore/base/rfc3339.hpp"
#include "services/reconfig-mgr/idle_planner.hpp"
#include "services/reconfig-mgr/move_planner.hpp"
#include "services/reconfig-mgr/move_runner.hpp"
#include "services/reconfig-mgr/moves_gate.hpp"
#include "services/reconfig-mgr/pool_view.hpp"
#include "services/reconfig-mgr/reconfig_shared.hpp"
#include "services/reconfig-mgr/slice_publisher.hpp"

namespace kc::reconfig {

using nlohmann::json;

// One GPUPool: its driver, inventory, journal and the thread that runs them.
class PoolWorker final : public MoveEnv {
 public:
  PoolWorker(std::string name, ReconfigManager::Shared& shared)
      : name_(std::move(name)),
        sh_(shared),
        clock_(sh_.client->clock()),
        runner_(*this, clock_, sh_.opts.runner),
        rng_(sh_.opts.seed),
        movesGate_(std::chrono::seconds(sh_.opts.movesReprobeSeconds)),
        slices_(*sh_.client, name_) {}
  ~PoolWorker() override { stop(); }

  void start() {
    thread_ = std::thread([this] { run(); });
  }
  void stop();
  void wake();
  bool exited() const { return exited_.load(); }

  // MoveEnv
  fabric::FabricDriver& fabric() override { return *driver_; }
  std::optional<api::UsageReport> usage(const std::string& node) override;
  std::optional<api::UsageReport> drainUsage(const Move& m) override;
  bool podWaiting(const Move& m) override;
  std::optional<std::string> cancelBackground(const Move& m) override;
  Status persist(const Journal& journal) override {
    journal_ = journal;
    return writeStatus(true);
  }
  void event(const Move& m, bool warning, const std::string& reason,
             const std::string& message) override {
    if (m.forClaim()) {
      claimEvent(m, warning, reason, message);
      return;
    }
    if (m.background()) {
      poolEvent(warning, reason,
                reason == "GPUMoveStarted" ? message + " (background: " + m.reason + ")" : message);
      return;
    }
    podEvent(m.podNamespace, m.podName, m.podUid, warning, reason, message);
  }
  void inventoryRead(const fabric::Inventory& inventory) override {
    inventory_ = inventory;
    lastRead_ = clock_.now();
    lastInventoryTime_ = formatRfc3339(clock_.wallNow());
    inventoryError_.reset();
  }
  void quarantine(const std::string& gpu, const std::string& reason) override;
  void unsupported(const std::string& message) override;
  void phaseEnded(const Move& m, MovePhase phase, double seconds) override;
  void moveFinished(const Move& m) override;
  void fabricDone() override { wake(); }
  void movesSerialised(const std::string& why) override {
    spdlog::warn("pool {}: {}", name_, why);
    poolEvent(true, "MovesSerialised", why);
  }
  // The move's own re-read showed `gpu` on `host`: the cached inventory says so too (the next
  // poll would, and the destination's node agent reads the pool status in between).
  void gpuMoved(const std::string& gpu, const std::string& host) override {
    // The move's verifying read is a look at the chassis as fresh as a planning read (this is
    // the chassis' only client): the next plan, right after, need not read again.
    lastVerified_ = clock_.now();
    if (inventory_) {
      for (auto& g : inventory_->gpus) {
        if (g.id == gpu) {
          g.hostPort = host;
        }
      }
    }
  }

 private:
  // Per pod request, for the paper's phase histograms (in memory; a restart loses them).
  struct RequestTiming {
    SteadyTime firstSeen{};
    double nodeSelection = 0;
    double availability = 0;
    double retrieval = 0;
    double reallocation = 0;
    std::int64_t gpusMoved = 0;
    bool planned = false;
    SteadyTime lastMoveDone{};
    std::string node;
  };
  RequestTiming& timing(const std::string& pod) { return timings_[pod]; }

  void podEvent(const std::string& ns, const std::string& name, const std::string& uid,
                bool warning, const std::string& reason, const std::string& message) {
    kube::ObjectReference ref;
    ref.kind = "Pod";
    ref.apiVersion = "v1";
    ref.ns = ns;
    ref.name = name;
    ref.uid = uid;
    auto r = sh_.recorder->record(ref, warning ? "Warning" : "Normal", reason, message);
    if (!r) {
      spdlog::debug("event {} on {}/{}: {}", reason, ns, name, r.error().toError().message);
    }
  }

  // Events of background moves (no pod) go on the GPUPool.
  void poolEvent(bool warning, const std::string& reason, const std::string& message);

  // The pool object as the informer has it (null when deleted).
  kube::ObjectPtr poolObject() const { return sh_.pools->get("", name_); }

  // Loads journal and quarantine from the object: at start, and when someone else wrote them.
  void loadFromObject(const json& obj);

  Status buildDriver();

  void readInventory();

  UsageByNode usageByNode();

  std::optional<PoolView> currentView() {
    if (!inventory_ || !spec_) {
      return std::nullopt;
    }
    auto view = buildView(*spec_, *inventory_, usageByNode(), journal_, quarantine_);
    markClaimHolders(view);
    markAttachFailures(view);
    return view;
  }

  // Renders and writes the status when it changed. `journalChange`: the write records a
  // journal step and must land (optimistic concurrency on the object's resourceVersion).
  Status writeStatus(bool journalChange);

  // The DRA path: the pool's ResourceSlices follow `status` (status.gpus) and the spec's nodes
  // and allocationPath (slice_publisher.hpp); nothing is sent while those stay the same. A pool
  // that is gone (`gone`) has its slices removed; one whose spec cannot be read keeps them.
  void syncSlices(const json& status, bool gone = false);
  // Whether the slices last published withhold `gpu` (it drains).
  bool publishedWithheld(const std::string& gpu) const;
  // A DRA pool's drain in flight whose GPU the published slices withhold: when it may go on.
  std::optional<SteadyTime> draDrainDue();

  // The attach controller (pool_worker_claims.cpp, docs/dra.md "Attach").
  // Claims whose allocation holds a device of one of this GPUPool's DRA pools.
  std::vector<api::Claim> poolClaims();
  // The GPUs (of `gpus`) those claims hold, and in which DRA pool.
  api::HeldDevices heldDevices(const std::vector<api::PoolGpu>& gpus);
  // Every GPU some ResourceClaim's allocation holds, in this pool's fabric pool or one of its
  // node pools, counts as in use ("ResourceClaim <ns>/<name>" in inUseBy): neither planner moves
  // a GPU a claim holds, wherever the allocator took it from.
  void markClaimHolders(PoolView& view);
  // A GPU whose attach for a claim failed is shown Unhealthy (so withheld from the slices, and
  // no allocator picks it again at once) for --attach-failure-holdoff-seconds.
  void markAttachFailures(PoolView& view);
  // status.gpus as last rendered.
  std::vector<api::PoolGpu> statusGpus() const;
  // For every such claim's device, api::nextAttachStep: report a condition, or start the move
  // (kind Claim) when none is in flight. Only on a DRA pool with the claims informer running.
  void driveClaims();
  void startClaimMove(const api::Claim& claim, const api::AttachStep& step);
  // The claim, read afresh from the API server, still has the same allocation and `device`
  // still waits for its binding conditions.
  bool stillWaiting(const api::Claim& claim, const api::ClaimDevice& device);
  void reportClaim(const api::Claim& claim, const api::ClaimDevice& device,
                   const api::AttachStep& step);
  // Sets `condition` on the claim's device through the status subresource (observedGeneration
  // the claim's generation; one re-read and retry on a conflict).
  Status setClaimCondition(const std::string& ns, const std::string& name, const std::string& uid,
                           const api::ClaimDevice& device, api::ClaimCondition condition);
  // podWaiting for a claim move: same UID, allocated that device for move.toNode, waiting.
  bool claimWaiting(const Move& m);
  // A claim move that failed (not cancelled): attach-failed=True, reason AttachFailed.
  void claimMoveFailed(const Move& m);
  void claimEvent(const Move& m, bool warning, const std::string& reason,
                  const std::string& message);

  // Every kubecomp-sched pod, parsed once per resourceVersion (the loop runs on every change
  // of any pod, node or pool; re-parsing thousands of pods each time would dominate).
  std::vector<PodInfo> kubecompPods();

  // The paper's phase timings of each request, observed when its pod is bound.
  void trackRequests(const std::vector<PodInfo>& pods);

  // Plans and starts the moves that may start beside those in flight.
  void planAndStart(const std::vector<PodInfo>& pods);

  // The waiting pods' plan (move_planner.hpp) on `view`, with the move in flight.
  PlanResult demandPlan(const PoolView& view, const std::vector<PodInfo>& pods);

  // CPU and memory of the pool's nodes from their Node objects (idle_planner.hpp).
  std::map<std::string, NodeCapacity> nodeCapacities();

  Result<IdlePlan> idlePlan(const std::vector<PodInfo>& pods);

  // Idle-time recomposition: no move in flight and no real request waiting for this pool
  // (the caller checked): start the background move the policy plans, if any. The plan is made
  // again after every landing and every change of pods, nodes or inventory (each wake).
  void startBackground(const std::vector<PodInfo>& pods);

  void run();  // loop() with the internal-error guard
  void loop();

  bool stoppingNow() {
    std::lock_guard lock(mu_);
    return stopping_;
  }
  void waitFor(std::chrono::milliseconds d) { waitUntil(clock_.now() + d); }
  void waitUntil(SteadyTime t) {
    std::unique_lock lock(mu_);
    clock_.waitUntil(lock, cv_, t, [this] { return stopping_ || dirty_; });
  }

  const std::string name_;
  ReconfigManager::Shared& sh_;
  kc::Clock& clock_;
  MoveRunner runner_;
  alloc::SplitMix64 rng_;
  std::thread thread_;
  std::atomic<bool> exited_{false};
  std::mutex mu_;  // guards stopping_ and dirty_
  std::condition_variable cv_;
  bool stopping_ = false;
  bool dirty_ = false;

  // Worker-thread state.
  std::optional<PoolSpec> spec_;
  std::optional<std::string> specError_;
  PoolSpec driverSpec_;
  std::unique_ptr<fabric::FabricDriver> driver_;
  std::optional<fabric::Inventory> inventory_;
  std::optional<std::string> inventoryError_;
  MovesGate movesGate_;  // a refusal as unsupported stops moves until the re-probe
  SteadyTime lastRead_{};
  SteadyTime lastVerified_{};  // the last move verified by its own re-read (gpuMoved)
  double lastReadSeconds_ = 0;
  std::string lastInventoryTime_;
  Journal journal_;
  Quarantine quarantine_;
  json previousStatus_ = json::object();
  json lastWrittenMoves_ = json::array();
  std::string resourceVersion_;
  std::int64_t lastWriteGeneration_ = 0;
  SlicePublisher slices_;
  json lastSliceInputs_;  // what the slices were last made to match (null: not yet)
  // DRA drain: the GPU and when the published slices first withheld it (drainUsage).
  std::pair<std::string, SteadyTime> draWithheldSince_;
  // GPU id -> until when it is withheld after a failed attach, and why.
  std::map<std::string, std::pair<SteadyTime, std::string>> attachFailed_;
  // Pod moves the fabric failed: per GPU and per chassis, how many in a row, until when the
  // GPU (or every GPU of the chassis) is held back, and why (moveFailed, markAttachFailures).
  struct Backoff {
    int failures = 0;
    SteadyTime until{};
    std::string why;
  };
  std::map<std::string, Backoff> gpuBackoff_;
  std::map<std::string, Backoff> chassisBackoff_;
  MovePhase lastEndedPhase_ = MovePhase::kDraining;  // of the move in flight (phaseEnded)
  void moveFailed(const Move& m);
  bool reload_ = false;
  std::map<std::string, RequestTiming> timings_;
  std::map<std::string, std::string> insufficient_;
  // The GPUs demand moves delivered to pods still waiting for them (move_planner.hpp).
  Deliveries delivered_;
  SteadyTime idlePauseUntil_{};    // no background move before (after one failed)
  std::string idleError_;          // last idle-time planning error, logged once
  std::set<std::string> badPods_;  // "ns/name@rv" already warned about
  struct ParsedPod {
    std::string resourceVersion;
    std::optional<PodInfo> info;  // nullopt: unreadable
  };
  std::map<std::string, ParsedPod> podCache_;
};

}  // namespace kc::reconfig
