#include "libcore/api/usage_report.hpp"

#include <utility>

#include "libcore/base/json_guard.hpp"

namespace kc::api {

using nlohmann::json;

namespace {

Result<std::vector<std::string>> stringArray(const json& value, const std::string& what) {
  std::vector<std::string> out;
  if (!value.is_array()) {
    return makeError(kc::errc::kInvalid, "usage report: " + what + " is not an array");
  }
  for (const json& v : value) {
    if (!v.is_string()) {
      return makeError(kc::errc::kInvalid, "usage report: " + what + " holds a non-string");
    }
    out.push_back(v.get<std::string>());
  }
  return out;
}

}  // namespace

json toJson(const UsageReport& report) {
  json inUse = json::object();
  for (const auto& [id, pods] : report.inUse) {
    inUse[id] = pods;
  }
  json out{{"pool", report.pool},
           {"advertised", report.advertised},
           {"withdrawn", report.withdrawn},
           {"inUse", inUse},
           {"registered", report.registered}};
  if (report.hostChecked) {  // absent otherwise: an older reader sees the report it knows
    out["hostChecked"] = true;
    out["hostVisible"] = report.hostVisible;
    out["notVisible"] = report.notVisible;
    out["removeBlocked"] = report.removeBlocked;
  }
  return out;
}

std::string serialize(const UsageReport& report) {
  return toJson(report).dump();
}

Result<UsageReport> parseUsageReport(std::string_view text) {
  auto parsed = parseJsonGuarded(text, "usage report", kMaxUsageReportBytes);
  if (!parsed) {
    return makeError(kc::errc::kInvalid, parsed.error().message);
  }
  const json& doc = *parsed;
  if (!doc.is_object()) {
    return makeError(kc::errc::kInvalid, "usage report: not a JSON object");
  }
  UsageReport r;
  if (const auto it = doc.find("pool"); it != doc.end()) {
    if (!it->is_string()) {
      return makeError(kc::errc::kInvalid, "usage report: 'pool' is not a string");
    }
    r.pool = it->get<std::string>();
  }
  for (auto [key, field] :
       {std::pair{"advertised", &r.advertised}, std::pair{"withdrawn", &r.withdrawn},
        std::pair{"hostVisible", &r.hostVisible}}) {
    if (const auto it = doc.find(key); it != doc.end()) {
      auto list = stringArray(*it, std::string("'") + key + "'");
      if (!list) {
        return std::move(list).error();
      }
      *field = std::move(*list);
    }
  }
  if (const auto it = doc.find("inUse"); it != doc.end()) {
    if (!it->is_object()) {
      return makeError(kc::errc::kInvalid, "usage report: 'inUse' is not an object");
    }
    for (const auto& [id, pods] : it->items()) {
      auto list = stringArray(pods, "inUse['" + id + "']");
      if (!list) {
        return makeError(kc::errc::kInvalid,
                         "usage report: inUse['" + id + "'] is not a list of pods");
      }
      r.inUse[id] = std::move(*list);
    }
  }
  for (auto [key, field] :
       {std::pair{"registered", &r.registered}, std::pair{"hostChecked", &r.hostChecked}}) {
    if (const auto it = doc.find(key); it != doc.end()) {
      if (!it->is_boolean()) {
        return makeError(kc::errc::kInvalid,
                         std::string("usage report: '") + key + "' is not a boolean");
      }
      *field = it->get<bool>();
    }
  }
  for (auto [key, field] :
       {std::pair{"notVisible", &r.notVisible}, std::pair{"removeBlocked", &r.removeBlocked}}) {
    if (const auto it = doc.find(key); it != doc.end()) {
      if (!it->is_object()) {
        return makeError(kc::errc::kInvalid,
                         std::string("usage report: '") + key + "' is not an object");
      }
      for (const auto& [id, why] : it->items()) {
        if (!why.is_string()) {
          return makeError(kc::errc::kInvalid,
                           std::string("usage report: ") + key + "['" + id + "'] is not a string");
        }
        (*field)[id] = why.get<std::string>();
      }
    }
  }
  return r;
}

}  // namespace kc::api
