#include "tools/kubelet-standin/status_builders.hpp"

#include <cctype>
#include <charconv>
#include <cstdio>
#include <functional>

#include "libcore/alloc/quantity.hpp"

namespace kc::kubelet {

using kc::alloc::formatResourceAmount;
namespace {

std::string previousTransition(const nlohmann::json& previous, const std::string& type,
                               const std::string& status, const std::string& now) {
  if (previous.is_array()) {
    for (const auto& c : previous) {
      if (c.is_object() && c.value("type", "") == type && c.value("status", "") == status &&
          c.contains("lastTransitionTime") && c["lastTransitionTime"].is_string()) {
        return c["lastTransitionTime"].get<std::string>();
      }
    }
  }
  return now;
}

nlohmann::json podCondition(const nlohmann::json& previous, const std::string& type, bool status,
                            const std::string& reason, const std::string& message,
                            const std::string& now) {
  const std::string s = status ? "True" : "False";
  nlohmann::json c = {{"type", type},
                      {"status", s},
                      {"lastProbeTime", nullptr},
                      {"lastTransitionTime", previousTransition(previous, type, s, now)}};
  if (!reason.empty()) {
    c["reason"] = reason;
  }
  if (!message.empty()) {
    c["message"] = message;
  }
  return c;
}

std::vector<nlohmann::json> containersOf(const nlohmann::json& pod, const char* field) {
  std::vector<nlohmann::json> out;
  const auto spec = pod.value("spec", nlohmann::json::object());
  for (const auto& c : spec.value(field, nlohmann::json::array())) {
    out.push_back(c);
  }
  return out;
}

std::string containerId(const nlohmann::json& pod, const std::string& name) {
  const std::string uid =
      pod.value("metadata", nlohmann::json::object()).value("uid", std::string());
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016zx%016zx", std::hash<std::string>{}(uid + "/" + name),
                std::hash<std::string>{}(name + "/" + uid));
  return std::string("containerd://") + buf;
}

nlohmann::json containerStatus(const nlohmann::json& pod, const nlohmann::json& c,
                               const nlohmann::json& state, bool ready, bool started, bool withId) {
  const std::string name = c.value("name", std::string());
  nlohmann::json s = {{"name", name},      {"image", c.value("image", std::string())},
                      {"imageID", ""},     {"ready", ready},
                      {"restartCount", 0}, {"started", started},
                      {"state", state},    {"lastState", nlohmann::json::object()}};
  if (withId) {
    s["containerID"] = containerId(pod, name);
  }
  return s;
}

nlohmann::json completedInit(const nlohmann::json& pod, const PodRunTimes& t) {
  auto out = nlohmann::json::array();
  for (const auto& c : containersOf(pod, "initContainers")) {
    nlohmann::json term = {{"terminated",
                            {{"exitCode", 0},
                             {"reason", "Completed"},
                             {"startedAt", t.startedAt.empty() ? t.now : t.startedAt},
                             {"finishedAt", t.startedAt.empty() ? t.now : t.startedAt},
                             {"containerID", containerId(pod, c.value("name", std::string()))}}}};
    out.push_back(containerStatus(pod, c, term, true, false, true));
  }
  return out;
}

std::string unreadyMessage(const nlohmann::json& pod) {
  std::string names;
  for (const auto& c : containersOf(pod, "containers")) {
    names += (names.empty() ? "" : " ") + c.value("name", std::string());
  }
  return "containers with unready status: [" + names + "]";
}

nlohmann::json baseStatus(const nlohmann::json& pod, const std::string& phase,
                          const std::string& hostIp, const std::string& podIp,
                          const PodRunTimes& t) {
  nlohmann::json s = {{"phase", phase},
                      {"hostIP", hostIp},
                      {"hostIPs", nlohmann::json::array({{{"ip", hostIp}}})},
                      {"podIP", podIp},
                      {"podIPs", nlohmann::json::array({{{"ip", podIp}}})},
                      {"startTime", t.startTime}};
  (void)pod;
  return s;
}

nlohmann::json previousConditions(const nlohmann::json& pod) {
  if (pod.contains("status") && pod["status"].is_object() && pod["status"].contains("conditions")) {
    return pod["status"]["conditions"];
  }
  return nlohmann::json::array();
}

}  // namespace

Result<std::optional<double>> runSeconds(const nlohmann::json& pod) {
  const auto meta = pod.value("metadata", nlohmann::json::object());
  const auto annotations = meta.value("annotations", nlohmann::json::object());
  if (!annotations.is_object() || !annotations.contains(kRunSecondsAnnotation)) {
    return std::optional<double>{};
  }
  const auto& v = annotations[kRunSecondsAnnotation];
  if (!v.is_string()) {
    return makeError(kc::errc::kInvalid,
                     std::string("annotation ") + kRunSecondsAnnotation + " is not a string");
  }
  const std::string text = v.get<std::string>();
  bool digit = false;
  bool dot = false;
  for (char c : text) {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      digit = true;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      digit = false;
      break;
    }
  }
  double seconds = 0;
  if (digit) {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
    digit = ec == std::errc() && end == text.data() + text.size() && seconds <= 1e9;
  }
  if (!digit) {
    return makeError(kc::errc::kInvalid, std::string("annotation ") + kRunSecondsAnnotation +
                                             "=\"" + text +
                                             "\" is not a non-negative decimal number of seconds");
  }
  return std::optional<double>{seconds};
}

nlohmann::json creatingStatus(const nlohmann::json& pod, const std::string& hostIp,
                              const std::string& podIp, const PodRunTimes& t) {
  const auto prev = previousConditions(pod);
  nlohmann::json s = baseStatus(pod, "Pending", hostIp, podIp, t);
  const std::string msg = unreadyMessage(pod);
  s["conditions"] = {podCondition(prev, "PodReadyToStartContainers", true, "", "", t.now),
                     podCondition(prev, "Initialized", true, "", "", t.now),
                     podCondition(prev, "Ready", false, "ContainersNotReady", msg, t.now),
                     podCondition(prev, "ContainersReady", false, "ContainersNotReady", msg, t.now),
                     podCondition(prev, "PodScheduled", true, "", "", t.now)};
  auto statuses = nlohmann::json::array();
  for (const auto& c : containersOf(pod, "containers")) {
    statuses.push_back(containerStatus(pod, c, {{"waiting", {{"reason", "ContainerCreating"}}}},
                                       false, false, false));
  }
  s["containerStatuses"] = statuses;
  if (!containersOf(pod, "initContainers").empty()) {
    s["initContainerStatuses"] = completedInit(pod, t);
  }
  return s;
}

nlohmann::json runningStatus(const nlohmann::json& pod, const std::string& hostIp,
                             const std::string& podIp, const PodRunTimes& t) {
  const auto prev = previousConditions(pod);
  nlohmann::json s = baseStatus(pod, "Running", hostIp, podIp, t);
  s["conditions"] = {podCondition(prev, "PodReadyToStartContainers", true, "", "", t.now),
                     podCondition(prev, "Initialized", true, "", "", t.now),
                     podCondition(prev, "Ready", true, "", "", t.now),
                     podCondition(prev, "ContainersReady", true, "", "", t.now),
                     podCondition(prev, "PodScheduled", true, "", "", t.now)};
  auto statuses = nlohmann::json::array();
  for (const auto& c : containersOf(pod, "containers")) {
    statuses.push_back(
        containerStatus(pod, c, {{"running", {{"startedAt", t.startedAt}}}}, true, true, true));
  }
  s["containerStatuses"] = statuses;
  if (!containersOf(pod, "initContainers").empty()) {
    s["initContainerStatuses"] = completedInit(pod, t);
  }
  return s;
}

nlohmann::json terminatedStatus(const nlohmann::json& pod, const std::string& hostIp,
                                const std::string& podIp, const PodRunTimes& t, int exitCode,
                                const std::string& reason) {
  const auto prev = previousConditions(pod);
  nlohmann::json s = baseStatus(pod, exitCode == 0 ? "Succeeded" : "Failed", hostIp, podIp, t);
  s["conditions"] = {podCondition(prev, "PodReadyToStartContainers", false, "", "", t.now),
                     podCondition(prev, "Initialized", true, "PodCompleted", "", t.now),
                     podCondition(prev, "Ready", false, "PodCompleted", "", t.now),
                     podCondition(prev, "ContainersReady", false, "PodCompleted", "", t.now),
                     podCondition(prev, "PodScheduled", true, "", "", t.now)};
  auto statuses = nlohmann::json::array();
  for (const auto& c : containersOf(pod, "containers")) {
    const std::string name = c.value("name", std::string());
    nlohmann::json state = {{"terminated",
                             {{"exitCode", exitCode},
                              {"reason", reason},
                              {"startedAt", t.startedAt},
                              {"finishedAt", t.finishedAt},
                              {"containerID", containerId(pod, name)}}}};
    statuses.push_back(containerStatus(pod, c, state, false, false, true));
  }
  s["containerStatuses"] = statuses;
  if (!containersOf(pod, "initContainers").empty()) {
    s["initContainerStatuses"] = completedInit(pod, t);
  }
  return s;
}

nlohmann::json rejectedStatus(const Rejection& rejection) {
  return {{"phase", "Failed"},
          {"reason", rejection.reason},
          {"message", "Pod was rejected: " + rejection.message}};
}

nlohmann::json nodeConditions(const nlohmann::json& previous, const std::string& now) {
  struct Spec {
    const char* type;
    const char* status;
    const char* reason;
    const char* message;
  };
  static constexpr Spec kSpecs[] = {
      {"MemoryPressure", "False", "KubeletHasSufficientMemory",
       "kubelet has sufficient memory available"},
      {"DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"},
      {"PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"},
      {"Ready", "True", "KubeletReady", "kubelet is posting ready status"},
  };
  auto out = nlohmann::json::array();
  for (const auto& s : kSpecs) {
    out.push_back({{"type", s.type},
                   {"status", s.status},
                   {"lastHeartbeatTime", now},
                   {"lastTransitionTime", previousTransition(previous, s.type, s.status, now)},
                   {"reason", s.reason},
                   {"message", s.message}});
  }
  return out;
}

nlohmann::json resourceMapJson(const ResourceList& list) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, amount] : list) {
    out[name] = formatResourceAmount(name, amount);
  }
  return out;
}

}  // namespace kc::kubelet
