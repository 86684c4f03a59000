#include "libcore/alloc/node_filter.hpp"

#include <algorithm>
#include <map>

#include "libcore/alloc/node_ports.hpp"

namespace kc::alloc {
namespace {

bool contains(const std::vector<std::string>& values, std::string_view v) {
  return std::find(values.begin(), values.end(), v) != values.end();
}

bool matchesField(const SelectorRequirement& r, const SchedNode& node) {
  // Only metadata.name with In/NotIn passes parsing; anything else matches nothing.
  if (r.key != "metadata.name") {
    return false;
  }
  switch (r.op) {
    case SelectorOperator::In:
      return contains(r.values, node.name);
    case SelectorOperator::NotIn:
      return !contains(r.values, node.name);
    default:
      return false;
  }
}

bool matchesTerm(const NodeSelectorTerm& term, const SchedNode& node) {
  if (term.matchExpressions.empty() && term.matchFields.empty()) {
    return false;
  }
  for (const auto& r : term.matchExpressions) {
    if (!matchesLabelRequirement(r, node.labels)) {
      return false;
    }
  }
  for (const auto& r : term.matchFields) {
    if (!matchesField(r, node)) {
      return false;
    }
  }
  return true;
}

bool toleratesAny(std::span<const Toleration> tolerations, const Taint& taint) {
  return std::any_of(tolerations.begin(), tolerations.end(),
                     [&](const Toleration& t) { return toleratesTaint(t, taint); });
}

}  // namespace

bool toleratesTaint(const Toleration& t, const Taint& taint) {
  if (t.effect && *t.effect != taint.effect) {
    return false;
  }
  if (!t.key.empty() && t.key != taint.key) {
    return false;
  }
  return t.op == TolerationOperator::Exists || t.value == taint.value;
}

bool matchesLabelRequirement(const SelectorRequirement& r, const StringMap& labels) {
  auto it = labels.find(r.key);
  const bool has = it != labels.end();
  switch (r.op) {
    case SelectorOperator::In:
      return has && contains(r.values, it->second);
    case SelectorOperator::NotIn:
      return !has || !contains(r.values, it->second);
    case SelectorOperator::Exists:
      return has;
    case SelectorOperator::DoesNotExist:
      return !has;
    case SelectorOperator::Gt:
    case SelectorOperator::Lt: {
      std::int64_t labelValue = 0;
      std::int64_t bound = 0;
      if (!has || r.values.size() != 1 || !parseLabelInt(it->second, labelValue) ||
          !parseLabelInt(r.values[0], bound)) {
        return false;
      }
      return r.op == SelectorOperator::Gt ? labelValue > bound : labelValue < bound;
    }
  }
  return false;
}

bool matchesNodeSelectorTerms(std::span<const NodeSelectorTerm> terms, const SchedNode& node) {
  return std::any_of(terms.begin(), terms.end(),
                     [&](const NodeSelectorTerm& t) { return matchesTerm(t, node); });
}

FilterReasons nodeUnschedulableFilter(const SchedPod& pod, const SchedNode& node) {
  if (!node.unschedulable) {
    return {};
  }
  const Taint cordon{std::string(kTaintNodeUnschedulable), "", TaintEffect::NoSchedule};
  if (toleratesAny(pod.tolerations, cordon)) {
    return {};
  }
  return {std::string(kReasonUnschedulable)};
}

FilterReasons nodeNameFilter(const SchedPod& pod, const SchedNode& node) {
  if (pod.nodeName.empty() || pod.nodeName == node.name) {
    return {};
  }
  return {std::string(kReasonNodeName)};
}

FilterReasons taintTolerationFilter(const SchedPod& pod, const SchedNode& node) {
  for (const auto& taint : node.taints) {
    if (taint.effect == TaintEffect::PreferNoSchedule) {
      continue;  // a scoring preference, not a filter
    }
    if (!toleratesAny(pod.tolerations, taint)) {
      return {"node(s) had untolerated taint {" + taint.key + ": " + taint.value + "}"};
    }
  }
  return {};
}

FilterReasons nodeAffinityFilter(const SchedPod& pod, const SchedNode& node) {
  for (const auto& [key, value] : pod.nodeSelector) {
    auto it = node.labels.find(key);
    if (it == node.labels.end() || it->second != value) {
      return {std::string(kReasonNodeAffinity)};
    }
  }
  if (pod.requiredNodeAffinity && !matchesNodeSelectorTerms(*pod.requiredNodeAffinity, node)) {
    return {std::string(kReasonNodeAffinity)};
  }
  return {};
}

FilterReasons resourcesFitFilter(const Resources& podRequest, const SchedNode& node,
                                 const NodeUsage& usage, const FitOptions& options) {
  FilterReasons reasons;
  // Both sides are in [0, INT64_MAX], so neither `usage.pods + 1 > ...` nor the subtractions
  // below can overflow when written as comparisons against what is left.
  if (usage.pods >= node.allocatablePods) {
    reasons.emplace_back(kReasonTooManyPods);
  }
  if (podRequest.isZero()) {
    return reasons;
  }
  auto shortOf = [](std::int64_t want, std::int64_t have, std::int64_t used) {
    return want > 0 && want > have - used;
  };
  const Resources& alloc = node.allocatable;
  const Resources& used = usage.requested;
  if (shortOf(podRequest.milliCpu, alloc.milliCpu, used.milliCpu)) {
    reasons.emplace_back("Insufficient cpu");
  }
  if (shortOf(podRequest.memory, alloc.memory, used.memory)) {
    reasons.emplace_back("Insufficient memory");
  }
  if (shortOf(podRequest.ephemeralStorage, alloc.ephemeralStorage, used.ephemeralStorage)) {
    reasons.emplace_back("Insufficient ephemeral-storage");
  }
  for (const auto& [name, want] : podRequest.scalar) {
    if (want == 0) {
      continue;
    }
    const std::size_t slash = name.find('/');
    const bool extended = slash != std::string::npos && name.rfind("kubernetes.io/", 0) != 0 &&
                          name.find(".kubernetes.io/") == std::string::npos;
    if (extended && (options.ignoredResources.count(name) != 0 ||
                     options.ignoredResourceGroups.count(name.substr(0, slash)) != 0)) {
      continue;
    }
    if (shortOf(want, alloc.scalarOr0(name), used.scalarOr0(name))) {
      reasons.push_back("Insufficient " + name);
    }
  }
  return reasons;
}

void prepareFilters(const SchedPod& pod, std::span<const SchedNode> nodes, FilterOptions& options,
                    PreparedFilters& prepared) {
  prepared.interPod = prepareInterPodAffinity(pod, nodes, options.placed, options.namespaces);
  prepared.spread = prepareTopologySpread(pod, nodes, options.placed);
  options.interPod = prepared.interPod ? &*prepared.interPod : nullptr;
  options.spread = prepared.spread ? &*prepared.spread : nullptr;
  if (options.volumes != nullptr) {
    prepared.volumeBinding = prepareVolumeBinding(pod, *options.volumes);
  }
  options.volumeBinding = prepared.volumeBinding ? &*prepared.volumeBinding : nullptr;
  options.prepared = true;
}

FilterReasons filterNode(const SchedPod& pod, const Resources& request, const SchedNode& node,
                         const NodeUsage& usage, const FilterOptions& options) {
  // kube-scheduler's default plugin order; a node stops at its first failing filter.
  if (options.volumeBinding != nullptr && !options.volumeBinding->rejectAll.empty()) {
    return {options.volumeBinding->rejectAll};  // VolumeBinding's PreFilter: no node at all
  }
  FilterReasons reasons = nodeUnschedulableFilter(pod, node);
  if (reasons.empty()) {
    reasons = nodeNameFilter(pod, node);
  }
  if (reasons.empty()) {
    reasons = taintTolerationFilter(pod, node);
  }
  if (reasons.empty()) {
    reasons = nodeAffinityFilter(pod, node);
  }
  if (reasons.empty() && !pod.hostPorts.empty()) {
    reasons = nodePortsFilter(pod, node, options.placed);
  }
  if (reasons.empty()) {
    reasons = resourcesFitFilter(request, node, usage, options.fit);
  }
  if (reasons.empty() && options.volumeBinding != nullptr) {
    reasons = volumeBindingFilter(*options.volumeBinding, node);
  }
  if (reasons.empty() && options.spread != nullptr) {
    reasons = topologySpreadFilter(pod, *options.spread, node);
  }
  if (reasons.empty() && options.interPod != nullptr) {
    reasons = interPodAffinityFilter(pod, *options.interPod, node);
  }
  if (reasons.empty() && options.rt) {
    reasons = options.rt(pod, request, node, usage);
  }
  return reasons;
}

Result<NodeFilterResult> filterNodes(const SchedPod& pod, std::span<const SchedNode> nodes,
                                     std::span<const NodeUsage> usage,
                                     const FilterOptions& options) {
  if (nodes.size() != usage.size()) {
    return makeError(kc::errc::kInvalid, "filterNodes: " + std::to_string(nodes.size()) +
                                             " nodes but " + std::to_string(usage.size()) +
                                             " usage entries");
  }
  const Resources request = podRequests(pod);
  const FilterOptions* opts = &options;
  FilterOptions prepared;
  PreparedFilters state;
  if (!options.prepared && (options.placed != nullptr || pod.topologySpread != nullptr ||
                            (options.volumes != nullptr && !pod.claimVolumes.empty()))) {
    prepared = options;
    prepareFilters(pod, nodes, prepared, state);
    opts = &prepared;
  }
  NodeFilterResult out;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    FilterReasons reasons = filterNode(pod, request, nodes[i], usage[i], *opts);
    if (reasons.empty()) {
      out.feasible.push_back(i);
    } else {
      out.rejected.push_back(RejectedNode{i, std::move(reasons)});
    }
  }
  if (out.feasible.empty()) {
    out.message = unschedulableMessage(nodes.size(), out.rejected);
    if (opts->volumeBinding != nullptr && !opts->volumeBinding->rejectAll.empty() &&
        !nodes.empty()) {
      // A PreFilter refusal is the FitError's one reason, not counted per node.
      out.message = "0/" + std::to_string(nodes.size()) +
                    " nodes are available: " + opts->volumeBinding->rejectAll + ".";
    }
  }
  return out;
}

std::string unschedulableMessage(std::size_t allNodes, std::span<const RejectedNode> rejected) {
  if (allNodes == 0) {
    return "no nodes available to schedule pods";
  }
  std::map<std::string, std::size_t> histogram;
  for (const auto& r : rejected) {
    for (const auto& reason : r.reasons) {
      ++histogram[reason];
    }
  }
  std::vector<std::string> parts;
  parts.reserve(histogram.size());
  for (const auto& [reason, count] : histogram) {
    parts.push_back(std::to_string(count) + " " + reason);
  }
  std::sort(parts.begin(), parts.end());  // as strings, count included, like sort.Strings
  std::string out = "0/" + std::to_string(allNodes) + " nodes are available:";
  if (!parts.empty()) {
    out += " ";
    for (std::size_t i = 0; i < parts.size(); ++i) {
      out += (i == 0 ? "" : ", ") + parts[i];
    }
    out += ".";
  }
  return out;
}

}  // namespace kc::alloc
