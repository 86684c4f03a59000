#pragma once
// The lenient JSON reads the contract parsers share (private to libcore/api): a member that is
// absent, null or of another type reads as absent, so a parser decides once what is missing.

#include <nlohmann/json.hpp>
#include <string>

namespace kc::api::detail {

// obj[key] when obj is an object holding a non-null key, else nullptr.
inline const nlohmann::json* member(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object()) {
    return nullptr;
  }
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

// obj[key] when it is a string, else "".
inline std::string text(const nlohmann::json& obj, const char* key) {
  const nlohmann::json* v = member(obj, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

}  // namespace kc::api::detail
