#include "tools/kube-apiserver-double/disruption.hpp"

#include <algorithm>
#include <cctype>
#include <limits>

#include "tools/kube-apiserver-double/json_access.hpp"

namespace kc::apiserver {

using nlohmann::json;

namespace {

std::int64_t integer(const json& obj, const char* key) {
  const json& v = member(obj, key);
  return v.is_number_integer() ? v.get<std::int64_t>() : 0;
}

// spec.minAvailable / spec.maxUnavailable: a non-negative integer or "<0..100>%".
Result<std::optional<IntOrPercent>> readIntOrPercent(const json& spec, const char* key) {
  const json& v = member(spec, key);
  const std::string field = std::string("spec.") + key;
  if (v.is_null()) {
    return std::optional<IntOrPercent>{};
  }
  if (v.is_number_integer()) {
    const std::int64_t n = v.get<std::int64_t>();
    if (n < 0) {
      return makeError(kc::errc::kInvalid, field + ": Invalid value: " + std::to_string(n) +
                                               ": must be greater than or equal to 0");
    }
    if (n > std::numeric_limits<std::int32_t>::max()) {
      return makeError(kc::errc::kInvalid,
                       field + ": Invalid value: " + std::to_string(n) + ": must fit in 32 bits");
    }
    return std::optional<IntOrPercent>{IntOrPercent{static_cast<std::int32_t>(n), false}};
  }
  const std::string s = v.is_string() ? v.get<std::string>() : "";
  const bool digits =
      s.size() >= 2 && s.size() <= 5 && s.back() == '%' &&
      std::all_of(s.begin(), s.end() - 1, [](unsigned char c) { return std::isdigit(c); });
  if (!digits) {
    return makeError(kc::errc::kInvalid, field + ": Invalid value: " + v.dump() +
                                             ": must be an integer or percentage (e.g '5%')");
  }
  const int pct = std::stoi(s.substr(0, s.size() - 1));
  if (pct > 100) {
    return makeError(kc::errc::kInvalid,
                     field + ": Invalid value: " + v.dump() + ": must not be greater than 100%");
  }
  return std::optional<IntOrPercent>{IntOrPercent{pct, true}};
}

bool terminalOrPending(const json& pod) {
  const std::string phase = text(member(pod, "status"), "phase");
  return phase == "Succeeded" || phase == "Failed" || phase == "Pending";
}

bool beingDeleted(const json& obj) {
  return member(member(obj, "metadata"), "deletionTimestamp").is_string();
}

}  // namespace

std::int32_t IntOrPercent::scaled(std::int32_t total, bool roundUp) const {
  if (!percent) {
    return value;
  }
  const std::int64_t product = static_cast<std::int64_t>(value) * total;
  return static_cast<std::int32_t>(roundUp ? (product + 99) / 100 : product / 100);
}

bool PdbSpec::selects(const json& pod) const {
  return !selectsNothing && selector.matches(member(member(pod, "metadata"), "labels"));
}

Result<PdbSpec> parsePdbSpec(const json& pdb) {
  const json& spec = member(pdb, "spec");
  if (!spec.is_null() && !spec.is_object()) {
    return makeError(kc::errc::kInvalid, "spec: Invalid value: must be an object");
  }
  PdbSpec out;
  auto min = readIntOrPercent(spec, "minAvailable");
  if (!min) {
    return min.error();
  }
  auto max = readIntOrPercent(spec, "maxUnavailable");
  if (!max) {
    return max.error();
  }
  out.minAvailable = *min;
  out.maxUnavailable = *max;
  if (out.minAvailable && out.maxUnavailable) {
    return makeError(kc::errc::kInvalid,
                     "spec: Invalid value: minAvailable and maxUnavailable cannot be both set");
  }
  const json& selector = member(spec, "selector");
  if (!selector.is_null()) {
    auto sel = LabelSelector::fromJson(selector, "spec.selector");
    if (!sel) {
      return sel.error();
    }
    out.selector = std::move(*sel);
    out.selectsNothing = false;
  }
  out.unhealthyPodEvictionPolicy = text(spec, "unhealthyPodEvictionPolicy");
  if (!out.unhealthyPodEvictionPolicy.empty() &&
      out.unhealthyPodEvictionPolicy != "IfHealthyBudget" &&
      out.unhealthyPodEvictionPolicy != "AlwaysAllow") {
    return makeError(kc::errc::kInvalid,
                     "spec.unhealthyPodEvictionPolicy: Unsupported value: " +
                         json(out.unhealthyPodEvictionPolicy).dump() +
                         ": supported values: \"AlwaysAllow\", \"IfHealthyBudget\"");
  }
  return out;
}

bool podHealthy(const json& pod) {
  if (beingDeleted(pod)) {
    return false;
  }
  const json& conditions = member(member(pod, "status"), "conditions");
  if (!conditions.is_array()) {
    return false;
  }
  return std::any_of(conditions.begin(), conditions.end(), [](const json& c) {
    return text(c, "type") == "Ready" && text(c, "status") == "True";
  });
}

json pdbStatus(const json& pdb, const PdbSpec& spec, const std::vector<const json*>& selectedPods,
               const json& previous, const std::string& now) {
  const auto expected = static_cast<std::int32_t>(selectedPods.size());
  std::int32_t healthy = 0;
  for (const json* p : selectedPods) {
    healthy += podHealthy(*p) ? 1 : 0;
  }
  std::int32_t desired = 0;
  if (spec.maxUnavailable) {
    desired = std::max(0, expected - spec.maxUnavailable->scaled(expected, true));
  } else if (spec.minAvailable) {
    desired = spec.minAvailable->scaled(expected, true);
  }
  const std::int32_t allowed = expected > 0 ? std::max(0, healthy - desired) : 0;
  const std::int64_t generation = integer(member(pdb, "metadata"), "generation");
  const std::string condStatus = allowed > 0 ? "True" : "False";
  std::string since = now;
  const json& oldConditions = member(previous, "conditions");
  if (oldConditions.is_array()) {
    for (const auto& c : oldConditions) {
      if (text(c, "type") == "DisruptionAllowed" && text(c, "status") == condStatus &&
          !text(c, "lastTransitionTime").empty()) {
        since = text(c, "lastTransitionTime");
      }
    }
  }
  return {
      {"observedGeneration", generation},
      {"disruptionsAllowed", allowed},
      {"currentHealthy", healthy},
      {"desiredHealthy", desired},
      {"expectedPods", expected},
      {"conditions", json::array({{{"type", "DisruptionAllowed"},
                                   {"status", condStatus},
                                   {"reason", allowed > 0 ? "SufficientPods" : "InsufficientPods"},
                                   {"message", ""},
                                   {"observedGeneration", generation},
                                   {"lastTransitionTime", since}}})}};
}

EvictionDecision decideEviction(const json& pod, const std::vector<const json*>& budgets) {
  using V = EvictionDecision::Verdict;
  // A terminal or pending pod disrupts nothing; one already being deleted is deleted again.
  if (terminalOrPending(pod) || beingDeleted(pod) || budgets.empty()) {
    return {V::kAllowed, "", ""};
  }
  if (budgets.size() > 1) {
    return {V::kSeveralBudgets, "",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does "
            "not support."};
  }
  const json& pdb = *budgets.front();
  const std::string name = text(member(pdb, "metadata"), "name");
  const json& status = member(pdb, "status");
  const std::int64_t healthy = integer(status, "currentHealthy");
  const std::int64_t desired = integer(status, "desiredHealthy");
  if (!podHealthy(pod)) {
    // An unready pod does not count as healthy: evicting it costs the budget nothing.
    if (text(member(pdb, "spec"), "unhealthyPodEvictionPolicy") == "AlwaysAllow" ||
        (healthy >= desired && desired > 0)) {
      return {V::kAllowed, name, ""};
    }
  }
  if (integer(status, "observedGeneration") < integer(member(pdb, "metadata"), "generation")) {
    return {V::kNotObserved, name,
            "The disruption budget " + name + " is still being processed by the server."};
  }
  const std::int64_t allowed = integer(status, "disruptionsAllowed");
  if (allowed < 0) {
    return {V::kNegativeBudget, name, "pdb disruptions allowed is negative"};
  }
  if (allowed == 0) {
    return {V::kBudgetExhausted, name,
            "The disruption budget " + name + " needs " + std::to_string(desired) +
                " healthy pods and has " + std::to_string(healthy) + " currently"};
  }
  return {V::kAllowed, name, ""};
}

}  // namespace kc::apiserver
