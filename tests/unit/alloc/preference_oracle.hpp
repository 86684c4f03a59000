#pragma once
// kube-scheduler's preference scores recomputed from the objects themselves, written from the
// Kubernetes documentation ("Assigning Pods to Nodes": node affinity weights, inter-pod affinity
// weights; "Pod Topology Spread Constraints": ScheduleAnyway; "Taints and Tolerations":
// PreferNoSchedule; the scheduling framework's Score / NormalizeScore, MaxNodeScore 100) and
// the plugins' documented formulas, not from pod_preference.cpp: for every candidate node it
// walks every node and every pod again, comparing topology values directly.
//
//  - InterPodAffinity: for every running pod p and every term, the term's weight counts on a
//    candidate in the same topology domain as p's node (both carry the key, same value): the
//    incoming pod's preferred affinity terms matching p (+), its preferred anti-affinity terms
//    (-); p's required affinity terms matching the incoming pod (+1 each), p's preferred
//    affinity (+) and anti-affinity (-) terms matching it. Normalized
//    trunc(100 * (s - min) / (max - min)) over the candidates, 0 when all equal.
//  - PodTopologySpread (ScheduleAnyway constraints only; none: 0 everywhere): a candidate
//    without every such constraint's key scores 0. Per constraint: domains = values of the key
//    on the other candidates (hostname: one per candidate), weight ln(domains + 2); a
//    candidate's count = matching pods (the pod's namespace, the labelSelector with
//    matchLabelKeys) on the nodes with every key, the candidate's value and admitted by the
//    constraint's node policies (hostname: on the candidate only). s = round(sum(count *
//    weight + maxSkew - 1)), normalized 100 * (max + min - s) / max (max 0: 100).
//  - NodeAffinity: sum of the weights of the preferred terms the node matches (a term with no
//    requirement matches nothing), normalized s * 100 / max (max 0: 0).
//  - TaintToleration: PreferNoSchedule taints not tolerated by a toleration of effect
//    PreferNoSchedule or none, normalized 100 - s * 100 / max (max 0: 100).
//  - total = 2 * InterPodAffinity + 2 * PodTopologySpread + 2 * NodeAffinity + 3 * TaintToleration.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/unit/alloc/affinity_oracle.hpp"

namespace kc::alloc::test {

struct PrefNode {
  std::string name;
  std::map<std::string, std::string> labels;
  nlohmann::json taints = nlohmann::json::array();  // [{key, value, effect}]
  std::vector<nlohmann::json> pods;                 // Pod objects running there
};

using NsLabels = std::map<std::string, std::map<std::string, std::string>>;

struct OracleScores {
  std::vector<std::int64_t> interPodAffinity, topologySpread, nodeAffinity, taintToleration, total;
};

inline nlohmann::json prefList(const nlohmann::json& pod, const char* side, const char* kind) {
  return pod["spec"]
      .value("affinity", nlohmann::json::object())
      .value(side, nlohmann::json::object())
      .value(kind, nlohmann::json::array());
}

inline bool prefSameDomain(const PrefNode& a, const PrefNode& b, const std::string& key) {
  return a.labels.count(key) && b.labels.count(key) && a.labels.at(key) == b.labels.at(key);
}

inline bool prefSamePod(const nlohmann::json& a, const nlohmann::json& b) {
  return oracleNs(a) == oracleNs(b) && a["metadata"]["name"] == b["metadata"]["name"];
}

// v1.Toleration semantics from the API reference.
inline bool prefTolerates(const nlohmann::json& tol, const nlohmann::json& taint) {
  const std::string effect = tol.value("effect", "");
  if (!effect.empty() && effect != taint["effect"].get<std::string>()) {
    return false;
  }
  const std::string key = tol.value("key", "");
  if (!key.empty() && key != taint["key"].get<std::string>()) {
    return false;
  }
  if (tol.value("operator", "Equal") == "Exists") {
    return true;
  }
  return tol.value("value", "") == taint.value("value", "");
}

inline bool prefRequirementMatches(const nlohmann::json& r, const std::string& have, bool has) {
  const std::string op = r["operator"];
  bool listed = false;
  for (const auto& v : r.value("values", nlohmann::json::array())) {
    listed = listed || (has && have == v.get<std::string>());
  }
  if (op == "In") {
    return listed;
  }
  if (op == "NotIn") {
    return !listed;
  }
  if (op == "Exists") {
    return has;
  }
  if (op == "DoesNotExist") {
    return !has;
  }
  if (!has) {
    return false;  // Gt, Lt on a missing label
  }
  const long long bound = std::stoll(r["values"][0].get<std::string>());
  std::size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(have, &used);
  } catch (...) {
    return false;
  }
  if (used != have.size()) {
    return false;
  }
  return op == "Gt" ? value > bound : value < bound;
}

inline bool prefNodeTermMatches(const nlohmann::json& term, const PrefNode& node) {
  const auto exprs = term.value("matchExpressions", nlohmann::json::array());
  const auto fields = term.value("matchFields", nlohmann::json::array());
  if (exprs.empty() && fields.empty()) {
    return false;
  }
  for (const auto& r : exprs) {
    const std::string key = r["key"];
    const bool has = node.labels.count(key) != 0;
    if (!prefRequirementMatches(r, has ? node.labels.at(key) : "", has)) {
      return false;
    }
  }
  for (const auto& r : fields) {
    if (!prefRequirementMatches(r, node.name, true)) {
      return false;
    }
  }
  return true;
}

inline std::vector<std::int64_t> oracleInterPodAffinity(const nlohmann::json& incoming,
                                                        const std::vector<PrefNode>& all,
                                                        const std::vector<std::size_t>& cands,
                                                        const NsLabels& ns) {
  std::vector<std::int64_t> raw;
  const std::string own = oracleNs(incoming);
  for (std::size_t c : cands) {
    std::int64_t s = 0;
    for (const auto& m : all) {
      for (const auto& p : m.pods) {
        if (prefSamePod(p, incoming)) {
          continue;
        }
        auto add = [&](const nlohmann::json& term, bool covers, std::int64_t w) {
          if (covers && prefSameDomain(m, all[c], term["topologyKey"])) {
            s += w;
          }
        };
        for (const auto& t :
             prefList(incoming, "podAffinity", "preferredDuringSchedulingIgnoredDuringExecution")) {
          add(t["podAffinityTerm"], oracleTermCovers(t["podAffinityTerm"], own, p, ns),
              t["weight"].get<std::int64_t>());
        }
        for (const auto& t : prefList(incoming, "podAntiAffinity",
                                      "preferredDuringSchedulingIgnoredDuringExecution")) {
          add(t["podAffinityTerm"], oracleTermCovers(t["podAffinityTerm"], own, p, ns),
              -t["weight"].get<std::int64_t>());
        }
        for (const auto& t :
             prefList(p, "podAffinity", "requiredDuringSchedulingIgnoredDuringExecution")) {
          add(t, oracleTermCovers(t, oracleNs(p), incoming, ns), 1);
        }
        for (const auto& t :
             prefList(p, "podAffinity", "preferredDuringSchedulingIgnoredDuringExecution")) {
          add(t["podAffinityTerm"],
              oracleTermCovers(t["podAffinityTerm"], oracleNs(p), incoming, ns),
              t["weight"].get<std::int64_t>());
        }
        for (const auto& t :
             prefList(p, "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution")) {
          add(t["podAffinityTerm"],
              oracleTermCovers(t["podAffinityTerm"], oracleNs(p), incoming, ns),
              -t["weight"].get<std::int64_t>());
        }
      }
    }
    raw.push_back(s);
  }
  std::vector<std::int64_t> out;
  if (raw.empty()) {
    return out;
  }
  const std::int64_t lo = *std::min_element(raw.begin(), raw.end());
  const std::int64_t hi = *std::max_element(raw.begin(), raw.end());
  for (std::int64_t s : raw) {
    out.push_back(hi == lo ? 0
                           : static_cast<std::int64_t>(100.0 * (static_cast<double>(s - lo) /
                                                                static_cast<double>(hi - lo))));
  }
  return out;
}

inline std::vector<std::int64_t> oracleSoftSpread(const nlohmann::json& incoming,
                                                  const std::vector<PrefNode>& all,
                                                  const std::vector<std::size_t>& cands) {
  std::vector<nlohmann::json> soft;
  for (const auto& c : incoming["spec"].value("topologySpreadConstraints", nlohmann::json())) {
    if (c["whenUnsatisfiable"] == "ScheduleAnyway") {
      soft.push_back(c);
    }
  }
  std::vector<std::int64_t> out(cands.size(), 0);
  if (soft.empty()) {
    return out;
  }
  auto allKeys = [&](const PrefNode& n) {
    for (const auto& c : soft) {
      if (!n.labels.count(c["topologyKey"].get<std::string>())) {
        return false;
      }
    }
    return true;
  };
  const auto podLabels = oracleLabels(incoming["metadata"].value("labels", nlohmann::json()));
  const auto nodeSelector = oracleLabels(incoming["spec"].value("nodeSelector", nlohmann::json()));
  const auto tolerations = incoming["spec"].value("tolerations", nlohmann::json::array());
  auto matching = [&](const PrefNode& n, const nlohmann::json& sel) {
    std::int64_t k = 0;
    for (const auto& p : n.pods) {
      if (!prefSamePod(p, incoming) && oracleNs(p) == oracleNs(incoming) &&
          oracleSelectorMatches(sel,
                                oracleLabels(p["metadata"].value("labels", nlohmann::json())))) {
        ++k;
      }
    }
    return k;
  };
  auto admitted = [&](const PrefNode& n, const nlohmann::json& c) {
    if (c.value("nodeAffinityPolicy", "Honor") == "Honor") {
      for (const auto& [k, v] : nodeSelector) {
        if (!n.labels.count(k) || n.labels.at(k) != v) {
          return false;
        }
      }
    }
    if (c.value("nodeTaintsPolicy", "Ignore") == "Honor") {
      for (const auto& taint : n.taints) {
        if (taint["effect"] == "PreferNoSchedule") {
          continue;
        }
        bool ok = false;
        for (const auto& t : tolerations) {
          ok = ok || prefTolerates(t, taint);
        }
        if (!ok) {
          return false;
        }
      }
    }
    return true;
  };
  std::vector<double> weight;
  std::vector<nlohmann::json> selectors;
  std::size_t scored = 0;
  for (std::size_t c : cands) {
    scored += allKeys(all[c]) ? 1 : 0;
  }
  for (const auto& c : soft) {
    const std::string key = c["topologyKey"];
    std::set<std::string> values;
    for (std::size_t i : cands) {
      if (allKeys(all[i])) {
        values.insert(all[i].labels.at(key));
      }
    }
    const std::size_t size = key == "kubernetes.io/hostname" ? scored : values.size();
    weight.push_back(std::log(static_cast<double>(size) + 2.0));
    nlohmann::json sel = c.value("labelSelector", nlohmann::json());
    for (const auto& k : c.value("matchLabelKeys", nlohmann::json::array())) {
      if (podLabels.count(k.get<std::string>()) && !sel.is_null()) {
        sel["matchLabels"][k.get<std::string>()] = podLabels.at(k.get<std::string>());
      }
    }
    selectors.push_back(sel);
  }
  std::int64_t lo = INT64_MAX;
  std::int64_t hi = 0;
  std::vector<bool> ignored;
  for (std::size_t j = 0; j < cands.size(); ++j) {
    const PrefNode& node = all[cands[j]];
    ignored.push_back(!allKeys(node));
    if (ignored.back()) {
      continue;
    }
    double s = 0;
    for (std::size_t k = 0; k < soft.size(); ++k) {
      const std::string key = soft[k]["topologyKey"];
      std::int64_t count = 0;
      if (key == "kubernetes.io/hostname") {
        count = matching(node, selectors[k]);
      } else {
        for (const auto& m : all) {
          if (allKeys(m) && m.labels.at(key) == node.labels.at(key) && admitted(m, soft[k])) {
            count += matching(m, selectors[k]);
          }
        }
      }
      s += static_cast<double>(count) * weight[k] + (soft[k]["maxSkew"].get<double>() - 1);
    }
    out[j] = static_cast<std::int64_t>(std::round(s));
    lo = std::min(lo, out[j]);
    hi = std::max(hi, out[j]);
  }
  for (std::size_t j = 0; j < cands.size(); ++j) {
    out[j] = ignored[j] ? 0 : (hi == 0 ? 100 : 100 * (hi + lo - out[j]) / hi);
  }
  return out;
}

inline std::vector<std::int64_t> oraclePreferredNodeAffinity(
    const nlohmann::json& incoming, const std::vector<PrefNode>& all,
    const std::vector<std::size_t>& cands) {
  const auto terms =
      incoming["spec"]
          .value("affinity", nlohmann::json::object())
          .value("nodeAffinity", nlohmann::json::object())
          .value("preferredDuringSchedulingIgnoredDuringExecution", nlohmann::json::array());
  std::vector<std::int64_t> out;
  for (std::size_t c : cands) {
    std::int64_t s = 0;
    for (const auto& t : terms) {
      s += prefNodeTermMatches(t["preference"], all[c]) ? t["weight"].get<std::int64_t>() : 0;
    }
    out.push_back(s);
  }
  const std::int64_t hi = out.empty() ? 0 : *std::max_element(out.begin(), out.end());
  for (auto& s : out) {
    s = hi == 0 ? 0 : s * 100 / hi;
  }
  return out;
}

inline std::vector<std::int64_t> oracleTaintToleration(const nlohmann::json& incoming,
                                                       const std::vector<PrefNode>& all,
                                                       const std::vector<std::size_t>& cands) {
  const auto tolerations = incoming["spec"].value("tolerations", nlohmann::json::array());
  std::vector<std::int64_t> out;
  for (std::size_t c : cands) {
    std::int64_t s = 0;
    for (const auto& taint : all[c].taints) {
      if (taint["effect"] != "PreferNoSchedule") {
        continue;
      }
      bool ok = false;
      for (const auto& t : tolerations) {
        const std::string effect = t.value("effect", "");
        ok = ok || ((effect.empty() || effect == "PreferNoSchedule") && prefTolerates(t, taint));
      }
      s += ok ? 0 : 1;
    }
    out.push_back(s);
  }
  const std::int64_t hi = out.empty() ? 0 : *std::max_element(out.begin(), out.end());
  for (auto& s : out) {
    s = hi == 0 ? 100 : 100 - s * 100 / hi;
  }
  return out;
}

inline OracleScores oraclePreferences(const nlohmann::json& incoming,
                                      const std::vector<PrefNode>& all,
                                      const std::vector<std::size_t>& cands, const NsLabels& ns) {
  OracleScores o;
  o.interPodAffinity = oracleInterPodAffinity(incoming, all, cands, ns);
  o.topologySpread = oracleSoftSpread(incoming, all, cands);
  o.nodeAffinity = oraclePreferredNodeAffinity(incoming, all, cands);
  o.taintToleration = oracleTaintToleration(incoming, all, cands);
  for (std::size_t i = 0; i < cands.size(); ++i) {
    o.total.push_back(2 * o.interPodAffinity[i] + 2 * o.topologySpread[i] + 2 * o.nodeAffinity[i] +
                      3 * o.taintToleration[i]);
  }
  return o;
}

}  // namespace kc::alloc::test
