#pragma once
// Gang decisions at 5,000 nodes (bench_sched, issue 27): kubecomp-sched's cache alone (the
// daemon's own code: informer ingest, the queue, alloc::GangPlanner, reservations), no API
// server, so the figure is the scheduler's own work per gang pod. 5,000 nodes of 3 attached
// GPUs in 50 GPUPools of 100 nodes with 100 unattached GPUs each; PodGroups of 8 pods of 2 GPUs
// (minMember 8), created in one burst; the eq1 pool policy places them, the later gangs with
// GPU moves (every node keeps one GPU free after its first member, so later gangs need moves).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>

namespace kc::bench {

struct GangScenario {
  std::uint32_t gangs = 1'000;  // of 8 pods each
  std::uint32_t size = 8;
};

struct GangFigures {
  std::uint64_t pods = 0;      // gang pods decided (bound or reserved as part of their gang)
  std::uint64_t bound = 0;     // bound at once (no GPU to move for the whole gang)
  std::uint64_t reserved = 0;  // reserved, waiting for GPU moves
  std::uint64_t refused = 0;   // gangs that did not fit (none expected)
  double seconds = 0;          // inside the cache's next() calls
  double podsPerS() const { return seconds <= 0 ? 0 : static_cast<double>(pods) / seconds; }
  void print(std::ostream& out) const;
  void addTo(nlohmann::json& out) const;  // gang_pods_per_s_5000_nodes and its details
};

// Throws std::runtime_error when a gang pod is left undecided.
GangFigures measureGangs(const GangScenario& scenario);

}  // namespace kc::bench
