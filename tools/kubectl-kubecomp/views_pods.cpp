// pending (unbound pods and why they wait) and rt NODE (a node's RT cores and reservations).

#include <cstdio>
#include <map>
#include <set>

#include "libcore/alloc/rt_pod.hpp"
#include "libcore/api/names.hpp"
#include "tools/kubectl-kubecomp/view_util.hpp"
#include "tools/kubectl-kubecomp/views.hpp"

namespace kc::kubectl {

using detail::str;
using nlohmann::json;

namespace {

std::int64_t quantityInt(const json& v) {
  if (v.is_number_integer()) {
    return v.get<std::int64_t>();
  }
  if (v.is_string()) {
    try {
      std::size_t used = 0;
      const auto n = std::stoll(v.get<std::string>(), &used);
      return used == v.get<std::string>().size() ? n : 0;
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

// A container's kubecomp.io/gpu: limits, else requests (extended resources need both equal).
std::int64_t containerGpus(const json& c) {
  const std::string key(api::kGpuResource);
  for (const char* where : {"limits", "requests"}) {
    const json& r = detail::at(c, {"resources", where});
    if (r.is_object() && r.contains(key)) {
      return quantityInt(r[key]);
    }
  }
  return 0;
}

// The pod's GPU request as the scheduler counts it: the sum over containers, or the largest
// init container when that is more.
std::int64_t podGpus(const json& pod) {
  std::int64_t sum = 0;
  std::int64_t init = 0;
  const json& spec = detail::at(pod, {"spec"});
  if (const json& cs = detail::at(spec, {"containers"}); cs.is_array()) {
    for (const json& c : cs) {
      sum += containerGpus(c);
    }
  }
  if (const json& cs = detail::at(spec, {"initContainers"}); cs.is_array()) {
    for (const json& c : cs) {
      init = std::max(init, containerGpus(c));
    }
  }
  return std::max(sum, init);
}

std::vector<std::string> containerNames(const json& pod, const char* field) {
  std::vector<std::string> out;
  if (const json& cs = detail::at(pod, {"spec", field}); cs.is_array()) {
    for (const json& c : cs) {
      out.push_back(str(c, {"name"}));
    }
  }
  return out;
}

alloc::RtStringMap stringMap(const json& obj) {
  alloc::RtStringMap out;
  if (obj.is_object()) {
    for (const auto& [k, v] : obj.items()) {
      if (v.is_string()) {
        out.emplace(k, v.get<std::string>());
      }
    }
  }
  return out;
}

alloc::RtPodSpec rtOf(const json& pod) {
  const auto init = containerNames(pod, "initContainers");
  const auto app = containerNames(pod, "containers");
  return alloc::rtPodSpec(stringMap(detail::at(pod, {"metadata", "annotations"})), init, app);
}

// The time an Event last happened, as text that sorts in time order (RFC 3339 in UTC).
std::string eventTime(const json& e) {
  for (const auto& path : {std::initializer_list<const char*>{"series", "lastObservedTime"},
                           {"lastTimestamp"},
                           {"eventTime"},
                           {"metadata", "creationTimestamp"}}) {
    if (std::string t = str(e, path); !t.empty()) {
      return t;
    }
  }
  return {};
}

struct LatestEvent {
  std::string time, reason, message;
};

std::map<std::string, LatestEvent> latestPodEvents(const Objects& events) {
  std::map<std::string, LatestEvent> out;
  for (const json& e : events) {
    if (str(e, {"involvedObject", "kind"}) != "Pod") {
      continue;
    }
    const std::string key =
        str(e, {"involvedObject", "namespace"}) + "/" + str(e, {"involvedObject", "name"});
    const std::string t = eventTime(e);
    auto& cur = out[key];
    if (cur.reason.empty() || t >= cur.time) {
      cur = {t, str(e, {"reason"}), str(e, {"message"})};
    }
  }
  return out;
}

// pod key -> "GPU phase" of each move in flight for it, from every pool's journal.
std::map<std::string, std::vector<std::string>> movesByPod(const Objects& pools) {
  std::map<std::string, std::vector<std::string>> out;
  for (const json& pool : pools) {
    const json& moves = detail::at(pool, {"status", "moves"});
    if (!moves.is_array()) {
      continue;
    }
    for (const json& m : moves) {
      const std::string phase = str(m, {"phase"});
      const std::string pod = str(m, {"pod"});
      if (!pod.empty() && phase != "Succeeded" && phase != "Failed") {
        out[pod].push_back(str(m, {"gpu"}) + " " + phase);
      }
    }
  }
  return out;
}

const json* podScheduledCondition(const json& pod) {
  const json& conds = detail::at(pod, {"status", "conditions"});
  if (conds.is_array()) {
    for (const json& c : conds) {
      if (str(c, {"type"}) == "PodScheduled") {
        return &c;
      }
    }
  }
  return nullptr;
}

struct Wants {
  std::int64_t gpus = 0;
  std::uint32_t rtCores = 0;
  std::string rtError;
  bool vni = false;
  std::vector<std::string> claims;

  bool any() const { return gpus > 0 || rtCores > 0 || !rtError.empty() || vni || !claims.empty(); }
  std::string text() const {
    std::vector<std::string> parts;
    if (gpus > 0) {
      parts.push_back(std::to_string(gpus) + " gpu");
    }
    if (rtCores > 0) {
      parts.push_back(std::to_string(rtCores) + " rt-core");
    }
    if (!rtError.empty()) {
      parts.push_back("rt (invalid)");
    }
    if (vni) {
      parts.push_back("vni");
    }
    if (!claims.empty()) {
      parts.push_back(std::to_string(claims.size()) + " claim");
    }
    return detail::joined(parts, ", ");
  }
};

Wants wantsOf(const json& pod) {
  Wants w;
  w.gpus = podGpus(pod);
  const auto rt = rtOf(pod);
  w.rtError = rt.error;
  for (const auto& c : rt.containers) {
    w.rtCores += c.reservation.cpus;
  }
  const json& annotations = detail::at(pod, {"metadata", "annotations"});
  const json& labels = detail::at(pod, {"metadata", "labels"});
  w.vni = annotations.contains(std::string(api::kVniOptInAnnotation)) &&
          !labels.contains(std::string(api::kVniLabel));
  if (const json& rc = detail::at(pod, {"spec", "resourceClaims"}); rc.is_array()) {
    for (const json& c : rc) {
      w.claims.push_back(str(c, {"name"}));
    }
  }
  return w;
}

bool waiting(const json& pod) {
  const std::string phase = str(pod, {"status", "phase"});
  return str(pod, {"spec", "nodeName"}).empty() && (phase.empty() || phase == "Pending") &&
         str(pod, {"metadata", "deletionTimestamp"}).empty();
}

}  // namespace

View pendingView(const Objects& pods, const Objects& events, const Objects& pools, TimePoint now,
                 bool allNamespaces) {
  View v;
  v.kind = "PendingPodList";
  v.emptyMessage = "No pods are waiting for GPUs, RT cores or a VNI.";
  if (allNamespaces) {
    v.table.columns.push_back({"NAMESPACE"});
  }
  for (const char* c : {"NAME", "WANTS", "NODE", "REASON", "MOVES", "AGE", "MESSAGE"}) {
    v.table.columns.push_back({c});
  }
  v.table.columns.push_back({"SCHEDULER", true});
  v.table.columns.push_back({"LAST EVENT", true});
  const auto latest = latestPodEvents(events);
  const auto moves = movesByPod(pools);
  for (const json& pod : pods) {
    if (!waiting(pod)) {
      continue;
    }
    const Wants w = wantsOf(pod);
    const std::string scheduler = str(pod, {"spec", "schedulerName"});
    if (!w.any() && scheduler != api::kSchedulerName) {
      continue;
    }
    const std::string ns = str(pod, {"metadata", "namespace"});
    const std::string name = str(pod, {"metadata", "name"});
    const std::string key = ns + "/" + name;
    std::string node =
        str(pod, {"metadata", "annotations", std::string(api::kDstNodeAnnotation).c_str()});
    if (node.empty()) {
      node = str(pod, {"status", "nominatedNodeName"});
    }
    std::string reason;
    std::string message;
    if (const json* c = podScheduledCondition(pod); c != nullptr && str(*c, {"status"}) != "True") {
      reason = str(*c, {"reason"});
      message = str(*c, {"message"});
    }
    std::string lastEvent;
    json eventJson = nullptr;
    if (const auto e = latest.find(key); e != latest.end()) {
      lastEvent = e->second.reason + ": " + e->second.message;
      eventJson = {
          {"reason", e->second.reason}, {"message", e->second.message}, {"time", e->second.time}};
      if (reason.empty()) {
        reason = e->second.reason;
        message = e->second.message;
      }
    }
    if (!w.rtError.empty() && message.empty()) {
      message = w.rtError;
    }
    const auto m = moves.find(key);
    const std::vector<std::string> podMoves =
        m != moves.end() ? m->second : std::vector<std::string>{};
    std::vector<std::string> row;
    if (allNamespaces) {
      row.push_back(ns);
    }
    for (std::string cell : {name, w.text(), node, reason, detail::joined(podMoves),
                             detail::age(str(pod, {"metadata", "creationTimestamp"}), now), message,
                             scheduler, lastEvent}) {
      row.push_back(std::move(cell));
    }
    v.table.rows.push_back(std::move(row));
    v.items.push_back({{"namespace", ns},
                       {"name", name},
                       {"gpus", w.gpus},
                       {"rtCores", w.rtCores},
                       {"rtError", w.rtError},
                       {"vni", w.vni},
                       {"claims", w.claims},
                       {"node", node},
                       {"schedulerName", scheduler},
                       {"reason", reason},
                       {"message", message},
                       {"moves", podMoves},
                       {"lastEvent", eventJson},
                       {"creationTimestamp", str(pod, {"metadata", "creationTimestamp"})}});
  }
  return v;
}

namespace {

// Parts per billion as a percentage with one decimal: 950000000 -> "95.0%".
std::string percent(std::uint64_t ppb) {
  const std::uint64_t tenths = ppb / 1'000'000;
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + "%";
}

std::uint64_t sharePpb(std::uint64_t runtimeUs, std::uint64_t periodUs) {
  return periodUs == 0 ? 0 : runtimeUs * 1'000'000'000ULL / periodUs;
}

struct CoreUse {
  std::uint64_t ppb = 0;
  std::vector<std::string> holders;
  json holdersJson = json::array();
};

}  // namespace

Result<View> rtView(const json& node, const Objects& pods) {
  const std::string name = str(node, {"metadata", "name"});
  auto info = alloc::parseRtNode(stringMap(detail::at(node, {"metadata", "labels"})),
                                 stringMap(detail::at(node, {"metadata", "annotations"})));
  if (!info) {
    return makeError(info.error().code, "node " + name + " has malformed real-time annotations (" +
                                            info.error().message + ")");
  }
  if (!info->has_value()) {
    return makeError("invalid", "node " + name + " is not real-time capable (no label " +
                                    std::string(api::kRtCapableLabel) +
                                    "=true; rt-kubelet-shim publishes it)");
  }
  const alloc::RtNodeInfo& rt = **info;
  const std::uint64_t bound = sharePpb(rt.bound.runtimeUs, rt.bound.periodUs);
  std::map<std::uint32_t, CoreUse> cores;
  for (std::uint32_t c : rt.cores) {
    cores[c];
  }
  std::uint64_t groupPpb = 0;
  json unassigned = json::array();
  for (const json& pod : pods) {
    const std::string phase = str(pod, {"status", "phase"});
    if (phase == "Succeeded" || phase == "Failed") {
      continue;
    }
    const std::string key =
        str(pod, {"metadata", "namespace"}) + "/" + str(pod, {"metadata", "name"});
    const auto spec = rtOf(pod);
    for (const auto& c : spec.containers) {
      const auto& r = c.reservation;
      const std::string budget =
          std::to_string(r.runtimeUs) + "/" + std::to_string(r.periodUs) + "us";
      const auto a = spec.assigned.find(c.container);
      if (a == spec.assigned.end()) {
        unassigned.push_back({{"pod", key},
                              {"container", c.container},
                              {"runtimeUs", r.runtimeUs},
                              {"periodUs", r.periodUs},
                              {"cpus", r.cpus}});
        continue;
      }
      groupPpb += sharePpb(r.runtimeUs, r.periodUs);
      for (std::uint32_t core : a->second) {
        CoreUse& u = cores[core];
        u.ppb += sharePpb(r.runtimeUs, r.periodUs);
        u.holders.push_back(key + "/" + c.container + " " + budget);
        u.holdersJson.push_back({{"pod", key},
                                 {"container", c.container},
                                 {"runtimeUs", r.runtimeUs},
                                 {"periodUs", r.periodUs}});
      }
    }
  }
  View v;
  v.kind = "RTNode";
  v.emptyMessage = "Node " + name + " has no RT cores.";
  v.table.columns = {{"CORE"}, {"BOUND"}, {"RESERVED"}, {"FREE"}, {"RESERVATIONS"}};
  const std::string kernel(alloc::rtKernelName(rt.kernel));
  v.preface = "Node " + name + ": kernel " + kernel + ", bound " +
              std::to_string(rt.bound.runtimeUs) + "/" + std::to_string(rt.bound.periodUs) +
              "us per core (" + percent(bound) + "), RT cores " + alloc::formatCpuList(rt.cores);
  if (rt.kernel == alloc::RtKernel::kRtGroup) {
    v.preface += ", all RT groups together " + percent(groupPpb) + " of " + percent(bound);
  }
  v.preface += "\n";
  for (const auto& [core, use] : cores) {
    const bool isRt = std::find(rt.cores.begin(), rt.cores.end(), core) != rt.cores.end();
    const std::uint64_t free = use.ppb >= bound ? 0 : bound - use.ppb;
    v.table.rows.push_back({std::to_string(core) + (isRt ? "" : " (not RT)"), percent(bound),
                            percent(use.ppb), percent(free), detail::joined(use.holders, ", ")});
    v.items.push_back({{"core", core},
                       {"rtCore", isRt},
                       {"boundPpb", bound},
                       {"reservedPpb", use.ppb},
                       {"freePpb", free},
                       {"reservations", use.holdersJson}});
  }
  for (const json& u : unassigned) {
    v.table.rows.push_back({"-", "", "", "",
                            u["pod"].get<std::string>() + "/" + u["container"].get<std::string>() +
                                " " + std::to_string(u["runtimeUs"].get<std::uint64_t>()) + "/" +
                                std::to_string(u["periodUs"].get<std::uint64_t>()) + "us x" +
                                std::to_string(u["cpus"].get<std::uint32_t>()) +
                                " (not placed yet)"});
  }
  v.extra = {{"node", name},
             {"kernel", kernel},
             {"bound", {{"runtimeUs", rt.bound.runtimeUs}, {"periodUs", rt.bound.periodUs}}},
             {"rtCores", alloc::formatCpuList(rt.cores)},
             {"groupReservedPpb", groupPpb},
             {"unassigned", unassigned}};
  return v;
}

}  // namespace kc::kubectl
