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
    gpuEntry<UnattachedFirstGpuPolicy>(false),
    gpuEntry<Algorithm1GpuPolicy>(false),
    gpuEntry<RandomGpuPolicy>(true),
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

Result<NodePolicy> findNodePolicy(std::string_view name) {
  for (const NodePolicy& p : kNodePolicies) {
    if (p.name == name) {
      return p;
    }
  }
  return makeError("not_found", "unknown node policy '" + std::string(name) +
                                    "' (known: " + knownNames(kNodePolicies) + ")");
}

Result<GpuPolicy> findGpuPolicy(std::string_view name) {
  for (const GpuPolicy& p : kGpuPolicies) {
    if (p.name == name) {
      return p;
    }
  }
  return makeError("not_found", "unknown GPU policy '" + std::string(name) +
                                    "' (known: " + knownNames(kGpuPolicies) + ")");
}

}  // namespace kc::alloc

namespace kc::alloc {

Result<QueuePolicy> findQueuePolicy(std::string_view name) {
  for (const QueuePolicy& p : kQueuePolicies) {
    if (p.name == name) {
      return p;
    }
  }
  return makeError("not_found", "unknown queue policy '" + std::string(name) +
                                    "' (known: " + knownNames(kQueuePolicies) + ")");
}

}  // namespace kc::alloc
