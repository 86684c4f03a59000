#include "tools/kube-apiserver-double/table_convertor.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>
#include <set>

#include "libcore/base/rfc3339.hpp"
#include "tools/kube-apiserver-double/dra_printers.hpp"
#include "tools/kube-apiserver-double/event_conversion.hpp"
#include "tools/kube-apiserver-double/json_access.hpp"

namespace kc::apiserver {

using nlohmann::json;

namespace {

const json& field(const json& obj, const char* key) {
  return member(obj, key);
}

std::string orNone(const std::string& s, const char* fallback = "<none>") {
  return s.empty() ? fallback : s;
}

json column(const char* name, const char* type, const char* description, std::int32_t priority = 0,
            const char* format = "") {
  return {{"name", name},
          {"type", type},
          {"format", format},
          {"description", description},
          {"priority", priority}};
}

// translateTimestampSince of the real printers: "<unknown>" for an absent or bad time.
std::string age(const json& timestamp, std::chrono::system_clock::time_point now) {
  if (!timestamp.is_string()) {
    return "<unknown>";
  }
  auto t = parseRfc3339(timestamp.get<std::string>());
  return t ? humanDuration(now - *t) : "<unknown>";
}

const json& walk(const json& obj, const std::vector<std::string>& steps) {
  static const json kNull;
  const json* cur = &obj;
  for (const auto& s : steps) {
    if (!s.empty() && s[0] == '#' && cur->is_array()) {
      std::size_t i = std::stoul(s.substr(1));
      if (i >= cur->size()) {
        return kNull;
      }
      cur = &(*cur)[i];
    } else if (cur->is_object()) {
      auto it = cur->find(s);
      if (it == cur->end()) {
        return kNull;
      }
      cur = &*it;
    } else {
      return kNull;
    }
  }
  return *cur;
}

// A float as Go's %v prints it: the shortest round-trip digits, in exponent form when the
// decimal exponent is below -4 or at least 6 ("0.25", "100000", "1.234567e+06").
std::string goFloat(double d) {
  char buf[64];
  auto sci = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string scientific(buf, sci.ptr);
  const int exponent = std::stoi(scientific.substr(scientific.find('e') + 1));
  if (exponent < -4 || exponent >= 6) {
    return scientific;
  }
  auto fixed = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::fixed);
  return std::string(buf, fixed.ptr);
}

// A value as the server's JSONPath printer writes it for a string column: Go's %v of the
// decoded JSON (lists "[a b]", objects "map[k:v]" with sorted keys, null "<nil>").
std::string goText(const json& v) {
  switch (v.type()) {
    case json::value_t::string:
      return v.get<std::string>();
    case json::value_t::boolean:
      return v.get<bool>() ? "true" : "false";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return v.dump();
    case json::value_t::number_float:
      return goFloat(v.get<double>());
    case json::value_t::array: {
      std::string out = "[";
      for (std::size_t i = 0; i < v.size(); ++i) {
        out += (i ? " " : "") + goText(v[i]);
      }
      return out + "]";
    }
    case json::value_t::object: {
      std::string out = "map[";
      bool first = true;
      for (auto it = v.begin(); it != v.end();
           ++it) {  // nlohmann keeps keys sorted, as Go prints maps
        out += (first ? "" : " ") + it.key() + ":" + goText(*it);
        first = false;
      }
      return out + "]";
    }
    default:
      return "<nil>";
  }
}

// A CRD column's cell, converted by the column's type as the apiextensions convertor does:
// string columns print the value as text (goText); integer/number/boolean keep only values
// of that JSON type; date becomes an age; anything else is null.
json customCell(const PrinterColumn& c, const json& v, std::chrono::system_clock::time_point now) {
  if (v.is_null()) {
    return nullptr;
  }
  if (c.type == "string") {
    return goText(v);
  }
  if (c.type == "integer" && v.is_number()) {
    return v.is_number_float() ? json(static_cast<std::int64_t>(v.get<double>()))
                               : json(v.get<std::int64_t>());
  }
  if (c.type == "number" && v.is_number()) {
    return v.get<double>();
  }
  if (c.type == "boolean" && v.is_boolean()) {
    return v;
  }
  if (c.type == "date" && v.is_string()) {
    auto t = parseRfc3339(v.get<std::string>());
    return t ? json(humanDuration(now - *t)) : json("<invalid>");
  }
  return nullptr;
}

struct PodCounts {
  int ready = 0;
  int restarts = 0;
  std::optional<std::chrono::system_clock::time_point>
      lastRestart;  // latest lastState.terminated.finishedAt

  void addRestarts(const json& containerStatus) {
    const json& n = field(containerStatus, "restartCount");
    restarts += n.is_number_integer() ? n.get<int>() : 0;
    const json& finished =
        field(field(field(containerStatus, "lastState"), "terminated"), "finishedAt");
    if (finished.is_string()) {
      if (auto t = parseRfc3339(finished.get<std::string>());
          t && (!lastRestart || *t > *lastRestart)) {
        lastRestart = *t;
      }
    }
  }
};

bool podReady(const json& status) {
  const json& conditions = field(status, "conditions");
  if (conditions.is_array()) {
    for (const auto& c : conditions) {
      if (text(c, "type") == "Ready" && text(c, "status") == "True") {
        return true;
      }
    }
  }
  return false;
}

// The pod STATUS column: the phase, refined by the pod's reason and its (init) containers'
// states, "Terminating" once deletion started (the printers' rules, re-stated).
std::string podStatus(const json& pod, PodCounts& counts) {
  const json& spec = field(pod, "spec");
  const json& status = field(pod, "status");
  std::string reason = text(status, "phase");
  if (!text(status, "reason").empty()) {
    reason = text(status, "reason");
  }
  const json& initStatuses = field(status, "initContainerStatuses");
  const std::size_t initCount =
      field(spec, "initContainers").is_array() ? field(spec, "initContainers").size() : 0;
  bool initializing = false;
  if (initStatuses.is_array()) {
    for (std::size_t i = 0; i < initStatuses.size(); ++i) {
      const json& cs = initStatuses[i];
      counts.addRestarts(cs);
      const json& state = field(cs, "state");
      const json& term = field(state, "terminated");
      const json& wait = field(state, "waiting");
      if (term.is_object() && field(term, "exitCode") == 0) {
        continue;
      }
      if (term.is_object()) {
        if (!text(term, "reason").empty()) {
          reason = "Init:" + text(term, "reason");
        } else if (field(term, "signal").is_number() && field(term, "signal").get<int>() != 0) {
          reason = "Init:Signal:" + std::to_string(field(term, "signal").get<int>());
        } else {
          reason = "Init:ExitCode:" + std::to_string(field(term, "exitCode").is_number()
                                                         ? field(term, "exitCode").get<int>()
                                                         : 0);
        }
      } else if (wait.is_object() && !text(wait, "reason").empty() &&
                 text(wait, "reason") != "PodInitializing") {
        reason = "Init:" + text(wait, "reason");
      } else {
        reason = "Init:" + std::to_string(i) + "/" + std::to_string(initCount);
      }
      initializing = true;
      break;
    }
  }
  if (!initializing) {
    const json& statuses = field(status, "containerStatuses");
    bool hasRunning = false;
    if (statuses.is_array()) {
      for (auto it = statuses.rbegin(); it != statuses.rend(); ++it) {
        const json& cs = *it;
        counts.addRestarts(cs);
        const json& state = field(cs, "state");
        const json& term = field(state, "terminated");
        const json& wait = field(state, "waiting");
        if (wait.is_object() && !text(wait, "reason").empty()) {
          reason = text(wait, "reason");
        } else if (term.is_object() && !text(term, "reason").empty()) {
          reason = text(term, "reason");
        } else if (term.is_object()) {
          int sig = field(term, "signal").is_number() ? field(term, "signal").get<int>() : 0;
          reason = sig != 0 ? "Signal:" + std::to_string(sig)
                            : "ExitCode:" + std::to_string(field(term, "exitCode").is_number()
                                                               ? field(term, "exitCode").get<int>()
                                                               : 0);
        } else if (field(cs, "ready") == true && field(state, "running").is_object()) {
          hasRunning = true;
          ++counts.ready;
        }
      }
    }
    // A container still running after another completed: Running, or NotReady while the
    // pod's Ready condition is not True.
    if (reason == "Completed" && hasRunning) {
      reason = podReady(status) ? "Running" : "NotReady";
    }
  }
  const json& meta = field(pod, "metadata");
  if (field(meta, "deletionTimestamp").is_string()) {
    reason = text(status, "reason") == "NodeLost" ? "Unknown" : "Terminating";
  }
  return reason;
}

json podCells(const json& pod, std::chrono::system_clock::time_point now) {
  const json& meta = field(pod, "metadata");
  const json& spec = field(pod, "spec");
  const json& status = field(pod, "status");
  PodCounts counts;
  std::string reason = podStatus(pod, counts);
  // "3 (5m ago)": restarts, and the time since the latest container termination.
  std::string restarts = std::to_string(counts.restarts);
  if (counts.restarts != 0 && counts.lastRestart) {
    restarts += " (" + humanDuration(now - *counts.lastRestart) + " ago)";
  }
  const std::size_t total =
      field(spec, "containers").is_array() ? field(spec, "containers").size() : 0;
  std::string gates = "<none>";
  if (field(spec, "readinessGates").is_array() && !field(spec, "readinessGates").empty()) {
    int trueGates = 0;
    for (const auto& g : field(spec, "readinessGates")) {
      for (const auto& c :
           field(status, "conditions").is_array() ? field(status, "conditions") : json::array()) {
        if (text(c, "type") == text(g, "conditionType") && text(c, "status") == "True") {
          ++trueGates;
        }
      }
    }
    gates = std::to_string(trueGates) + "/" + std::to_string(field(spec, "readinessGates").size());
  }
  return {text(meta, "name"),
          std::to_string(counts.ready) + "/" + std::to_string(total),
          reason,
          restarts,
          age(field(meta, "creationTimestamp"), now),
          orNone(text(status, "podIP")),
          orNone(text(spec, "nodeName")),
          orNone(text(status, "nominatedNodeName")),
          gates};
}

json nodeCells(const json& node, std::chrono::system_clock::time_point now) {
  const json& meta = field(node, "metadata");
  const json& spec = field(node, "spec");
  const json& status = field(node, "status");
  std::string state;
  if (field(status, "conditions").is_array()) {
    for (const auto& c : field(status, "conditions")) {
      if (text(c, "type") == "Ready") {
        state = text(c, "status") == "True" ? "Ready" : "NotReady";
      }
    }
  }
  if (state.empty()) {
    state = "Unknown";
  }
  if (field(spec, "unschedulable") == true) {
    state += ",SchedulingDisabled";
  }
  std::set<std::string> roles;
  if (field(meta, "labels").is_object()) {
    const std::string prefix = "node-role.kubernetes.io/";
    for (auto it = field(meta, "labels").begin(); it != field(meta, "labels").end(); ++it) {
      if (it.key().rfind(prefix, 0) == 0 && it.key().size() > prefix.size()) {
        roles.insert(it.key().substr(prefix.size()));
      } else if (it.key() == "kubernetes.io/role" && it->is_string() &&
                 !it->get<std::string>().empty()) {
        roles.insert(it->get<std::string>());
      }
    }
  }
  std::string roleText;
  for (const auto& r : roles) {
    roleText += (roleText.empty() ? "" : ",") + r;
  }
  std::string internalIp;
  std::string externalIp;
  if (field(status, "addresses").is_array()) {
    for (const auto& a : field(status, "addresses")) {
      if (text(a, "type") == "InternalIP" && internalIp.empty()) {
        internalIp = text(a, "address");
      }
      if (text(a, "type") == "ExternalIP" && externalIp.empty()) {
        externalIp = text(a, "address");
      }
    }
  }
  const json& info = field(status, "nodeInfo");
  return {text(meta, "name"),
          state,
          orNone(roleText),
          age(field(meta, "creationTimestamp"), now),
          text(info, "kubeletVersion"),
          orNone(internalIp),
          orNone(externalIp),
          orNone(text(info, "osImage"), "<unknown>"),
          orNone(text(info, "kernelVersion"), "<unknown>"),
          orNone(text(info, "containerRuntimeVersion"), "<unknown>")};
}

// An event's row (core/v1 field names; events.k8s.io/v1 objects are converted first): ages
// of the last and first sighting (series, then lastTimestamp, then eventTime), the object
// as "<kind>/<name>", the source as "component, host" falling back to the reporting
// controller and instance, the count (1 for a singleton of the new API).
json eventCells(const json& stored, std::chrono::system_clock::time_point now) {
  const json ev =
      text(stored, "apiVersion") == "events.k8s.io/v1" ? coreEventFromEventsV1(stored) : stored;
  const json& series = field(ev, "series");
  std::string first = field(ev, "firstTimestamp").is_string()
                          ? age(field(ev, "firstTimestamp"), now)
                          : age(field(ev, "eventTime"), now);
  std::string last =
      field(ev, "lastTimestamp").is_string() ? age(field(ev, "lastTimestamp"), now) : first;
  std::int64_t count =
      field(ev, "count").is_number_integer() ? field(ev, "count").get<std::int64_t>() : 0;
  if (series.is_object()) {
    last = age(field(series, "lastObservedTime"), now);
    count =
        field(series, "count").is_number_integer() ? field(series, "count").get<std::int64_t>() : 0;
  } else if (count == 0) {
    count = 1;
  }
  const json& involved = field(ev, "involvedObject");
  std::string kind = text(involved, "kind");
  std::transform(kind.begin(), kind.end(), kind.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  const std::string target =
      text(involved, "name").empty() ? kind : kind + "/" + text(involved, "name");
  const json& source = field(ev, "source");
  const std::string component = text(source, "component").empty() ? text(ev, "reportingComponent")
                                                                  : text(source, "component");
  const std::string host =
      text(source, "host").empty() ? text(ev, "reportingInstance") : text(source, "host");
  std::string message = text(ev, "message");
  message.erase(0, message.find_first_not_of(" \t\n"));
  message.erase(message.find_last_not_of(" \t\n") + 1);
  return {last,
          text(ev, "type"),
          text(ev, "reason"),
          target,
          text(involved, "fieldPath"),
          host.empty() ? component : component + ", " + host,
          message,
          first,
          count,
          text(field(ev, "metadata"), "name")};
}

const char* kNameDoc = "Name of the object (metadata.name).";
const char* kAgeDoc = "Time since the object was created (metadata.creationTimestamp).";

}  // namespace

std::string humanDuration(std::chrono::system_clock::duration d) {
  using namespace std::chrono;
  const std::int64_t seconds = duration_cast<std::chrono::seconds>(d).count();
  if (seconds < -1) {
    return "<invalid>";
  }
  if (seconds < 0) {
    return "0s";
  }
  if (seconds < 120) {
    return std::to_string(seconds) + "s";
  }
  const std::int64_t minutes = seconds / 60;
  if (minutes < 10) {
    const std::int64_t s = seconds % 60;
    return std::to_string(minutes) + "m" + (s == 0 ? "" : std::to_string(s) + "s");
  }
  if (minutes < 180) {
    return std::to_string(minutes) + "m";
  }
  const std::int64_t hours = minutes / 60;
  if (hours < 8) {
    const std::int64_t m = minutes % 60;
    return std::to_string(hours) + "h" + (m == 0 ? "" : std::to_string(m) + "m");
  }
  if (hours < 48) {
    return std::to_string(hours) + "h";
  }
  if (hours < 24 * 8) {
    const std::int64_t h = hours % 24;
    return std::to_string(hours / 24) + "d" + (h == 0 ? "" : std::to_string(h) + "h");
  }
  if (hours < 24 * 365 * 2) {
    return std::to_string(hours / 24) + "d";
  }
  if (hours < 24 * 365 * 8) {
    const std::int64_t days = (hours / 24) % 365;
    return std::to_string(hours / 24 / 365) + "y" + (days == 0 ? "" : std::to_string(days) + "d");
  }
  return std::to_string(hours / 24 / 365) + "y";
}

TableConvertor::TableConvertor(std::string group, std::string resource,
                               const std::vector<PrinterColumn>* customColumns) {
  if (customColumns) {
    printer_ = Printer::kCustom;
    custom_ = *customColumns;
    if (custom_.empty()) {
      custom_.push_back({"Age", "date", "", kAgeDoc, 0, ".metadata.creationTimestamp"});
    }
    for (const auto& c : custom_) {
      auto steps = parseSimpleJsonPath(c.jsonPath);
      customPaths_.push_back(steps ? *steps : std::vector<std::string>{"#invalid"});
    }
  } else if (group.empty() && resource == "pods") {
    printer_ = Printer::kPod;
  } else if (group.empty() && resource == "nodes") {
    printer_ = Printer::kNode;
  } else if (group.empty() && resource == "namespaces") {
    printer_ = Printer::kNamespace;
  } else if ((group.empty() || group == "events.k8s.io") && resource == "events") {
    printer_ = Printer::kEvent;
  } else if (group == "policy" && resource == "poddisruptionbudgets") {
    printer_ = Printer::kPdb;
  } else if (group == "resource.k8s.io" && dra::hasPrinter(resource)) {
    printer_ = Printer::kDra;
    resource_ = std::move(resource);
  } else {
    printer_ = Printer::kDefault;
  }
}

nlohmann::json TableConvertor::columnDefinitions() const {
  if (printer_ == Printer::kDra) {
    return dra::columnDefinitions(resource_);
  }
  if (printer_ == Printer::kEvent) {
    // The one printer whose NAME column is last (and wide only).
    return json::array(
        {column("Last Seen", "string", "Time since the most recent occurrence."),
         column("Type", "string", "Normal or Warning."),
         column("Reason", "string", "Why the event was recorded."),
         column("Object", "string", "The object the event is about (<kind>/<name>)."),
         column("Subobject", "string", "involvedObject.fieldPath", 1),
         column("Source", "string", "The component (and host) that reported the event.", 1),
         column("Message", "string", "The event's message."),
         column("First Seen", "string", "Time since the first occurrence.", 1),
         column("Count", "string", "How often the event occurred.", 1),
         column("Name", "string", kNameDoc, 1, "name")});
  }
  json cols = json::array({column("Name", "string", kNameDoc, 0, "name")});
  switch (printer_) {
    case Printer::kPod:
      cols.push_back(
          column("Ready", "string", "Ready containers of the pod / all its containers."));
      cols.push_back(
          column("Status", "string", "The pod's phase refined by its containers' states."));
      cols.push_back(column("Restarts", "string", "Container restarts of the pod."));
      cols.push_back(column("Age", "string", kAgeDoc));
      cols.push_back(column("IP", "string", "status.podIP", 1));
      cols.push_back(column("Node", "string", "spec.nodeName", 1));
      cols.push_back(column("Nominated Node", "string", "status.nominatedNodeName", 1));
      cols.push_back(column("Readiness Gates", "string", "True readiness gates / all of them.", 1));
      break;
    case Printer::kNode:
      cols.push_back(column("Status", "string",
                            "The node's Ready condition, and SchedulingDisabled when cordoned."));
      cols.push_back(
          column("Roles", "string", "The node's node-role.kubernetes.io/<role> labels."));
      cols.push_back(column("Age", "string", kAgeDoc));
      cols.push_back(column("Version", "string", "status.nodeInfo.kubeletVersion"));
      cols.push_back(column("Internal-IP", "string", "The node's InternalIP address.", 1));
      cols.push_back(column("External-IP", "string", "The node's ExternalIP address.", 1));
      cols.push_back(column("OS-Image", "string", "status.nodeInfo.osImage", 1));
      cols.push_back(column("Kernel-Version", "string", "status.nodeInfo.kernelVersion", 1));
      cols.push_back(
          column("Container-Runtime", "string", "status.nodeInfo.containerRuntimeVersion", 1));
      break;
    case Printer::kNamespace:
      cols.push_back(column("Status", "string", "status.phase"));
      cols.push_back(column("Age", "string", kAgeDoc));
      break;
    case Printer::kEvent:
    case Printer::kDra:
      break;
    case Printer::kPdb:
      cols.push_back(column("Min Available", "string", "spec.minAvailable"));
      cols.push_back(column("Max Unavailable", "string", "spec.maxUnavailable"));
      cols.push_back(column("Allowed Disruptions", "integer", "status.disruptionsAllowed"));
      cols.push_back(column("Age", "string", kAgeDoc));
      break;
    case Printer::kCustom:
      for (const auto& c : custom_) {
        std::string desc =
            c.description.empty()
                ? "Custom resource definition column (in JSONPath format): " + c.jsonPath
                : c.description;
        cols.push_back({{"name", c.name},
                        {"type", c.type},
                        {"format", c.format},
                        {"description", desc},
                        {"priority", c.priority}});
      }
      break;
    case Printer::kDefault:
      cols.push_back(column("Created At", "date", kAgeDoc));
      break;
  }
  return cols;
}

nlohmann::json TableConvertor::cells(const nlohmann::json& object,
                                     std::chrono::system_clock::time_point now) const {
  const json& meta = field(object, "metadata");
  switch (printer_) {
    case Printer::kPod:
      return podCells(object, now);
    case Printer::kNode:
      return nodeCells(object, now);
    case Printer::kNamespace:
      return {text(meta, "name"), text(field(object, "status"), "phase"),
              age(field(meta, "creationTimestamp"), now)};
    case Printer::kEvent:
      return eventCells(object, now);
    case Printer::kDra:
      return dra::cells(resource_, object, now);
    case Printer::kPdb: {
      auto intOrPercent = [&](const char* key) {
        const json& v = field(field(object, "spec"), key);
        return v.is_string()           ? v.get<std::string>()
               : v.is_number_integer() ? v.dump()
                                       : std::string("N/A");
      };
      const json& allowed = field(field(object, "status"), "disruptionsAllowed");
      return {text(meta, "name"), intOrPercent("minAvailable"), intOrPercent("maxUnavailable"),
              allowed.is_number_integer() ? allowed.get<std::int64_t>() : 0,
              age(field(meta, "creationTimestamp"), now)};
    }
    case Printer::kCustom: {
      json cells = json::array({text(meta, "name")});
      for (std::size_t i = 0; i < custom_.size(); ++i) {
        cells.push_back(customCell(custom_[i], walk(object, customPaths_[i]), now));
      }
      return cells;
    }
    case Printer::kDefault:
      return {text(meta, "name"), field(meta, "creationTimestamp")};
  }
  return json::array();
}

nlohmann::json TableConvertor::row(const nlohmann::json& object,
                                   std::chrono::system_clock::time_point now,
                                   const TableRequest& request) const {
  json r = {{"cells", cells(object, now)}};
  if (printer_ == Printer::kPod) {
    std::string phase = text(field(object, "status"), "phase");
    if (phase == "Succeeded" || phase == "Failed") {
      r["conditions"] =
          json::array({{{"type", "Completed"}, {"status", "True"}, {"reason", phase}}});
    }
  }
  switch (request.include) {
    case IncludeObject::kNone:
      break;
    case IncludeObject::kMetadata:
      r["object"] = {{"kind", "PartialObjectMetadata"},
                     {"apiVersion", request.apiVersion},
                     {"metadata", field(object, "metadata")}};
      break;
    case IncludeObject::kObject:
      r["object"] = object;
      break;
  }
  return r;
}

}  // namespace kc::apiserver
