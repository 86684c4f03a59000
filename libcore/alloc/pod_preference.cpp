#include "libcore/alloc/pod_preference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "libcore/alloc/node_filter.hpp"
#include "libcore/alloc/topology_spread.hpp"

namespace kc::alloc {
namespace {

constexpr std::string_view kHostnameKey = "kubernetes.io/hostname";

using Scores = std::vector<std::int64_t>;

bool isSelf(const SchedPod& pod, const PlacedPod& p) {
  return p.name == pod.name && p.ns == pod.ns;
}

std::unordered_map<std::string_view, const SchedNode*> byName(std::span<const SchedNode> nodes) {
  std::unordered_map<std::string_view, const SchedNode*> out;
  out.reserve(nodes.size());
  for (const SchedNode& n : nodes) {
    out.emplace(n.name, &n);
  }
  return out;
}

// ---- InterPodAffinity --------------------------------------------------------------------------

// topologyKey -> value -> score (kube-scheduler's topologyScore).
using PairScores =
    std::map<std::string, std::map<std::string, std::int64_t, std::less<>>, std::less<>>;

// Adds `delta` to the pair (term's key, node's value) when the node carries the key.
void addToPair(PairScores& scores, const SchedNode& node, const std::string& key,
               std::int64_t delta) {
  if (auto it = node.labels.find(key); it != node.labels.end()) {
    scores[key][it->second] += delta;
  }
}

// One placed pod `p` on `node`: the incoming pod's preferred terms matching it, and its own
// terms matching the incoming pod.
void addPlacedPod(PairScores& scores, const SchedPod& pod, const PlacedPod& p,
                  const SchedNode& node, const NamespaceLabels* namespaces) {
  // Weighted terms written in a pod of `ownerNs`, each matched against a pod of `ns`, `labels`.
  auto addWeighted = [&](const std::vector<WeightedPodAffinityTerm>& terms, std::int64_t sign,
                         std::string_view ownerNs, std::string_view ns, const StringMap& labels) {
    for (const auto& w : terms) {
      if (affinityTermMatches(w.term, ownerNs, ns, labels, namespaces)) {
        addToPair(scores, node, w.term.topologyKey, sign * w.weight);
      }
    }
  };
  if (const PodAffinity* own = pod.podAffinity.get(); own != nullptr) {
    addWeighted(own->preferred, 1, pod.ns, p.ns, p.labels);
    addWeighted(own->preferredAnti, -1, pod.ns, p.ns, p.labels);
  }
  const PodAffinity* theirs = p.affinity.get();
  if (theirs == nullptr) {
    return;
  }
  for (const auto& t : theirs->required) {
    if (affinityTermMatches(t, p.ns, pod.ns, pod.labels, namespaces)) {
      addToPair(scores, node, t.topologyKey, kHardPodAffinityWeight);
    }
  }
  addWeighted(theirs->preferred, 1, p.ns, pod.ns, pod.labels);
  addWeighted(theirs->preferredAnti, -1, p.ns, pod.ns, pod.labels);
}

Scores interPodAffinityScores(const SchedPod& pod, std::span<const SchedNode> nodes,
                              std::span<const std::size_t> candidates, const PlacedPods* placed,
                              const NamespaceLabels* namespaces) {
  Scores out(candidates.size(), 0);
  if (placed == nullptr) {
    return out;
  }
  const auto index = byName(nodes);
  PairScores pairs;
  auto visit = [&](const std::string& nodeName, const PlacedPods::Entry& p) {
    auto it = index.find(nodeName);
    if (it != index.end() && !isSelf(pod, *p)) {
      addPlacedPod(pairs, pod, *p, *it->second, namespaces);
    }
  };
  const PodAffinity* own = pod.podAffinity.get();
  if (own != nullptr && (!own->preferred.empty() || !own->preferredAnti.empty())) {
    placed->forEach(visit);
  } else {
    placed->forEachWithScoredAffinity(visit);  // only their own terms can count
  }
  if (pairs.empty()) {
    return out;
  }
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const StringMap& labels = nodes[candidates[i]].labels;
    for (const auto& [key, values] : pairs) {
      auto label = labels.find(key);
      auto it = label == labels.end() ? values.end() : values.find(label->second);
      out[i] += it == values.end() ? 0 : it->second;
    }
  }
  if (out.empty()) {
    return out;
  }
  const auto [lo, hi] = std::minmax_element(out.begin(), out.end());
  const std::int64_t min = *lo;
  const std::int64_t diff = *hi - min;
  for (std::int64_t& s : out) {
    // kube-scheduler computes it in float64 and truncates; so do we, for the same integers.
    s = diff > 0
            ? static_cast<std::int64_t>(static_cast<double>(kMaxNodeScore) *
                                        (static_cast<double>(s - min) / static_cast<double>(diff)))
            : 0;
  }
  return out;
}

// ---- PodTopologySpread (ScheduleAnyway) ---------------------------------------------------------

struct SoftConstraint {
  const SpreadConstraint* c = nullptr;
  std::optional<LabelSelector> selector{};
  bool hostname = false;
  double weight = 0;
  std::map<std::string, std::int64_t, std::less<>> count{};  // domain -> matching pods
};

bool hasAllKeys(const SchedNode& node, const std::vector<SoftConstraint>& soft) {
  return std::all_of(soft.begin(), soft.end(), [&](const SoftConstraint& s) {
    return node.labels.find(s.c->topologyKey) != node.labels.end();
  });
}

std::int64_t matchingPods(const SchedPod& pod, const SoftConstraint& s, const PlacedPods* placed,
                          std::string_view node) {
  if (placed == nullptr || !s.selector) {
    return 0;
  }
  std::int64_t n = 0;
  for (const auto& p : placed->onNode(node)) {
    if (!isSelf(pod, *p) && p->ns == pod.ns && matchesLabelSelector(*s.selector, p->labels)) {
      ++n;
    }
  }
  return n;
}

// The domains (values among the candidates not ignored) and their weights.
void spreadDomains(std::vector<SoftConstraint>& soft, std::span<const SchedNode> nodes,
                   std::span<const std::size_t> candidates, const std::vector<bool>& ignored) {
  std::size_t scored = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (ignored[i]) {
      continue;
    }
    ++scored;
    for (SoftConstraint& s : soft) {
      if (!s.hostname) {
        s.count.emplace(nodes[candidates[i]].labels.at(s.c->topologyKey), 0);
      }
    }
  }
  for (SoftConstraint& s : soft) {
    const std::size_t size = s.hostname ? scored : s.count.size();
    s.weight = std::log(static_cast<double>(size + 2));
  }
}

Scores topologySpreadScores(const SchedPod& pod, std::span<const SchedNode> nodes,
                            std::span<const std::size_t> candidates, const PlacedPods* placed) {
  Scores out(candidates.size(), 0);
  std::vector<SoftConstraint> soft;
  if (pod.topologySpread != nullptr) {
    for (const SpreadConstraint& c : pod.topologySpread->constraints) {
      if (!c.doNotSchedule) {
        soft.push_back({&c, spreadSelector(c, pod), c.topologyKey == kHostnameKey});
      }
    }
  }
  if (soft.empty()) {
    return out;  // kube-scheduler skips the plugin: every node 0
  }
  std::vector<bool> ignored(candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    ignored[i] = !hasAllKeys(nodes[candidates[i]], soft);
  }
  spreadDomains(soft, nodes, candidates, ignored);
  for (const SchedNode& node : nodes) {
    if (!hasAllKeys(node, soft)) {
      continue;
    }
    for (SoftConstraint& s : soft) {
      auto domain = s.count.find(node.labels.at(s.c->topologyKey));
      const bool admitted = (!s.c->honorNodeAffinity || nodeAffinityFilter(pod, node).empty()) &&
                            (!s.c->honorNodeTaints || taintTolerationFilter(pod, node).empty());
      if (!s.hostname && domain != s.count.end() && admitted) {
        domain->second += matchingPods(pod, s, placed, node.name);
      }
    }
  }
  std::int64_t min = std::numeric_limits<std::int64_t>::max();
  std::int64_t max = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (ignored[i]) {
      continue;
    }
    const SchedNode& node = nodes[candidates[i]];
    double raw = 0;
    for (const SoftConstraint& s : soft) {
      const std::int64_t cnt = s.hostname ? matchingPods(pod, s, placed, node.name)
                                          : s.count.at(node.labels.at(s.c->topologyKey));
      raw += static_cast<double>(cnt) * s.weight + static_cast<double>(s.c->maxSkew - 1);
    }
    out[i] = static_cast<std::int64_t>(std::round(raw));
    min = std::min(min, out[i]);
    max = std::max(max, out[i]);
  }
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (ignored[i]) {
      out[i] = 0;
    } else if (max == 0) {
      out[i] = kMaxNodeScore;
    } else {
      out[i] = kMaxNodeScore * (max + min - out[i]) / max;
    }
  }
  return out;
}

// ---- NodeAffinity (preferred) and TaintToleration ------------------------------------------

Scores nodeAffinityScores(const SchedPod& pod, std::span<const SchedNode> nodes,
                          std::span<const std::size_t> candidates) {
  Scores out(candidates.size(), 0);
  std::int64_t max = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    for (const PreferredSchedulingTerm& t : pod.preferredNodeAffinity) {
      if (matchesNodeSelectorTerms(std::span(&t.preference, 1), nodes[candidates[i]])) {
        out[i] += t.weight;
      }
    }
    max = std::max(max, out[i]);
  }
  for (std::int64_t& s : out) {
    s = max == 0 ? s : s * kMaxNodeScore / max;
  }
  return out;
}

Scores taintTolerationScores(const SchedPod& pod, std::span<const SchedNode> nodes,
                             std::span<const std::size_t> candidates) {
  std::vector<const Toleration*> tolerations;
  for (const Toleration& t : pod.tolerations) {
    if (!t.effect || *t.effect == TaintEffect::PreferNoSchedule) {
      tolerations.push_back(&t);
    }
  }
  Scores out(candidates.size(), 0);
  std::int64_t max = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    for (const Taint& taint : nodes[candidates[i]].taints) {
      const bool tolerated =
          std::any_of(tolerations.begin(), tolerations.end(),
                      [&](const Toleration* t) { return toleratesTaint(*t, taint); });
      if (taint.effect == TaintEffect::PreferNoSchedule && !tolerated) {
        ++out[i];
      }
    }
    max = std::max(max, out[i]);
  }
  for (std::int64_t& s : out) {
    s = max == 0 ? kMaxNodeScore : kMaxNodeScore - s * kMaxNodeScore / max;
  }
  return out;
}

}  // namespace

bool hasPreferenceInputs(const SchedPod& pod, std::span<const SchedNode> nodes,
                         const PlacedPods* placed, std::optional<bool> preferNoScheduleTaints) {
  if (!pod.preferredNodeAffinity.empty()) {
    return true;
  }
  if (const PodAffinity* a = pod.podAffinity.get();
      a != nullptr && (!a->preferred.empty() || !a->preferredAnti.empty())) {
    return true;
  }
  if (pod.topologySpread != nullptr &&
      std::any_of(pod.topologySpread->constraints.begin(), pod.topologySpread->constraints.end(),
                  [](const SpreadConstraint& c) { return !c.doNotSchedule; })) {
    return true;
  }
  if (placed != nullptr && placed->anyScoredAffinity()) {
    return true;
  }
  if (preferNoScheduleTaints) {
    return *preferNoScheduleTaints;
  }
  return std::any_of(nodes.begin(), nodes.end(), [](const SchedNode& n) {
    return std::any_of(n.taints.begin(), n.taints.end(),
                       [](const Taint& t) { return t.effect == TaintEffect::PreferNoSchedule; });
  });
}

PreferenceScores scorePreferences(const SchedPod& pod, std::span<const SchedNode> nodes,
                                  std::span<const std::size_t> candidates, const PlacedPods* placed,
                                  const NamespaceLabels* namespaces) {
  PreferenceScores out;
  out.interPodAffinity = interPodAffinityScores(pod, nodes, candidates, placed, namespaces);
  out.topologySpread = topologySpreadScores(pod, nodes, candidates, placed);
  out.nodeAffinity = nodeAffinityScores(pod, nodes, candidates);
  out.taintToleration = taintTolerationScores(pod, nodes, candidates);
  out.total.resize(candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    out.total[i] = kInterPodAffinityScoreWeight * out.interPodAffinity[i] +
                   kTopologySpreadScoreWeight * out.topologySpread[i] +
                   kNodeAffinityScoreWeight * out.nodeAffinity[i] +
                   kTaintTolerationScoreWeight * out.taintToleration[i];
  }
  return out;
}

}  // namespace kc::alloc
