// PodDisruptionBudgets and pods/eviction: the store keeps every budget's status current
// (the disruption controller's job on a real cluster) and evicts pods through it.

#include "tools/kube-apiserver-double/disruption.hpp"
#include "tools/kube-apiserver-double/store_internal.hpp"

namespace kc::apiserver {

namespace {
const char* const kPdbTable = "policy/poddisruptionbudgets";
const char* const kPodTable = "/pods";
}  // namespace

void validatePdb(const std::string& name, const json& pdb) {
  auto spec = parsePdbSpec(pdb);
  if (!spec) {
    const std::string& m = spec.error().message;
    auto colon = m.find(": ");
    throw invalid("policy", "PodDisruptionBudget", name, m.substr(0, colon),
                  colon == std::string::npos ? m : m.substr(colon + 2));
  }
}

std::vector<ObjectPtr> ObjectStore::inNamespaceLocked(const std::string& tableKey,
                                                      const std::string& ns) const {
  std::vector<ObjectPtr> out;
  const Table* t = findTable(tableKey);
  if (!t) {
    return out;
  }
  const std::string prefix = ns + "/";
  for (auto it = t->objects.lower_bound(prefix);
       it != t->objects.end() && it->first.rfind(prefix, 0) == 0; ++it) {
    out.push_back(it->second);
  }
  return out;
}

void ObjectStore::reconcileBudgetsLocked(const std::string& ns) {
  if (reconcilingBudgets_) {
    return;  // a budget's own status write
  }
  std::vector<ObjectPtr> budgets = inNamespaceLocked(kPdbTable, ns);
  if (budgets.empty()) {
    return;
  }
  reconcilingBudgets_ = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{reconcilingBudgets_};
  const std::vector<ObjectPtr> pods = inNamespaceLocked(kPodTable, ns);
  const ResourceInfo* pdbRes = registry_.findByTable(kPdbTable);
  for (const auto& budget : budgets) {
    auto spec = parsePdbSpec(budget->object);
    if (!spec || hasDeletionTimestamp(budget->object)) {
      continue;
    }
    std::vector<const json*> selected;
    for (const auto& p : pods) {
      if (spec->selects(p->object)) {
        selected.push_back(&p->object);
      }
    }
    const json previous = budget->object.value("status", json::object());
    json status = pdbStatus(budget->object, *spec, selected, previous, timestamp());
    if (status != previous) {
      json next = budget->object;
      next["status"] = std::move(status);
      commit(*pdbRes, budget->ns + "/" + budget->name, budget, std::move(next));
    }
  }
}

void ObjectStore::evictPod(const std::string& ns, const std::string& name, const json& eviction,
                           const DeleteOptions& options) {
  std::lock_guard lock(mu_);
  const ResourceInfo* pods = registry_.find("", "v1", "pods");
  if (!eviction.is_object()) {
    throw badRequest("the body of the request must be a JSON object");
  }
  if (auto k = str(eviction, "kind"); !k.empty() && k != "Eviction") {
    throw badRequest("the kind in the data (" + k +
                     ") does not match the expected kind (Eviction)");
  }
  if (auto av = str(eviction, "apiVersion");
      !av.empty() && av != "policy/v1" && av != "policy/v1beta1") {
    throw badRequest("the API version in the data (" + av +
                     ") does not match the expected API version (policy/v1)");
  }
  if (str(metaOf(eviction), "name") != name) {
    throw badRequest("name in URL does not match name in Eviction object");
  }
  ObjectPtr pod = getLocked(*pods, ns, name);
  std::vector<const json*> budgets;
  std::vector<ObjectPtr> held = inNamespaceLocked(kPdbTable, ns);
  for (const auto& b : held) {
    auto spec = parsePdbSpec(b->object);
    if (spec && spec->selects(pod->object)) {
      budgets.push_back(&b->object);
    }
  }
  const EvictionDecision d = decideEviction(pod->object, budgets);
  using V = EvictionDecision::Verdict;
  const std::string kViolates = "Cannot evict pod as it would violate the pod's disruption budget.";
  switch (d.verdict) {
    case V::kAllowed:
      removeLocked(*pods, pod, options);
      return;
    case V::kBudgetExhausted:
      throw ApiError(
          429, "TooManyRequests", kViolates,
          json{
              {"causes", json::array({{{"reason", "DisruptionBudget"}, {"message", d.message}}})}});
    case V::kNotObserved:
      throw ApiError(
          429, "TooManyRequests", kViolates,
          json{{"causes", json::array({{{"reason", "DisruptionBudget"}, {"message", d.message}}})},
               {"retryAfterSeconds", 10}});
    case V::kNegativeBudget:
      throw ApiError(
          403, "Forbidden",
          "poddisruptionbudgets.policy " + quote(d.pdbName) + " is forbidden: " + d.message,
          json{{"name", d.pdbName}, {"group", "policy"}, {"kind", "poddisruptionbudgets"}});
    case V::kSeveralBudgets:
      throw ApiError(500, "InternalError", "Internal error occurred: " + d.message,
                     json{{"causes", json::array({{{"message", d.message}}})}});
  }
}

}  // namespace kc::apiserver
