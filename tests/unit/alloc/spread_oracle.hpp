#pragma once
// Pod topology spread recomputed from the objects themselves, written from the Kubernetes
// documentation ("Pod Topology Spread Constraints": maxSkew, minDomains, nodeAffinityPolicy,
// nodeTaintsPolicy, matchLabelKeys) and not from topology_spread.cpp: for every candidate node
// it walks every node and pod again.
//
//  - only whenUnsatisfiable DoNotSchedule constrains; ScheduleAnyway is a preference;
//  - the nodes that count: those carrying every DoNotSchedule constraint's topologyKey (the
//    filter sees only those constraints); with
//    nodeAffinityPolicy Honor (default) only those the pod's nodeSelector admits; with
//    nodeTaintsPolicy Honor (default Ignore) only those whose NoSchedule/NoExecute taints the pod
//    tolerates (the pods here tolerate nothing);
//  - a domain is one value of the topologyKey among them; its count is the pods running on
//    them in the pod's namespace that the labelSelector (and, per matchLabelKeys, the pod's own
//    value of each such key) selects;
//  - skew on a node = its domain's count + 1 if the pod itself is selected - the smallest
//    count of any domain (0 when minDomains is given and there are fewer domains);
//  - a node without the topologyKey is refused as missing the label; a skew above maxSkew is
//    refused.

#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/unit/alloc/affinity_oracle.hpp"

namespace kc::alloc::test {

struct SpreadNode {
  std::string name;
  std::map<std::string, std::string> labels;
  bool tainted = false;  // a NoSchedule taint no test pod tolerates
  std::vector<nlohmann::json> pods;
};

// "ok", "missing" or "spread" for one candidate node (the other filters are not its business).
inline std::string naiveSpread(const nlohmann::json& incoming, const SpreadNode& node,
                               const std::vector<SpreadNode>& all) {
  const auto constraints =
      incoming["spec"].value("topologySpreadConstraints", nlohmann::json::array());
  const auto podLabels = oracleLabels(incoming["metadata"].value("labels", nlohmann::json()));
  const auto selector = oracleLabels(incoming["spec"].value("nodeSelector", nlohmann::json()));
  for (const auto& c : constraints) {
    if (c.value("whenUnsatisfiable", "") != "DoNotSchedule") {
      continue;
    }
    const std::string key = c["topologyKey"];
    if (!node.labels.count(key)) {
      return "missing";
    }
    nlohmann::json sel = c.value("labelSelector", nlohmann::json());
    for (const auto& k : c.value("matchLabelKeys", nlohmann::json::array())) {
      if (podLabels.count(k.get<std::string>()) && !sel.is_null()) {
        sel["matchLabels"][k.get<std::string>()] = podLabels.at(k.get<std::string>());
      }
    }
    std::map<std::string, long> domains;
    for (const auto& n : all) {
      bool counts = true;
      for (const auto& other : constraints) {
        counts = counts && (other.value("whenUnsatisfiable", "") != "DoNotSchedule" ||
                            n.labels.count(other["topologyKey"].get<std::string>()) != 0);
      }
      if (c.value("nodeAffinityPolicy", "Honor") == "Honor") {
        for (const auto& [k, v] : selector) {
          counts = counts && n.labels.count(k) && n.labels.at(k) == v;
        }
      }
      if (c.value("nodeTaintsPolicy", "Ignore") == "Honor") {
        counts = counts && !n.tainted;
      }
      if (!counts) {
        continue;
      }
      long& d = domains[n.labels.at(key)];
      for (const auto& p : n.pods) {
        if (oracleNs(p) == oracleNs(incoming) &&
            oracleSelectorMatches(sel,
                                  oracleLabels(p["metadata"].value("labels", nlohmann::json())))) {
          ++d;
        }
      }
    }
    long min = std::numeric_limits<long>::max();
    for (const auto& [v, n] : domains) {
      min = std::min(min, n);
    }
    if (domains.empty() || (c.contains("minDomains") &&
                            static_cast<long>(domains.size()) < c["minDomains"].get<long>())) {
      min = 0;
    }
    const long here = domains.count(node.labels.at(key)) ? domains.at(node.labels.at(key)) : 0;
    const long self = oracleSelectorMatches(sel, podLabels) ? 1 : 0;
    if (here + self - min > c["maxSkew"].get<long>()) {
      return "spread";
    }
  }
  return "ok";
}

}  // namespace kc::alloc::test
