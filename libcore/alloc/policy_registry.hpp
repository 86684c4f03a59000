#pragma once
// The one registry of allocation policies. The simulator (tools/kubecomp-sim), the scheduler
// (kubecomp-sched) and the benchmarks choose policies by these names, so an experiment's
// "--node-policy eq1 --gpu-policy alg1" means the same code everywhere.
//
// To add a policy: write a struct with kName, kDescription and compare()/rank() next to the
// others (node_score.hpp or gpu_candidate.hpp), add one line to the table in
// policy_registry.cpp, and add its rows to the table tests. See docs/alloc.md.

#include <span>
#include <string_view>

#include "libcore/alloc/backfill.hpp"
#include "libcore/alloc/device_offer.hpp"
#include "libcore/alloc/gpu_candidate.hpp"
#include "libcore/alloc/idle_recompose.hpp"
#include "libcore/alloc/idle_timeout.hpp"
#include "libcore/alloc/least_allocated.hpp"
#include "libcore/alloc/node_score.hpp"
#include "libcore/alloc/stock_dra.hpp"
#include "libcore/base/result.hpp"

namespace kc::alloc {

// Default policies: the paper's node scoring and our GPU choice.
inline constexpr std::string_view kDefaultNodePolicy = Eq1NodePolicy::kName;
inline constexpr std::string_view kDefaultGpuPolicy = UnattachedFirstGpuPolicy::kName;
// The queue: the paper's FCFS (backfill.hpp holds the others).
inline constexpr std::string_view kDefaultQueuePolicy = FcfsQueuePolicy::kName;
// GPU moves only for placements, as in the paper (idle_recompose.hpp holds the other).
inline constexpr std::string_view kDefaultRecomposePolicy = NoRecomposePolicy::kName;

// All policies, in a fixed order (paper policies first, then baselines).
std::span<const NodePolicy> nodePolicies();
std::span<const GpuPolicy> gpuPolicies();
std::span<const QueuePolicy> queuePolicies();
std::span<const RecomposePolicy> recomposePolicies();

// Lookup by exact name. Error "not_found" whose message lists the known names.
Result<NodePolicy> findNodePolicy(std::string_view name);
Result<GpuPolicy> findGpuPolicy(std::string_view name);
Result<QueuePolicy> findQueuePolicy(std::string_view name);
Result<RecomposePolicy> findRecomposePolicy(std::string_view name);

// Baselines: what a cluster WITHOUT KubeComp does, to compare against (least_allocated.hpp,
// device_offer.hpp, idle_timeout.hpp, stock_dra.hpp). Their node and GPU policies are kept out
// of nodePolicies() and gpuPolicies(), which list what kubecomp-sched and reconfig-mgr offer
// and find; a simulator or benchmark looks up both tables with the *OrBaseline finders.
std::span<const NodePolicy> baselineNodePolicies();
std::span<const GpuPolicy> baselineGpuPolicies();
Result<NodePolicy> findNodeOrBaselinePolicy(std::string_view name);
Result<GpuPolicy> findGpuOrBaselinePolicy(std::string_view name);

// Which free GPUs a node is offered ("pool": ours, the default) and what happens to an idle
// attached GPU ("keep": ours, the default).
inline constexpr std::string_view kDefaultOfferPolicy = PoolOfferPolicy::kName;
inline constexpr std::string_view kDefaultReturnPolicy = KeepReturnPolicy::kName;
std::span<const OfferPolicy> offerPolicies();
std::span<const ReturnPolicy> returnPolicies();
Result<OfferPolicy> findOfferPolicy(std::string_view name);
Result<ReturnPolicy> findReturnPolicy(std::string_view name);

// Named combinations of the policies above (stock-dra). Each part is a registered name.
std::span<const PolicyPreset> policyPresets();
Result<PolicyPreset> findPolicyPreset(std::string_view name);

}  // namespace kc::alloc
