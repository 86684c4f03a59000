#include "tools/kube-apiserver-double/priority_admission.hpp"

#include <cstdint>
#include <optional>

#include "tools/kube-apiserver-double/api_error.hpp"

namespace kc::apiserver {
namespace {

using nlohmann::json;

struct ClassValue {
  std::string name;
  std::int32_t value = 0;
  std::optional<std::string> preemptionPolicy;
};

std::string nameOf(const json& obj) {
  auto m = obj.find("metadata");
  if (m == obj.end() || !m->is_object()) {
    return {};
  }
  return m->value("name", std::string());
}

ClassValue classValue(const json& pc) {
  ClassValue v;
  v.name = nameOf(pc);
  if (auto it = pc.find("value"); it != pc.end() && it->is_number_integer()) {
    v.value = it->get<std::int32_t>();
  }
  if (auto it = pc.find("preemptionPolicy"); it != pc.end() && it->is_string()) {
    v.preemptionPolicy = it->get<std::string>();
  }
  return v;
}

// The classes the real server creates at start (scheduling.SystemPriorityClasses).
std::optional<ClassValue> builtinClass(const std::string& name) {
  if (name == "system-node-critical") {
    return ClassValue{name, 2'000'001'000, "PreemptLowerPriority"};
  }
  if (name == "system-cluster-critical") {
    return ClassValue{name, 2'000'000'000, "PreemptLowerPriority"};
  }
  return std::nullopt;
}

ApiError forbidden(const std::string& resource, const std::string& name, const std::string& why) {
  return ApiError(403, "Forbidden",
                  qualifiedResource(resource == "pods" ? "" : "scheduling.k8s.io", resource) +
                      " \"" + name + "\" is forbidden: " + why,
                  json{{"name", name}, {"kind", resource}});
}

}  // namespace

void admitPodPriority(const std::string& podName, json& pod,
                      const std::vector<const json*>& classes) {
  json& spec = pod["spec"];
  const std::string className = spec.value("priorityClassName", std::string());
  std::optional<ClassValue> cls;
  if (className.empty()) {
    for (const json* pc : classes) {
      if (pc->value("globalDefault", false)) {
        cls = classValue(*pc);
      }
    }
  } else {
    for (const json* pc : classes) {
      if (nameOf(*pc) == className) {
        cls = classValue(*pc);
      }
    }
    if (!cls) {
      cls = builtinClass(className);
    }
    if (!cls) {
      throw forbidden("pods", podName, "no PriorityClass with name " + className + " was found");
    }
  }
  const std::int32_t priority = cls ? cls->value : 0;
  if (auto given = spec.find("priority");
      given != spec.end() && !given->is_null() &&
      (!given->is_number_integer() || given->get<std::int64_t>() != priority)) {
    throw forbidden("pods", podName,
                    "the integer value of priority (" + given->dump() +
                        ") must not be provided in pod spec; priority admission controller "
                        "computed " +
                        std::to_string(priority) + " from the given PriorityClass name");
  }
  spec["priority"] = priority;
  if (cls && !cls->name.empty() && className.empty()) {
    spec["priorityClassName"] = cls->name;
  }
  if (cls && cls->preemptionPolicy) {
    if (auto given = spec.find("preemptionPolicy");
        given != spec.end() && given->is_string() && *given != *cls->preemptionPolicy) {
      throw forbidden("pods", podName,
                      "the string value of PreemptionPolicy (" + given->get<std::string>() +
                          ") must not be provided in pod spec; priority admission controller "
                          "computed " +
                          *cls->preemptionPolicy + " from the given PriorityClass name");
    }
    spec["preemptionPolicy"] = *cls->preemptionPolicy;
  } else if (!spec.contains("preemptionPolicy") || spec["preemptionPolicy"].is_null()) {
    spec["preemptionPolicy"] = "PreemptLowerPriority";
  }
}

void admitPriorityClass(const std::string& name, const json& pc,
                        const std::vector<const json*>& classes) {
  const auto value = pc.find("value");
  if (value == pc.end() || !value->is_number_integer()) {
    throw invalid("scheduling.k8s.io", "PriorityClass", name, "value", "Required value");
  }
  if (name.rfind("system-", 0) == 0 && !builtinClass(name)) {
    throw invalid(
        "scheduling.k8s.io", "PriorityClass", name, "metadata.name",
        "Invalid value: \"" + name + "\": priority class names with 'system-' prefix are reserved");
  }
  if (!builtinClass(name) && value->get<std::int64_t>() > kHighestUserDefinablePriority) {
    throw invalid("scheduling.k8s.io", "PriorityClass", name, "value",
                  "Forbidden: maximum allowed value of a user defined priority is " +
                      std::to_string(kHighestUserDefinablePriority));
  }
  if (auto p = pc.find("preemptionPolicy");
      p != pc.end() && !p->is_null() && *p != "Never" && *p != "PreemptLowerPriority") {
    throw invalid("scheduling.k8s.io", "PriorityClass", name, "preemptionPolicy",
                  "Unsupported value: " + p->dump() +
                      ": supported values: \"Never\", \"PreemptLowerPriority\"");
  }
  if (pc.value("globalDefault", false)) {
    for (const json* other : classes) {
      if (other->value("globalDefault", false) && nameOf(*other) != name) {
        throw forbidden("priorityclasses", name,
                        "PriorityClass " + nameOf(*other) +
                            " is already marked as default. Only one default can exist");
      }
    }
  }
}

}  // namespace kc::apiserver
