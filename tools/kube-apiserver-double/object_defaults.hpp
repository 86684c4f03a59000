#pragma once
// Validation and defaulting of built-in kinds at create/update time (the parts our clients
// observe): name syntax, generation bumps, pod and deployment defaults.

#include <nlohmann/json.hpp>
#include <string>

namespace kc::apiserver {

struct ResourceInfo;

bool isDnsSubdomain(const std::string& s);
bool isDnsLabel(const std::string& s);
extern const char* const kSubdomainMsg;
extern const char* const kLabelMsg;

// Everything but metadata/status/kind/apiVersion changed: what bumps metadata.generation.
bool specChanged(const nlohmann::json& a, const nlohmann::json& b);

std::string podQosClass(const nlohmann::json& spec);
void defaultPod(nlohmann::json& pod);
void defaultDeployment(nlohmann::json& deployment);
// As the API server stores a Secret: stringData merged into data (base64, stringData wins on a
// shared key) and dropped, type defaulted to Opaque. A stringData value that is not a string
// is refused by the caller's validation.
void normalizeSecret(nlohmann::json& secret);

// Everything above and the per-kind checks (PodDisruptionBudget, resource.k8s.io), as the store
// applies them to a new object (CRDs aside: the store accepts those itself) ...
void admitOnCreate(const ResourceInfo& res, const std::string& name, nlohmann::json& body);
// ... and to an update, once `next` holds what the update may not change (metadata the server
// owns, the stored status or spec). Both throw the 422 (or 400) ApiError.
void admitOnUpdate(const ResourceInfo& res, const std::string& name, const nlohmann::json& oldObj,
                   nlohmann::json& next, bool statusUpdate);

}  // namespace kc::apiserver
