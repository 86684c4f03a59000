#include "libcore/alloc/policy_registry.hpp"

#include <array>
#include <string>

namespace kc::alloc {
namespace {

template <typename P>
constexpr NodePolicy nodeEntry() {
  return NodePolicy{P::kName, P::kDescription, &P::compare};
}

template <typename P>
constexpr GpuPolicy gpuEntry(bool needsRng) {
  return GpuPolicy{P::kName, P::kDescription, needsRng, &P::rank};
}

constexpr std::array kNodePolicies{
    nodeEntry<Eq1NodePolicy>(),
    nodeEntry<BestFitNodePolicy>(),
    nodeEntry<LeastDemandNodePolicy>(),
    nodeEntry<FirstFeasibleNodePolicy>(),
};

constexpr std::array kGpuPolicies{
    gpuEntry<UnattachedFirstGpuPolicy>(false), gpuEntry<Algorithm1GpuPolicy>(false),
    gpuEntry<ChassisSpreadGpuPolicy>(false),   gpuEntry<RandomGpuPolicy>(true),
    gpuEntry<FirstFitGpuPolicy>(false),
};

template <typename P>
constexpr QueuePolicy queueEntry() {
  return QueuePolicy{P::kName, P::kDescription, P::kDiscipline};
}

constexpr std::array kQueuePolicies{
    queueEntry<FcfsQueuePolicy>(),
    queueEntry<GreedyBackfillQueuePolicy>(),
    queueEntry<EasyBackfillQueuePolicy>(),
    queueEntry<SlackBackfillQueuePolicy>(),
};

template <typename P>
constexpr RecomposePolicy recomposeEntry() {
  return RecomposePolicy{P::kName, P::kDescription, P::kKind};
}

constexpr std::array kRecomposePolicies{
    recomposeEntry<NoRecomposePolicy>(),
    recomposeEntry<IdleGatherRecomposePolicy>(),
};

constexpr std::array kBaselineNodePolicies{
    nodeEntry<LeastAllocatedNodePolicy>(),
};

constexpr std::array kBaselineGpuPolicies{
    gpuEntry<FirstFitLocalGpuPolicy>(false),
};

template <typename P>
constexpr OfferPolicy offerEntry() {
  return OfferPolicy{P::kName, P::kDescription, P::kOffer};
}

constexpr std::array kOfferPolicies{
    offerEntry<PoolOfferPolicy>(),
    offerEntry<LocalOrUnattachedOfferPolicy>(),
};

template <typename P>
constexpr ReturnPolicy returnEntry() {
  return ReturnPolicy{P::kName, P::kDescription, P::kKind};
}

constexpr std::array kReturnPolicies{
    returnEntry<KeepReturnPolicy>(),
    returnEntry<IdleTimeoutReturnPolicy>(),
};

constexpr std::array kPolicyPresets{
    StockDraPreset::kPreset,
};

template <typename Table>
std::string knownNames(const Table& table) {
  std::string names;
  for (const auto& entry : table) {
    names += names.empty() ? "" : ", ";
    names += entry.name;
  }
  return names;
}

// Lookup by exact name; error "not_found" listing the known names.
template <typename Policy, typename Table>
Result<Policy> findByName(const Table& table, const char* kind, std::string_view name) {
  for (const Policy& p : table) {
    if (p.name == name) {
      return p;
    }
  }
  return makeError(kc::errc::kNotFound, "unknown " + std::string(kind) + " policy '" +
                                            std::string(name) + "' (known: " + knownNames(table) +
                                            ")");
}

// The main table first, then the baselines; the error lists both.
template <typename Policy, typename Main, typename Baselines>
Result<Policy> findInEither(const Main& main, const Baselines& baselines, const char* kind,
                            std::string_view name) {
  if (auto p = findByName<Policy>(main, kind, name)) {
    return p;
  }
  if (auto p = findByName<Policy>(baselines, kind, name)) {
    return p;
  }
  return makeError(kc::errc::kNotFound, "unknown " + std::string(kind) + " policy '" +
                                            std::string(name) + "' (known: " + knownNames(main) +
                                            "; baselines: " + knownNames(baselines) + ")");
}

}  // namespace

std::span<const NodePolicy> nodePolicies() {
  return kNodePolicies;
}
std::span<const GpuPolicy> gpuPolicies() {
  return kGpuPolicies;
}

std::span<const QueuePolicy> queuePolicies() {
  return kQueuePolicies;
}

std::span<const RecomposePolicy> recomposePolicies() {
  return kRecomposePolicies;
}

Result<NodePolicy> findNodePolicy(std::string_view name) {
  return findByName<NodePolicy>(kNodePolicies, "node", name);
}

Result<GpuPolicy> findGpuPolicy(std::string_view name) {
  return findByName<GpuPolicy>(kGpuPolicies, "GPU", name);
}

Result<QueuePolicy> findQueuePolicy(std::string_view name) {
  return findByName<QueuePolicy>(kQueuePolicies, "queue", name);
}

Result<RecomposePolicy> findRecomposePolicy(std::string_view name) {
  return findByName<RecomposePolicy>(kRecomposePolicies, "recomposition", name);
}

std::span<const NodePolicy> baselineNodePolicies() {
  return kBaselineNodePolicies;
}

std::span<const GpuPolicy> baselineGpuPolicies() {
  return kBaselineGpuPolicies;
}

Result<NodePolicy> findNodeOrBaselinePolicy(std::string_view name) {
  return findInEither<NodePolicy>(kNodePolicies, kBaselineNodePolicies, "node", name);
}

Result<GpuPolicy> findGpuOrBaselinePolicy(std::string_view name) {
  return findInEither<GpuPolicy>(kGpuPolicies, kBaselineGpuPolicies, "GPU", name);
}

std::span<const OfferPolicy> offerPolicies() {
  return kOfferPolicies;
}

std::span<const ReturnPolicy> returnPolicies() {
  return kReturnPolicies;
}

Result<OfferPolicy> findOfferPolicy(std::string_view name) {
  return findByName<OfferPolicy>(kOfferPolicies, "device offer", name);
}

Result<ReturnPolicy> findReturnPolicy(std::string_view name) {
  return findByName<ReturnPolicy>(kReturnPolicies, "idle return", name);
}

std::span<const PolicyPreset> policyPresets() {
  return kPolicyPresets;
}

Result<PolicyPreset> findPolicyPreset(std::string_view name) {
  return findByName<PolicyPreset>(kPolicyPresets, "preset", name);
}

}  // namespace kc::alloc
