#pragma once
// The resources the double serves: built-in kinds registered at start plus the ones
// CustomResourceDefinitions add at run time. Discovery documents are rendered from here.

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tools/kube-apiserver-double/table_convertor.hpp"

namespace kc::apiserver {

struct ResourceInfo {
  std::string group;                  // "" for the core group
  std::vector<std::string> versions;  // served versions, preferred (storage) first
  std::string resource;               // plural, e.g. "pods"
  std::string singular;               // "pod"
  std::string kind;                   // "Pod"
  std::string listKind;               // "PodList"
  bool namespaced = true;
  bool hasStatus = false;            // status subresource
  bool hasBinding = false;           // pods/binding
  bool hasEviction = false;          // pods/eviction (policy/v1 Eviction)
  bool custom = false;               // defined by a CRD: no strategic merge patch
  bool returnDeletedObject = false;  // DELETE answers with the object (pods) instead of a Status
  bool tracksGeneration = false;     // metadata.generation without a status subresource
  std::vector<std::string> shortNames;
  std::vector<std::string> categories;
  // Field selector labels beyond metadata.name / metadata.namespace.
  std::vector<std::string> fieldLabels;
  // Custom resources: each served version's additionalPrinterColumns (Table output).
  std::map<std::string, std::vector<PrinterColumn>> printerColumns;

  // Table key shared by all versions of a resource: "<group>/<resource>".
  std::string tableKey() const { return group + "/" + resource; }
  bool servesVersion(const std::string& v) const;
  std::string apiVersion(const std::string& v) const { return group.empty() ? v : group + "/" + v; }
};

class ResourceRegistry {
 public:
  // The built-in resources (core/v1, apps/v1, batch/v1, coordination.k8s.io/v1,
  // events.k8s.io/v1, policy/v1, rbac, scheduling.k8s.io/v1, storage.k8s.io/v1,
  // resource.k8s.io/v1, apiextensions.k8s.io/v1).
  static ResourceRegistry withBuiltins();

  void add(ResourceInfo info);
  // Removes a CRD-defined resource; built-ins cannot be removed.
  void removeCustom(const std::string& group, const std::string& resource);

  const ResourceInfo* find(const std::string& group, const std::string& version,
                           const std::string& resource) const;
  const ResourceInfo* findByTable(const std::string& tableKey) const;
  const ResourceInfo* findByKind(const std::string& group, const std::string& kind) const;

  // Discovery documents (legacy, non-aggregated JSON forms).
  nlohmann::json apiVersions() const;                                      // /api
  nlohmann::json apiGroupList() const;                                     // /apis
  std::optional<nlohmann::json> apiGroup(const std::string& group) const;  // /apis/<g>
  std::optional<nlohmann::json> resourceList(const std::string& group,
                                             const std::string& version) const;
  // Minimal OpenAPI v3 documents: the root index and, per group-version, one PATCH
  // operation per kind declaring the fieldValidation parameter. That is what kubectl
  // (>= 1.27) reads to decide that the server validates fields, so it skips client-side
  // schema validation. No schemas are served.
  nlohmann::json openApiV3Root() const;
  std::optional<nlohmann::json> openApiV3(const std::string& group,
                                          const std::string& version) const;

 private:
  std::map<std::string, ResourceInfo> byTable_;  // tableKey -> info
};

}  // namespace kc::apiserver
