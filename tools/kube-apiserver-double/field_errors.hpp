#pragma once
// Field validation errors as apimachinery's field.ErrorList collects them: each names a field
// path and a type (Required, Invalid, TooMany, ...) and reads as "<field>: <type>: <detail>".
// A non-empty list becomes ONE 422 Invalid Status whose details.causes carry every error, the
// shape kube-apiserver answers for a rejected create or update.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tools/kube-apiserver-double/api_error.hpp"

namespace kc::apiserver {

struct FieldError {
  std::string reason;  // the StatusCause type: FieldValueRequired, FieldValueInvalid, ...
  std::string field;   // "spec.devices[0].name"
  std::string body;    // "Required value", "Invalid value: \"x\": must be ..."
};

class FieldErrors {
 public:
  void required(const std::string& field, const std::string& detail = "");
  // `value` is printed as Go's field errors print a bad value: strings quoted, numbers and
  // booleans bare, null as "null", anything else as compact JSON.
  void invalid(const std::string& field, const nlohmann::json& value, const std::string& detail);
  void tooMany(const std::string& field, std::size_t actual, std::size_t max);
  void tooLong(const std::string& field, std::size_t max);
  void duplicate(const std::string& field, const nlohmann::json& value);
  void forbidden(const std::string& field, const std::string& detail);
  void notSupported(const std::string& field, const nlohmann::json& value,
                    const std::vector<std::string>& supported);
  void immutable(const std::string& field, const nlohmann::json& value) {
    invalid(field, value, "field is immutable");
  }

  bool empty() const { return errors_.empty(); }
  const std::vector<FieldError>& errors() const { return errors_; }
  // "field: body" of every error, in order (what tests and messages read).
  std::vector<std::string> messages() const;

 private:
  std::vector<FieldError> errors_;
};

// The 422 Invalid for `errors` (must not be empty): message "<Kind>.<group> \"<name>\" is
// invalid: <error>" for one error, "... is invalid: [<e1>, <e2>]" for several.
ApiError invalidObject(const std::string& group, const std::string& kind, const std::string& name,
                       const FieldErrors& errors);

}  // namespace kc::apiserver
