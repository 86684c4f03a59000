#include "libcore/alloc/least_allocated.hpp"

namespace kc::alloc {
namespace {

__extension__ typedef unsigned __int128 U128;  // GCC/Clang; __extension__ keeps -Wpedantic quiet

}  // namespace

std::int64_t leastRequestedScore(std::uint64_t requested, std::uint64_t capacity) {
  if (capacity == 0 || requested > capacity) {
    return 0;
  }
  // A 128-bit product: no capacity can overflow it.
  const auto free = static_cast<U128>(capacity - requested);
  return static_cast<std::int64_t>(free * 100 / capacity);
}

std::int64_t leastAllocatedScore(const NodeState& node, std::uint32_t req) {
  std::int64_t sum = 0;
  std::int64_t weights = 0;
  auto add = [&](std::uint64_t requested, std::uint64_t capacity) {
    sum += leastRequestedScore(requested, capacity);
    ++weights;
  };
  // kube leaves out a resource the node does not have.
  if (node.cpuMilliCapacity > 0) {
    add(node.cpuMilliUsed, node.cpuMilliCapacity);
  }
  if (node.memoryMiBCapacity > 0) {
    add(node.memoryMiBUsed, node.memoryMiBCapacity);
  }
  if (req > 0) {
    // A model-filtered view counts only accepted free GPUs, still a subset of the attached.
    const std::uint64_t notFree =
        node.attachedGpus >= node.freeGpus ? node.attachedGpus - node.freeGpus : 0;
    add(notFree + req, node.attachedGpus);  // no GPU attached: 0, never left out (header)
  }
  return weights == 0 ? 0 : sum / weights;
}

int LeastAllocatedNodePolicy::compare(const NodeState& a, const NodeState& b, std::uint32_t req) {
  const std::int64_t sa = leastAllocatedScore(a, req);
  const std::int64_t sb = leastAllocatedScore(b, req);
  return sa > sb ? -1 : (sa < sb ? 1 : 0);  // the higher score is preferred
}

}  // namespace kc::alloc
