#include "libcore/base/yaml_json.hpp"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <limits>
#include <string>

namespace kc {
namespace {

using nlohmann::json;

constexpr int kMaxDepth = 64;

bool isNull(const std::string& s) {
  return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

std::optional<bool> asBool(const std::string& s) {
  if (s == "true" || s == "True" || s == "TRUE") {
    return true;
  }
  if (s == "false" || s == "False" || s == "FALSE") {
    return false;
  }
  return std::nullopt;
}

// YAML 1.2 core schema ints: [-+]?[0-9]+ | 0o[0-7]+ | 0x[0-9a-fA-F]+. Out of int64 range -> not
// an int (falls through to float or string, as a core-schema reader that keeps precision would).
std::optional<std::int64_t> asInt(const std::string& s) {
  std::string_view v = s;
  int base = 10;
  bool negative = false;
  if (v.starts_with("0o")) {
    base = 8;
    v.remove_prefix(2);
  } else if (v.starts_with("0x")) {
    base = 16;
    v.remove_prefix(2);
  } else if (!v.empty() && (v.front() == '-' || v.front() == '+')) {
    negative = v.front() == '-';
    v.remove_prefix(1);
  }
  if (v.empty()) {
    return std::nullopt;
  }
  std::uint64_t magnitude = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), magnitude, base);
  if (ec != std::errc() || end != v.data() + v.size()) {
    return std::nullopt;
  }
  const auto limit = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (negative) {
    if (magnitude > limit + 1) {
      return std::nullopt;
    }
    return magnitude == limit + 1 ? std::numeric_limits<std::int64_t>::min()
                                  : -static_cast<std::int64_t>(magnitude);
  }
  if (magnitude > limit) {
    return std::nullopt;
  }
  return static_cast<std::int64_t>(magnitude);
}

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? | [-+]?\.(inf|Inf|INF) | \.(nan|NaN|NAN)
std::optional<double> asFloat(const std::string& s) {
  std::string_view v = s;
  double sign = 1.0;
  if (!v.empty() && (v.front() == '-' || v.front() == '+')) {
    sign = v.front() == '-' ? -1.0 : 1.0;
    v.remove_prefix(1);
  }
  if (v == ".inf" || v == ".Inf" || v == ".INF") {
    return sign * std::numeric_limits<double>::infinity();
  }
  if (s == ".nan" || s == ".NaN" || s == ".NAN") {
    return std::numeric_limits<double>::quiet_NaN();
  }
  std::size_t i = 0;
  std::size_t digits = 0;
  while (i < v.size() && v[i] >= '0' && v[i] <= '9') {
    ++i;
    ++digits;
  }
  bool point = false;
  if (i < v.size() && v[i] == '.') {
    point = true;
    ++i;
    while (i < v.size() && v[i] >= '0' && v[i] <= '9') {
      ++i;
      ++digits;
    }
  }
  if (digits == 0) {
    return std::nullopt;
  }
  bool exponent = false;
  if (i < v.size() && (v[i] == 'e' || v[i] == 'E')) {
    ++i;
    if (i < v.size() && (v[i] == '-' || v[i] == '+')) {
      ++i;
    }
    std::size_t expDigits = 0;
    while (i < v.size() && v[i] >= '0' && v[i] <= '9') {
      ++i;
      ++expDigits;
    }
    if (expDigits == 0) {
      return std::nullopt;
    }
    exponent = true;
  }
  if (i != v.size() || (!point && !exponent)) {
    return std::nullopt;
  }
  double out = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || end != v.data() + v.size()) {
    return std::nullopt;
  }
  return sign * out;
}

Result<json> convert(const YAML::Node& node, int depth) {
  if (depth > kMaxDepth) {
    return makeError(kc::errc::kInvalid,
                     "YAML nested deeper than " + std::to_string(kMaxDepth) + " levels");
  }
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return json(nullptr);
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) {
          const auto m = kv.first.Mark();
          return makeError(kc::errc::kInvalid,
                           "line " + std::to_string(m.line + 1) + " column " +
                               std::to_string(m.column + 1) +
                               ": map key is not a scalar (not expressible in JSON)");
        }
        auto value = convert(kv.second, depth + 1);
        if (!value) {
          return value;
        }
        out[kv.first.Scalar()] = std::move(*value);
      }
      return out;
    }
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& item : node) {
        auto value = convert(item, depth + 1);
        if (!value) {
          return value;
        }
        out.push_back(std::move(*value));
      }
      return out;
    }
    case YAML::NodeType::Scalar: {
      const std::string& text = node.Scalar();
      // yaml-cpp tags quoted and block scalars "!" (non-specific, i.e. a string) and plain ones
      // "?"; an explicit "!!str" also means string.
      const std::string& tag = node.Tag();
      if (tag == "!" || tag == "tag:yaml.org,2002:str") {
        return json(text);
      }
      if (isNull(text)) {
        return json(nullptr);
      }
      if (auto b = asBool(text)) {
        return json(*b);
      }
      if (auto i = asInt(text)) {
        return json(*i);
      }
      if (auto f = asFloat(text)) {
        return json(*f);
      }
      return json(text);
    }
  }
  return json(nullptr);
}

}  // namespace

Result<std::vector<json>> yamlDocumentsToJson(std::string_view text) {
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    return makeError(kc::errc::kInvalid, "YAML: line " + std::to_string(e.mark.line + 1) +
                                             " column " + std::to_string(e.mark.column + 1) + ": " +
                                             e.msg);
  }
  std::vector<json> out;
  for (const auto& d : docs) {
    if (d.IsNull()) {
      continue;
    }
    auto value = convert(d, 0);
    if (!value) {
      return std::move(value).error();
    }
    out.push_back(std::move(*value));
  }
  return out;
}

Result<json> yamlToJson(std::string_view text) {
  auto docs = yamlDocumentsToJson(text);
  if (!docs) {
    return std::move(docs).error();
  }
  if (docs->size() != 1) {
    return makeError(kc::errc::kInvalid,
                     "expected one YAML document, found " + std::to_string(docs->size()));
  }
  return std::move(docs->front());
}

}  // namespace kc
