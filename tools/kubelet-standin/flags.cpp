#include "tools/kubelet-standin/flags.hpp"

#include <cctype>
#include <charconv>
#include <vector>

#include "tools/kubelet-standin/admission.hpp"

namespace kc::kubelet {
namespace {

std::vector<std::string_view> splitComma(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string_view item = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (!item.empty()) {
      out.push_back(item);
    }
    if (comma == std::string_view::npos) {
      break;
    }
    start = comma + 1;
  }
  return out;
}

// Label keys and values as the apiserver validates them (qualified name; value of at most 63
// characters of [A-Za-z0-9_.-], alphanumeric at both ends, or empty).
bool isLabelValue(std::string_view v) {
  if (v.empty()) {
    return true;
  }
  if (v.size() > 63 || !std::isalnum(static_cast<unsigned char>(v.front())) ||
      !std::isalnum(static_cast<unsigned char>(v.back()))) {
    return false;
  }
  for (char c : v) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return false;
    }
  }
  return true;
}

bool isLabelKey(std::string_view k) {
  return isQualifiedName(k);
}

}  // namespace

Result<std::chrono::milliseconds> parseGoDuration(std::string_view text) {
  if (text.empty()) {
    return makeError(kc::errc::kInvalid, "duration is empty");
  }
  if (text == "0") {
    return std::chrono::milliseconds(0);
  }
  double totalMs = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t numStart = i;
    while (i < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
      ++i;
    }
    if (i == numStart) {
      return makeError(kc::errc::kInvalid, "duration '" + std::string(text) +
                                               "': expected a number at '" +
                                               std::string(text.substr(numStart)) + "'");
    }
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data() + numStart, text.data() + i, value);
    if (ec != std::errc() || end != text.data() + i) {
      return makeError(kc::errc::kInvalid, "duration '" + std::string(text) + "': bad number");
    }
    const std::size_t unitStart = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) {
      ++i;
    }
    const std::string_view unit = text.substr(unitStart, i - unitStart);
    double ms = 0;
    if (unit == "h") {
      ms = 3'600'000;
    } else if (unit == "m") {
      ms = 60'000;
    } else if (unit == "s") {
      ms = 1000;
    } else if (unit == "ms") {
      ms = 1;
    } else if (unit == "us" || unit == "\xC2\xB5s") {
      ms = 0.001;
    } else if (unit == "ns") {
      ms = 0.000001;
    } else {
      return makeError(kc::errc::kInvalid, "duration '" + std::string(text) +
                                               "': missing or unknown unit '" + std::string(unit) +
                                               "' (use h, m, s, ms, us, ns)");
    }
    totalMs += value * ms;
  }
  if (totalMs > 1e12) {
    return makeError(kc::errc::kInvalid, "duration '" + std::string(text) + "' is too long");
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(totalMs + 0.5));
}

Result<std::map<std::string, std::string>> parseLabels(std::string_view text) {
  std::map<std::string, std::string> out;
  for (const auto item : splitComma(text)) {
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return makeError(kc::errc::kInvalid, "label '" + std::string(item) + "' is not key=value");
    }
    const std::string key(item.substr(0, eq));
    const std::string value(item.substr(eq + 1));
    if (!isLabelKey(key)) {
      return makeError(kc::errc::kInvalid, "label key '" + key + "' is not a qualified name");
    }
    if (!isLabelValue(value)) {
      return makeError(kc::errc::kInvalid,
                       "label value '" + value + "' of " + key + " is not a valid label value");
    }
    out[key] = value;
  }
  return out;
}

Result<nlohmann::json> parseTaints(std::string_view text) {
  auto out = nlohmann::json::array();
  for (const auto item : splitComma(text)) {
    const std::size_t colon = item.rfind(':');
    if (colon == std::string_view::npos) {
      return makeError(kc::errc::kInvalid,
                       "taint '" + std::string(item) + "' has no effect (key[=value]:Effect)");
    }
    const std::string effect(item.substr(colon + 1));
    if (effect != "NoSchedule" && effect != "PreferNoSchedule" && effect != "NoExecute") {
      return makeError(kc::errc::kInvalid,
                       "taint '" + std::string(item) + "': effect '" + effect +
                           "' is not NoSchedule, PreferNoSchedule or NoExecute");
    }
    const std::string_view kv = item.substr(0, colon);
    const std::size_t eq = kv.find('=');
    const std::string key(kv.substr(0, eq));
    const std::string value =
        eq == std::string_view::npos ? std::string() : std::string(kv.substr(eq + 1));
    if (!isLabelKey(key)) {
      return makeError(kc::errc::kInvalid, "taint key '" + key + "' is not a qualified name");
    }
    if (!isLabelValue(value)) {
      return makeError(kc::errc::kInvalid,
                       "taint value '" + value + "' is not a valid label value");
    }
    nlohmann::json t = {{"key", key}, {"effect", effect}};
    if (!value.empty()) {
      t["value"] = value;
    }
    out.push_back(t);
  }
  return out;
}

}  // namespace kc::kubelet
