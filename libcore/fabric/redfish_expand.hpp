#pragma once
// Redfish `$expand` (DSP0266, "Query parameters"): what a service says it supports, the query
// the driver asks with, and the resources an expanded reply carries inline. Pure functions.
//
//  ServiceRoot.ProtocolFeaturesSupported.ExpandQuery {ExpandAll, NoLinks, Links, Levels,
//  MaxLevels}: `.` (NoLinks) expands links outside `Links` properties, `*` (ExpandAll) every
//  link, `($levels=n)` (Levels) cascades n levels, at most MaxLevels.
//
// The driver asks for `.` when offered (a collection's `Members` and a ResourceBlock's
// `Processors` are outside `Links`), else `*`; `~` alone cannot expand `Members` and is not
// used. An expanded resource is parsed by the same parser as a fetched one: the object is cut
// out of the reply and handed over as text, so both paths apply the same rules.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::fabric::redfish {

struct ExpandSupport {
  bool noLinks = false;    // "."
  bool expandAll = false;  // "*"
  bool levels = false;     // "($levels=n)"
  std::int64_t maxLevels = 1;

  bool any() const { return noLinks || expandAll; }
};

// From the service root's body. Absent, null or malformed ProtocolFeaturesSupported means no
// $expand (it can only widen what the driver tries; a plain read is always correct).
ExpandSupport parseExpandSupport(std::string_view serviceRootBody);

// The query parameter for `levels` levels ("$expand=.($levels=2)"), capped at what the service
// supports (without Levels: "$expand=." which is one level); nullopt when it has no $expand.
std::optional<std::string> expandQuery(const ExpandSupport& support, std::int64_t levels);

// `target` with `query` appended ("?" or "&" as the target needs).
std::string withQuery(const std::string& target, const std::string& query);

// Every resource an (expanded) reply carries inline, by its @odata.id: an object with a valid
// absolute @odata.id and at least one property that is not an annotation (a bare reference,
// even one with @odata.type, is not a resource). Nested ones are found too (a ResourceBlock's
// expanded Processors). The value is the object's JSON text. Errors: the body is no JSON object
// (the collection parser reports that itself).
Result<std::map<std::string, std::string>> embeddedResources(std::string_view body,
                                                             std::string_view what);

}  // namespace kc::fabric::redfish
