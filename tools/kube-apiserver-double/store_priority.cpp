// The Priority admission plugin in the store: a new Pod gets its priority from the stored
// PriorityClasses, a new PriorityClass is checked against them (priority_admission.hpp).

#include "tools/kube-apiserver-double/priority_admission.hpp"
#include "tools/kube-apiserver-double/resource_registry.hpp"
#include "tools/kube-apiserver-double/store_internal.hpp"

namespace kc::apiserver {

void ObjectStore::admitPriorityLocked(const ResourceInfo& res, const std::string& name,
                                      json& body) const {
  const bool pod = res.group.empty() && res.resource == "pods";
  const bool priorityClass = res.group == "scheduling.k8s.io" && res.resource == "priorityclasses";
  if (!pod && !priorityClass) {
    return;
  }
  std::vector<const json*> classes;
  if (const ResourceInfo* pcs = registry_.find("scheduling.k8s.io", "v1", "priorityclasses")) {
    if (const Table* t = findTable(pcs->tableKey())) {
      for (const auto& [key, obj] : t->objects) {
        classes.push_back(&obj->object);
      }
    }
  }
  if (pod) {
    if (body.contains("spec") && body["spec"].is_object()) {
      admitPodPriority(name, body, classes);
    }
  } else {
    admitPriorityClass(name, body, classes);
  }
}

}  // namespace kc::apiserver
