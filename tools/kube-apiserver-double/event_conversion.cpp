#include "tools/kube-apiserver-double/event_conversion.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include "tools/kube-apiserver-double/api_error.hpp"
#include "tools/kube-apiserver-double/json_access.hpp"

namespace kc::apiserver {

using nlohmann::json;

namespace {

// (events.k8s.io/v1 name, core/v1 name).
constexpr std::array<std::pair<const char*, const char*>, 7> kRenamed = {{
    {"regarding", "involvedObject"},
    {"note", "message"},
    {"reportingController", "reportingComponent"},
    {"deprecatedSource", "source"},
    {"deprecatedFirstTimestamp", "firstTimestamp"},
    {"deprecatedLastTimestamp", "lastTimestamp"},
    {"deprecatedCount", "count"},
}};

json renamed(const json& event, bool toCore, const char* apiVersion) {
  if (!event.is_object()) {
    return event;
  }
  json out = event;
  for (const auto& [v1Name, coreName] : kRenamed) {
    const char* from = toCore ? v1Name : coreName;
    const char* to = toCore ? coreName : v1Name;
    out.erase(to);  // a field of the other form has no place here
    if (auto it = event.find(from); it != event.end()) {
      out[to] = *it;
      out.erase(from);
    }
  }
  out["apiVersion"] = apiVersion;
  out["kind"] = "Event";
  return out;
}

}  // namespace

json coreEventFromEventsV1(const json& event) {
  return renamed(event, true, "v1");
}

json eventsV1FromCoreEvent(const json& event) {
  json out = renamed(event, false, "events.k8s.io/v1");
  // eventTime has no omitempty in events.k8s.io/v1: a legacy event without one reads as null.
  if (out.is_object() && !out.contains("eventTime")) {
    out["eventTime"] = nullptr;
  }
  return out;
}

void validateEventsV1Create(const json& event) {
  const std::string name = text(member(event, "metadata"), "name");
  for (const char* f :
       {"eventTime", "reportingController", "reportingInstance", "action", "reason"}) {
    if (text(event, f).empty()) {
      throw invalid("events.k8s.io", "Event", name, f, "Required value");
    }
  }
  const std::string type = text(event, "type");
  if (type != "Normal" && type != "Warning") {
    throw invalid(
        "events.k8s.io", "Event", name, "type",
        "Unsupported value: " + json(type).dump() + ": supported values: \"Normal\", \"Warning\"");
  }
}

std::string coreEventFieldSelector(const std::string& selector) {
  std::string out;
  std::size_t start = 0;
  bool first = true;
  while (start <= selector.size()) {
    const std::size_t comma = std::min(selector.find(',', start), selector.size());
    std::string term = selector.substr(start, comma - start);
    start = comma + 1;
    // The label runs from the first non-blank to the operator (=, ==, !=) or a dot.
    const std::size_t lead = std::min(term.find_first_not_of(' '), term.size());
    const std::size_t end = std::min(term.find_first_of("=!. ", lead), term.size());
    const std::string key = term.substr(lead, end - lead);
    for (const auto& [v1Name, coreName] : kRenamed) {
      if (key == v1Name) {
        term = term.substr(0, lead) + coreName + term.substr(end);
        break;
      }
    }
    out += (first ? "" : ",") + term;
    first = false;
  }
  return out;
}

}  // namespace kc::apiserver
