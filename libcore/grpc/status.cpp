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
    {grpc::StatusCode::INVALID_ARGUMENT, "invalid"},
    {grpc::StatusCode::NOT_FOUND, "not_found"},
    {grpc::StatusCode::DEADLINE_EXCEEDED, "timeout"},
    {grpc::StatusCode::UNAVAILABLE, "unavailable"},
    {grpc::StatusCode::ALREADY_EXISTS, "conflict"},
    {grpc::StatusCode::ABORTED, "conflict"},
    {grpc::StatusCode::FAILED_PRECONDITION, "failed_precondition"},
    {grpc::StatusCode::RESOURCE_EXHAUSTED, "exhausted"},
    {grpc::StatusCode::UNIMPLEMENTED, "unsupported"},
    {grpc::StatusCode::CANCELLED, "cancelled"},
    {grpc::StatusCode::PERMISSION_DENIED, "forbidden"},
    {grpc::StatusCode::UNAUTHENTICATED, "unauthorized"},
}};

}  // namespace

Error toError(const grpc::Status& status, std::string_view what) {
  std::string code = "internal";
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
