#include "libcore/alloc/sched_objects.hpp"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "libcore/alloc/pod_fields.hpp"
#include "libcore/alloc/quantity.hpp"

namespace kc::alloc {
namespace {

using detail::optionalString;
using detail::stringMap;
using nlohmann::json;

Error invalid(const std::string& field, const std::string& why) {
  return makeError(kc::errc::kInvalid, field + ": " + why);
}

// The member `key` of `obj`, or null when absent. `obj` must be an object.
const json& member(const json& obj, const char* key) {
  static const json kNull;  // an immutable constant, not shared state
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

Status expectObject(const json& v, const std::string& field) {
  if (!v.is_object()) {
    return invalid(field, "not an object");
  }
  return okStatus();
}

// Sets the amounts of a resource map (requests, limits, overhead, allocatable) in `into`.
// Names that `skip` (a map or null) holds are validated but not set: the apiserver's defaulting
// of requests from limits keeps every request that is given. `pods` receives "pods" if not null.
Status addResourceMap(Resources& into, const json& map, const json& skip, const std::string& field,
                      std::int64_t* pods = nullptr) {
  if (map.is_null()) {
    return okStatus();
  }
  if (!map.is_object()) {
    return invalid(field, "not a map");
  }
  for (const auto& [name, value] : map.items()) {
    const std::string where = field + "." + name;
    std::string text;
    if (value.is_string()) {
      text = value.get<std::string>();
    } else if (value.is_number_integer() || value.is_number_float()) {
      text = value.dump();  // Quantity also unmarshals a JSON number
    } else {
      return invalid(where, "not a quantity");
    }
    auto amount = parseResourceAmount(name, text);
    if (!amount) {
      return invalid(where, amount.error().message);
    }
    if (skip.is_object() && skip.contains(name)) {
      continue;
    }
    std::int64_t* slot = nullptr;
    if (name == "cpu") {
      slot = &into.milliCpu;
    } else if (name == "memory") {
      slot = &into.memory;
    } else if (name == "ephemeral-storage") {
      slot = &into.ephemeralStorage;
    } else if (name == "pods") {
      slot = pods;
    } else if (isScalarResourceName(name)) {
      slot = &into.scalar[name];
    }
    if (slot != nullptr) {
      *slot = *amount;
    }
  }
  return okStatus();
}

Result<ContainerRequest> parseContainer(const json& c, const std::string& field, bool init) {
  if (auto s = expectObject(c, field); !s) {
    return s.error();
  }
  ContainerRequest out;
  auto name = optionalString(c, "name", field + ".name");
  if (!name) {
    return name.error();
  }
  out.name = *name;
  const json& res = member(c, "resources");
  if (!res.is_null()) {
    if (auto s = expectObject(res, field + ".resources"); !s) {
      return s.error();
    }
    const json& requests = member(res, "requests");
    if (auto s = addResourceMap(out.requests, requests, json(), field + ".resources.requests");
        !s) {
      return s.error();
    }
    if (auto s = addResourceMap(out.requests, member(res, "limits"), requests,
                                field + ".resources.limits");
        !s) {
      return s.error();
    }
  }
  auto policy = optionalString(c, "restartPolicy", field + ".restartPolicy");
  if (!policy) {
    return policy.error();
  }
  if (!policy->empty()) {
    if (!init || *policy != "Always") {
      return invalid(field + ".restartPolicy", "'" + *policy + "' is not allowed" +
                                                   (init ? " (only Always)" : " on a container"));
    }
    out.restartable = true;
  }
  return out;
}

// A JSON list (null: empty) read element by element with `parseOne(element, "field[i]")`.
template <typename T, typename ParseOne>
Result<std::vector<T>> parseList(const json& list, const std::string& field, ParseOne parseOne) {
  std::vector<T> out;
  if (list.is_null()) {
    return out;
  }
  if (!list.is_array()) {
    return invalid(field, "not a list");
  }
  for (std::size_t i = 0; i < list.size(); ++i) {
    Result<T> one = parseOne(list[i], field + "[" + std::to_string(i) + "]");
    if (!one) {
      return one.error();
    }
    out.push_back(std::move(*one));
  }
  return out;
}

Result<std::vector<ContainerRequest>> parseContainers(const json& list, const std::string& field,
                                                      bool init) {
  return parseList<ContainerRequest>(list, field, [init](const json& c, const std::string& f) {
    return parseContainer(c, f, init);
  });
}

Result<SelectorRequirement> parseRequirement(const json& r, const std::string& field,
                                             bool fieldSelector) {
  if (auto s = expectObject(r, field); !s) {
    return s.error();
  }
  SelectorRequirement out;
  auto key = optionalString(r, "key", field + ".key");
  if (!key) {
    return key.error();
  }
  if (key->empty()) {
    return invalid(field + ".key", "required");
  }
  out.key = *key;
  auto op = optionalString(r, "operator", field + ".operator");
  if (!op) {
    return op.error();
  }
  static constexpr std::pair<std::string_view, SelectorOperator> kOps[] = {
      {"In", SelectorOperator::In},         {"NotIn", SelectorOperator::NotIn},
      {"Exists", SelectorOperator::Exists}, {"DoesNotExist", SelectorOperator::DoesNotExist},
      {"Gt", SelectorOperator::Gt},         {"Lt", SelectorOperator::Lt}};
  bool known = false;
  for (const auto& [text, value] : kOps) {
    if (*op == text) {
      out.op = value;
      known = true;
    }
  }
  if (!known) {
    return invalid(field + ".operator", "'" + *op +
                                            "' is not one of In, NotIn, Exists, "
                                            "DoesNotExist, Gt, Lt");
  }
  const json& values = member(r, "values");
  if (!values.is_null()) {
    if (!values.is_array()) {
      return invalid(field + ".values", "not a list");
    }
    for (const auto& v : values) {
      if (!v.is_string()) {
        return invalid(field + ".values", "not a list of strings");
      }
      out.values.push_back(v.get<std::string>());
    }
  }
  const std::string vf = field + ".values";
  switch (out.op) {
    case SelectorOperator::In:
    case SelectorOperator::NotIn:
      if (out.values.empty()) {
        return invalid(vf, "must be non-empty for In and NotIn");
      }
      break;
    case SelectorOperator::Exists:
    case SelectorOperator::DoesNotExist:
      if (!out.values.empty()) {
        return invalid(vf, "must be empty for Exists and DoesNotExist");
      }
      break;
    case SelectorOperator::Gt:
    case SelectorOperator::Lt: {
      std::int64_t n = 0;
      if (out.values.size() != 1 || !parseLabelInt(out.values[0], n)) {
        return invalid(vf, "must be one integer for Gt and Lt");
      }
      break;
    }
  }
  if (fieldSelector) {
    if (out.key != "metadata.name") {
      return invalid(field + ".key", "'" + out.key + "' is not a supported field (metadata.name)");
    }
    if ((out.op != SelectorOperator::In && out.op != SelectorOperator::NotIn) ||
        out.values.size() != 1) {
      return invalid(field, "a field selector takes In or NotIn with exactly one value");
    }
  }
  return out;
}

Result<std::vector<SelectorRequirement>> parseRequirements(const json& list,
                                                           const std::string& field,
                                                           bool fieldSelector) {
  return parseList<SelectorRequirement>(list, field,
                                        [fieldSelector](const json& r, const std::string& f) {
                                          return parseRequirement(r, f, fieldSelector);
                                        });
}

Result<std::optional<std::vector<NodeSelectorTerm>>> parseRequiredAffinity(const json& spec) {
  const json& affinity = member(spec, "affinity");
  if (affinity.is_null()) {
    return std::optional<std::vector<NodeSelectorTerm>>();
  }
  if (auto s = expectObject(affinity, "spec.affinity"); !s) {
    return s.error();
  }
  const json& nodeAffinity = member(affinity, "nodeAffinity");
  if (nodeAffinity.is_null()) {
    return std::optional<std::vector<NodeSelectorTerm>>();
  }
  if (auto s = expectObject(nodeAffinity, "spec.affinity.nodeAffinity"); !s) {
    return s.error();
  }
  const json& required = member(nodeAffinity, "requiredDuringSchedulingIgnoredDuringExecution");
  if (required.is_null()) {
    return std::optional<std::vector<NodeSelectorTerm>>();
  }
  auto terms = parseNodeSelector(
      required, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution");
  if (!terms) {
    return terms.error();
  }
  return std::optional<std::vector<NodeSelectorTerm>>(std::move(*terms));
}

Result<TaintEffect> parseEffect(const std::string& text, const std::string& field) {
  if (text == "NoSchedule") {
    return TaintEffect::NoSchedule;
  }
  if (text == "PreferNoSchedule") {
    return TaintEffect::PreferNoSchedule;
  }
  if (text == "NoExecute") {
    return TaintEffect::NoExecute;
  }
  return invalid(field, "'" + text + "' is not one of NoSchedule, PreferNoSchedule, NoExecute");
}

Result<std::vector<Toleration>> parseTolerations(const json& list) {
  std::vector<Toleration> out;
  if (list.is_null()) {
    return out;
  }
  if (!list.is_array()) {
    return invalid("spec.tolerations", "not a list");
  }
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string f = "spec.tolerations[" + std::to_string(i) + "]";
    if (auto s = expectObject(list[i], f); !s) {
      return s.error();
    }
    Toleration t;
    auto key = optionalString(list[i], "key", f + ".key");
    auto op = optionalString(list[i], "operator", f + ".operator");
    auto value = optionalString(list[i], "value", f + ".value");
    auto effect = optionalString(list[i], "effect", f + ".effect");
    for (const auto* r : {&key, &op, &value, &effect}) {
      if (!*r) {
        return r->error();
      }
    }
    t.key = *key;
    t.value = *value;
    if (op->empty() || *op == "Equal") {
      t.op = TolerationOperator::Equal;
      if (t.key.empty()) {
        return invalid(f + ".operator", "must be Exists when key is empty");
      }
    } else if (*op == "Exists") {
      t.op = TolerationOperator::Exists;
      if (!t.value.empty()) {
        return invalid(f + ".value", "must be empty when operator is Exists");
      }
    } else {
      return invalid(f + ".operator", "'" + *op + "' is not Equal or Exists");
    }
    if (!effect->empty()) {
      auto e = parseEffect(*effect, f + ".effect");
      if (!e) {
        return e.error();
      }
      t.effect = *e;
    }
    out.push_back(std::move(t));
  }
  return out;
}

Status parseMetadataName(const json& obj, std::string& name, const json*& metadata) {
  if (!obj.is_object()) {
    return makeError(kc::errc::kInvalid, "object: not a JSON object");
  }
  metadata = &member(obj, "metadata");
  if (auto s = expectObject(*metadata, "metadata"); !s) {
    return s.error();
  }
  auto n = optionalString(*metadata, "name", "metadata.name");
  if (!n) {
    return n.error();
  }
  if (n->empty()) {
    return invalid("metadata.name", "required");
  }
  name = *n;
  return okStatus();
}

}  // namespace

std::int64_t Resources::scalarOr0(std::string_view name) const {
  auto it = scalar.find(name);
  return it == scalar.end() ? 0 : it->second;
}

bool Resources::isZero() const {
  if (milliCpu != 0 || memory != 0 || ephemeralStorage != 0) {
    return false;
  }
  for (const auto& [name, amount] : scalar) {
    if (amount != 0) {
      return false;
    }
  }
  return true;
}

bool parseLabelInt(std::string_view s, std::int64_t& out) {
  if (!s.empty() && s.front() == '+') {
    s.remove_prefix(1);
    if (!s.empty() && s.front() == '-') {
      return false;
    }
  }
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, out);
  return !s.empty() && ec == std::errc() && ptr == end;
}

bool isScalarResourceName(std::string_view name) {
  return name.find('/') != std::string_view::npos || name.rfind("hugepages-", 0) == 0 ||
         name.rfind("attachable-volumes-", 0) == 0;
}

std::string_view taintEffectName(TaintEffect e) {
  switch (e) {
    case TaintEffect::NoSchedule:
      return "NoSchedule";
    case TaintEffect::PreferNoSchedule:
      return "PreferNoSchedule";
    case TaintEffect::NoExecute:
      return "NoExecute";
  }
  return "?";
}

namespace {

// The pod's scheduling annotations: the GPU models it accepts and its expected run time.
Status applyPodAnnotations(const StringMap& annotations, SchedPod& out) {
  if (auto it = annotations.find(kGpuModelsAnnotation); it != annotations.end()) {
    auto models = GpuModelFilter::parse(it->second, kGpuModelsAnnotationSeparator);
    if (!models) {
      return invalid("metadata.annotations[" + std::string(kGpuModelsAnnotation) + "]",
                     models.error().message);
    }
    out.gpuModels = std::move(*models);
  }
  if (auto it = annotations.find(kExpectedRuntimeAnnotation); it != annotations.end()) {
    std::int64_t seconds = 0;
    const std::string& text = it->second;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || seconds <= 0 ||
        seconds > kMaxExpectedRuntimeSeconds) {
      return invalid("metadata.annotations[" + std::string(kExpectedRuntimeAnnotation) + "]",
                     "'" + text + "' is not a whole number of seconds in 1.." +
                         std::to_string(kMaxExpectedRuntimeSeconds));
    }
    out.expectedRuntimeSeconds = seconds;
  }
  return okStatus();
}

// metadata: name, namespace, uid and annotations. Returns the annotations, which the RT spec
// reads once the containers are known.
Result<StringMap> parsePodMetadata(const json& pod, SchedPod& out) {
  const json* metadata = nullptr;
  if (auto s = parseMetadataName(pod, out.name, metadata); !s) {
    return s.error();
  }
  auto ns = optionalString(*metadata, "namespace", "metadata.namespace");
  auto uid = optionalString(*metadata, "uid", "metadata.uid");
  if (!ns || !uid) {
    return !ns ? ns.error() : uid.error();
  }
  out.ns = *ns;
  out.uid = *uid;
  auto annotations = stringMap(member(*metadata, "annotations"), "metadata.annotations");
  if (!annotations) {
    return annotations.error();
  }
  if (auto s = applyPodAnnotations(*annotations, out); !s) {
    return s.error();
  }
  return annotations;
}

// spec.schedulerName, spec.nodeName and spec.activeDeadlineSeconds (the expected run time when
// no annotation gives one).
Status parsePodScheduling(const json& spec, SchedPod& out) {
  auto scheduler = optionalString(spec, "schedulerName", "spec.schedulerName");
  auto nodeName = optionalString(spec, "nodeName", "spec.nodeName");
  if (!scheduler || !nodeName) {
    return !scheduler ? scheduler.error() : nodeName.error();
  }
  out.schedulerName = scheduler->empty() ? "default-scheduler" : *scheduler;
  out.nodeName = *nodeName;
  if (const json& deadline = member(spec, "activeDeadlineSeconds"); !deadline.is_null()) {
    if (!deadline.is_number_integer() || deadline.get<std::int64_t>() <= 0) {
      return invalid("spec.activeDeadlineSeconds", "must be a positive integer");
    }
    if (!out.expectedRuntimeSeconds) {
      out.expectedRuntimeSeconds =
          std::min(deadline.get<std::int64_t>(), kMaxExpectedRuntimeSeconds);
    }
  }
  return okStatus();
}

// spec.containers (at least one), spec.initContainers and spec.overhead.
Status parsePodContainers(const json& spec, SchedPod& out) {
  auto containers = parseContainers(member(spec, "containers"), "spec.containers", false);
  if (!containers) {
    return containers.error();
  }
  if (containers->empty()) {
    return invalid("spec.containers", "at least one container is required");
  }
  out.containers = std::move(*containers);
  auto inits = parseContainers(member(spec, "initContainers"), "spec.initContainers", true);
  if (!inits) {
    return inits.error();
  }
  out.initContainers = std::move(*inits);
  if (auto s = addResourceMap(out.overhead, member(spec, "overhead"), json(), "spec.overhead");
      !s) {
    return s.error();
  }
  return okStatus();
}

// Where the pod may run: spec.nodeSelector, required node affinity and tolerations.
Status parsePodPlacement(const json& spec, SchedPod& out) {
  auto selector = stringMap(member(spec, "nodeSelector"), "spec.nodeSelector");
  if (!selector) {
    return selector.error();
  }
  out.nodeSelector = std::move(*selector);
  auto affinity = parseRequiredAffinity(spec);
  if (!affinity) {
    return affinity.error();
  }
  out.requiredNodeAffinity = std::move(*affinity);
  auto tolerations = parseTolerations(member(spec, "tolerations"));
  if (!tolerations) {
    return tolerations.error();
  }
  out.tolerations = std::move(*tolerations);
  const json& claims = member(spec, "resourceClaims");
  out.usesClaims = claims.is_array() && !claims.empty();
  return okStatus();
}

// status.phase; a pod without status (not yet created) has none.
Status parsePodPhase(const json& pod, SchedPod& out) {
  const json& status = member(pod, "status");
  if (status.is_null()) {
    return okStatus();
  }
  if (auto st = expectObject(status, "status"); !st) {
    return st.error();
  }
  auto phase = optionalString(status, "phase", "status.phase");
  if (!phase) {
    return phase.error();
  }
  out.phase = *phase;
  return okStatus();
}

}  // namespace

Result<SchedPod> parsePod(const nlohmann::json& pod) {
  SchedPod out;
  auto annotations = parsePodMetadata(pod, out);
  if (!annotations) {
    return annotations.error();
  }
  const json& spec = member(pod, "spec");
  if (auto s = expectObject(spec, "spec"); !s) {
    return s.error();
  }
  if (auto s = parsePodScheduling(spec, out); !s) {
    return s.error();
  }
  if (auto s = parsePodContainers(spec, out); !s) {
    return s.error();
  }
  if (auto s = parsePodPlacement(spec, out); !s) {
    return s.error();
  }
  if (auto s = parsePodPhase(pod, out); !s) {
    return s.error();
  }
  if (auto s = parsePodFields(pod, out); !s) {
    return s.error();
  }
  std::vector<std::string> initNames, names;
  for (const auto& c : out.initContainers) {
    initNames.push_back(c.name);
  }
  for (const auto& c : out.containers) {
    names.push_back(c.name);
  }
  out.rt = rtPodSpec(*annotations, initNames, names);
  return out;
}

Result<SchedNode> parseNode(const nlohmann::json& node) {
  SchedNode out;
  const json* metadata = nullptr;
  if (auto s = parseMetadataName(node, out.name, metadata); !s) {
    return s.error();
  }
  auto labels = stringMap(member(*metadata, "labels"), "metadata.labels");
  if (!labels) {
    return labels.error();
  }
  out.labels = std::move(*labels);
  auto nodeAnnotations = stringMap(member(*metadata, "annotations"), "metadata.annotations");
  if (!nodeAnnotations) {
    return nodeAnnotations.error();
  }
  if (auto rt = parseRtNode(out.labels, *nodeAnnotations); rt) {
    out.rt = std::move(*rt);
  } else {
    out.rtError = rt.error().message;
  }

  const json& spec = member(node, "spec");
  if (!spec.is_null()) {
    if (auto s = expectObject(spec, "spec"); !s) {
      return s.error();
    }
    const json& unschedulable = member(spec, "unschedulable");
    if (!unschedulable.is_null() && !unschedulable.is_boolean()) {
      return invalid("spec.unschedulable", "not a boolean");
    }
    out.unschedulable = unschedulable.is_boolean() && unschedulable.get<bool>();
    const json& taints = member(spec, "taints");
    if (!taints.is_null() && !taints.is_array()) {
      return invalid("spec.taints", "not a list");
    }
    for (std::size_t i = 0; taints.is_array() && i < taints.size(); ++i) {
      const std::string f = "spec.taints[" + std::to_string(i) + "]";
      if (auto s = expectObject(taints[i], f); !s) {
        return s.error();
      }
      auto key = optionalString(taints[i], "key", f + ".key");
      auto value = optionalString(taints[i], "value", f + ".value");
      auto effect = optionalString(taints[i], "effect", f + ".effect");
      for (const auto* r : {&key, &value, &effect}) {
        if (!*r) {
          return r->error();
        }
      }
      if (key->empty()) {
        return invalid(f + ".key", "required");
      }
      auto e = parseEffect(*effect, f + ".effect");
      if (!e) {
        return e.error();
      }
      out.taints.push_back(Taint{*key, *value, *e});
    }
  }

  const json& status = member(node, "status");
  if (!status.is_null()) {
    if (auto s = expectObject(status, "status"); !s) {
      return s.error();
    }
    if (auto s = addResourceMap(out.allocatable, member(status, "allocatable"), json(),
                                "status.allocatable", &out.allocatablePods);
        !s) {
      return s.error();
    }
  }
  return out;
}

Result<std::vector<NodeSelectorTerm>> parseNodeSelector(const json& required,
                                                        const std::string& base) {
  if (auto s = expectObject(required, base); !s) {
    return s.error();
  }
  const json& terms = member(required, "nodeSelectorTerms");
  const std::string tf = base + ".nodeSelectorTerms";
  if (!terms.is_array() || terms.empty()) {
    return invalid(tf, "must be a non-empty list");
  }
  std::vector<NodeSelectorTerm> out;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    auto term = parseNodeSelectorTerm(terms[i], tf + "[" + std::to_string(i) + "]");
    if (!term) {
      return term.error();
    }
    out.push_back(std::move(*term));
  }
  return out;
}

Result<NodeSelectorTerm> parseNodeSelectorTerm(const json& term, const std::string& f) {
  if (auto s = expectObject(term, f); !s) {
    return s.error();
  }
  NodeSelectorTerm out;
  auto exprs = parseRequirements(member(term, "matchExpressions"), f + ".matchExpressions", false);
  if (!exprs) {
    return exprs.error();
  }
  auto fields = parseRequirements(member(term, "matchFields"), f + ".matchFields", true);
  if (!fields) {
    return fields.error();
  }
  out.matchExpressions = std::move(*exprs);
  out.matchFields = std::move(*fields);
  return out;
}

}  // namespace kc::alloc
