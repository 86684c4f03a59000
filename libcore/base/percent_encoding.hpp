#pragma once
// Percent-encoding (RFC 3986 section 2.1) for URL path segments and query strings.

#include <string>
#include <string_view>

#include "libcore/base/result.hpp"

namespace kc {

// Escapes every byte except the RFC 3986 unreserved characters (A-Z a-z 0-9 - . _ ~) as %XX
// with upper-case hex: safe for a query key or value and for one path segment.
std::string percentEncode(std::string_view raw);

// Decodes %XX escapes (either hex case); with plusAsSpace, '+' becomes ' ' (form-encoded
// query strings). A truncated ("%4") or non-hex ("%G1") escape is an error with code "invalid".
Result<std::string> percentDecode(std::string_view encoded, bool plusAsSpace = false);

}  // namespace kc
