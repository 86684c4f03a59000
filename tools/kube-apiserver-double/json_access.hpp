#pragma once
// Null-safe reads of stored objects: a missing key, or a value of another JSON type,
// reads as null / "" instead of throwing (stored objects are client-written).

#include <nlohmann/json.hpp>
#include <string>

namespace kc::apiserver {

// obj[key], or null when obj is not an object or has no such key.
inline const nlohmann::json& member(const nlohmann::json& obj, const char* key) {
  static const nlohmann::json kNull;
  if (!obj.is_object()) {
    return kNull;
  }
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

// obj[key] when it is a string, else "".
inline std::string text(const nlohmann::json& obj, const char* key) {
  const nlohmann::json& v = member(obj, key);
  return v.is_string() ? v.get<std::string>() : "";
}

}  // namespace kc::apiserver
