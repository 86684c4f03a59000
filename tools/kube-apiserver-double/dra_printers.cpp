#include "tools/kube-apiserver-double/dra_printers.hpp"

#include "libcore/base/rfc3339.hpp"
#include "tools/kube-apiserver-double/json_access.hpp"
#include "tools/kube-apiserver-double/table_convertor.hpp"

namespace kc::apiserver::dra {

using nlohmann::json;

namespace {

json column(const char* name, const char* description, const char* format = "") {
  return {{"name", name},
          {"type", "string"},
          {"format", format},
          {"description", description},
          {"priority", 0}};
}

std::string age(const json& meta, std::chrono::system_clock::time_point now) {
  const json& ts = member(meta, "creationTimestamp");
  if (!ts.is_string()) {
    return "<unknown>";
  }
  auto t = parseRfc3339(ts.get<std::string>());
  return t ? humanDuration(now - *t) : "<unknown>";
}

}  // namespace

bool hasPrinter(const std::string& resource) {
  return resource == "deviceclasses" || resource == "resourceclaims" ||
         resource == "resourceclaimtemplates" || resource == "resourceslices";
}

json columnDefinitions(const std::string& resource) {
  json cols = json::array({column("Name", "Name of the object (metadata.name).", "name")});
  if (resource == "resourceclaims") {
    cols.push_back(
        column("State", "A summary of the current state (allocated, pending, reserved, etc.)."));
  } else if (resource == "resourceslices") {
    cols.push_back(column("Node", "NodeName identifies the node which provides the resources."));
    cols.push_back(column("Driver", "Driver identifies the DRA driver providing the devices."));
    cols.push_back(column("Pool", "Name of the pool the ResourceSlice belongs to."));
  }
  cols.push_back(column("Age", "Time since the object was created (metadata.creationTimestamp)."));
  return cols;
}

json cells(const std::string& resource, const json& object,
           std::chrono::system_clock::time_point now) {
  const json& meta = member(object, "metadata");
  json row = json::array({text(meta, "name")});
  if (resource == "resourceclaims") {
    row.push_back(resourceClaimState(object));
  } else if (resource == "resourceslices") {
    const json& spec = member(object, "spec");
    // nodeName is a pointer upstream: an unset one is a null cell (kubectl prints nothing).
    row.push_back(member(spec, "nodeName"));
    row.push_back(text(spec, "driver"));
    row.push_back(text(member(spec, "pool"), "name"));
  }
  row.push_back(age(meta, now));
  return row;
}

std::string resourceClaimState(const json& claim) {
  const bool deleted = !member(member(claim, "metadata"), "deletionTimestamp").is_null();
  const json& status = member(claim, "status");
  std::string state = deleted ? "deleted" : "";
  auto add = [&](const char* s) {
    if (!state.empty()) {
      state += ',';
    }
    state += s;
  };
  if (member(status, "allocation").is_null()) {
    if (!deleted) {
      add("pending");
    }
  } else {
    add("allocated");
    const json& reserved = member(status, "reservedFor");
    if (reserved.is_array() && !reserved.empty()) {
      add("reserved");
    }
  }
  return state;
}

}  // namespace kc::apiserver::dra
