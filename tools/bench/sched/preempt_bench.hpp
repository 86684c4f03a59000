#pragma once
// Preemption decisions at 5,000 nodes and 10,000 running pods (bench_sched, issue 27):
// kubecomp-sched's cache alone (informer ingest, the queue, placePod failing, the running pods
// gathered, alloc::selectPreemption), no API server. 5,000 nodes of 2 attached GPUs in 50
// GPUPools of 100 nodes, no GPU free anywhere: two 1-GPU pods of priorities 0..9 run on every
// node. Each sample is one pod of priority 100 asking 1 GPU: it fits nowhere even with GPUs
// moved, every node is a candidate, and the lowest-priority, latest-started pod is chosen.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <vector>

namespace kc::bench {

struct PreemptScenario {
  std::uint32_t samples = 200;
};

struct PreemptFigures {
  std::vector<double> ms;     // per preempting pod: the cache's whole decision
  std::uint64_t victims = 0;  // victims chosen over all samples, warm-up included (one each)
  void print(std::ostream& out) const;
  void addTo(nlohmann::json& out) const;  // preempt_decision_p99_ms and its details
};

// Throws std::runtime_error when a sample does not end in a preemption.
PreemptFigures measurePreemption(const PreemptScenario& scenario);

}  // namespace kc::bench
