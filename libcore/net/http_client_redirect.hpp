#pragma once
// Private to the HttpClient units: where a same-origin redirect leads (RFC 3986 reference
// resolution against the request target).

#include <string>
#include <string_view>

#include "libcore/base/result.hpp"
#include "libcore/net/http.hpp"

namespace kc::net::detail {

// 301, 302, 303, 307, 308: the statuses request() follows.
bool isRedirect(unsigned status);

// The request-target a Location header points to, relative to the request `target` sent to
// `origin`. Errors: "redirect" for another origin, "protocol" for a malformed Location.
Result<std::string> redirectTarget(const Url& origin, std::string_view target,
                                   std::string_view location);

}  // namespace kc::net::detail
