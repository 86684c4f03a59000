#pragma once
// Reading Metacontroller hook request bodies, for any controller kind:
//  - the hook version a controller declares (controller.spec.hooks.<hook>.version, v1 default);
//  - the object maps `children` / `attachments` / `related`: outer key "<Kind>.<apiVersion>"
//    ("Pod.v1", "Role.rbac.authorization.k8s.io/v1"), inner key the object's name (v1,
//    RelativeObjectMap, when parent and object share a scope) or "<namespace>/<name>" (v2,
//    UniformObjectMap, always for namespaced objects);
//  - small typed accessors that report where a field is missing instead of throwing.
// Both inner key forms are accepted whatever version the controller declares: Metacontroller
// releases before v4.15 send v1 keys even when a hook says v2. A key that names neither the
// object's name nor its namespace/name is an error (the body is not what Metacontroller sends).

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::metacontroller {

enum class HookVersion { kV1, kV2 };

const char* hookVersionName(HookVersion version);

// The request body as a JSON object. Errors (code "invalid"): not JSON, not an object.
Result<nlohmann::json> parseBody(std::string_view body);

// controller.spec.hooks.<hook>.version: absent/null -> v1; "v1" / "v2"; anything else is an
// error naming the field.
Result<HookVersion> declaredHookVersion(const nlohmann::json& body, std::string_view hook);

// "<Kind>.<apiVersion>": "ConfigMap.v1", "Role.rbac.authorization.k8s.io/v1".
std::string groupKey(std::string_view kind, std::string_view apiVersion);

// The inner key Metacontroller uses for a namespaced object of a namespaced parent.
std::string objectKey(HookVersion version, std::string_view ns, std::string_view name);

// The objects of one group of an object map (`field` = "children", "attachments", "related").
// A missing or null map or group yields no objects. Errors: the map or group is not an object,
// an entry is not an object, an entry's key matches neither its metadata.name nor
// "<metadata.namespace>/<metadata.name>".
Result<std::vector<const nlohmann::json*>> groupObjects(const nlohmann::json& body,
                                                        std::string_view field,
                                                        std::string_view group);

// `object[key]` or nullptr (also when `object` is not an object).
const nlohmann::json* member(const nlohmann::json& object, std::string_view key);
// A required non-empty string; the error says "<where>.<key> must be a non-empty string".
Result<std::string> requiredString(const nlohmann::json& object, std::string_view key,
                                   std::string_view where);
// The string at `key`, or "" when absent or not a string.
std::string optionalString(const nlohmann::json& object, std::string_view key);

}  // namespace kc::metacontroller
