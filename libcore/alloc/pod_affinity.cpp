#include "libcore/alloc/pod_affinity.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "libcore/alloc/node_filter.hpp"
#include "libcore/alloc/pod_fields.hpp"

namespace kc::alloc {
namespace {

using detail::at;
using detail::invalid;
using nlohmann::json;

Result<std::vector<std::string>> stringList(const json& v, const std::string& f) {
  std::vector<std::string> out;
  if (v.is_null()) {
    return out;
  }
  if (!v.is_array()) {
    return invalid(f, "not a list");
  }
  for (const auto& s : v) {
    if (!s.is_string()) {
      return invalid(f, "not a list of strings");
    }
    out.push_back(s.get<std::string>());
  }
  return out;
}

Result<SelectorRequirement> parseExpression(const json& e, const std::string& f) {
  if (!e.is_object()) {
    return invalid(f, "not an object");
  }
  SelectorRequirement r;
  const json& key = at(e, "key");
  if (!key.is_string() || key.get_ref<const std::string&>().empty()) {
    return invalid(f + ".key", "required");
  }
  r.key = key.get<std::string>();
  const json& op = at(e, "operator");
  const std::string opText = op.is_string() ? op.get<std::string>() : std::string();
  if (opText == "In" || opText == "NotIn") {
    r.op = opText == "In" ? SelectorOperator::In : SelectorOperator::NotIn;
  } else if (opText == "Exists" || opText == "DoesNotExist") {
    r.op = opText == "Exists" ? SelectorOperator::Exists : SelectorOperator::DoesNotExist;
  } else {
    return invalid(f + ".operator",
                   "'" + opText + "' is not one of In, NotIn, Exists, DoesNotExist");
  }
  auto values = stringList(at(e, "values"), f + ".values");
  if (!values) {
    return values.error();
  }
  r.values = std::move(*values);
  const bool set = r.op == SelectorOperator::In || r.op == SelectorOperator::NotIn;
  if (set == r.values.empty()) {
    return invalid(f + ".values", set ? "must be non-empty for In and NotIn"
                                      : "must be empty for Exists and DoesNotExist");
  }
  return r;
}

Result<std::optional<LabelSelector>> parseSelectorImpl(const json& v, const std::string& f) {
  if (v.is_null()) {
    return std::optional<LabelSelector>();
  }
  if (!v.is_object()) {
    return invalid(f, "not an object");
  }
  LabelSelector out;
  const json& labels = at(v, "matchLabels");
  if (!labels.is_null()) {
    if (!labels.is_object()) {
      return invalid(f + ".matchLabels", "not a map");
    }
    for (const auto& [k, value] : labels.items()) {
      if (!value.is_string()) {
        return invalid(f + ".matchLabels[" + k + "]", "not a string");
      }
      out.matchLabels.emplace(k, value.get<std::string>());
    }
  }
  const json& exprs = at(v, "matchExpressions");
  if (!exprs.is_null() && !exprs.is_array()) {
    return invalid(f + ".matchExpressions", "not a list");
  }
  for (std::size_t i = 0; exprs.is_array() && i < exprs.size(); ++i) {
    auto r = parseExpression(exprs[i], f + ".matchExpressions[" + std::to_string(i) + "]");
    if (!r) {
      return r.error();
    }
    out.matchExpressions.push_back(std::move(*r));
  }
  return std::optional<LabelSelector>(std::move(out));
}

Result<PodAffinityTerm> parseTerm(const json& t, const std::string& f) {
  if (!t.is_object()) {
    return invalid(f, "not an object");
  }
  PodAffinityTerm out;
  auto selector = parseSelectorImpl(at(t, "labelSelector"), f + ".labelSelector");
  auto nsSelector = parseSelectorImpl(at(t, "namespaceSelector"), f + ".namespaceSelector");
  auto namespaces = stringList(at(t, "namespaces"), f + ".namespaces");
  if (!selector || !nsSelector || !namespaces) {
    return !selector ? selector.error() : !nsSelector ? nsSelector.error() : namespaces.error();
  }
  const json& key = at(t, "topologyKey");
  if (!key.is_string() || key.get_ref<const std::string&>().empty()) {
    return invalid(f + ".topologyKey", "required");
  }
  out.labelSelector = std::move(*selector);
  out.namespaceSelector = std::move(*nsSelector);
  out.namespaces = std::move(*namespaces);
  out.topologyKey = key.get<std::string>();
  return out;
}

// One of podAffinity / podAntiAffinity: its required and preferred terms.
Status parseSide(const json& side, const std::string& f, std::vector<PodAffinityTerm>& required,
                 std::vector<WeightedPodAffinityTerm>& preferred) {
  if (side.is_null()) {
    return okStatus();
  }
  if (!side.is_object()) {
    return invalid(f, "not an object");
  }
  const std::string rf = f + ".requiredDuringSchedulingIgnoredDuringExecution";
  const json& req = at(side, "requiredDuringSchedulingIgnoredDuringExecution");
  if (!req.is_null() && !req.is_array()) {
    return invalid(rf, "not a list");
  }
  for (std::size_t i = 0; req.is_array() && i < req.size(); ++i) {
    auto t = parseTerm(req[i], rf + "[" + std::to_string(i) + "]");
    if (!t) {
      return t.error();
    }
    required.push_back(std::move(*t));
  }
  const std::string pf = f + ".preferredDuringSchedulingIgnoredDuringExecution";
  const json& pref = at(side, "preferredDuringSchedulingIgnoredDuringExecution");
  if (!pref.is_null() && !pref.is_array()) {
    return invalid(pf, "not a list");
  }
  for (std::size_t i = 0; pref.is_array() && i < pref.size(); ++i) {
    const std::string ef = pf + "[" + std::to_string(i) + "]";
    const json& w = at(pref[i], "weight");
    if (!w.is_number_integer() || w.get<std::int64_t>() < 1 || w.get<std::int64_t>() > 100) {
      return invalid(ef + ".weight", "must be an integer in 1..100");
    }
    auto t = parseTerm(at(pref[i], "podAffinityTerm"), ef + ".podAffinityTerm");
    if (!t) {
      return t.error();
    }
    preferred.push_back({static_cast<std::int32_t>(w.get<std::int64_t>()), std::move(*t)});
  }
  return okStatus();
}

using Counts = InterPodAffinityState::Counts;

void addPair(Counts& counts, const SchedNode& node, const std::string& key) {
  if (auto it = node.labels.find(key); it != node.labels.end()) {
    ++counts[{key, it->second}];
  }
}

bool matchesAll(std::span<const PodAffinityTerm> terms, std::string_view ownerNs,
                std::string_view ns, const StringMap& labels, const NamespaceLabels* namespaces) {
  return std::all_of(terms.begin(), terms.end(), [&](const PodAffinityTerm& t) {
    return affinityTermMatches(t, ownerNs, ns, labels, namespaces);
  });
}

}  // namespace

Result<std::optional<LabelSelector>> parseLabelSelector(const nlohmann::json& v,
                                                        const std::string& field) {
  return parseSelectorImpl(v, field);
}

bool matchesLabelSelector(const LabelSelector& selector, const StringMap& labels) {
  for (const auto& [k, v] : selector.matchLabels) {
    auto it = labels.find(k);
    if (it == labels.end() || it->second != v) {
      return false;
    }
  }
  return std::all_of(
      selector.matchExpressions.begin(), selector.matchExpressions.end(),
      [&](const SelectorRequirement& r) { return matchesLabelRequirement(r, labels); });
}

Result<std::shared_ptr<const PodAffinity>> parsePodAffinity(const nlohmann::json& spec) {
  const json& affinity = at(spec, "affinity");
  if (affinity.is_null()) {
    return std::shared_ptr<const PodAffinity>();
  }
  auto out = std::make_shared<PodAffinity>();
  if (auto s = parseSide(at(affinity, "podAffinity"), "spec.affinity.podAffinity", out->required,
                         out->preferred);
      !s) {
    return s.error();
  }
  if (auto s = parseSide(at(affinity, "podAntiAffinity"), "spec.affinity.podAntiAffinity",
                         out->requiredAnti, out->preferredAnti);
      !s) {
    return s.error();
  }
  if (out->required.empty() && out->requiredAnti.empty() && out->preferred.empty() &&
      out->preferredAnti.empty()) {
    return std::shared_ptr<const PodAffinity>();
  }
  return std::shared_ptr<const PodAffinity>(std::move(out));
}

bool affinityTermMatches(const PodAffinityTerm& term, std::string_view ownerNs, std::string_view ns,
                         const StringMap& labels, const NamespaceLabels* namespaces) {
  bool inNamespace = false;
  if (term.namespaces.empty() && !term.namespaceSelector) {
    inNamespace = ns == ownerNs;
  } else if (std::find(term.namespaces.begin(), term.namespaces.end(), ns) !=
             term.namespaces.end()) {
    inNamespace = true;
  } else if (term.namespaceSelector) {
    const LabelSelector& sel = *term.namespaceSelector;
    if (sel.matchLabels.empty() && sel.matchExpressions.empty()) {
      inNamespace = true;  // {}: every namespace
    } else if (namespaces != nullptr) {
      auto it = namespaces->find(ns);
      inNamespace = it != namespaces->end() && matchesLabelSelector(sel, it->second);
    }
  }
  return inNamespace && term.labelSelector && matchesLabelSelector(*term.labelSelector, labels);
}

std::optional<InterPodAffinityState> prepareInterPodAffinity(const SchedPod& pod,
                                                             std::span<const SchedNode> nodes,
                                                             const PlacedPods* placed,
                                                             const NamespaceLabels* namespaces) {
  const PodAffinity* own = pod.podAffinity.get();
  const bool ownTerms = own != nullptr && (!own->required.empty() || !own->requiredAnti.empty());
  const bool existing = placed != nullptr && placed->anyRequiredAntiAffinity();
  if (!ownTerms && !existing) {
    return std::nullopt;
  }
  InterPodAffinityState state;
  if (own != nullptr) {
    state.matchesOwnAffinity = matchesAll(own->required, pod.ns, pod.ns, pod.labels, namespaces);
  }
  if (placed == nullptr) {
    return state;
  }
  std::unordered_map<std::string_view, const SchedNode*> byName;
  byName.reserve(nodes.size());
  for (const SchedNode& n : nodes) {
    byName.emplace(n.name, &n);
  }
  auto nodeOf = [&](const std::string& name) -> const SchedNode* {
    auto it = byName.find(name);
    return it == byName.end() ? nullptr : it->second;
  };
  auto self = [&](const PlacedPod& p) { return p.name == pod.name && p.ns == pod.ns; };
  placed->forEachWithRequiredAntiAffinity([&](const std::string& nodeName, const auto& p) {
    const SchedNode* node = nodeOf(nodeName);
    if (node == nullptr || self(*p)) {
      return;
    }
    for (const PodAffinityTerm& t : p->affinity->requiredAnti) {
      if (affinityTermMatches(t, p->ns, pod.ns, pod.labels, namespaces)) {
        addPair(state.existingAnti, *node, t.topologyKey);
      }
    }
  });
  if (!ownTerms) {
    return state;
  }
  placed->forEach([&](const std::string& nodeName, const auto& p) {
    const SchedNode* node = nodeOf(nodeName);
    if (node == nullptr || self(*p)) {
      return;
    }
    if (!own->required.empty() && matchesAll(own->required, pod.ns, p->ns, p->labels, namespaces)) {
      for (const PodAffinityTerm& t : own->required) {
        addPair(state.affinity, *node, t.topologyKey);
      }
    }
    for (const PodAffinityTerm& t : own->requiredAnti) {
      if (affinityTermMatches(t, pod.ns, p->ns, p->labels, namespaces)) {
        addPair(state.antiAffinity, *node, t.topologyKey);
      }
    }
  });
  return state;
}

std::vector<std::string> interPodAffinityFilter(const SchedPod& pod,
                                                const InterPodAffinityState& state,
                                                const SchedNode& node) {
  if (!state.existingAnti.empty()) {
    for (const auto& [key, value] : node.labels) {
      if (auto it = state.existingAnti.find({key, value});
          it != state.existingAnti.end() && it->second > 0) {
        return {std::string(kReasonExistingAntiAffinity)};
      }
    }
  }
  const PodAffinity* own = pod.podAffinity.get();
  if (own == nullptr) {
    return {};
  }
  bool podsExist = true;
  for (const PodAffinityTerm& t : own->required) {
    auto label = node.labels.find(t.topologyKey);
    if (label == node.labels.end()) {
      return {std::string(kReasonPodAffinity)};
    }
    auto it = state.affinity.find({t.topologyKey, label->second});
    if (it == state.affinity.end() || it->second <= 0) {
      podsExist = false;
    }
  }
  if (!podsExist && !(state.affinity.empty() && state.matchesOwnAffinity)) {
    return {std::string(kReasonPodAffinity)};
  }
  for (const PodAffinityTerm& t : own->requiredAnti) {
    auto label = node.labels.find(t.topologyKey);
    if (label == node.labels.end()) {
      continue;
    }
    if (auto it = state.antiAffinity.find({t.topologyKey, label->second});
        it != state.antiAffinity.end() && it->second > 0) {
      return {std::string(kReasonPodAntiAffinity)};
    }
  }
  return {};
}

}  // namespace kc::alloc
