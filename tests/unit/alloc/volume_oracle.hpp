#pragma once
// An independent reading of kube-scheduler's VolumeBinding plugin, written from its
// documentation (the Kubernetes storage docs on volume binding modes and the plugin's
// documented Filter reasons, the volume topology-aware scheduling design) over plain test
// descriptions of claims, volumes and classes, not over the code under test's catalog. Only
// the test's own shapes are used: one label equality per PV affinity term, one matchLabels pair
// per claim selector, allowedTopologies as (key, values) pairs.
//
// Rules, as the documentation states them:
//  - a claim is bound when it names a volume and its binding is complete; then the pod may run
//    only on nodes that volume's node affinity admits (or nowhere, if the volume is missing);
//  - an unbound claim whose class binds WaitForFirstConsumer is bound for the node chosen:
//    with the smallest existing Available volume of its class that is large enough, has its
//    access modes and volume mode, matches its selector, is reachable from the node and is not
//    taken by another claim (claims smallest first); else provisioned, if the class names a
//    provisioner and allowedTopologies admits the node; a claim already promised to a node
//    (selected-node) only fits that node;
//  - any other unbound claim must be bound before the pod is scheduled at all.

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kc::alloc::test {

struct OracleClaim {
  std::string name;
  std::optional<std::string> storageClass;  // nullopt: no class at all
  std::string volumeName;
  bool bindCompleted = false;
  std::optional<std::string> selectedNode;
  std::int64_t request = 0;
  std::uint8_t modes = 1;  // bit 0 RWO, 1 ROX, 2 RWX, 3 RWOP
  bool block = false;
  std::optional<std::pair<std::string, std::string>> selector;  // one matchLabels pair
};

struct OracleVolume {
  std::string name;
  std::string storageClass;
  std::int64_t capacity = 0;
  std::uint8_t modes = 1;
  bool block = false;
  std::string claimName;  // "" free
  std::string phase = "Available";
  // Terms ORed; each term one label key = value (empty: no node affinity).
  std::vector<std::pair<std::string, std::string>> affinity;
  std::map<std::string, std::string> labels;
};

struct OracleClass {
  std::string name;
  std::string provisioner;
  bool waitForFirstConsumer = false;
  // Terms ORed; each a list of (key, allowed values) ANDed.
  std::vector<std::vector<std::pair<std::string, std::vector<std::string>>>> topologies;
};

struct OracleNode {
  std::string name;
  std::map<std::string, std::string> labels;
};

struct OracleVerdict {
  bool refusedEverywhere = false;  // an unbound non-delayed claim
  bool affinityConflict = false;
  bool noVolumeToBind = false;
  bool boundVolumeMissing = false;
  std::map<std::string, std::string> staticBindings;  // claim -> volume
  std::vector<std::string> provisioned;               // claims, in the order decided
};

class VolumeOracle {
 public:
  std::vector<OracleClaim> claims;
  std::vector<OracleVolume> volumes;
  std::vector<OracleClass> classes;

  OracleVerdict judge(const std::vector<std::string>& podClaims, const OracleNode& node) const {
    OracleVerdict v;
    std::vector<const OracleClaim*> delayed;
    std::vector<const OracleClaim*> bound;
    for (const auto& name : podClaims) {
      const OracleClaim* c = findClaim(name);
      if (!c->volumeName.empty() && c->bindCompleted) {
        bound.push_back(c);
        continue;
      }
      const OracleClass* cls = c->storageClass ? findClass(*c->storageClass) : nullptr;
      if (cls != nullptr && cls->waitForFirstConsumer && c->volumeName.empty()) {
        delayed.push_back(c);
      } else {
        v.refusedEverywhere = true;
      }
    }
    if (v.refusedEverywhere) {
      return v;
    }
    for (const OracleClaim* c : bound) {
      const OracleVolume* pv = findVolume(c->volumeName);
      if (pv == nullptr) {
        v.boundVolumeMissing = true;
        break;
      }
      if (!reaches(*pv, node)) {
        v.affinityConflict = true;
        break;
      }
    }
    judgeDelayed(delayed, node, v);
    if (v.affinityConflict || v.noVolumeToBind || v.boundVolumeMissing) {
      v.staticBindings.clear();
      v.provisioned.clear();
    }
    return v;
  }

 private:
  void judgeDelayed(std::vector<const OracleClaim*> delayed, const OracleNode& node,
                    OracleVerdict& v) const {
    for (const OracleClaim* c : delayed) {
      if (c->selectedNode && *c->selectedNode != node.name) {
        v.noVolumeToBind = true;
        return;
      }
    }
    std::vector<const OracleClaim*> provision;
    std::vector<const OracleClaim*> match;
    for (const OracleClaim* c : delayed) {
      (c->selectedNode ? provision : match).push_back(c);
    }
    std::stable_sort(match.begin(), match.end(), [](const OracleClaim* a, const OracleClaim* b) {
      return a->request < b->request;
    });
    std::vector<std::string> taken;
    for (const OracleClaim* c : match) {
      const OracleVolume* best = nullptr;
      for (const OracleVolume& pv : volumes) {
        const bool free =
            pv.claimName.empty() && std::find(taken.begin(), taken.end(), pv.name) == taken.end();
        const bool fits =
            pv.storageClass == *c->storageClass && pv.phase == "Available" &&
            pv.capacity >= c->request && (pv.modes & c->modes) == c->modes &&
            pv.block == c->block && reaches(pv, node) &&
            (!c->selector || (pv.labels.count(c->selector->first) != 0 &&
                              pv.labels.at(c->selector->first) == c->selector->second));
        if (free && fits &&
            (best == nullptr || pv.capacity < best->capacity ||
             (pv.capacity == best->capacity && pv.name < best->name))) {
          best = &pv;
        }
      }
      if (best == nullptr) {
        provision.push_back(c);
      } else {
        taken.push_back(best->name);
        v.staticBindings[c->name] = best->name;
      }
    }
    for (const OracleClaim* c : provision) {
      const OracleClass* cls = findClass(*c->storageClass);
      const bool can = !cls->provisioner.empty() &&
                       cls->provisioner != "kubernetes.io/no-provisioner" &&
                       admits(cls->topologies, node);
      if (!can) {
        v.noVolumeToBind = true;
      }
      v.provisioned.push_back(c->name);
    }
  }

  static bool reaches(const OracleVolume& pv, const OracleNode& node) {
    if (pv.affinity.empty()) {
      return true;
    }
    for (const auto& [k, val] : pv.affinity) {
      auto l = node.labels.find(k);
      if (l != node.labels.end() && l->second == val) {
        return true;
      }
    }
    return false;
  }

  static bool admits(
      const std::vector<std::vector<std::pair<std::string, std::vector<std::string>>>>& terms,
      const OracleNode& node) {
    if (terms.empty()) {
      return true;
    }
    for (const auto& term : terms) {
      bool all = !term.empty();
      for (const auto& [k, values] : term) {
        auto l = node.labels.find(k);
        all = all && l != node.labels.end() &&
              std::find(values.begin(), values.end(), l->second) != values.end();
      }
      if (all) {
        return true;
      }
    }
    return false;
  }

  const OracleClaim* findClaim(const std::string& n) const {
    for (const auto& c : claims) {
      if (c.name == n) {
        return &c;
      }
    }
    return nullptr;
  }
  const OracleVolume* findVolume(const std::string& n) const {
    for (const auto& v : volumes) {
      if (v.name == n) {
        return &v;
      }
    }
    return nullptr;
  }
  const OracleClass* findClass(const std::string& n) const {
    for (const auto& c : classes) {
      if (c.name == n) {
        return &c;
      }
    }
    return nullptr;
  }
};

}  // namespace kc::alloc::test
