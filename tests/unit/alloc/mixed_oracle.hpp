#pragma once
// kube-scheduler's filters and DefaultPreemption recomputed together from the Pod, Node and
// GPUPool objects themselves, for tests that mix every feature at once. Written from the
// Kubernetes documentation ("Resource Management for Pods and Containers", "Sidecar
// Containers", "Pod Overhead", "Assigning Pods to Nodes", "Taints and Tolerations", "Pod
// Priority and Preemption") and from docs/sched.md for the GPU pools, not from libcore/alloc;
// host ports, inter-pod affinity and topology spread are delegated to ports_oracle.hpp,
// affinity_oracle.hpp and spread_oracle.hpp. Everything is recomputed on every call.
//
//  - a pod's effective request, per resource: the larger of (its containers plus its
//    restartable init containers, the sidecars) and, for each init container in order, what
//    runs while it runs (a plain one: itself plus the sidecars declared before it; a sidecar:
//    the sidecars up to and including it); then spec.overhead on top;
//  - a node fits when the requests of the pods holding it plus the pod's stay within its
//    allocatable cpu and memory, and the pod count within allocatable pods;
//  - taints: every NoSchedule and NoExecute taint must be tolerated (PreferNoSchedule never
//    filters); a toleration matches on key (empty key with Exists: every key), value (Equal)
//    and effect (empty: every effect);
//  - nodeSelector: every pair among the node's labels; required node affinity: one of the
//    nodeSelectorTerms whose every expression holds;
//  - GPUs (docs/sched.md "GPU pools"): a pod asking kubecomp.io/gpu needs a node of a GPUPool
//    whose usable GPUs (healthy, not draining, attached to one of its nodes or unattached) minus
//    what the pods holding the pool's nodes ask leave enough; it binds at once when the node's
//    own attached GPUs minus those held there suffice, otherwise the missing ones are moved
//    first (a reservation);
//  - preemption: only pods of lower priority that run (bound or just bound) are victims; a node
//    is a candidate when, with all of them gone, the pod passes every filter (their host ports
//    and pod (anti-)affinity still counted, as docs/sched.md says) and its GPUs are covered by
//    the pool's free ones plus what the victims free on the node (at most what is in use there);
//    the victims are then put back most important first (higher priority, then earlier start)
//    while the pod still fits, first those whose eviction would take a PodDisruptionBudget
//    below zero (budgets counted down in that order), then the others; the node: fewest such
//    budget violations among its victims, lowest highest-victim priority, smallest sum of
//    priorities each shifted by 2^31 (as kube-scheduler sums them), fewest victims, latest
//    earliest start among the highest-priority victims;
//  - nominated pods ("Pod Priority and Preemption": a preemptor waits with
//    status.nominatedNodeName while its victims go, and a pod of lower or equal priority is
//    scheduled as if the nominated pod already ran on that node; a pod of higher priority
//    ignores it): while pod P is nominated to node N, deciding a pod Q other than P with
//    priority(Q) <= priority(P) counts P on N, in the filters and in the preemption's victim
//    search (P is no victim), with its CPU, memory, pod slot, host ports and GPUs
//    (docs/sched.md: not its labels or affinity; its GPUs less those its terminating victims
//    hold, and the tests show no pod terminating: victims vanish at once). The nomination ends
//    when P is placed (bound or reserved), when P is refused with no preemption anywhere (kube
//    clears nominatedNodeName then), or when a pod of higher priority preempts on N.

#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "tests/unit/alloc/affinity_oracle.hpp"
#include "tests/unit/alloc/ports_oracle.hpp"
#include "tests/unit/alloc/spread_oracle.hpp"

namespace kc::alloc::test::mixed {

using Amounts = std::map<std::string, std::int64_t>;  // cpu (millicores), memory (MiB), gpus

// "250m", "2" (cpu); "512Mi", "4Gi" (memory); "3" (GPUs). Only the forms the tests write.
inline std::int64_t amount(const std::string& resource, const std::string& text) {
  const auto number = [&](std::size_t cut) { return std::stoll(text.substr(0, cut)); };
  if (resource == "cpu") {
    return text.back() == 'm' ? number(text.size() - 1) : number(text.size()) * 1000;
  }
  if (text.size() > 2 && text.compare(text.size() - 2, 2, "Gi") == 0) {
    return number(text.size() - 2) * 1024;
  }
  if (text.size() > 2 && text.compare(text.size() - 2, 2, "Mi") == 0) {
    return number(text.size() - 2);
  }
  return number(text.size());
}

inline Amounts amounts(const nlohmann::json& map) {
  Amounts out;
  if (map.is_object()) {
    for (const auto& [k, v] : map.items()) {
      out[k == "kubecomp.io/gpu" ? "gpu" : k] = amount(k, v.get<std::string>());
    }
  }
  return out;
}

inline Amounts containerRequests(const nlohmann::json& c) {
  return amounts(
      c.value("resources", nlohmann::json::object()).value("requests", nlohmann::json::object()));
}

// The pod's effective request (see the header).
inline Amounts effectiveRequest(const nlohmann::json& pod) {
  const nlohmann::json& spec = pod["spec"];
  Amounts running;
  Amounts sidecars;
  Amounts initPeak;
  const auto add = [](Amounts& into, const Amounts& what) {
    for (const auto& [k, v] : what) {
      into[k] += v;
    }
  };
  for (const auto& c : spec.value("containers", nlohmann::json::array())) {
    add(running, containerRequests(c));
  }
  for (const auto& c : spec.value("initContainers", nlohmann::json::array())) {
    Amounts during = sidecars;
    add(during, containerRequests(c));
    if (c.value("restartPolicy", std::string()) == "Always") {
      sidecars = during;
      add(running, containerRequests(c));
    }
    for (const auto& [k, v] : during) {
      initPeak[k] = std::max(initPeak[k], v);
    }
  }
  for (const auto& [k, v] : initPeak) {
    running[k] = std::max(running[k], v);
  }
  add(running, amounts(spec.value("overhead", nlohmann::json::object())));
  return running;
}

inline std::int64_t of(const Amounts& a, const std::string& k) {
  auto it = a.find(k);
  return it == a.end() ? 0 : it->second;
}

struct Node {
  nlohmann::json obj;  // the Node object handed to the scheduler
  std::string name;
  std::map<std::string, std::string> labels;
  int pool = -1;     // index into Cluster::poolUsable; -1: wired to no pool
  int attached = 0;  // usable GPUs attached (and advertised)
};

// A pod holding a node: bound (by anyone), just bound by the scheduler, or reserved.
struct Placed {
  nlohmann::json pod;
  std::string key;  // "ns/name"
  int node = 0;
  bool runs = true;  // bound or just bound (a victim if of lower priority); false: reserved
  int priority = 0;
  std::int64_t start = 0;  // any monotonic unit; earlier is more important
  bool nominee = false;    // a nominated pod counted on its node (runs is false)
};

// A pod a preemption nominated to a node.
struct Nomination {
  nlohmann::json pod;
  int node = 0;
  int priority = 0;
};

// `placed` plus the pods nominated (by key) that count when the pod `key` of `priority` is
// decided: those of priority >= its own, the pod itself never.
inline std::vector<Placed> withNominated(const std::vector<Placed>& placed,
                                         const std::map<std::string, Nomination>& nominated,
                                         const std::string& key, int priority) {
  std::vector<Placed> out = placed;
  for (const auto& [k, n] : nominated) {
    if (k != key && n.priority >= priority) {
      out.push_back({n.pod, k, n.node, false, n.priority, 0, true});
    }
  }
  return out;
}

// A PodDisruptionBudget: the pods of `ns` whose labels include `matchLabels` (empty: none).
struct Budget {
  std::string ns;
  std::map<std::string, std::string> matchLabels;
  int allowed = 0;  // status.disruptionsAllowed
};

struct Cluster {
  std::vector<Node> nodes;
  std::vector<int> poolUsable;  // per pool: usable GPUs, attached or not
  std::vector<Budget> budgets;
};

// The pods of `order` (most important first) whose eviction would take one of the budgets
// below zero, the budgets counted down along the order.
inline std::set<std::string> violating(const std::vector<const Placed*>& order,
                                       const std::vector<Budget>& budgets) {
  std::set<std::string> out;
  std::vector<int> left;
  for (const auto& b : budgets) {
    left.push_back(b.allowed);
  }
  for (const Placed* p : order) {
    const auto labels = oracleLabels(p->pod["metadata"].value("labels", nlohmann::json()));
    for (std::size_t b = 0; b < budgets.size(); ++b) {
      bool selects = !budgets[b].matchLabels.empty() && oracleNs(p->pod) == budgets[b].ns;
      for (const auto& [k, v] : budgets[b].matchLabels) {
        selects = selects && labels.count(k) && labels.at(k) == v;
      }
      if (selects && --left[b] < 0) {
        out.insert(p->key);
      }
    }
  }
  return out;
}

inline bool tolerated(const nlohmann::json& pod, const nlohmann::json& taint) {
  for (const auto& t : pod["spec"].value("tolerations", nlohmann::json::array())) {
    const std::string key = t.value("key", std::string());
    const std::string op = t.value("operator", std::string("Equal"));
    const std::string effect = t.value("effect", std::string());
    if (!effect.empty() && effect != taint["effect"].get<std::string>()) {
      continue;
    }
    if (!key.empty() && key != taint["key"].get<std::string>()) {
      continue;
    }
    if (op == "Exists" || t.value("value", std::string()) == taint.value("value", std::string())) {
      return true;
    }
  }
  return false;
}

inline bool expressionHolds(const nlohmann::json& e, const std::map<std::string, std::string>& l) {
  const std::string key = e["key"], op = e["operator"];
  const auto it = l.find(key);
  bool listed = false;
  for (const auto& v : e.value("values", nlohmann::json::array())) {
    listed = listed || (it != l.end() && it->second == v.get<std::string>());
  }
  return (op == "In" && listed) || (op == "NotIn" && !listed) ||
         (op == "Exists" && it != l.end()) || (op == "DoesNotExist" && it == l.end());
}

// The filters that read the node alone: taints, nodeSelector, required node affinity.
inline bool nodeAdmits(const nlohmann::json& pod, const Node& node) {
  const nlohmann::json& spec = pod["spec"];
  for (const auto& taint :
       node.obj.value("spec", nlohmann::json::object()).value("taints", nlohmann::json::array())) {
    if (taint["effect"] != "PreferNoSchedule" && !tolerated(pod, taint)) {
      return false;
    }
  }
  for (const auto& [k, v] : oracleLabels(spec.value("nodeSelector", nlohmann::json()))) {
    if (!node.labels.count(k) || node.labels.at(k) != v) {
      return false;
    }
  }
  const auto terms =
      spec.value("affinity", nlohmann::json::object())
          .value("nodeAffinity", nlohmann::json::object())
          .value("requiredDuringSchedulingIgnoredDuringExecution", nlohmann::json::object())
          .value("nodeSelectorTerms", nlohmann::json());
  if (terms.is_null()) {
    return true;
  }
  return std::any_of(terms.begin(), terms.end(), [&](const nlohmann::json& t) {
    const auto exprs = t.value("matchExpressions", nlohmann::json::array());
    return std::all_of(exprs.begin(), exprs.end(),
                       [&](const nlohmann::json& e) { return expressionHolds(e, node.labels); });
  });
}

// cpu, memory and the pod count on node n, counting the pods in `holding` there.
inline bool resourcesFit(const Amounts& want, const Cluster& c, int n,
                         const std::vector<const Placed*>& holding) {
  const Amounts alloc = amounts(c.nodes[n].obj["status"]["allocatable"]);
  std::int64_t cpu = of(want, "cpu");
  std::int64_t memory = of(want, "memory");
  std::int64_t count = 1;
  for (const Placed* p : holding) {
    if (p->node != n) {
      continue;
    }
    const Amounts r = effectiveRequest(p->pod);
    cpu += of(r, "cpu");
    memory += of(r, "memory");
    ++count;
  }
  return cpu <= of(alloc, "cpu") && memory <= of(alloc, "memory") && count <= of(alloc, "pods");
}

inline std::vector<const Placed*> pointers(const std::vector<Placed>& placed) {
  std::vector<const Placed*> out;
  for (const auto& p : placed) {
    out.push_back(&p);
  }
  return out;
}

// GPUs the pods holding the nodes of `pool` (or node `n`, pool < 0) ask.
inline std::int64_t gpusHeld(const Cluster& c, const std::vector<const Placed*>& holding, int pool,
                             int n) {
  std::int64_t held = 0;
  for (const Placed* p : holding) {
    if (pool >= 0 ? c.nodes[p->node].pool == pool : p->node == n) {
      held += of(effectiveRequest(p->pod), "gpu");
    }
  }
  return held;
}

// The free GPUs of node n's pool (0 without one).
inline std::int64_t poolFree(const Cluster& c, const std::vector<const Placed*>& holding, int n) {
  const int pool = c.nodes[n].pool;
  return pool < 0 ? 0 : c.poolUsable[pool] - gpusHeld(c, holding, pool, -1);
}

// The filters reading the pods placed (host ports, inter-pod affinity, topology spread).
inline bool podsAdmit(const nlohmann::json& pod, const Cluster& c, int n,
                      const std::vector<const Placed*>& holding) {
  std::vector<OracleNode> affinity;
  std::vector<SpreadNode> spread;
  for (const auto& node : c.nodes) {
    affinity.push_back({node.name, node.labels, {}});
    spread.push_back({node.name, node.labels, false, {}});
  }
  std::vector<nlohmann::json> ports;  // every pod on n, a nominated one too
  for (const Placed* p : holding) {
    if (p->node == n) {
      ports.push_back(p->pod);
    }
    if (!p->nominee) {
      affinity[p->node].pods.push_back(p->pod);
      spread[p->node].pods.push_back(p->pod);
    }
  }
  return naivePortsFree(pod, ports) && naiveInterPod(pod, affinity[n], affinity, {}) == "ok" &&
         naiveSpread(pod, spread[n], spread) == "ok";
}

// Whether every filter lets `pod` onto node n with `placed` holding their nodes.
inline bool allowed(const nlohmann::json& pod, const Cluster& c, int n,
                    const std::vector<Placed>& placed) {
  const auto holding = pointers(placed);
  const Amounts want = effectiveRequest(pod);
  const std::int64_t gpus = of(want, "gpu");
  if (gpus > 0 && poolFree(c, holding, n) < gpus) {
    return false;
  }
  return nodeAdmits(pod, c.nodes[n]) && resourcesFit(want, c, n, holding) &&
         podsAdmit(pod, c, n, holding);
}

// The GPUs node n itself can give the pod now (attached minus held there).
inline std::int64_t nodeFreeGpus(const Cluster& c, int n, const std::vector<Placed>& placed) {
  return c.nodes[n].attached - gpusHeld(c, pointers(placed), -1, n);
}

struct Preemption {
  int node = -1;
  std::set<std::string> victims;  // keys
  // PDB violations, highest victim priority, shifted sum, victims, -earliest start.
  std::tuple<std::int64_t, std::int64_t, std::int64_t, std::size_t, std::int64_t> rank{};
};

// Preemption on node n (nullopt: not a candidate).
inline std::optional<Preemption> preemptOnNode(const nlohmann::json& pod, int priority,
                                               const Cluster& c, int n,
                                               const std::vector<Placed>& placed) {
  const Amounts want = effectiveRequest(pod);
  const std::int64_t gpus = of(want, "gpu");
  const auto all = pointers(placed);
  std::vector<const Placed*> keep;
  std::vector<const Placed*> lower;
  for (const Placed* p : all) {
    (p->node == n && p->runs && p->priority < priority ? lower : keep).push_back(p);
  }
  const std::int64_t inUse = std::min<std::int64_t>(c.nodes[n].attached, gpusHeld(c, all, -1, n));
  const auto fits = [&](const std::vector<const Placed*>& present, std::int64_t freed) {
    return resourcesFit(want, c, n, present) &&
           (gpus == 0 ||
            (c.nodes[n].pool >= 0 && poolFree(c, all, n) + std::min(freed, inUse) >= gpus));
  };
  std::int64_t freed = 0;
  for (const Placed* p : lower) {
    freed += of(effectiveRequest(p->pod), "gpu");
  }
  if (lower.empty() || !nodeAdmits(pod, c.nodes[n]) || !podsAdmit(pod, c, n, all) ||
      !fits(keep, freed)) {
    return std::nullopt;
  }
  std::sort(lower.begin(), lower.end(), [](const Placed* a, const Placed* b) {
    return a->priority != b->priority ? a->priority > b->priority : a->start < b->start;
  });
  Preemption out;
  out.node = n;
  std::vector<const Placed*> present = keep;
  std::int64_t highest = INT64_MIN;
  std::int64_t sum = 0;
  std::int64_t earliest = INT64_MAX;
  std::int64_t violations = 0;
  const std::set<std::string> breaking = violating(lower, c.budgets);
  // Put back the pods whose eviction would break a budget first, then the others.
  for (const bool breaks : {true, false}) {
    for (const Placed* p : lower) {
      if (breaking.count(p->key) != (breaks ? 1U : 0U)) {
        continue;
      }
      const std::int64_t g = of(effectiveRequest(p->pod), "gpu");
      present.push_back(p);
      if (fits(present, freed - g)) {
        freed -= g;  // put back
        continue;
      }
      present.pop_back();
      out.victims.insert(p->key);
      violations += breaks ? 1 : 0;
      // kube-scheduler adds 2^31 to each priority before summing (so that negative priorities
      // do not favour more victims): in effect fewer victims first when priorities are small.
      sum += p->priority + (std::int64_t{1} << 31);
      if (p->priority > highest) {
        highest = p->priority;
        earliest = p->start;
      } else if (p->priority == highest) {
        earliest = std::min(earliest, p->start);
      }
    }
  }
  out.rank = {violations, highest, sum, out.victims.size(), -earliest};
  return out;
}

// Every node and victim set the documentation allows (empty: no preemption).
inline std::vector<Preemption> preemptions(const nlohmann::json& pod, int priority,
                                           const Cluster& c, const std::vector<Placed>& placed) {
  std::vector<Preemption> all;
  if (pod["spec"].value("preemptionPolicy", std::string()) == "Never") {
    return all;
  }
  for (int n = 0; n < static_cast<int>(c.nodes.size()); ++n) {
    if (auto p = preemptOnNode(pod, priority, c, n, placed)) {
      all.push_back(std::move(*p));
    }
  }
  if (all.empty()) {
    return all;
  }
  auto best = all.front().rank;
  for (const auto& p : all) {
    best = std::min(best, p.rank);
  }
  std::erase_if(all, [&](const Preemption& p) { return p.rank != best; });
  return all;
}

}  // namespace kc::alloc::test::mixed
