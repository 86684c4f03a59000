#include "libcore/alloc/topology_spread.hpp"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "libcore/alloc/node_filter.hpp"
#include "libcore/alloc/pod_fields.hpp"

namespace kc::alloc {
namespace {

using detail::at;
using detail::invalid;
using nlohmann::json;

// An optional string member that must be one of two values; `first` selected gives true.
Result<bool> choice(const json& c, const char* key, const std::string& f, const char* first,
                    const char* second, bool byDefault) {
  const json& v = at(c, key);
  if (v.is_null()) {
    return byDefault;
  }
  if (v.is_string() && v.get_ref<const std::string&>() == first) {
    return true;
  }
  if (v.is_string() && v.get_ref<const std::string&>() == second) {
    return false;
  }
  return invalid(f + "." + key, std::string("must be ") + first + " or " + second);
}

Result<SpreadConstraint> parseConstraint(const json& c, const std::string& f) {
  if (!c.is_object()) {
    return invalid(f, "not an object");
  }
  SpreadConstraint out;
  const json& skew = at(c, "maxSkew");
  if (!skew.is_number_integer() || skew.get<std::int64_t>() < 1 ||
      skew.get<std::int64_t>() > std::numeric_limits<std::int32_t>::max()) {
    return invalid(f + ".maxSkew", "must be a positive integer");
  }
  out.maxSkew = static_cast<std::int32_t>(skew.get<std::int64_t>());
  const json& key = at(c, "topologyKey");
  if (!key.is_string() || key.get_ref<const std::string&>().empty()) {
    return invalid(f + ".topologyKey", "required");
  }
  out.topologyKey = key.get<std::string>();
  const json& when = at(c, "whenUnsatisfiable");
  if (when.is_null()) {
    return invalid(f + ".whenUnsatisfiable", "required");
  }
  auto dns = choice(c, "whenUnsatisfiable", f, "DoNotSchedule", "ScheduleAnyway", true);
  auto affinity = choice(c, "nodeAffinityPolicy", f, "Honor", "Ignore", true);
  auto taints = choice(c, "nodeTaintsPolicy", f, "Honor", "Ignore", false);
  auto selector = parseLabelSelector(at(c, "labelSelector"), f + ".labelSelector");
  if (!dns || !affinity || !taints || !selector) {
    return !dns        ? dns.error()
           : !affinity ? affinity.error()
           : !taints   ? taints.error()
                       : selector.error();
  }
  out.doNotSchedule = *dns;
  out.honorNodeAffinity = *affinity;
  out.honorNodeTaints = *taints;
  out.labelSelector = std::move(*selector);
  if (const json& min = at(c, "minDomains"); !min.is_null()) {
    if (!min.is_number_integer() || min.get<std::int64_t>() < 1 ||
        min.get<std::int64_t>() > std::numeric_limits<std::int32_t>::max()) {
      return invalid(f + ".minDomains", "must be a positive integer");
    }
    if (!out.doNotSchedule) {
      return invalid(f + ".minDomains", "only with whenUnsatisfiable DoNotSchedule");
    }
    out.minDomains = static_cast<std::int32_t>(min.get<std::int64_t>());
  }
  const json& keys = at(c, "matchLabelKeys");
  if (!keys.is_null() && !keys.is_array()) {
    return invalid(f + ".matchLabelKeys", "not a list");
  }
  for (std::size_t i = 0; keys.is_array() && i < keys.size(); ++i) {
    if (!keys[i].is_string()) {
      return invalid(f + ".matchLabelKeys", "not a list of strings");
    }
    out.matchLabelKeys.push_back(keys[i].get<std::string>());
  }
  return out;
}

// Whether `node` counts for constraint `c` (kube-scheduler: every DoNotSchedule constraint's
// topologyKey on the node, then each constraint's own inclusion policies).
bool hasAllKeys(const SchedNode& node, std::span<const SpreadConstraint* const> constraints) {
  return std::all_of(constraints.begin(), constraints.end(), [&](const SpreadConstraint* c) {
    return node.labels.find(c->topologyKey) != node.labels.end();
  });
}

bool included(const SchedPod& pod, const SchedNode& node, const SpreadConstraint& c) {
  return (!c.honorNodeAffinity || nodeAffinityFilter(pod, node).empty()) &&
         (!c.honorNodeTaints || taintTolerationFilter(pod, node).empty());
}

}  // namespace

std::optional<LabelSelector> spreadSelector(const SpreadConstraint& c, const SchedPod& pod) {
  std::optional<LabelSelector> sel = c.labelSelector;
  if (!sel || c.matchLabelKeys.empty()) {
    return sel;
  }
  for (const std::string& key : c.matchLabelKeys) {
    if (auto it = pod.labels.find(key); it != pod.labels.end()) {
      sel->matchExpressions.push_back({key, SelectorOperator::In, {it->second}});
    }
  }
  return sel;
}

Result<std::shared_ptr<const TopologySpread>> parseTopologySpread(const nlohmann::json& spec) {
  const json& list = at(spec, "topologySpreadConstraints");
  if (list.is_null()) {
    return std::shared_ptr<const TopologySpread>();
  }
  if (!list.is_array()) {
    return invalid("spec.topologySpreadConstraints", "not a list");
  }
  auto out = std::make_shared<TopologySpread>();
  for (std::size_t i = 0; i < list.size(); ++i) {
    auto c = parseConstraint(list[i], "spec.topologySpreadConstraints[" + std::to_string(i) + "]");
    if (!c) {
      return c.error();
    }
    out->constraints.push_back(std::move(*c));
  }
  if (out->constraints.empty()) {
    return std::shared_ptr<const TopologySpread>();
  }
  return std::shared_ptr<const TopologySpread>(std::move(out));
}

std::optional<TopologySpreadState> prepareTopologySpread(const SchedPod& pod,
                                                         std::span<const SchedNode> nodes,
                                                         const PlacedPods* placed) {
  if (pod.topologySpread == nullptr) {
    return std::nullopt;
  }
  std::vector<const SpreadConstraint*> hard;
  for (const auto& c : pod.topologySpread->constraints) {
    if (c.doNotSchedule) {
      hard.push_back(&c);
    }
  }
  if (hard.empty()) {
    return std::nullopt;
  }
  std::vector<std::optional<LabelSelector>> selectors;
  TopologySpreadState state;
  for (const SpreadConstraint* c : hard) {
    selectors.push_back(spreadSelector(*c, pod));
    TopologySpreadState::Domains d;
    d.selfMatch = selectors.back() && matchesLabelSelector(*selectors.back(), pod.labels);
    state.constraints.push_back(std::move(d));
  }
  for (const SchedNode& node : nodes) {
    if (!hasAllKeys(node, hard)) {
      continue;
    }
    for (std::size_t i = 0; i < hard.size(); ++i) {
      if (!included(pod, node, *hard[i])) {
        continue;
      }
      std::int64_t matching = 0;
      if (placed != nullptr && selectors[i]) {
        for (const auto& p : placed->onNode(node.name)) {
          const bool self = p->name == pod.name && p->ns == pod.ns;
          if (!self && p->ns == pod.ns && matchesLabelSelector(*selectors[i], p->labels)) {
            ++matching;
          }
        }
      }
      state.constraints[i].count[node.labels.at(hard[i]->topologyKey)] += matching;
    }
  }
  for (std::size_t i = 0; i < hard.size(); ++i) {
    auto& d = state.constraints[i];
    std::int64_t min = std::numeric_limits<std::int64_t>::max();
    for (const auto& [value, n] : d.count) {
      min = std::min(min, n);
    }
    const bool tooFew =
        hard[i]->minDomains && static_cast<std::int64_t>(d.count.size()) < *hard[i]->minDomains;
    d.min = d.count.empty() || tooFew ? 0 : min;
  }
  return state;
}

std::vector<std::string> topologySpreadFilter(const SchedPod& pod, const TopologySpreadState& state,
                                              const SchedNode& node) {
  if (pod.topologySpread == nullptr) {
    return {};  // a state prepared for another pod
  }
  std::size_t i = 0;
  for (const auto& c : pod.topologySpread->constraints) {
    if (!c.doNotSchedule) {
      continue;
    }
    const auto& d = state.constraints[i++];
    auto label = node.labels.find(c.topologyKey);
    if (label == node.labels.end()) {
      return {std::string(kReasonSpreadMissingLabel)};
    }
    auto it = d.count.find(label->second);
    const std::int64_t here = it == d.count.end() ? 0 : it->second;
    if (here + (d.selfMatch ? 1 : 0) - d.min > c.maxSkew) {
      return {std::string(kReasonSpread)};
    }
  }
  return {};
}

}  // namespace kc::alloc
