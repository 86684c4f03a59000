#pragma once
// Server-side Table columns of resource.k8s.io/v1, as kube-apiserver's built-in printers
// (pkg/printers/internalversion) print them: deviceclasses and resourceclaimtemplates NAME AGE,
// resourceclaims NAME STATE AGE, resourceslices NAME NODE DRIVER POOL AGE.

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

namespace kc::apiserver::dra {

// True for the four resources these printers serve.
bool hasPrinter(const std::string& resource);
nlohmann::json columnDefinitions(const std::string& resource);
nlohmann::json cells(const std::string& resource, const nlohmann::json& object,
                     std::chrono::system_clock::time_point now);

// The STATE column of a claim: "deleted" once deletion started, then "pending" (not allocated
// and not being deleted) or "allocated" plus ",reserved" when it has consumers.
std::string resourceClaimState(const nlohmann::json& claim);

}  // namespace kc::apiserver::dra
