#include "libcore/obs/log.hpp"

#include <spdlog/formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <ctime>
#include <mutex>
#include <nlohmann/json.hpp>

#include "libcore/base/rfc3339.hpp"

namespace kc::obs {
namespace {

// kv() encodes fields behind this marker so the formatters can find them again:
//   "\x1f" key "\x1e" value "\x1d" key "\x1e" value "\x1d" ...
constexpr char kFieldsMarker = '\x1f';
constexpr char kKeyValueSep = '\x1e';
constexpr char kFieldEnd = '\x1d';

std::string sanitize(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c == kFieldsMarker || c == kKeyValueSep || c == kFieldEnd) {
      c = '?';
    }
  }
  return out;
}

struct SplitMessage {
  std::string_view text;
  std::vector<std::pair<std::string_view, std::string_view>> fields;
};

SplitMessage split(std::string_view payload) {
  SplitMessage out;
  const auto marker = payload.find(kFieldsMarker);
  out.text = payload.substr(0, marker);
  if (marker == std::string_view::npos) {
    return out;
  }
  std::string_view rest = payload.substr(marker + 1);
  while (!rest.empty()) {
    const auto end = rest.find(kFieldEnd);
    std::string_view field = rest.substr(0, end);
    const auto sep = field.find(kKeyValueSep);
    if (sep != std::string_view::npos) {
      out.fields.emplace_back(field.substr(0, sep), field.substr(sep + 1));
    }
    if (end == std::string_view::npos) {
      break;
    }
    rest = rest.substr(end + 1);
    if (!rest.empty() && rest.front() == kFieldsMarker) {
      rest.remove_prefix(1);  // a second kv() in the same message
    }
  }
  return out;
}

std::string_view levelName(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
      return "trace";
    case spdlog::level::debug:
      return "debug";
    case spdlog::level::info:
      return "info";
    case spdlog::level::warn:
      return "warn";
    case spdlog::level::err:
      return "error";
    case spdlog::level::critical:
      return "critical";
    default:
      return "off";
  }
}

bool needsQuotes(std::string_view v) {
  return v.empty() || v.find_first_of(" \t\"=\n") != std::string_view::npos;
}

class LineFormatter final : public spdlog::formatter {
 public:
  explicit LineFormatter(LogFormat format) : format_(format) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const std::string_view payload(msg.payload.data(), msg.payload.size());
    const SplitMessage parts = split(payload);
    std::string line;
    if (format_ == LogFormat::kJson) {
      nlohmann::ordered_json j;
      j["ts"] = formatRfc3339(msg.time, Rfc3339Precision::kMillis);
      j["level"] = levelName(msg.level);
      j["logger"] = std::string(msg.logger_name.data(), msg.logger_name.size());
      j["msg"] = std::string(parts.text);
      for (const auto& [k, v] : parts.fields) {
        const std::string key(k);
        if (key == "ts" || key == "level" || key == "logger" || key == "msg") {
          std::string renamed("field.");  // never overwrite the envelope
          renamed += key;
          j[renamed] = std::string(v);
        } else {
          j[key] = std::string(v);
        }
      }
      line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    } else {
      line = formatRfc3339(msg.time, Rfc3339Precision::kMillis) + " " +
             std::string(levelName(msg.level)) + " [" +
             std::string(msg.logger_name.data(), msg.logger_name.size()) + "] " +
             std::string(parts.text);
      for (const auto& [k, v] : parts.fields) {
        line.push_back(' ');
        line.append(k);
        line.push_back('=');
        line += needsQuotes(v) ? nlohmann::json(std::string(v)).dump() : std::string(v);
      }
    }
    line.push_back('\n');
    dest.append(line.data(), line.data() + line.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<LineFormatter>(format_);
  }

 private:
  LogFormat format_;
};

// Sink appending to a caller-owned string (tests).
class StringSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit StringSink(std::string* out) : out_(out) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t buf;
    formatter_->format(msg, buf);
    out_->append(buf.data(), buf.size());
  }
  void flush_() override {}

 private:
  std::string* out_;
};

Result<spdlog::level::level_enum> parseLevel(std::string_view text) {
  static const std::pair<std::string_view, spdlog::level::level_enum> kLevels[] = {
      {"trace", spdlog::level::trace},       {"debug", spdlog::level::debug},
      {"info", spdlog::level::info},         {"warn", spdlog::level::warn},
      {"warning", spdlog::level::warn},      {"error", spdlog::level::err},
      {"critical", spdlog::level::critical}, {"off", spdlog::level::off}};
  for (const auto& [name, level] : kLevels) {
    if (name == text) {
      return level;
    }
  }
  return makeError(kc::errc::kInvalid,
                   "unknown log level '" + std::string(text) +
                       "' (want trace, debug, info, warn, error, critical or off)");
}

Status install(const LogOptions& options, spdlog::sink_ptr sink) {
  auto level = parseLevel(options.level);
  if (!level) {
    return std::move(level).error();
  }
  sink->set_formatter(std::make_unique<LineFormatter>(options.format));
  auto logger = std::make_shared<spdlog::logger>(options.name, std::move(sink));
  logger->set_level(*level);
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(std::move(logger));
  return okStatus();
}

}  // namespace

Result<LogFormat> parseLogFormat(std::string_view text) {
  if (text == "text") {
    return LogFormat::kText;
  }
  if (text == "json") {
    return LogFormat::kJson;
  }
  return makeError(kc::errc::kInvalid,
                   "unknown log format '" + std::string(text) + "' (want text or json)");
}

Status setupLogging(const LogOptions& options) {
  return install(options, std::make_shared<spdlog::sinks::stderr_sink_mt>());
}

Status setupLoggingTo(const LogOptions& options, std::string* out) {
  return install(options, std::make_shared<StringSink>(out));
}

std::string kv(std::initializer_list<std::pair<std::string_view, std::string_view>> fields) {
  std::string out(1, kFieldsMarker);
  for (const auto& [k, v] : fields) {
    out += sanitize(k);
    out.push_back(kKeyValueSep);
    out += sanitize(v);
    out.push_back(kFieldEnd);
  }
  return out;
}

}  // namespace kc::obs
