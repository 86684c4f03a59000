#pragma once
// Logging set-up for every daemon: spdlog's default logger writes to stderr either as text
// ("2026-11-22T21:00:00.123Z info [kubecomp-sched] bound pod ns/p to n1") or as JSON lines
// ({"ts":"2026-11-22T21:00:00.123Z","level":"info","logger":"kubecomp-sched","msg":"..."}),
// which log collectors parse without regexes. Code logs through spdlog as usual
// (spdlog::info("bound pod {}/{} to {}", ns, name, node)); structured key/values are added
// with kc::obs::kv(...) so they become JSON fields in JSON mode.

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "libcore/base/result.hpp"

namespace kc::obs {

enum class LogFormat { kText, kJson };

struct LogOptions {
  std::string name = "kubecomp";  // logger name, usually the daemon name
  std::string level = "info";     // trace|debug|info|warn|error|critical|off
  LogFormat format = LogFormat::kText;
};

// "text" / "json" (from a --log-format flag); error code "invalid" otherwise.
Result<LogFormat> parseLogFormat(std::string_view text);

// Replaces spdlog's default logger (thread-safe sink on stderr) with one configured from
// `options`. Fails with "invalid" on an unknown level, changing nothing.
Status setupLogging(const LogOptions& options);

// Writes into `out` instead of stderr (tests). Same formats.
Status setupLoggingTo(const LogOptions& options, std::string* out);

// Structured fields appended to a message: in text mode ` key=value` pairs (values with
// spaces quoted), in JSON mode they become top-level fields of the line:
//   spdlog::info("pod bound{}", kc::obs::kv({{"pod", "ns/p"}, {"node", "n1"}}));
// The marker it emits is recognised by the JSON formatter only; keep it the last argument.
std::string kv(std::initializer_list<std::pair<std::string_view, std::string_view>> fields);

}  // namespace kc::obs
