#pragma once
// YAML file -> nlohmann::json for the tests (CRD and example manifests). Plain scalars are
// typed as YAML 1.2's core schema types them (null, true/false, integers, floats); quoted
// scalars stay strings.

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <nlohmann/json.hpp>
#include <string>

namespace kc::bridge::testing {

inline nlohmann::json yamlToJson(const YAML::Node& node) {
  using nlohmann::json;
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& item : node) {
        out.push_back(yamlToJson(item));
      }
      return out;
    }
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : node) {
        out[kv.first.as<std::string>()] = yamlToJson(kv.second);
      }
      return out;
    }
    case YAML::NodeType::Scalar:
      break;
  }
  const std::string s = node.Scalar();
  if (node.Tag() == "!") {  // quoted
    return s;
  }
  if (s == "null" || s == "~" || s.empty()) {
    return nullptr;
  }
  if (s == "true" || s == "false") {
    return s == "true";
  }
  std::int64_t i = 0;
  if (auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), i);
      ec == std::errc() && end == s.data() + s.size()) {
    return i;
  }
  double d = 0;
  if (auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
      ec == std::errc() && end == s.data() + s.size()) {
    return d;
  }
  return s;
}

inline nlohmann::json loadYamlFile(const std::string& path) {
  return yamlToJson(YAML::LoadFile(path));
}

}  // namespace kc::bridge::testing
