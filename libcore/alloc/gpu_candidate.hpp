#pragma once
// GPU candidate choice: which GPUs to move to the node chosen by selectNode (paper 001,
// section V-A-2, Algorithm 1).
//
// Candidates are the free GPUs (not in use, healthy, not draining) of the target node's pool
// that are not attached to the target node. A policy ranks them; the first `count` are moved.
//
// Algorithm 1 (GPU scoring function):
//   1  nodeGPUCnt[*] <- 0
//   2  foreach gpu in gpuCandidates: nodeGPUCnt[gpu.node] += 1
//   4  foreach gpu in gpuCandidates: gpu.score <- -nodeGPUCnt[gpu.node]
// and the candidates with the highest scores are moved first: GPUs on nodes holding few free
// GPUs are likely fragments (free, but too few to serve a pod there), so they are taken first.
//
// Policies (one unit, one ranking each, all listed in policy_registry.hpp):
//   "alg1"             Algorithm 1 exactly as the original code ran it: unattached GPUs all
//                      share one pseudo-node (the original's empty host port), so a large free
//                      unattached pool scores lowest and is taken LAST. Ties: GPU id.
//   "unattached-first" ours: unattached GPUs first (moving them needs no detach, and takes no
//                      GPU away from a node), then Algorithm 1's score; ties by node name, then
//                      GPU id, so fragments of one node leave together.
//   "chassis-spread"   ours for a parallel move schedule (move_schedule.hpp): ranks as
//                      "unattached-first", but among candidates of equal rank (unattached, or
//                      the same Algorithm 1 score) the next one taken is on the chassis with the
//                      fewest GPUs taken so far (then the unattached-first order), so a demand's
//                      moves spread over chassis and can run at once. The same nodes give GPUs
//                      as under unattached-first whenever a whole score group is taken.
//   "random"           a seeded random choice (the caller's SplitMix64), a baseline.
//   "first-fit"        the first candidates in inventory order, a baseline.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "libcore/alloc/gpu_model.hpp"
#include "libcore/alloc/pool_model.hpp"
#include "libcore/alloc/rng.hpp"
#include "libcore/base/result.hpp"

namespace kc::alloc {

// A GPU-choice policy: reorders `candidates` so that its first `count` entries are the ones
// to move (entries after that are left in unspecified order). `rng` is non-null when
// needsRng is true.
struct GpuPolicy {
  std::string_view name;
  std::string_view description;
  bool needsRng;
  void (*rank)(const ClusterState& state, std::vector<GpuIndex>& candidates, std::uint32_t count,
               SplitMix64* rng);
};

struct Algorithm1GpuPolicy {
  static constexpr std::string_view kName = "alg1";
  static constexpr std::string_view kDescription =
      "paper Algorithm 1 as the original ran it (unattached GPUs form one group)";
  static void rank(const ClusterState& state, std::vector<GpuIndex>& candidates,
                   std::uint32_t count, SplitMix64* rng);
};
struct UnattachedFirstGpuPolicy {
  static constexpr std::string_view kName = "unattached-first";
  static constexpr std::string_view kDescription =
      "unattached GPUs first, then Algorithm 1 (fewest free candidates on the same node)";
  static void rank(const ClusterState& state, std::vector<GpuIndex>& candidates,
                   std::uint32_t count, SplitMix64* rng);
};
struct ChassisSpreadGpuPolicy {
  static constexpr std::string_view kName = "chassis-spread";
  static constexpr std::string_view kDescription =
      "as unattached-first, but equally ranked GPUs are taken from the chassis with the fewest "
      "taken so far (moves on different chassis can run in parallel)";
  static void rank(const ClusterState& state, std::vector<GpuIndex>& candidates,
                   std::uint32_t count, SplitMix64* rng);
};
struct RandomGpuPolicy {
  static constexpr std::string_view kName = "random";
  static constexpr std::string_view kDescription = "uniformly random candidates (seeded)";
  static void rank(const ClusterState& state, std::vector<GpuIndex>& candidates,
                   std::uint32_t count, SplitMix64* rng);
};
struct FirstFitGpuPolicy {
  static constexpr std::string_view kName = "first-fit";
  static constexpr std::string_view kDescription = "first candidates in inventory order";
  static void rank(const ClusterState& state, std::vector<GpuIndex>& candidates,
                   std::uint32_t count, SplitMix64* rng);
};

// The candidates for `target`, in inventory order, of an accepted model only (the default
// filter accepts any). Empty if the node is wired to no pool.
// Precondition: target < state.nodeCount().
std::vector<GpuIndex> gpuCandidates(const ClusterState& state, NodeIndex target,
                                    const GpuModelFilter& models = {});

// Algorithm 1's score of each candidate (same order as `candidates`), unattached GPUs grouped
// as one pseudo-node as in the original.
std::vector<std::int64_t> algorithm1Scores(const ClusterState& state,
                                           std::span<const GpuIndex> candidates);

// The `count` GPUs to move to `target`, best first, among the candidates of an accepted model
// (the policy ranks only those). Errors: "invalid" (bad node index, policy needs a generator
// and rng is null), "insufficient" (fewer candidates than count; nothing is chosen then).
// count == 0 gives an empty list.
Result<std::vector<GpuIndex>> chooseGpus(const ClusterState& state, NodeIndex target,
                                         std::uint32_t count, const GpuPolicy& policy,
                                         SplitMix64* rng = nullptr,
                                         const GpuModelFilter& models = {});

}  // namespace kc::alloc
