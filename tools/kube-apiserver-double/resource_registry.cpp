#include "tools/kube-apiserver-double/resource_registry.hpp"

#include <algorithm>
#include <set>

namespace kc::apiserver {

namespace {

const std::vector<std::string> kAllVerbs = {"create", "delete", "deletecollection", "get",
                                            "list",   "patch",  "update",           "watch"};

ResourceInfo builtin(std::string group, std::string version, std::string resource,
                     std::string singular, std::string kind, bool namespaced,
                     std::vector<std::string> shortNames = {}) {
  ResourceInfo r;
  r.group = std::move(group);
  r.versions = {std::move(version)};
  r.resource = std::move(resource);
  r.singular = std::move(singular);
  r.kind = kind;
  r.listKind = kind + "List";
  r.namespaced = namespaced;
  r.shortNames = std::move(shortNames);
  return r;
}

// resource.k8s.io/v1 (Dynamic Resource Allocation, GA in Kubernetes 1.34): no short names or
// categories upstream; every DELETE answers with the object; DeviceClass and ResourceSlice
// bump metadata.generation on spec changes; only ResourceSlice offers field selectors beyond
// metadata (spec.nodeName, spec.driver).
void addDynamicResourceAllocation(ResourceRegistry& reg) {
  auto classes =
      builtin("resource.k8s.io", "v1", "deviceclasses", "deviceclass", "DeviceClass", false);
  classes.tracksGeneration = true;
  auto slices =
      builtin("resource.k8s.io", "v1", "resourceslices", "resourceslice", "ResourceSlice", false);
  slices.tracksGeneration = true;
  slices.fieldLabels = {"spec.nodeName", "spec.driver"};
  auto claims =
      builtin("resource.k8s.io", "v1", "resourceclaims", "resourceclaim", "ResourceClaim", true);
  claims.hasStatus = true;
  auto templates = builtin("resource.k8s.io", "v1", "resourceclaimtemplates",
                           "resourceclaimtemplate", "ResourceClaimTemplate", true);
  for (auto* r : {&classes, &slices, &claims, &templates}) {
    r->returnDeletedObject = true;
    reg.add(*r);
  }
}

}  // namespace

bool ResourceInfo::servesVersion(const std::string& v) const {
  return std::find(versions.begin(), versions.end(), v) != versions.end();
}

ResourceRegistry ResourceRegistry::withBuiltins() {
  ResourceRegistry reg;
  auto ns = builtin("", "v1", "namespaces", "namespace", "Namespace", false, {"ns"});
  ns.hasStatus = true;
  ns.fieldLabels = {"status.phase"};
  reg.add(ns);

  auto pods = builtin("", "v1", "pods", "pod", "Pod", true, {"po"});
  pods.hasStatus = true;
  pods.hasBinding = true;
  pods.hasEviction = true;
  pods.returnDeletedObject = true;
  pods.categories = {"all"};
  pods.fieldLabels = {
      "spec.nodeName",    "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
      "spec.hostNetwork", "status.phase",       "status.podIP",       "status.nominatedNodeName"};
  reg.add(pods);

  auto nodes = builtin("", "v1", "nodes", "node", "Node", false, {"no"});
  nodes.hasStatus = true;
  nodes.fieldLabels = {"spec.unschedulable"};
  reg.add(nodes);

  auto events = builtin("", "v1", "events", "event", "Event", true, {"ev"});
  events.fieldLabels = {"involvedObject.kind",
                        "involvedObject.namespace",
                        "involvedObject.name",
                        "involvedObject.uid",
                        "involvedObject.apiVersion",
                        "involvedObject.resourceVersion",
                        "involvedObject.fieldPath",
                        "reason",
                        "reportingComponent",
                        "source",
                        "type"};
  reg.add(events);

  reg.add(builtin("", "v1", "configmaps", "configmap", "ConfigMap", true, {"cm"}));
  auto secrets = builtin("", "v1", "secrets", "secret", "Secret", true);
  secrets.fieldLabels = {"type"};
  reg.add(secrets);
  auto svc = builtin("", "v1", "services", "service", "Service", true, {"svc"});
  svc.hasStatus = true;
  svc.categories = {"all"};
  reg.add(svc);
  reg.add(builtin("", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", true, {"sa"}));
  auto pvc = builtin("", "v1", "persistentvolumeclaims", "persistentvolumeclaim",
                     "PersistentVolumeClaim", true, {"pvc"});
  pvc.hasStatus = true;
  reg.add(pvc);
  // Volume binding (kube-scheduler's VolumeBinding, kubecomp-sched): PVs and StorageClasses,
  // validated as kube-apiserver validates them (storage_validation.hpp).
  auto pv =
      builtin("", "v1", "persistentvolumes", "persistentvolume", "PersistentVolume", false, {"pv"});
  pv.hasStatus = true;
  reg.add(pv);
  reg.add(builtin("storage.k8s.io", "v1", "storageclasses", "storageclass", "StorageClass", false,
                  {"sc"}));

  for (auto [res, sing, kind, shorts] :
       std::vector<std::tuple<std::string, std::string, std::string, std::vector<std::string>>>{
           {"deployments", "deployment", "Deployment", {"deploy"}},
           {"replicasets", "replicaset", "ReplicaSet", {"rs"}},
           {"statefulsets", "statefulset", "StatefulSet", {"sts"}},
           {"daemonsets", "daemonset", "DaemonSet", {"ds"}}}) {
    auto r = builtin("apps", "v1", res, sing, kind, true, shorts);
    r.hasStatus = true;
    r.categories = {"all"};
    reg.add(r);
  }
  auto jobs = builtin("batch", "v1", "jobs", "job", "Job", true);
  jobs.hasStatus = true;
  jobs.categories = {"all"};
  reg.add(jobs);
  reg.add(builtin("coordination.k8s.io", "v1", "leases", "lease", "Lease", true));
  auto ev2 = builtin("events.k8s.io", "v1", "events", "event", "Event", true, {"ev"});
  ev2.fieldLabels = {"regarding.kind",
                     "regarding.namespace",
                     "regarding.name",
                     "regarding.uid",
                     "reason",
                     "reportingController",
                     "type"};
  reg.add(ev2);
  auto pdb = builtin("policy", "v1", "poddisruptionbudgets", "poddisruptionbudget",
                     "PodDisruptionBudget", true, {"pdb"});
  pdb.hasStatus = true;
  reg.add(pdb);
  // RBAC objects are stored, never enforced (the double authorizes nothing): charts and the
  // bridge operator's children apply them.
  reg.add(builtin("rbac.authorization.k8s.io", "v1", "roles", "role", "Role", true));
  reg.add(builtin("rbac.authorization.k8s.io", "v1", "rolebindings", "rolebinding", "RoleBinding",
                  true));
  reg.add(builtin("rbac.authorization.k8s.io", "v1", "clusterroles", "clusterrole", "ClusterRole",
                  false));
  reg.add(builtin("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "clusterrolebinding",
                  "ClusterRoleBinding", false));
  reg.add(builtin("scheduling.k8s.io", "v1", "priorityclasses", "priorityclass", "PriorityClass",
                  false, {"pc"}));
  addDynamicResourceAllocation(reg);
  auto crd =
      builtin("apiextensions.k8s.io", "v1", "customresourcedefinitions", "customresourcedefinition",
              "CustomResourceDefinition", false, {"crd", "crds"});
  crd.hasStatus = true;
  reg.add(crd);
  return reg;
}

void ResourceRegistry::add(ResourceInfo info) {
  byTable_[info.tableKey()] = std::move(info);
}

void ResourceRegistry::removeCustom(const std::string& group, const std::string& resource) {
  auto it = byTable_.find(group + "/" + resource);
  if (it != byTable_.end() && it->second.custom) {
    byTable_.erase(it);
  }
}

const ResourceInfo* ResourceRegistry::find(const std::string& group, const std::string& version,
                                           const std::string& resource) const {
  auto it = byTable_.find(group + "/" + resource);
  if (it == byTable_.end() || !it->second.servesVersion(version)) {
    return nullptr;
  }
  return &it->second;
}

const ResourceInfo* ResourceRegistry::findByTable(const std::string& tableKey) const {
  auto it = byTable_.find(tableKey);
  return it == byTable_.end() ? nullptr : &it->second;
}

const ResourceInfo* ResourceRegistry::findByKind(const std::string& group,
                                                 const std::string& kind) const {
  for (const auto& [key, info] : byTable_) {
    if (info.group == group && info.kind == kind) {
      return &info;
    }
  }
  return nullptr;
}

nlohmann::json ResourceRegistry::apiVersions() const {
  return {{"kind", "APIVersions"},
          {"versions", {"v1"}},
          {"serverAddressByClientCIDRs",
           {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", "127.0.0.1"}}}}};
}

namespace {
nlohmann::json groupDoc(const std::string& name, const std::vector<std::string>& versions) {
  nlohmann::json vs = nlohmann::json::array();
  for (const auto& v : versions) {
    vs.push_back({{"groupVersion", name + "/" + v}, {"version", v}});
  }
  return {{"name", name}, {"versions", vs}, {"preferredVersion", vs.at(0)}};
}

std::map<std::string, std::vector<std::string>> groupsOf(
    const std::map<std::string, ResourceInfo>& byTable) {
  std::map<std::string, std::vector<std::string>> groups;
  for (const auto& [key, info] : byTable) {
    if (info.group.empty()) {
      continue;
    }
    auto& vs = groups[info.group];
    for (const auto& v : info.versions) {
      if (std::find(vs.begin(), vs.end(), v) == vs.end()) {
        vs.push_back(v);
      }
    }
  }
  return groups;
}
}  // namespace

nlohmann::json ResourceRegistry::apiGroupList() const {
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& [name, versions] : groupsOf(byTable_)) {
    groups.push_back(groupDoc(name, versions));
  }
  return {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", groups}};
}

std::optional<nlohmann::json> ResourceRegistry::apiGroup(const std::string& group) const {
  auto groups = groupsOf(byTable_);
  auto it = groups.find(group);
  if (it == groups.end()) {
    return std::nullopt;
  }
  auto doc = groupDoc(it->first, it->second);
  doc["kind"] = "APIGroup";
  doc["apiVersion"] = "v1";
  return doc;
}

std::optional<nlohmann::json> ResourceRegistry::resourceList(const std::string& group,
                                                             const std::string& version) const {
  nlohmann::json resources = nlohmann::json::array();
  bool any = false;
  for (const auto& [key, info] : byTable_) {
    if (info.group != group || !info.servesVersion(version)) {
      continue;
    }
    any = true;
    nlohmann::json r = {{"name", info.resource},
                        {"singularName", info.singular},
                        {"namespaced", info.namespaced},
                        {"kind", info.kind},
                        {"verbs", kAllVerbs}};
    if (!info.shortNames.empty()) {
      r["shortNames"] = info.shortNames;
    }
    if (!info.categories.empty()) {
      r["categories"] = info.categories;
    }
    resources.push_back(r);
    if (info.hasStatus) {
      resources.push_back({{"name", info.resource + "/status"},
                           {"singularName", ""},
                           {"namespaced", info.namespaced},
                           {"kind", info.kind},
                           {"verbs", {"get", "patch", "update"}}});
    }
    if (info.hasBinding) {
      resources.push_back({{"name", info.resource + "/binding"},
                           {"singularName", ""},
                           {"namespaced", info.namespaced},
                           {"kind", "Binding"},
                           {"verbs", {"create"}}});
    }
    if (info.hasEviction) {
      // group/version name the Eviction's API: kubectl drain reads them to choose policy/v1.
      resources.push_back({{"name", info.resource + "/eviction"},
                           {"singularName", ""},
                           {"namespaced", info.namespaced},
                           {"group", "policy"},
                           {"version", "v1"},
                           {"kind", "Eviction"},
                           {"verbs", {"create"}}});
    }
  }
  if (!any) {
    return std::nullopt;
  }
  return nlohmann::json{{"kind", "APIResourceList"},
                        {"apiVersion", "v1"},
                        {"groupVersion", group.empty() ? version : group + "/" + version},
                        {"resources", resources}};
}

nlohmann::json ResourceRegistry::openApiV3Root() const {
  nlohmann::json paths = nlohmann::json::object();
  for (const auto& [key, info] : byTable_) {
    for (const auto& v : info.versions) {
      std::string gv = info.group.empty() ? "api/" + v : "apis/" + info.group + "/" + v;
      // The hash changes when the set of kinds in the group-version changes (CRDs).
      std::size_t h = std::hash<std::string>{}(openApiV3(info.group, v)->dump());
      paths[gv] = {{"serverRelativeURL", "/openapi/v3/" + gv + "?hash=" + std::to_string(h)}};
    }
  }
  return {{"paths", paths}};
}

std::optional<nlohmann::json> ResourceRegistry::openApiV3(const std::string& group,
                                                          const std::string& version) const {
  nlohmann::json paths = nlohmann::json::object();
  for (const auto& [key, info] : byTable_) {
    if (info.group != group || !info.servesVersion(version)) {
      continue;
    }
    std::string base = group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
    std::string path =
        base + (info.namespaced ? "/namespaces/{namespace}/" : "/") + info.resource + "/{name}";
    nlohmann::json patch = {{"x-kubernetes-group-version-kind",
                             {{"group", group}, {"version", version}, {"kind", info.kind}}},
                            {"x-kubernetes-action", "patch"},
                            {"parameters",
                             {{{"name", "fieldValidation"},
                               {"in", "query"},
                               {"schema", {{"type", "string"}, {"uniqueItems", true}}}},
                              {{"name", "fieldManager"},
                               {"in", "query"},
                               {"schema", {{"type", "string"}, {"uniqueItems", true}}}}}},
                            {"responses", {{"200", {{"description", "OK"}}}}}};
    paths[path] = {{"patch", patch}};
  }
  if (paths.empty()) {
    return std::nullopt;
  }
  return nlohmann::json{
      {"openapi", "3.0.0"},
      {"info",
       {{"title", "Kubernetes (kube-apiserver-double, no schemas)"}, {"version", "v1.30.0"}}},
      {"paths", paths}};
}

}  // namespace kc::apiserver
