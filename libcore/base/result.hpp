#pragma once
// Result<T>: the value of an operation on untrusted input, or the reason it failed.
// Used instead of exceptions at every boundary where bad input is expected (API objects,
// annotations, HTTP bodies, fabric replies, files); exceptions remain for programming
// errors and start-up misconfiguration.

#include <string>
#include <utility>
#include <variant>

namespace kc {

// A failure: a short machine-readable code (e.g. "invalid", "exhausted", "conflict",
// "timeout", "unavailable") and a message for people.
struct Error {
  std::string code;
  std::string message;

  friend bool operator==(const Error&, const Error&) = default;
};

inline Error makeError(std::string code, std::string message) {
  return Error{std::move(code), std::move(message)};
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

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
  const Error& error() const& { return std::get<1>(state_); }
  Error&& error() && { return std::get<1>(std::move(state_)); }

  T valueOr(T fallback) const& { return ok() ? value() : std::move(fallback); }

 private:
  std::variant<T, Error> state_;
};

// Result of an operation that yields nothing but may fail.
struct Ok {
  friend bool operator==(const Ok&, const Ok&) = default;
};
using Status = Result<Ok>;

inline Status okStatus() { return Ok{}; }

}  // namespace kc
