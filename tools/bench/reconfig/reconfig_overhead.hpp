#pragma once
// The software overhead of one 1-GPU reconfiguration at zero fabric latency, end to end on real
// processes (issue 12). One measurement, two users: bench_reconfig prints it on its own and
// bench_sched reports it as reconfig_overhead_ms beside its throughput figures.
//
// The cluster: kubecomp-sched, reconfig-mgr, a disaggpu-devplugin and a kubelet-standin per
// node, chassis-sim (latency 0) and the API server double, every one a child process. Per pod:
// pod created -> the scheduler's kubecomp.io/dst-node request -> reconfig-mgr's move verified
// (journal Succeeded) -> the destination's allocatable shows the GPU (device plugin -> kubelet
// status sync) -> bound. Each pod needs exactly one move (a detach and an attach: the source
// node is cordoned, its GPUs free, the destination full).
//
// Beside it, the original design's polling as an anchor (computed, not run): its device plugin
// re-read the chassis every 1 s and its Permit re-read the node every 1 s, so each added on
// average half an interval: ~1,000 ms mean on top of the same work.

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace kc::bench {

inline constexpr int kAnchorOriginalPollingMs = 1000;
inline constexpr double kReconfigGoalMs = 100;
// Pods (one move each) of a full and of a --quick run, and the stand-ins' status sync period.
inline constexpr int kReconfigPodsFull = 20;
inline constexpr int kReconfigPodsQuick = 5;
inline constexpr const char* kReconfigStatusSync = "10ms";

struct ReconfigOverhead {
  int pods = 0;
  std::string statusSync;
  // Per pod, ms: created -> request, request -> verified, verified -> allocatable,
  // allocatable -> bound, created -> bound.
  std::vector<double> toRequest, toMoved, toVisible, toBound, total;

  // The headline figure: the p50 of created -> bound, rounded to 0.1 ms.
  double overheadMs() const;
  // The human-readable lines (phases, anchor, goal), each starting with `indent`.
  void print(std::ostream& out, const std::string& indent = "  ") const;
  // reconfig_overhead_ms and the other figures, as bench_reconfig's last line.
  nlohmann::json toJson() const;
};

// Runs the measurement with `pods` pods (one move each) and the kubelet stand-ins' status sync
// period `statusSync` (a Go duration, e.g. "10ms"). Throws std::runtime_error naming the step
// that did not happen within its limit; never returns an empty result.
ReconfigOverhead measureReconfigOverhead(int pods, const std::string& statusSync);

}  // namespace kc::bench
