#pragma once
// Validation and defaulting of built-in kinds at create/update time (the parts our clients
// observe): name syntax, generation bumps, pod and deployment defaults.

#include <nlohmann/json.hpp>
#include <string>

namespace kc::apiserver {

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

}  // namespace kc::apiserver
