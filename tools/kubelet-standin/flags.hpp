#pragma once
// Parsing of kubelet-style flag values: Go durations ("10s", "500ms", "5m"), label lists
// ("k=v,k2=v2", --node-labels) and taint lists ("key=value:NoSchedule", --register-with-taints).
// Every function rejects what kubelet would reject, with a message naming the bad part.

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "libcore/base/result.hpp"

namespace kc::kubelet {

// "1h2m3.5s", "250ms", "0s": Go time.ParseDuration units h, m, s, ms, us, ns; no sign.
Result<std::chrono::milliseconds> parseGoDuration(std::string_view text);
Result<std::map<std::string, std::string>> parseLabels(std::string_view text);
// JSON array of {key, value?, effect} (effects NoSchedule, PreferNoSchedule, NoExecute).
Result<nlohmann::json> parseTaints(std::string_view text);

}  // namespace kc::kubelet
