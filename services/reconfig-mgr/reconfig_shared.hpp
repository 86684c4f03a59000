#pragma once
// reconfig-mgr's internals shared by the manager (reconfig.cpp) and its pool workers
// (pool_worker*.cpp): the metrics and what every worker reads. Not part of the library's API.

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <memory>
#include <string>
#include <utility>

#include "libcore/alloc/policy_registry.hpp"
#include "libcore/kube/events.hpp"
#include "services/reconfig-mgr/move_journal.hpp"
#include "services/reconfig-mgr/reconfig.hpp"

namespace kc::reconfig {

using SteadyTime = std::chrono::steady_clock::time_point;

namespace detail {
inline const prometheus::Histogram::BucketBoundaries& secondsBuckets() {
  static const prometheus::Histogram::BucketBoundaries b = {
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
      2.5,   5,      10,    25,   50,    100,  250, 500,  1000};
  return b;
}

inline std::string gpusLabel(std::int64_t n) {
  return n >= 8 ? std::string("8+") : std::to_string(n);
}

inline double secondsSince(SteadyTime t, SteadyTime now) {
  return std::chrono::duration<double>(now - t).count();
}

// One pool's gauges (kubecomp_reconfig_pool_gpus by state, moves in flight, oldest start).
struct PoolGauges {
  double quarantined = 0, moving = 0, unhealthy = 0, inUse = 0, free = 0;
  double inFlight = 0;
  double oldestStart = 0;  // Unix seconds; 0 = no move in flight
  std::array<std::pair<const char*, double>, 5> byState() const {
    return {{{"quarantined", quarantined},
             {"moving", moving},
             {"unhealthy", unhealthy},
             {"in_use", inUse},
             {"free", free}}};
  }
};
}  // namespace detail

struct ReconfigManager::Metrics {
  explicit Metrics(prometheus::Registry& reg)
      : phases(prometheus::BuildHistogram()
                   .Name("kubecomp_reconfig_phase_seconds")
                   .Help("Duration of the paper's reconfiguration phases per pod request "
                         "(node_selection, "
                         "gpu_availability_update, allocation_retrieval, reallocation, "
                         "detection_and_binding), "
                         "by GPUs moved for the pod")
                   .Register(reg)),
        movePhases(prometheus::BuildHistogram()
                       .Name("kubecomp_reconfig_move_phase_seconds")
                       .Help("Duration of each phase of one GPU move (Draining, Detaching, "
                             "Attaching, Verifying, "
                             "RollingBack)")
                       .Register(reg)),
        moves(prometheus::BuildCounter()
                  .Name("kubecomp_reconfig_moves_total")
                  .Help("GPU moves finished, by result")
                  .Register(reg)),
        movesOk(moves.Add({{"result", "succeeded"}})),
        movesFailed(moves.Add({{"result", "failed"}})),
        background(prometheus::BuildCounter()
                       .Name("kubecomp_reconfig_background_moves_total")
                       .Help("Background moves of idle-time recomposition (--recompose-policy) "
                             "finished, by result (succeeded, failed, cancelled: a real request "
                             "needed the fabric while it was still draining); they count in "
                             "kubecomp_reconfig_moves_total too")
                       .Register(reg)),
        backgroundOk(background.Add({{"result", "succeeded"}})),
        backgroundFailed(background.Add({{"result", "failed"}})),
        backgroundCancelled(background.Add({{"result", "cancelled"}})),
        failures(prometheus::BuildCounter()
                     .Name("kubecomp_reconfig_failures_total")
                     .Help("Failures, by kind (inventory, move, status_write, unsupported, "
                           "quarantine, insufficient)")
                     .Register(reg)),
        inventoryReads(prometheus::BuildCounter()
                           .Name("kubecomp_reconfig_inventory_reads_total")
                           .Help("Fabric inventory reads, by result")
                           .Register(reg)),
        readsOk(inventoryReads.Add({{"result", "ok"}})),
        readsFailed(inventoryReads.Add({{"result", "error"}})),
        leader(prometheus::BuildGauge()
                   .Name("kubecomp_reconfig_is_leader")
                   .Help("1 while this replica holds the lease and acts")
                   .Register(reg)
                   .Add({})),
        pools(prometheus::BuildGauge()
                  .Name("kubecomp_reconfig_pools")
                  .Help("GPUPools with a worker")
                  .Register(reg)
                  .Add({})),
        poolGpus(prometheus::BuildGauge()
                     .Name("kubecomp_reconfig_pool_gpus")
                     .Help("GPUs of each GPUPool by state as its last status shows them "
                           "(quarantined, moving, unhealthy, in_use, free: healthy, unused, in no "
                           "move); only the replica that acts has them")
                     .Register(reg)),
        movesInFlight(prometheus::BuildGauge()
                          .Name("kubecomp_reconfig_moves_in_flight")
                          .Help("GPU moves of each GPUPool not finished yet")
                          .Register(reg)),
        oldestMove(prometheus::BuildGauge()
                       .Name("kubecomp_reconfig_oldest_move_start_timestamp_seconds")
                       .Help("Unix time the oldest move in flight of each GPUPool started (0: "
                             "none)")
                       .Register(reg)) {
    // Histograms by move phase exist from the start (empty), as Prometheus advises for known
    // label values: dashboards and rules see them before the first move.
    for (MovePhase p : {MovePhase::kDraining, MovePhase::kDetaching, MovePhase::kAttaching,
                        MovePhase::kVerifying, MovePhase::kRollingBack}) {
      movePhases.Add({{"phase", std::string(toString(p))}}, detail::secondsBuckets());
    }
    for (const char* kind : {"inventory", "move", "status_write", "unsupported", "quarantine",
                             "insufficient", "slice_publish", "internal"}) {
      failures.Add({{"kind", kind}});
    }
  }

  void phase(const std::string& name, std::int64_t gpus, double seconds) {
    phases.Add({{"phase", name}, {"gpus", detail::gpusLabel(gpus)}}, detail::secondsBuckets())
        .Observe(seconds);
  }
  void failure(const std::string& kind) { failures.Add({{"kind", kind}}).Increment(); }
  // The pool gauges from one rendered status (PoolWorker::writeStatus), and their removal when
  // the pool's worker ends (pool gone, lease lost, stop), so no stale pool keeps alerting.
  void poolState(const std::string& pool, const detail::PoolGauges& g) {
    for (const auto& [state, n] : g.byState()) {
      poolGpus.Add({{"pool", pool}, {"state", state}}).Set(n);
    }
    movesInFlight.Add({{"pool", pool}}).Set(g.inFlight);
    oldestMove.Add({{"pool", pool}}).Set(g.oldestStart);
  }
  void forgetPool(const std::string& pool) {
    for (const auto& [state, n] : detail::PoolGauges{}.byState()) {
      poolGpus.Remove(&poolGpus.Add({{"pool", pool}, {"state", state}}));
    }
    movesInFlight.Remove(&movesInFlight.Add({{"pool", pool}}));
    oldestMove.Remove(&oldestMove.Add({{"pool", pool}}));
  }

  prometheus::Family<prometheus::Histogram>& phases;
  prometheus::Family<prometheus::Histogram>& movePhases;
  prometheus::Family<prometheus::Counter>& moves;
  prometheus::Counter& movesOk;
  prometheus::Counter& movesFailed;
  prometheus::Family<prometheus::Counter>& background;
  prometheus::Counter& backgroundOk;
  prometheus::Counter& backgroundFailed;
  prometheus::Counter& backgroundCancelled;
  prometheus::Family<prometheus::Counter>& failures;
  prometheus::Family<prometheus::Counter>& inventoryReads;
  prometheus::Counter& readsOk;
  prometheus::Counter& readsFailed;
  prometheus::Gauge& leader;
  prometheus::Gauge& pools;
  prometheus::Family<prometheus::Gauge>& poolGpus;
  prometheus::Family<prometheus::Gauge>& movesInFlight;
  prometheus::Family<prometheus::Gauge>& oldestMove;
};

// What every worker reads: the client, the informers' stores, the recorder, the options.
struct ReconfigManager::Shared {
  ReconfigOptions opts;
  kube::KubeClient* client = nullptr;
  Metrics* metrics = nullptr;
  alloc::GpuPolicy policy{};
  alloc::RecomposeKind recompose = alloc::RecomposeKind::None;
  std::unique_ptr<kube::EventRecorder> recorder;
  const kube::Store* pools = nullptr;
  const kube::Store* nodes = nullptr;
  const kube::Store* pods = nullptr;
  // ResourceClaims of all namespaces; null when the API server serves no resource.k8s.io/v1.
  const kube::Store* claims = nullptr;
};

}  // namespace kc::reconfig
