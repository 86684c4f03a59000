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

}  // namespace kc::apiserver
