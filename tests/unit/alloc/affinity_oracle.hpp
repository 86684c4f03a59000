#pragma once
// Inter-pod affinity recomputed from the Pod objects themselves, written from the Kubernetes
// documentation ("Assigning Pods to Nodes": inter-pod affinity and anti-affinity; the
// PodAffinityTerm API reference) and kube-scheduler's documented filter, not from
// pod_affinity.cpp: it walks every pair of pods and compares topology values directly, with no
// counts and no prepared state.
//
//  - a term covers the namespaces listed, plus those its namespaceSelector matches ({}: all);
//    with neither, the namespace of the pod that wrote it; its labelSelector must match the
//    other pod's labels (missing: nothing; {}: everything);
//  - same topology domain: both nodes carry the term's topologyKey label with one value;
//  - required affinity: the node carries every term's key, and for each term a pod matching
//    all the terms runs in the node's domain of that term; if no such pod runs anywhere (on a
//    node carrying one of the keys) and the pod matches its own terms, it may go anyway;
//  - required anti-affinity: no pod matching a term runs in the node's domain of that term;
//  - the pods already running: none of their required anti-affinity terms that matches the
//    incoming pod may have the node in the running pod's domain.

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kc::alloc::test {

struct OracleNode {
  std::string name;
  std::map<std::string, std::string> labels;
  std::vector<nlohmann::json> pods;  // Pod objects running there
};

inline std::map<std::string, std::string> oracleLabels(const nlohmann::json& j) {
  std::map<std::string, std::string> out;
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      out[k] = v.get<std::string>();
    }
  }
  return out;
}

inline bool oracleSelectorMatches(const nlohmann::json& sel,
                                  const std::map<std::string, std::string>& labels) {
  if (sel.is_null()) {
    return false;
  }
  for (const auto& [k, v] : oracleLabels(sel.value("matchLabels", nlohmann::json()))) {
    if (!labels.count(k) || labels.at(k) != v) {
      return false;
    }
  }
  for (const auto& e : sel.value("matchExpressions", nlohmann::json::array())) {
    const std::string key = e["key"], op = e["operator"];
    const bool has = labels.count(key) != 0;
    bool listed = false;
    for (const auto& v : e.value("values", nlohmann::json::array())) {
      listed = listed || (has && labels.at(key) == v.get<std::string>());
    }
    if ((op == "In" && !listed) || (op == "NotIn" && listed) || (op == "Exists" && !has) ||
        (op == "DoesNotExist" && has)) {
      return false;
    }
  }
  return true;
}

inline std::string oracleNs(const nlohmann::json& pod) {
  return pod["metadata"].value("namespace", std::string());
}

// Does `term`, written in a pod of namespace `owner`, cover `pod`?
inline bool oracleTermCovers(
    const nlohmann::json& term, const std::string& owner, const nlohmann::json& pod,
    const std::map<std::string, std::map<std::string, std::string>>& nsLabels) {
  const std::string ns = oracleNs(pod);
  const auto listed = term.value("namespaces", nlohmann::json::array());
  const auto nsSel = term.value("namespaceSelector", nlohmann::json());
  bool inNs = false;
  if (listed.empty() && nsSel.is_null()) {
    inNs = ns == owner;
  }
  for (const auto& n : listed) {
    inNs = inNs || n.get<std::string>() == ns;
  }
  if (!nsSel.is_null()) {
    const auto it = nsLabels.find(ns);
    inNs = inNs ||
           oracleSelectorMatches(
               nsSel, it == nsLabels.end() ? std::map<std::string, std::string>() : it->second);
  }
  return inNs &&
         oracleSelectorMatches(term.value("labelSelector", nlohmann::json()),
                               oracleLabels(pod["metadata"].value("labels", nlohmann::json())));
}

inline nlohmann::json oracleTerms(const nlohmann::json& pod, const char* side) {
  return pod["spec"]
      .value("affinity", nlohmann::json::object())
      .value(side, nlohmann::json::object())
      .value("requiredDuringSchedulingIgnoredDuringExecution", nlohmann::json::array());
}

inline bool oracleSameDomain(const OracleNode& a, const OracleNode& b, const std::string& key) {
  return a.labels.count(key) && b.labels.count(key) && a.labels.at(key) == b.labels.at(key);
}

// "ok", "existing", "affinity" or "anti": the first rule the node breaks, in kube-scheduler's
// order (existing pods' anti-affinity, then affinity, then anti-affinity).
inline std::string naiveInterPod(
    const nlohmann::json& incoming, const OracleNode& node, const std::vector<OracleNode>& all,
    const std::map<std::string, std::map<std::string, std::string>>& nsLabels) {
  const std::string ns = oracleNs(incoming);
  for (const auto& m : all) {
    for (const auto& p : m.pods) {
      for (const auto& t : oracleTerms(p, "podAntiAffinity")) {
        if (oracleTermCovers(t, oracleNs(p), incoming, nsLabels) &&
            oracleSameDomain(m, node, t["topologyKey"])) {
          return "existing";
        }
      }
    }
  }
  const auto affinity = oracleTerms(incoming, "podAffinity");
  auto matchesAll = [&](const nlohmann::json& p) {
    for (const auto& t : affinity) {
      if (!oracleTermCovers(t, ns, p, nsLabels)) {
        return false;
      }
    }
    return true;
  };
  bool everyDomain = true;
  bool anyAnywhere = false;
  for (const auto& t : affinity) {
    const std::string key = t["topologyKey"];
    if (!node.labels.count(key)) {
      return "affinity";
    }
    bool here = false;
    for (const auto& m : all) {
      for (const auto& p : m.pods) {
        if (matchesAll(p)) {
          here = here || oracleSameDomain(m, node, key);
          anyAnywhere = anyAnywhere || m.labels.count(key) != 0;
        }
      }
    }
    everyDomain = everyDomain && here;
  }
  if (!everyDomain && (anyAnywhere || !matchesAll(incoming))) {
    return "affinity";
  }
  for (const auto& t : oracleTerms(incoming, "podAntiAffinity")) {
    for (const auto& m : all) {
      for (const auto& p : m.pods) {
        if (oracleTermCovers(t, ns, p, nsLabels) && oracleSameDomain(m, node, t["topologyKey"])) {
          return "anti";
        }
      }
    }
  }
  return "ok";
}

}  // namespace kc::alloc::test
