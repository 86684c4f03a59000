#pragma once
// Small lenient readers the views share (private to tools/kubectl-kubecomp): a missing or
// mistyped field reads as empty, never throws.

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "libcore/base/rfc3339.hpp"
#include "tools/kubectl-kubecomp/output.hpp"

namespace kc::kubectl::detail {

// The string at a path of object keys, "" when any step is missing or not of that type.
inline std::string str(const nlohmann::json& obj, std::initializer_list<const char*> path) {
  const nlohmann::json* cur = &obj;
  for (const char* key : path) {
    if (!cur->is_object()) {
      return {};
    }
    auto it = cur->find(key);
    if (it == cur->end()) {
      return {};
    }
    cur = &*it;
  }
  return cur->is_string() ? cur->get<std::string>() : std::string();
}

// The object (or array) at a path, or an empty object.
inline const nlohmann::json& at(const nlohmann::json& obj,
                                std::initializer_list<const char*> path) {
  static const nlohmann::json kEmpty = nlohmann::json::object();
  const nlohmann::json* cur = &obj;
  for (const char* key : path) {
    if (!cur->is_object()) {
      return kEmpty;
    }
    auto it = cur->find(key);
    if (it == cur->end() || it->is_null()) {
      return kEmpty;
    }
    cur = &*it;
  }
  return *cur;
}

inline std::optional<std::chrono::system_clock::time_point> time(const std::string& text) {
  if (text.empty()) {
    return std::nullopt;
  }
  auto t = kc::parseRfc3339(text);
  return t ? std::optional(*t) : std::nullopt;
}

// The age of an RFC 3339 time as kubectl prints it ("" when unknown).
inline std::string age(const std::string& text, std::chrono::system_clock::time_point now) {
  const auto t = time(text);
  return t ? humanDuration(now - *t) : std::string();
}

// Whole seconds from a to b, nullopt when either is unknown.
inline std::optional<std::int64_t> secondsBetween(const std::string& a, const std::string& b) {
  const auto ta = time(a);
  const auto tb = time(b);
  if (!ta || !tb) {
    return std::nullopt;
  }
  return std::chrono::duration_cast<std::chrono::seconds>(*tb - *ta).count();
}

inline nlohmann::json orNull(const std::optional<std::int64_t>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

inline std::string joined(const std::vector<std::string>& parts, const char* sep = ",") {
  std::string out;
  for (const auto& p : parts) {
    out += (out.empty() ? "" : sep) + p;
  }
  return out;
}

}  // namespace kc::kubectl::detail
