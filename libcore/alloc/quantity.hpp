#pragma once
// Kubernetes resource quantities ("500m", "2", "1.5Gi", "1e3") as kubelet's admission and
// kube-scheduler read them: CPU in millicores, everything else in whole units, both rounded
// up (a request of "0.5" pods or "1.5" bytes needs the next whole unit, as
// resource.Quantity.Value() does).

#include <cstdint>
#include <string>
#include <string_view>

#include "libcore/base/result.hpp"

namespace kc::alloc {

// Value of `text` times 1000 (millis), rounded up. Error "invalid" on anything that is not a
// quantity, on negative values and on values above 2^62.
Result<std::int64_t> parseQuantityMilli(std::string_view text);
// Value of `text` in whole units, rounded up. Same errors.
Result<std::int64_t> parseQuantity(std::string_view text);

// The integer amount kubelet compares for a resource: millicores for "cpu", whole units else.
Result<std::int64_t> parseResourceAmount(std::string_view resource, std::string_view text);
// The inverse, for Node capacity/allocatable: "1500m" / "2" for cpu, plain integers else.
std::string formatResourceAmount(std::string_view resource, std::int64_t amount);

}  // namespace kc::alloc
