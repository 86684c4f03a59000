#include "libcore/alloc/pod_fields.hpp"

#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "libcore/alloc/pod_affinity.hpp"
#include "libcore/alloc/topology_spread.hpp"
#include "libcore/alloc/volume_objects.hpp"

namespace kc::alloc {

namespace detail {

Error invalid(const std::string& field, const std::string& why) {
  return makeError(kc::errc::kInvalid, field + ": " + why);
}

const nlohmann::json& at(const nlohmann::json& obj, const char* key) {
  static const nlohmann::json kNull;  // an immutable constant, not shared state
  if (!obj.is_object()) {
    return kNull;
  }
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

Result<std::string> optionalString(const nlohmann::json& obj, const char* key,
                                   const std::string& field) {
  const nlohmann::json& v = at(obj, key);
  if (v.is_null()) {
    return std::string();
  }
  if (!v.is_string()) {
    return invalid(field, "not a string");
  }
  return v.get<std::string>();
}

Result<StringMap> stringMap(const nlohmann::json& v, const std::string& field) {
  StringMap out;
  if (v.is_null()) {
    return out;
  }
  if (!v.is_object()) {
    return invalid(field, "not a map");
  }
  for (const auto& [k, value] : v.items()) {
    if (!value.is_string()) {
      return invalid(field + "[" + k + "]", "not a string");
    }
    out.emplace(k, value.get<std::string>());
  }
  return out;
}

}  // namespace detail

namespace {

using detail::at;
using detail::invalid;
using nlohmann::json;

Status parseLabels(const json& metadata, SchedPod& out) {
  const json& labels = at(metadata, "labels");
  if (labels.is_null()) {
    return okStatus();
  }
  if (!labels.is_object()) {
    return invalid("metadata.labels", "not a map");
  }
  for (const auto& [k, v] : labels.items()) {
    if (!v.is_string()) {
      return invalid("metadata.labels[" + k + "]", "not a string");
    }
    out.labels.emplace(k, v.get<std::string>());
  }
  return okStatus();
}

Status parseGates(const json& spec, SchedPod& out) {
  const json& gates = at(spec, "schedulingGates");
  if (gates.is_null()) {
    return okStatus();
  }
  if (!gates.is_array()) {
    return invalid("spec.schedulingGates", "not a list");
  }
  for (std::size_t i = 0; i < gates.size(); ++i) {
    const std::string f = "spec.schedulingGates[" + std::to_string(i) + "].name";
    const json& name = at(gates[i], "name");
    if (!name.is_string() || name.get_ref<const std::string&>().empty()) {
      return invalid(f, "must be a non-empty string");
    }
    out.schedulingGates.push_back(name.get<std::string>());
  }
  return okStatus();
}

Status parsePort(const json& port, const std::string& f, SchedPod& out) {
  if (!port.is_object()) {
    return invalid(f, "not an object");
  }
  const json& hostPort = at(port, "hostPort");
  if (hostPort.is_null()) {
    return okStatus();
  }
  if (!hostPort.is_number_integer() || hostPort.get<std::int64_t>() < 0 ||
      hostPort.get<std::int64_t>() > 65535) {
    return invalid(f + ".hostPort", "must be an integer in 0..65535");
  }
  HostPort hp;
  hp.port = static_cast<std::int32_t>(hostPort.get<std::int64_t>());
  const json& protocol = at(port, "protocol");
  if (!protocol.is_null()) {
    if (!protocol.is_string()) {
      return invalid(f + ".protocol", "not a string");
    }
    const std::string& p = protocol.get_ref<const std::string&>();
    if (p != "TCP" && p != "UDP" && p != "SCTP" && !p.empty()) {
      return invalid(f + ".protocol", "'" + p + "' is not one of TCP, UDP, SCTP");
    }
    if (!p.empty()) {
      hp.protocol = p;
    }
  }
  const json& hostIP = at(port, "hostIP");
  if (!hostIP.is_null()) {
    if (!hostIP.is_string()) {
      return invalid(f + ".hostIP", "not a string");
    }
    if (!hostIP.get_ref<const std::string&>().empty()) {
      hp.hostIP = hostIP.get<std::string>();
    }
  }
  if (hp.port > 0) {  // hostPort 0: no host port (NodePorts skips it)
    out.hostPorts.push_back(std::move(hp));
  }
  return okStatus();
}

Status parseHostPorts(const json& spec, SchedPod& out) {
  const json& containers = at(spec, "containers");
  if (!containers.is_array()) {
    return okStatus();  // parsePod has already required the list
  }
  for (std::size_t c = 0; c < containers.size(); ++c) {
    const json& ports = at(containers[c], "ports");
    const std::string f = "spec.containers[" + std::to_string(c) + "].ports";
    if (ports.is_null()) {
      continue;
    }
    if (!ports.is_array()) {
      return invalid(f, "not a list");
    }
    for (std::size_t i = 0; i < ports.size(); ++i) {
      if (auto s = parsePort(ports[i], f + "[" + std::to_string(i) + "]", out); !s) {
        return s;
      }
    }
  }
  return okStatus();
}

// spec.priority (int32) and spec.preemptionPolicy (PreemptLowerPriority, the default, or Never).
Status parsePriority(const json& spec, SchedPod& out) {
  const json& priority = at(spec, "priority");
  if (!priority.is_null()) {
    if (!priority.is_number_integer() ||
        priority.get<std::int64_t>() < std::numeric_limits<std::int32_t>::min() ||
        priority.get<std::int64_t>() > std::numeric_limits<std::int32_t>::max()) {
      return invalid("spec.priority", "must be a 32-bit integer");
    }
    out.priority = static_cast<std::int32_t>(priority.get<std::int64_t>());
  }
  const json& policy = at(spec, "preemptionPolicy");
  if (!policy.is_null()) {
    if (!policy.is_string() || (policy.get_ref<const std::string&>() != "Never" &&
                                policy.get_ref<const std::string&>() != "PreemptLowerPriority")) {
      return invalid("spec.preemptionPolicy", "must be PreemptLowerPriority or Never");
    }
    out.preemptNever = policy.get_ref<const std::string&>() == "Never";
  }
  return okStatus();
}

// spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution: a list of
// {weight 1..100, preference: a nodeSelectorTerm}.
Status parsePreferredNodeAffinity(const json& spec, SchedPod& out) {
  const std::string base =
      "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution";
  const json& list = at(at(at(spec, "affinity"), "nodeAffinity"),
                        "preferredDuringSchedulingIgnoredDuringExecution");
  if (list.is_null()) {
    return okStatus();
  }
  if (!list.is_array()) {
    return invalid(base, "not a list");
  }
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string f = base + "[" + std::to_string(i) + "]";
    if (!list[i].is_object()) {
      return invalid(f, "not an object");
    }
    const json& w = at(list[i], "weight");
    if (!w.is_number_integer() || w.get<std::int64_t>() < 1 || w.get<std::int64_t>() > 100) {
      return invalid(f + ".weight", "must be an integer in 1..100");
    }
    const json& preference = at(list[i], "preference");
    if (preference.is_null()) {
      return invalid(f + ".preference", "required");
    }
    auto term = parseNodeSelectorTerm(preference, f + ".preference");
    if (!term) {
      return term.error();
    }
    out.preferredNodeAffinity.push_back(
        {static_cast<std::int32_t>(w.get<std::int64_t>()), std::move(*term)});
  }
  return okStatus();
}

}  // namespace

Status parsePodFields(const nlohmann::json& pod, SchedPod& out) {
  if (auto s = parseLabels(at(pod, "metadata"), out); !s) {
    return s;
  }
  const json& spec = at(pod, "spec");
  if (auto s = parseGates(spec, out); !s) {
    return s;
  }
  if (auto s = parsePriority(spec, out); !s) {
    return s;
  }
  if (auto s = parsePreferredNodeAffinity(spec, out); !s) {
    return s;
  }
  auto affinity = parsePodAffinity(spec);
  if (!affinity) {
    return affinity.error();
  }
  out.podAffinity = std::move(*affinity);
  auto spread = parseTopologySpread(spec);
  if (!spread) {
    return spread.error();
  }
  out.topologySpread = std::move(*spread);
  if (auto s = parsePodClaimVolumes(pod, out); !s) {
    return s;
  }
  return parseHostPorts(spec, out);
}

}  // namespace kc::alloc
