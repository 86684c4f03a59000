#pragma once
// Label and field selectors with the syntax and semantics of apimachinery's
// labels.Parse / fields.ParseSelector.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::apiserver {

struct LabelRequirement {
  enum class Op {
    kEquals,
    kNotEquals,
    kIn,
    kNotIn,
    kExists,
    kDoesNotExist,
    kGreaterThan,
    kLessThan
  };
  std::string key;
  Op op = Op::kEquals;
  std::vector<std::string> values;
};

class LabelSelector {
 public:
  // "" selects everything. Errors carry the reason in the real server's words.
  static Result<LabelSelector> parse(const std::string& text);
  // A metav1.LabelSelector object ({matchLabels, matchExpressions}; operators In, NotIn,
  // Exists, DoesNotExist). An empty object selects everything. Errors (code "invalid") carry
  // "<field>: <detail>" under `fieldPath`.
  static Result<LabelSelector> fromJson(const nlohmann::json& selector,
                                        const std::string& fieldPath);
  bool empty() const { return reqs_.empty(); }
  // labels: the object's metadata.labels (may be null).
  bool matches(const nlohmann::json& labels) const;

 private:
  std::vector<LabelRequirement> reqs_;
};

struct FieldRequirement {
  std::string field;
  std::string value;
  bool negate = false;
};

class FieldSelector {
 public:
  // allowedFields: labels beyond metadata.name/metadata.namespace the resource supports;
  // an unsupported label is an error ("field label not supported: X").
  static Result<FieldSelector> parse(const std::string& text,
                                     const std::vector<std::string>& allowedFields);
  bool empty() const { return reqs_.empty(); }
  bool matches(const nlohmann::json& object) const;
  // The value a selector sees for a field of an object ("" when absent).
  static std::string fieldValue(const nlohmann::json& object, const std::string& field);

 private:
  std::vector<FieldRequirement> reqs_;
};

}  // namespace kc::apiserver
