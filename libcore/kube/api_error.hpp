#pragma once
// The typed error of every Kubernetes API call: the HTTP status, the Status object's reason,
// message and details as the apiserver sent them (meta/v1 Status), or a transport failure
// (httpCode 0). Callers branch on the predicates, never on message text.

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "libcore/base/result.hpp"

namespace kc::kube {

struct ApiError {
  int httpCode = 0;        // 0: no HTTP answer (connect, TLS, timeout, cancelled, bad body)
  std::string reason;      // Status.reason: NotFound, AlreadyExists, Conflict, Expired, Gone, ...
  std::string message;     // Status.message, or the transport's message
  nlohmann::json details;  // Status.details (null when absent)
  std::chrono::seconds retryAfter{0};  // Retry-After header or details.retryAfterSeconds

  bool isTransport() const { return httpCode == 0; }
  bool isNotFound() const { return httpCode == 404; }
  // 409 has two distinct meanings: a stale resourceVersion (Conflict: re-read and retry)
  // and a create of an existing name (AlreadyExists: usually fine for idempotent callers).
  bool isAlreadyExists() const { return httpCode == 409 && reason == "AlreadyExists"; }
  bool isConflict() const { return httpCode == 409 && reason != "AlreadyExists"; }
  // An expired resourceVersion or continue token: as HTTP 410 or as a watch ERROR event
  // carrying code 410 / reason Expired (current servers) or Gone (older servers).
  bool isExpired() const { return httpCode == 410 || reason == "Expired" || reason == "Gone"; }
  bool isTooManyRequests() const { return httpCode == 429; }
  bool isServerError() const { return httpCode >= 500; }
  bool isInvalid() const { return httpCode == 422; }
  bool isForbidden() const { return httpCode == 403; }
  bool isUnauthorized() const { return httpCode == 401; }
  // Worth retrying the same request unchanged after a backoff.
  bool isRetryable() const { return isTransport() || isTooManyRequests() || isServerError(); }

  // kc::Error form for callers that report rather than branch: code is a short word
  // (not_found, already_exists, conflict, expired, invalid, forbidden, unauthorized,
  // throttled, server_error, unavailable, http_<n>) and message carries reason and text.
  kc::Error toError() const;
  std::string describe() const;
};

ApiError transportError(std::string message);

// Builds the error of a non-2xx answer: parses a meta/v1 Status body when there is one,
// otherwise keeps the HTTP code with the (truncated) body as message.
ApiError parseStatusError(int httpCode, std::string_view body,
                          std::string_view retryAfterHeader = {});

// Parses a Status object already decoded (a watch ERROR event's object).
ApiError statusFromJson(const nlohmann::json& status);

// The result of an API call: kc::Result with ApiError as its error, so it has the one Result
// shape and converts to kc::Result<T> (error: toError()) where a caller only reports.
template <typename T>
using ApiResult = kc::Result<T, ApiError>;

using ApiStatus = ApiResult<kc::Ok>;

}  // namespace kc::kube
