#pragma once
// reconfig-mgr as a library: the only fabric client of the suite. For every GPUPool it reads
// the chassis inventory (through libcore/fabric, every spec.pollIntervalSeconds and before each
// planned move), merges the device plugins' usage reports (Node annotation
// kubecomp.io/gpu-usage) into the GPUPool status, and carries out the moves that waiting
// kubecomp-sched pods need (move_planner.hpp, move_runner.hpp), one at a time per chassis
// (moves on different chassis of a pool in parallel), pools in parallel (one worker thread per
// pool); with --recompose-policy idle-gather also background
// moves while a pool's fabric is idle (idle_planner.hpp). Only the leader (Lease) acts; the
// others watch.
// main.cpp parses flags and runs one of these; the tests run the binary.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "libcore/alloc/gpu_candidate.hpp"
#include "libcore/api/names.hpp"
#include "libcore/base/result.hpp"
#include "libcore/fabric/call_policy.hpp"
#include "libcore/kube/client.hpp"
#include "libcore/kube/events.hpp"
#include "libcore/kube/informer.hpp"
#include "libcore/kube/leader.hpp"
#include "services/reconfig-mgr/move_runner.hpp"

namespace kc::obs {
class Metrics;
class HealthChecks;
}  // namespace kc::obs

namespace kc::reconfig {

struct ReconfigOptions {
  std::string identity;                          // Lease holder and Event source instance
  std::string schedulerName = "kubecomp-sched";  // pods whose moves we make
  std::string secretNamespace = "kubecomp";      // of credentialsSecret without a namespace
  std::string gpuPolicy = "unattached-first";    // libcore GPU policy (policy_registry.hpp)
  // Idle-time recomposition (idle_planner.hpp): a libcore recomposition policy name; "none" is
  // the paper's (GPUs move only for a waiting pod).
  std::string recomposePolicy = "none";
  std::chrono::seconds defaultRuntime{300};     // expected run time of a pod that gives none
  std::chrono::seconds recomposeCooldown{300};  // a GPU moved in the background stays this long
  // A pool whose fabric refused a move as unsupported tries the next needed move again after
  // this long (MovesGate); 0: never (until its chassis list changes or a restart).
  std::int64_t movesReprobeSeconds = 300;
  std::uint64_t seed = 1;  // for the "random" policy
  // Moves in parallel across chassis (one per chassis), fabric calls on their own threads.
  MoveRunnerOptions runner{.concurrency = {1, 0}, .asyncFabric = true};
  fabric::CallPolicy callPolicy;  // every chassis request
  // A plan uses an inventory read at most this long ago (else it reads first).
  std::chrono::milliseconds planInventoryMaxAge{1000};
  // DRA drain: how long the slices must have withheld a GPU before it counts as withdrawn.
  std::chrono::milliseconds draDrainSettle{500};
  // DRA: a GPU whose attach for a claim failed is withheld (shown Unhealthy) this long.
  std::chrono::milliseconds attachFailureHoldoff{300'000};
  // A pod's move that the fabric failed (detach, attach or verification) holds its GPU back
  // from the planners for this long, doubling per further failure of that GPU, up to
  // attachFailureHoldoff; two failures in a row on one chassis hold back the whole chassis the
  // same way. A success clears it (no retry storm on a sick GPU or chassis).
  std::chrono::milliseconds moveFailureBackoff{10'000};
  bool leaderElect = true;
  std::string leaseNamespace = "kubecomp";
  std::string leaseName = "reconfig-mgr";
  std::chrono::milliseconds leaseDuration{15'000};
  std::chrono::milliseconds renewDeadline{10'000};
  std::chrono::milliseconds retryPeriod{2'000};
};

// Checks the options (policy name, durations). Error "invalid".
Status validate(const ReconfigOptions& options);

class PoolWorker;

class ReconfigManager {
 public:
  // `metrics` and `health` may be null.
  ReconfigManager(ReconfigOptions options, kube::KubeClient& client, obs::Metrics* metrics,
                  obs::HealthChecks* health);
  ~ReconfigManager();
  ReconfigManager(const ReconfigManager&) = delete;
  ReconfigManager& operator=(const ReconfigManager&) = delete;

  // Informers, then the election (or the workers at once without it).
  Status start();
  // Steps down, stops every worker (a fabric request in progress finishes first) and the
  // informers. Idempotent.
  void stop();
  bool leading() const { return leading_.load(); }

  struct Metrics;
  struct Shared;

 private:
  void lead();         // runs while leading: keeps one worker per GPUPool
  void startClaims();  // probes resource.k8s.io/v1, starts the claims informer when served
  void wakeAll();

  ReconfigOptions opts_;
  kube::KubeClient& client_;
  obs::HealthChecks* health_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<Shared> shared_;
  std::unique_ptr<kube::Informer> pools_;
  std::unique_ptr<kube::Informer> nodes_;
  std::unique_ptr<kube::Informer> pods_;
  // ResourceClaims (the DRA attach controller), started only when the API server serves
  // resource.k8s.io/v1.
  std::unique_ptr<kube::Informer> claims_;
  bool claimsStarted_ = false;
  std::unique_ptr<kube::LeaderElector> elector_;
  std::thread direct_;  // the lead() thread without leader election
  std::atomic<bool> leading_{false};
  std::atomic<bool> stopLeading_{false};
  std::mutex mu_;  // guards workers_ and the lead() wait
  std::condition_variable cv_;
  bool changed_ = false;
  std::map<std::string, std::unique_ptr<PoolWorker>> workers_;
  bool started_ = false;
  bool stopped_ = false;  // guarded by mu_
};

}  // namespace kc::reconfig
