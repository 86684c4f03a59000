#pragma once
// Parsing untrusted JSON (a chassis reply, an annotation another process wrote): size and
// nesting limits first, then nlohmann without exceptions. Never throws.

#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <string_view>

#include "libcore/base/result.hpp"

namespace kc {

inline constexpr std::size_t kMaxReplyBytes = 8 * 1024 * 1024;
inline constexpr std::size_t kMaxJsonDepth = 32;

// `what` names the document in error messages ("H3 resources reply").
Result<nlohmann::json> parseJsonGuarded(std::string_view body, std::string_view what,
                                        std::size_t maxBytes = kMaxReplyBytes);

// Short, printable excerpt of an untrusted body for error messages.
std::string excerpt(std::string_view body, std::size_t max = 120);

}  // namespace kc
