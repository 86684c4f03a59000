#pragma once
// One mapping between gRPC status codes and the project's error codes (kc::Error::code), used
// by servers (an Error becomes the Status a peer sees) and clients (a failed call becomes an
// Error the daemon handles like any other).

#include <grpcpp/support/status.h>

#include "libcore/base/result.hpp"

namespace kc::grpcx {

// INVALID_ARGUMENT -> "invalid", NOT_FOUND -> "not_found", DEADLINE_EXCEEDED -> "timeout",
// UNAVAILABLE -> "unavailable", ALREADY_EXISTS / ABORTED -> "conflict", FAILED_PRECONDITION
// -> "failed_precondition", RESOURCE_EXHAUSTED -> "exhausted", UNIMPLEMENTED -> "unsupported",
// CANCELLED -> "cancelled", PERMISSION_DENIED -> "forbidden", UNAUTHENTICATED ->
// "unauthorized", anything else -> "internal". The message keeps the peer's text, prefixed
// with `what` (e.g. "Register") when given.
Error toError(const grpc::Status& status, std::string_view what = {});

// The inverse for the codes above; unknown codes become INTERNAL.
grpc::Status toStatus(const Error& error);

// Ok for an OK status, the mapped Error otherwise.
Status toResult(const grpc::Status& status, std::string_view what = {});

}  // namespace kc::grpcx
