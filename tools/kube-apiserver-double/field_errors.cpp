#include "tools/kube-apiserver-double/field_errors.hpp"

namespace kc::apiserver {

using nlohmann::json;

namespace {

std::string badValue(const json& v) {
  return v.is_null() ? "null" : v.dump();
}

}  // namespace

void FieldErrors::required(const std::string& field, const std::string& detail) {
  errors_.push_back({"FieldValueRequired", field,
                     detail.empty() ? "Required value" : "Required value: " + detail});
}

void FieldErrors::invalid(const std::string& field, const json& value, const std::string& detail) {
  errors_.push_back(
      {"FieldValueInvalid", field, "Invalid value: " + badValue(value) + ": " + detail});
}

void FieldErrors::tooMany(const std::string& field, std::size_t actual, std::size_t max) {
  errors_.push_back({"FieldValueTooMany", field,
                     "Too many: " + std::to_string(actual) + ": must have at most " +
                         std::to_string(max) + " items"});
}

void FieldErrors::tooLong(const std::string& field, std::size_t max) {
  errors_.push_back({"FieldValueTooLong", field,
                     "Too long: may not be more than " + std::to_string(max) + " bytes"});
}

void FieldErrors::duplicate(const std::string& field, const json& value) {
  errors_.push_back({"FieldValueDuplicate", field, "Duplicate value: " + badValue(value)});
}

void FieldErrors::forbidden(const std::string& field, const std::string& detail) {
  errors_.push_back({"FieldValueForbidden", field, "Forbidden: " + detail});
}

void FieldErrors::notSupported(const std::string& field, const json& value,
                               const std::vector<std::string>& supported) {
  std::string list;
  for (const auto& s : supported) {
    list += (list.empty() ? "" : ", ") + json(s).dump();
  }
  errors_.push_back({"FieldValueNotSupported", field,
                     "Unsupported value: " + badValue(value) + ": supported values: " + list});
}

std::vector<std::string> FieldErrors::messages() const {
  std::vector<std::string> out;
  for (const auto& e : errors_) {
    out.push_back(e.field + ": " + e.body);
  }
  return out;
}

ApiError invalidObject(const std::string& group, const std::string& kind, const std::string& name,
                       const FieldErrors& errors) {
  json causes = json::array();
  for (const auto& e : errors.errors()) {
    causes.push_back({{"reason", e.reason}, {"message", e.body}, {"field", e.field}});
  }
  json details = {{"name", name}, {"kind", kind}, {"causes", causes}};
  if (!group.empty()) {
    details["group"] = group;
  }
  const auto messages = errors.messages();
  std::string all;
  for (const auto& m : messages) {
    all += (all.empty() ? "" : ", ") + m;
  }
  if (messages.size() > 1) {
    all = "[" + all + "]";
  }
  const std::string groupKind = group.empty() ? kind : kind + "." + group;
  return {422, "Invalid", groupKind + " " + json(name).dump() + " is invalid: " + all, details};
}

}  // namespace kc::apiserver
