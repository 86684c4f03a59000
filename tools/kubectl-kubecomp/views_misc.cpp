// vnis, bridgejobs and claims: one row per object of ours.

#include "libcore/api/dra_claim.hpp"
#include "libcore/api/names.hpp"
#include "libcore/api/vni.hpp"
#include "tools/kubectl-kubecomp/view_util.hpp"
#include "tools/kubectl-kubecomp/views.hpp"

namespace kc::kubectl {

using detail::str;
using nlohmann::json;

namespace {

void namespaceColumn(View& v, bool allNamespaces) {
  if (allNamespaces) {
    v.table.columns.insert(v.table.columns.begin(), Column{"NAMESPACE"});
  }
}

void addRow(View& v, bool allNamespaces, const std::string& ns, std::vector<std::string> cells) {
  if (allNamespaces) {
    cells.insert(cells.begin(), ns);
  }
  v.table.rows.push_back(std::move(cells));
}

std::string ownerOf(const json& obj) {
  const json& refs = detail::at(obj, {"metadata", "ownerReferences"});
  if (refs.is_array() && !refs.empty()) {
    return str(refs[0], {"kind"}) + "/" + str(refs[0], {"name"});
  }
  return {};
}

}  // namespace

View vnisView(const Objects& vnis, TimePoint now, bool allNamespaces) {
  View v;
  v.kind = "VNIList";
  v.emptyMessage = "No VNIs found.";
  v.table.columns = {{"NAME"}, {"VNI"}, {"OWNER"}, {"AGE"}, {"OWNER-UID", true}};
  namespaceColumn(v, allNamespaces);
  for (const json& obj : vnis) {
    const api::VniObject o = api::parseVniObject(obj);
    const std::string owner = ownerOf(obj);
    const std::string created = str(obj, {"metadata", "creationTimestamp"});
    addRow(v, allNamespaces, o.ns,
           {o.name, o.vni ? std::to_string(*o.vni) : "", owner, detail::age(created, now),
            o.ownerUid});
    v.items.push_back({{"namespace", o.ns},
                       {"name", o.name},
                       {"vni", o.vni ? json(*o.vni) : json(nullptr)},
                       {"owner", owner},
                       {"ownerUid", o.ownerUid},
                       {"creationTimestamp", created}});
  }
  return v;
}

View bridgeJobsView(const Objects& jobs, TimePoint now, bool allNamespaces) {
  View v;
  v.kind = "BridgeJobList";
  v.emptyMessage = "No BridgeJobs found.";
  v.table.columns = {{"NAME"},           {"STATUS"},       {"REMOTE-ID"},   {"STARTED"},
                     {"COMPLETED"},      {"AGE"},          {"IMAGE", true}, {"RESOURCE", true},
                     {"ATTEMPTS", true}, {"MESSAGE", true}};
  namespaceColumn(v, allNamespaces);
  for (const json& job : jobs) {
    const std::string ns = str(job, {"metadata", "namespace"});
    const std::string name = str(job, {"metadata", "name"});
    const json& status = detail::at(job, {"status"});
    const std::int64_t attempts =
        status.contains("attempts") && status["attempts"].is_number_integer()
            ? status["attempts"].get<std::int64_t>()
            : 0;
    const std::string started = str(status, {"startTime"});
    const std::string completed = str(status, {"completionTime"});
    const std::string created = str(job, {"metadata", "creationTimestamp"});
    addRow(
        v, allNamespaces, ns,
        {name, str(status, {"jobStatus"}), str(status, {"remoteJobId"}), detail::age(started, now),
         detail::age(completed, now), detail::age(created, now), str(job, {"spec", "image"}),
         str(job, {"spec", "resourceURL"}), std::to_string(attempts), str(status, {"message"})});
    v.items.push_back({{"namespace", ns},
                       {"name", name},
                       {"jobStatus", str(status, {"jobStatus"})},
                       {"remoteJobId", str(status, {"remoteJobId"})},
                       {"submitTime", str(status, {"submitTime"})},
                       {"startTime", started},
                       {"completionTime", completed},
                       {"attempts", attempts},
                       {"message", str(status, {"message"})},
                       {"image", str(job, {"spec", "image"})},
                       {"resourceURL", str(job, {"spec", "resourceURL"})},
                       {"creationTimestamp", created}});
  }
  return v;
}

namespace {

bool ours(const api::Claim& c) {
  if (c.allocation) {
    for (const auto& d : c.allocation->results) {
      if (d.driver == api::kDraDriverName) {
        return true;
      }
    }
    return false;
  }
  for (const auto& r : c.requests) {
    if (r.deviceClassName == api::kDraDeviceClassName) {
      return true;
    }
  }
  return false;
}

std::string claimState(const api::Claim& c) {
  std::string s = c.allocation ? "allocated" : "pending";
  if (!c.reservedFor.empty()) {
    s += ",reserved";
  }
  if (c.deleting) {
    s += ",deleting";
  }
  return s;
}

}  // namespace

View claimsView(const Objects& claims, TimePoint now, bool allNamespaces) {
  View v;
  v.kind = "ClaimList";
  v.emptyMessage = "No ResourceClaims of driver " + std::string(api::kDraDriverName) + " found.";
  v.table.columns = {{"NAME"}, {"STATE"},           {"NODE"}, {"DEVICES"}, {"RESERVED-FOR"},
                     {"AGE"},  {"CONDITIONS", true}};
  namespaceColumn(v, allNamespaces);
  for (const json& obj : claims) {
    auto parsed = api::parseClaim(obj);
    if (!parsed || !ours(*parsed)) {
      continue;
    }
    const api::Claim& c = *parsed;
    std::vector<std::string> devices;
    json devicesJson = json::array();
    std::vector<std::string> conditions;
    if (c.allocation) {
      for (const auto& d : c.allocation->results) {
        if (d.driver != api::kDraDriverName) {
          continue;
        }
        devices.push_back(d.pool + "/" + d.device);
        json dj = {{"request", d.request},
                   {"pool", d.pool},
                   {"device", d.device},
                   {"conditions", json::array()}};
        if (const auto* st = c.deviceStatus(d)) {
          for (const auto& cond : st->conditions) {
            conditions.push_back(d.device + ":" + cond.type + "=" + cond.status);
            dj["conditions"].push_back({{"type", cond.type},
                                        {"status", cond.status},
                                        {"reason", cond.reason},
                                        {"message", cond.message}});
          }
        }
        devicesJson.push_back(std::move(dj));
      }
    }
    std::vector<std::string> consumers;
    for (const auto& r : c.reservedFor) {
      consumers.push_back(r.resource + "/" + r.name);
    }
    const std::string node = c.allocation ? c.allocation->nodeName : "";
    const std::string created = str(obj, {"metadata", "creationTimestamp"});
    addRow(v, allNamespaces, c.ns,
           {c.name, claimState(c), node, detail::joined(devices), detail::joined(consumers),
            detail::age(created, now), detail::joined(conditions)});
    v.items.push_back({{"namespace", c.ns},
                       {"name", c.name},
                       {"state", claimState(c)},
                       {"allocated", c.allocation.has_value()},
                       {"node", node},
                       {"devices", devicesJson},
                       {"reservedFor", consumers},
                       {"creationTimestamp", created}});
  }
  return v;
}

}  // namespace kc::kubectl
