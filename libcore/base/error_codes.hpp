#pragma once
// The codes of kc::Error (result.hpp), one spelling each. Code that makes or compares an
// error uses these names, never a string literal, so a code cannot be misspelt in one place.
// The strings themselves appear in logs, JSON error bodies and gRPC mappings: keep them stable.

namespace kc::errc {

// Input
inline constexpr const char* kInvalid = "invalid";  // bad argument, malformed input or config
inline constexpr const char* kBadRequest = "bad_request";  // a malformed request document (HTTP 400
                                                           // where "invalid" is 422)
inline constexpr const char* kTooLarge = "too_large";      // body or reply over its size limit
inline constexpr const char* kOutOfRange = "out_of_range";  // a value outside the configured range
inline constexpr const char* kReserved = "reserved";        // a value that is never issued

// State
inline constexpr const char* kNotFound = "not_found";
inline constexpr const char* kAlreadyExists = "already_exists";
inline constexpr const char* kConflict = "conflict";  // held by someone else, or changed underneath
inline constexpr const char* kExpired = "expired";    // a watch/list continuation is too old
inline constexpr const char* kFailedPrecondition = "failed_precondition";
inline constexpr const char* kExhausted = "exhausted";        // nothing free left
inline constexpr const char* kInsufficient = "insufficient";  // not enough capacity for the request
inline constexpr const char* kUnschedulable = "unschedulable";
inline constexpr const char* kNotAllocated = "not_allocated";  // release of a value not held

// Peers and transport
inline constexpr const char* kTimeout = "timeout";          // no answer within the deadline
inline constexpr const char* kUnavailable = "unavailable";  // connection failed, 5xx, peer gone
inline constexpr const char* kStale = "stale";        // a reused connection was dead (retry fresh)
inline constexpr const char* kTls = "tls";            // TLS set-up or handshake failed
inline constexpr const char* kRedirect = "redirect";  // a redirect the client will not follow
inline constexpr const char* kProtocol = "protocol";  // malformed or unexpected reply
inline constexpr const char* kUnauthorized = "unauthorized";  // credentials missing or rejected
inline constexpr const char* kForbidden = "forbidden";        // authenticated, not allowed
inline constexpr const char* kThrottled = "throttled";        // 429 from the peer
inline constexpr const char* kServerError = "server_error";   // 5xx with a Status body
inline constexpr const char* kUnprocessable = "unprocessable";
inline constexpr const char* kCancelled = "cancelled";
inline constexpr const char* kInternal = "internal";

// Fabric moves (libcore/fabric)
inline constexpr const char* kUnverified = "unverified";  // the inventory does not show the move
inline constexpr const char* kUnhealthy = "unhealthy";    // GPU lost / not usable
inline constexpr const char* kRefused = "refused";        // the chassis said no and nothing changed
// The peer cannot do this at all; retrying will not help. Distinct from kProtocol (a malformed
// reply).
inline constexpr const char* kUnsupported = "unsupported";

}  // namespace kc::errc
