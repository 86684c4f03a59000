#include "libcore/kube/api_error.hpp"

#include <charconv>

namespace kc::kube {

namespace {

std::chrono::seconds parseRetryAfter(std::string_view header) {
  // Only the delta-seconds form; the apiserver never sends an HTTP date here.
  while (!header.empty() && header.front() == ' ') {
    header.remove_prefix(1);
  }
  long v = 0;
  auto [ptr, ec] = std::from_chars(header.data(), header.data() + header.size(), v);
  if (ec != std::errc{} || v < 0) {
    return std::chrono::seconds{0};
  }
  return std::chrono::seconds{std::min<long>(v, 3600)};
}

std::string reasonForCode(int code) {
  switch (code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 409:
      return "Conflict";
    case 410:
      return "Expired";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 500:
      return "InternalError";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "";
  }
}

}  // namespace

ApiError transportError(std::string message) {
  ApiError e;
  e.httpCode = 0;
  e.reason = "Transport";
  e.message = std::move(message);
  return e;
}

ApiError statusFromJson(const nlohmann::json& status) {
  ApiError e;
  if (!status.is_object()) {
    e.httpCode = 500;
    e.reason = "InternalError";
    e.message = "malformed Status object";
    return e;
  }
  if (auto it = status.find("code"); it != status.end() && it->is_number_integer()) {
    e.httpCode = it->get<int>();
  }
  if (auto it = status.find("reason"); it != status.end() && it->is_string()) {
    e.reason = it->get<std::string>();
  }
  if (auto it = status.find("message"); it != status.end() && it->is_string()) {
    e.message = it->get<std::string>();
  }
  if (auto it = status.find("details"); it != status.end() && it->is_object()) {
    e.details = *it;
    if (auto ra = it->find("retryAfterSeconds"); ra != it->end() && ra->is_number_integer()) {
      e.retryAfter = std::chrono::seconds{std::clamp<long>(ra->get<long>(), 0, 3600)};
    }
  }
  if (e.reason.empty()) {
    e.reason = reasonForCode(e.httpCode);
  }
  return e;
}

ApiError parseStatusError(int httpCode, std::string_view body, std::string_view retryAfterHeader) {
  ApiError e;
  auto parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object() && parsed.value("kind", "") == "Status") {
    e = statusFromJson(parsed);
    e.httpCode = httpCode;  // the status line is authoritative
  } else {
    e.httpCode = httpCode;
    e.message = std::string(body.substr(0, 512));
  }
  if (e.reason.empty()) {
    e.reason = reasonForCode(httpCode);
  }
  if (e.retryAfter.count() == 0 && !retryAfterHeader.empty()) {
    e.retryAfter = parseRetryAfter(retryAfterHeader);
  }
  return e;
}

std::string ApiError::describe() const {
  if (isTransport()) {
    return "transport: " + message;
  }
  std::string s = "HTTP " + std::to_string(httpCode);
  if (!reason.empty()) {
    s += " " + reason;
  }
  if (!message.empty()) {
    s += ": " + message;
  }
  return s;
}

kc::Error ApiError::toError() const {
  std::string code;
  if (isTransport()) {
    code = kc::errc::kUnavailable;
  } else if (isNotFound()) {
    code = kc::errc::kNotFound;
  } else if (isAlreadyExists()) {
    code = kc::errc::kAlreadyExists;
  } else if (isConflict()) {
    code = kc::errc::kConflict;
  } else if (isExpired()) {
    code = kc::errc::kExpired;
  } else if (isInvalid() || httpCode == 400) {
    code = kc::errc::kInvalid;
  } else if (isForbidden()) {
    code = kc::errc::kForbidden;
  } else if (isUnauthorized()) {
    code = kc::errc::kUnauthorized;
  } else if (isTooManyRequests()) {
    code = kc::errc::kThrottled;
  } else if (isServerError()) {
    code = kc::errc::kServerError;
  } else {
    code = "http_" + std::to_string(httpCode);
  }
  return kc::makeError(std::move(code), describe());
}

}  // namespace kc::kube
