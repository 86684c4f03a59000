#include "libcore/alloc/gpu_candidate.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>

#include "libcore/alloc/move_schedule.hpp"

namespace kc::alloc {
namespace {

// Algorithm 1, lines 1-3: free candidates per attached node (kNoNode = the unattached group).
std::unordered_map<NodeIndex, std::uint32_t> countPerNode(const ClusterState& state,
                                                          std::span<const GpuIndex> candidates) {
  std::unordered_map<NodeIndex, std::uint32_t> counts;
  counts.reserve(candidates.size());
  for (GpuIndex g : candidates) {
    ++counts[state.gpu(g).node];
  }
  return counts;
}

}  // namespace

std::vector<GpuIndex> gpuCandidates(const ClusterState& state, NodeIndex target,
                                    const GpuModelFilter& models) {
  std::vector<GpuIndex> out;
  const PoolIndex pool = state.node(target).pool;
  if (pool == kNoPool) {
    return out;
  }
  const auto gpus = state.poolGpus(pool);
  out.reserve(gpus.size());
  for (GpuIndex g : gpus) {
    const GpuState& gpu = state.gpu(g);
    if (gpu.free() && gpu.node != target && models.accepts(gpu.model)) {
      out.push_back(g);
    }
  }
  return out;
}

std::vector<std::int64_t> algorithm1Scores(const ClusterState& state,
                                           std::span<const GpuIndex> candidates) {
  const auto counts = countPerNode(state, candidates);
  std::vector<std::int64_t> scores;
  scores.reserve(candidates.size());
  for (GpuIndex g : candidates) {  // line 4-5: gpu.score <- -nodeGPUCnt[gpu.node]
    scores.push_back(-static_cast<std::int64_t>(counts.at(state.gpu(g).node)));
  }
  return scores;
}

void Algorithm1GpuPolicy::rank(const ClusterState& state, std::vector<GpuIndex>& candidates,
                               std::uint32_t, SplitMix64*) {
  const auto counts = countPerNode(state, candidates);
  std::sort(candidates.begin(), candidates.end(), [&](GpuIndex a, GpuIndex b) {
    const std::uint32_t ca = counts.at(state.gpu(a).node);
    const std::uint32_t cb = counts.at(state.gpu(b).node);
    if (ca != cb) {
      return ca < cb;  // higher score -count first
    }
    return state.gpu(a).id < state.gpu(b).id;
  });
}

namespace {

// The unattached-first order: unattached, then Algorithm 1's score, node name, GPU id.
void sortUnattachedFirst(const ClusterState& state, std::vector<GpuIndex>& candidates,
                         const std::unordered_map<NodeIndex, std::uint32_t>& counts) {
  std::sort(candidates.begin(), candidates.end(), [&](GpuIndex a, GpuIndex b) {
    const GpuState& ga = state.gpu(a);
    const GpuState& gb = state.gpu(b);
    if (ga.attached() != gb.attached()) {
      return !ga.attached();  // unattached: cheapest source, scores above every attached GPU
    }
    if (ga.attached()) {
      const std::uint32_t ca = counts.at(ga.node);
      const std::uint32_t cb = counts.at(gb.node);
      if (ca != cb) {
        return ca < cb;
      }
      if (ga.node != gb.node) {
        return state.node(ga.node).name < state.node(gb.node).name;
      }
    }
    return ga.id < gb.id;
  });
}

}  // namespace

void UnattachedFirstGpuPolicy::rank(const ClusterState& state, std::vector<GpuIndex>& candidates,
                                    std::uint32_t, SplitMix64*) {
  sortUnattachedFirst(state, candidates, countPerNode(state, candidates));
}

void ChassisSpreadGpuPolicy::rank(const ClusterState& state, std::vector<GpuIndex>& candidates,
                                  std::uint32_t count, SplitMix64*) {
  const auto counts = countPerNode(state, candidates);
  sortUnattachedFirst(state, candidates, counts);
  // The rank unattached-first gives: equal for the unattached group and for GPUs whose nodes
  // have as many free candidates.
  auto tier = [&](GpuIndex g) -> std::uint32_t {
    const GpuState& gpu = state.gpu(g);
    return gpu.attached() ? 1 + counts.at(gpu.node) : 0;
  };
  std::map<std::string_view, std::uint32_t> taken;  // GPUs chosen per chassis so far
  const std::size_t want = std::min<std::size_t>(count, candidates.size());
  for (std::size_t i = 0; i < want; ++i) {
    // candidates[i, tierEnd) share the rank of candidates[i]: take the one whose chassis has the
    // fewest taken (the first such in the unattached-first order) and move it to position i.
    std::size_t best = i;
    std::uint32_t bestTaken = taken[chassisOfGpu(state.gpu(candidates[i]).id)];
    for (std::size_t j = i + 1; j < candidates.size() && bestTaken > 0; ++j) {
      if (tier(candidates[j]) != tier(candidates[i])) {
        break;
      }
      const std::uint32_t t = taken[chassisOfGpu(state.gpu(candidates[j]).id)];
      if (t < bestTaken) {
        best = j;
        bestTaken = t;
      }
    }
    // Rotate rather than swap, so the others keep the unattached-first order.
    std::rotate(candidates.begin() + static_cast<std::ptrdiff_t>(i),
                candidates.begin() + static_cast<std::ptrdiff_t>(best),
                candidates.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    ++taken[chassisOfGpu(state.gpu(candidates[i]).id)];
  }
}

void RandomGpuPolicy::rank(const ClusterState&, std::vector<GpuIndex>& candidates,
                           std::uint32_t count, SplitMix64* rng) {
  // Partial Fisher-Yates: the first `count` positions become a uniform random sample.
  const std::size_t n = candidates.size();
  for (std::size_t i = 0; i < count && i + 1 < n; ++i) {
    const std::size_t j = i + static_cast<std::size_t>(rng->below(n - i));
    std::swap(candidates[i], candidates[j]);
  }
}

void FirstFitGpuPolicy::rank(const ClusterState&, std::vector<GpuIndex>&, std::uint32_t,
                             SplitMix64*) {
  // Candidates already come in inventory order.
}

Result<std::vector<GpuIndex>> chooseGpus(const ClusterState& state, NodeIndex target,
                                         std::uint32_t count, const GpuPolicy& policy,
                                         SplitMix64* rng, const GpuModelFilter& models) {
  if (target >= state.nodeCount()) {
    return makeError(kc::errc::kInvalid, "unknown node index " + std::to_string(target));
  }
  if (policy.needsRng && rng == nullptr) {
    return makeError(kc::errc::kInvalid,
                     "GPU policy '" + std::string(policy.name) + "' needs a random generator");
  }
  if (count == 0) {
    return std::vector<GpuIndex>{};
  }
  std::vector<GpuIndex> candidates = gpuCandidates(state, target, models);
  if (candidates.size() < count) {
    return makeError(
        kc::errc::kInsufficient,
        "node '" + state.node(target).name + "' needs " + std::to_string(count) +
            " GPUs but its pool has " + std::to_string(candidates.size()) + " free GPUs elsewhere" +
            (models.acceptsAny() ? std::string() : " of the models " + models.toString(',')));
  }
  policy.rank(state, candidates, count, rng);
  candidates.resize(count);
  return candidates;
}

}  // namespace kc::alloc
