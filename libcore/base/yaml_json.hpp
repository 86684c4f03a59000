#pragma once
// YAML documents as JSON values (nlohmann::json) with YAML 1.2 core-schema scalar typing:
// null/~/empty -> null, true/false -> bool, decimal/0o/0x integers -> int, decimals with a
// point or exponent and .inf/.nan -> double, anything quoted -> string. Used to read manifests
// (CRDs, examples, chart values) and YAML topologies with one set of rules. On yaml-cpp.

#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc {

// Every document of a YAML stream ("---" separated), empty documents skipped. Errors have
// code "invalid" and name the line and column yaml-cpp reports, or the unsupported construct
// (non-scalar map keys, nesting deeper than 64 levels).
Result<std::vector<nlohmann::json>> yamlDocumentsToJson(std::string_view text);

// Exactly one document; "invalid" when the stream holds none or several.
Result<nlohmann::json> yamlToJson(std::string_view text);

}  // namespace kc
