#include "libcore/grpc/status.hpp"

#include <array>
#include <string>
#include <utility>

namespace kc::grpcx {
namespace {

struct CodeName {
  grpc::StatusCode code;
  const char* name;
};

// First match wins in both directions (ABORTED maps to "conflict", "conflict" to
// ALREADY_EXISTS).
constexpr std::array<CodeName, 12> kCodes{{
    {grpc::StatusCode::INVALID_ARGUMENT, kc::errc::kInvalid},
    {grpc::StatusCode::NOT_FOUND, kc::errc::kNotFound},
    {grpc::StatusCode::DEADLINE_EXCEEDED, kc::errc::kTimeout},
    {grpc::StatusCode::UNAVAILABLE, kc::errc::kUnavailable},
    {grpc::StatusCode::ALREADY_EXISTS, kc::errc::kConflict},
    {grpc::StatusCode::ABORTED, kc::errc::kConflict},
    {grpc::StatusCode::FAILED_PRECONDITION, kc::errc::kFailedPrecondition},
    {grpc::StatusCode::RESOURCE_EXHAUSTED, kc::errc::kExhausted},
    {grpc::StatusCode::UNIMPLEMENTED, kc::errc::kUnsupported},
    {grpc::StatusCode::CANCELLED, kc::errc::kCancelled},
    {grpc::StatusCode::PERMISSION_DENIED, kc::errc::kForbidden},
    {grpc::StatusCode::UNAUTHENTICATED, kc::errc::kUnauthorized},
}};

}  // namespace

Error toError(const grpc::Status& status, std::string_view what) {
  std::string code = kc::errc::kInternal;
  for (const auto& c : kCodes) {
    if (c.code == status.error_code()) {
      code = c.name;
      break;
    }
  }
  std::string message;
  if (!what.empty()) {
    message.append(what).append(": ");
  }
  message += status.error_message().empty() ? "gRPC status " + std::to_string(status.error_code())
                                            : status.error_message();
  return makeError(std::move(code), std::move(message));
}

grpc::Status toStatus(const Error& error) {
  for (const auto& c : kCodes) {
    if (error.code == c.name) {
      return {c.code, error.message};
    }
  }
  return {grpc::StatusCode::INTERNAL, error.message};
}

Status toResult(const grpc::Status& status, std::string_view what) {
  if (status.ok()) {
    return okStatus();
  }
  return toError(status, what);
}

}  // namespace kc::grpcx
