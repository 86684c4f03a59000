#include "libcore/base/json_guard.hpp"

#include <nlohmann/json.hpp>
#include <string>

namespace kc {

std::string excerpt(std::string_view body, std::size_t max) {
  std::string out;
  for (char c : body.substr(0, max)) {
    const auto u = static_cast<unsigned char>(c);
    out.push_back(u >= 0x20 && u < 0x7f ? c : '?');
  }
  if (body.size() > max) {
    out += "...";
  }
  return out;
}

Result<nlohmann::json> parseJsonGuarded(std::string_view body, std::string_view what,
                                        std::size_t maxBytes) {
  if (body.size() > maxBytes) {
    return makeError(kc::errc::kProtocol, std::string(what) + " is " + std::to_string(body.size()) +
                                              " bytes, over the limit of " +
                                              std::to_string(maxBytes));
  }
  // Depth check before parsing: bounded work and memory for hostile nesting.
  std::size_t depth = 0;
  bool inString = false;
  bool escaped = false;
  for (char c : body) {
    if (inString) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        inString = false;
      }
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        return makeError(kc::errc::kProtocol, std::string(what) + " nests deeper than " +
                                                  std::to_string(kMaxJsonDepth) + " levels");
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  auto doc = nlohmann::json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return makeError(kc::errc::kProtocol,
                     std::string(what) + " is not valid JSON: \"" + excerpt(body) + "\"");
  }
  return doc;
}

}  // namespace kc
