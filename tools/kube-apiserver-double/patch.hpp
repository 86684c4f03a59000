#pragma once
// The PATCH flavours the apiserver accepts: JSON merge patch (RFC 7386), JSON patch
// (RFC 6902) and Kubernetes strategic merge patch for built-in types.

#include <nlohmann/json.hpp>

#include "libcore/base/result.hpp"

namespace kc::apiserver {

// RFC 7386: objects merge recursively, null removes a key, everything else replaces.
nlohmann::json applyMergePatch(const nlohmann::json& target, const nlohmann::json& patch);

// RFC 6902. Errors: code "bad_request" (malformed patch document) or "invalid" (an
// operation failed, e.g. a failed "test" or a missing path), as the apiserver
// distinguishes 400 from 422.
Result<nlohmann::json> applyJsonPatch(const nlohmann::json& target, const nlohmann::json& patch);

// Strategic merge patch with the list merge keys of the core API types (containers,
// env, ports, volumes, ... by name; conditions by type; finalizers as a set) and the
// $patch (delete/replace/merge), $deleteFromPrimitiveList, $retainKeys and
// $setElementOrder directives. Error code "bad_request" for malformed directives.
Result<nlohmann::json> applyStrategicMergePatch(const nlohmann::json& target,
                                                const nlohmann::json& patch);

}  // namespace kc::apiserver
