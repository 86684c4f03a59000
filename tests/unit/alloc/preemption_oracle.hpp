#pragma once
// Preemption recomputed from the documentation, not from preemption.cpp: the slow,
// obviously-right oracle the victim and node choice are checked against.
//
// What the documentation says ("Pod Priority and Preemption"; the scheduling framework's
// PostFilter, DefaultPreemption): a pending pod P that fits no node looks for a node where
// removing one or more pods of LOWER priority than P lets P fit. On such a node it removes them
// all, then gives back ("reprieves") as many as it can, most important first (higher priority,
// then the one that started earlier), trying first the pods whose eviction would break a
// PodDisruptionBudget (budgets are counted down over the pods in that same order; a pod whose
// budget goes below zero is "violating"). Among the nodes that work it picks, in turn: the
// fewest PDB violations, the lowest highest-victim priority, the smallest sum of victim
// priorities, the fewest victims, the latest start among the highest-priority victims; any of
// the nodes still tied may be chosen. A pod with preemptionPolicy: Never never preempts.
//
// The cluster here is kept deliberately plain: CPU (millicores), a pod count, GPUs per node and
// per pool; a node is "pooled" when the free GPUs of its pool may be moved to it.

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace kc::alloc::test {

struct OracleNode {
  std::string name;
  std::int64_t cpu = 0;  // allocatable millicores
  std::int64_t maxPods = 110;
  int freeGpus = 0;  // free GPUs attached to the node
  int pool = -1;     // -1: none
  bool cordoned = false;
};

struct OraclePod {
  std::string ns = "default";
  std::string name;
  int node = 0;  // index of its node
  int priority = 0;
  std::int64_t start = 0;
  std::int64_t cpu = 0;
  int gpus = 0;
  std::map<std::string, std::string> labels;
};

struct OracleBudget {
  std::string ns = "default";
  std::map<std::string, std::string> matchLabels;  // empty: selects nothing (as the scheduler)
  int allowed = 0;
};

struct OracleCluster {
  std::vector<OracleNode> nodes;
  std::vector<OraclePod> running;
  std::vector<OracleBudget> budgets;
  std::map<int, int> poolFree;  // free GPUs of each pool (attached anywhere or not)
};

struct OraclePreemptor {
  int priority = 0;
  std::int64_t cpu = 0;
  int gpus = 0;
  bool never = false;
};

struct OracleChoice {
  int node = -1;
  std::vector<std::string> victims;  // names, sorted
  int violations = 0;
};

// Does P fit node n with only `present` of its pods still there?
inline bool oracleFits(const OracleCluster& c, const OraclePreemptor& p, int n,
                       const std::vector<int>& present) {
  const OracleNode& node = c.nodes[n];
  std::int64_t cpu = 0;
  int inUse = 0;
  int presentGpus = 0;
  int count = 0;
  for (std::size_t i = 0; i < c.running.size(); ++i) {
    if (c.running[i].node != n) {
      continue;
    }
    inUse += c.running[i].gpus;
    if (std::find(present.begin(), present.end(), static_cast<int>(i)) != present.end()) {
      cpu += c.running[i].cpu;
      presentGpus += c.running[i].gpus;
      ++count;
    }
  }
  if (count + 1 > node.maxPods || cpu + p.cpu > node.cpu) {
    return false;
  }
  const int freeNow = node.pool >= 0 ? c.poolFree.at(node.pool) : node.freeGpus;
  return freeNow + (inUse - presentGpus) >= p.gpus;
}

inline bool oracleMoreImportant(const OraclePod& a, const OraclePod& b) {
  return a.priority != b.priority ? a.priority > b.priority
                                  : std::tie(a.start, a.name) < std::tie(b.start, b.name);
}

// The documented procedure on node n; nullopt when the node cannot help.
inline std::optional<OracleChoice> oracleOnNode(const OracleCluster& c, const OraclePreemptor& p,
                                                int n) {
  if (c.nodes[n].cordoned) {
    return std::nullopt;
  }
  std::vector<int> keep;  // higher or equal priority: never touched
  std::vector<int> lower;
  for (std::size_t i = 0; i < c.running.size(); ++i) {
    if (c.running[i].node == n) {
      (c.running[i].priority < p.priority ? lower : keep).push_back(static_cast<int>(i));
    }
  }
  if (lower.empty() || !oracleFits(c, p, n, keep)) {
    return std::nullopt;
  }
  std::sort(lower.begin(), lower.end(),
            [&](int a, int b) { return oracleMoreImportant(c.running[a], c.running[b]); });
  std::vector<int> left(c.budgets.size());
  for (std::size_t b = 0; b < c.budgets.size(); ++b) {
    left[b] = c.budgets[b].allowed;
  }
  std::set<int> violators;
  for (int i : lower) {
    for (std::size_t b = 0; b < c.budgets.size(); ++b) {
      const OracleBudget& budget = c.budgets[b];
      bool selects = !budget.matchLabels.empty() && budget.ns == c.running[i].ns;
      for (const auto& [k, v] : budget.matchLabels) {
        auto it = c.running[i].labels.find(k);
        selects = selects && it != c.running[i].labels.end() && it->second == v;
      }
      if (selects && --left[b] < 0) {
        violators.insert(i);
      }
    }
  }
  OracleChoice out;
  out.node = n;
  std::vector<int> present = keep;
  for (bool violatingFirst : {true, false}) {
    for (int i : lower) {
      if (violators.contains(i) != violatingFirst) {
        continue;
      }
      present.push_back(i);
      if (!oracleFits(c, p, n, present)) {
        present.pop_back();
        out.victims.push_back(c.running[i].name);
        out.violations += violatingFirst ? 1 : 0;
      }
    }
  }
  std::sort(out.victims.begin(), out.victims.end());
  return out;
}

// The tuple the node choice minimises.
inline std::tuple<int, std::int64_t, std::int64_t, std::size_t, std::int64_t> oracleKey(
    const OracleCluster& c, const OracleChoice& choice) {
  std::vector<const OraclePod*> v;
  for (const auto& name : choice.victims) {
    for (const auto& pod : c.running) {
      if (pod.name == name) {
        v.push_back(&pod);
      }
    }
  }
  std::int64_t highest = INT64_MIN;
  std::int64_t sum = 0;
  for (const OraclePod* pod : v) {
    highest = std::max<std::int64_t>(highest, pod->priority);
    sum += pod->priority + (std::int64_t{1} << 31);
  }
  std::int64_t earliest = INT64_MAX;
  for (const OraclePod* pod : v) {
    if (pod->priority == highest) {
      earliest = std::min(earliest, pod->start);
    }
  }
  return {choice.violations, highest, sum, v.size(), -earliest};
}

// Every choice the documentation allows (empty: no preemption).
inline std::vector<OracleChoice> oracleAllowed(const OracleCluster& c, const OraclePreemptor& p) {
  std::vector<OracleChoice> all;
  if (p.never) {
    return all;
  }
  for (int n = 0; n < static_cast<int>(c.nodes.size()); ++n) {
    if (auto choice = oracleOnNode(c, p, n)) {
      all.push_back(std::move(*choice));
    }
  }
  if (all.empty()) {
    return all;
  }
  auto best = oracleKey(c, all.front());
  for (const auto& choice : all) {
    best = std::min(best, oracleKey(c, choice));
  }
  std::erase_if(all, [&](const OracleChoice& choice) { return oracleKey(c, choice) != best; });
  return all;
}

}  // namespace kc::alloc::test
