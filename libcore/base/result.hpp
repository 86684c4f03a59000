#pragma once
// Result<T>: the value of an operation on untrusted input, or the reason it failed.
// Used instead of exceptions at every boundary where bad input is expected (API objects,
// annotations, HTTP bodies, fabric replies, files); exceptions remain for programming
// errors and start-up misconfiguration.
//
// One shape for every layer: the error type is kc::Error unless a layer needs a richer one
// that callers branch on (libcore/kube: ApiResult<T> = Result<T, kube::ApiError>, with the HTTP
// status and the Kubernetes Status reason). A richer error says how it reads as a kc::Error
// (toError()), and a Result carrying it converts to Result<T> where a caller only reports.

#include <concepts>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include "libcore/base/error_codes.hpp"

namespace kc {

// A failure: a short machine-readable code, one of kc::errc (error_codes.hpp), and a message
// for people.
struct Error {
  std::string code;
  std::string message;

  friend bool operator==(const Error&, const Error&) = default;
};

inline Error makeError(std::string code, std::string message) {
  return Error{std::move(code), std::move(message)};
}

// An error type richer than Error that can be reported as one.
template <typename E>
concept ReportableError = !std::same_as<E, Error> && requires(const E& e) {
  { e.toError() } -> std::convertible_to<Error>;
};

template <typename T, typename E = Error>
class [[nodiscard]] Result {
 public:
  using ErrorType = E;

  Result(T value)
      : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(E error) : state_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  // Result<T, RichError> -> Result<T>: the value moves over, the error becomes its toError().
  template <ReportableError E2>
  requires std::same_as<E, Error> Result(
      Result<T, E2> other)  // NOLINT: implicit by design, like the two above
      : state_(other.ok() ? std::variant<T, E>(std::in_place_index<0>, std::move(other).value())
                          : std::variant<T, E>(std::in_place_index<1>, other.error().toError())) {}

  bool ok() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  // Precondition: ok(). Accessing the value of a failed result is a programming error.
  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // Precondition: !ok().
  const E& error() const& { return std::get<1>(state_); }
  E&& error() && { return std::get<1>(std::move(state_)); }

  T valueOr(T fallback) const& { return ok() ? value() : std::move(fallback); }

 private:
  std::variant<T, E> state_;
};

// Result of an operation that yields nothing but may fail.
struct Ok {
  friend bool operator==(const Ok&, const Ok&) = default;
};
using Status = Result<Ok>;

inline Status okStatus() {
  return Ok{};
}

}  // namespace kc
