// Pod subresources that are not plain object writes: binding.

#include "tools/kube-apiserver-double/store_internal.hpp"

namespace kc::apiserver {

void ObjectStore::bindPod(const std::string& ns, const std::string& name,
                          const nlohmann::json& binding) {
  std::lock_guard lock(mu_);
  const ResourceInfo* pods = registry_.find("", "v1", "pods");
  ObjectPtr current = getLocked(*pods, ns, name);
  if (!binding.is_object()) {
    throw badRequest("the body of the request must be a JSON object");
  }
  const json target = binding.value("target", json::object());
  const std::string node = target.is_object() ? str(target, "name") : "";
  if (node.empty()) {
    throw invalid("", "Binding", name, "target.name", "Required value");
  }
  if (auto k = str(target, "kind"); !k.empty() && k != "Node") {
    throw invalid("", "Binding", name, "target.kind",
                  "Invalid value: " + quote(k) + ": must be empty or 'Node'");
  }
  const json& bmeta = metaOf(binding);
  if (auto uid = str(bmeta, "uid"); !uid.empty() && uid != current->uid) {
    throw conflict("", "pods/binding", name,
                   "Precondition failed: UID in precondition: " + uid +
                       ", UID in object meta: " + current->uid);
  }
  if (hasDeletionTimestamp(current->object)) {
    throw conflict("", "pods/binding", name,
                   "pod " + name + " is being deleted, cannot be assigned to a host");
  }
  const json& spec = current->object.value("spec", json::object());
  if (auto assigned = str(spec, "nodeName"); !assigned.empty()) {
    throw conflict("", "pods/binding", name,
                   "pod " + name + " is already assigned to node " + quote(assigned));
  }
  json next = current->object;
  next["spec"]["nodeName"] = node;
  if (bmeta.contains("annotations") && bmeta["annotations"].is_object()) {
    for (auto it = bmeta["annotations"].begin(); it != bmeta["annotations"].end(); ++it) {
      next["metadata"]["annotations"][it.key()] = *it;
    }
  }
  json& status = next["status"];
  if (!status.is_object()) {
    status = json::object();
  }
  json conditions = status.value("conditions", json::array());
  json scheduled = {{"type", "PodScheduled"},
                    {"status", "True"},
                    {"lastProbeTime", nullptr},
                    {"lastTransitionTime", timestamp()}};
  bool replaced = false;
  for (auto& c : conditions) {
    if (c.value("type", "") == "PodScheduled") {
      c = scheduled;
      replaced = true;
    }
  }
  if (!replaced) {
    conditions.push_back(scheduled);
  }
  status["conditions"] = conditions;
  commit(*pods, objectKey(*pods, ns, name), current, std::move(next));
}

}  // namespace kc::apiserver
