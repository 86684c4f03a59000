#pragma once
// RFC 3339 timestamps ("2026-11-22T21:00:00Z", "2026-11-22T22:00:00.5+01:00"), the form of
// Kubernetes metav1.Time / MicroTime, Redfish DateTime and our log lines.

#include <chrono>
#include <string>
#include <string_view>

#include "libcore/base/result.hpp"

namespace kc {

// Digits after the seconds when formatting: metav1.Time has none, log lines 3, MicroTime 6.
enum class Rfc3339Precision { kSeconds, kMillis, kMicros };

// UTC with a 'Z' suffix, truncated (not rounded) to the precision:
// formatRfc3339(t, kMicros) == "2026-11-22T21:00:00.123456Z". Total: every system_clock time
// (years 1678..2261) has a four-digit year.
std::string formatRfc3339(std::chrono::system_clock::time_point t,
                          Rfc3339Precision precision = Rfc3339Precision::kSeconds);

// Parses YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM) (RFC 3339 section 5.6; 'T' and 'Z'
// also in lower case). Strict: every field in range for its month and year (Feb 29 only in leap
// years), at least one fraction digit after '.', nothing before or after. Leap second 60 is
// rejected, as Kubernetes (Go's time.Parse) does. Fraction digits past nanoseconds are ignored.
// A valid text outside the clock's range (years 1678..2261, e.g. Go's zero time 0001-01-01)
// is an error too, never an overflow.
// Errors carry code "invalid" and say which part is wrong.
Result<std::chrono::system_clock::time_point> parseRfc3339(std::string_view text);

}  // namespace kc
