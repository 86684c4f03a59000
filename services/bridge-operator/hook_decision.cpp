#include "services/bridge-operator/hook_decision.hpp"

#include <algorithm>
#include <charconv>

#include "libcore/base/rfc3339.hpp"

namespace kc::bridge {

namespace {

using metacontroller::groupObjects;
using metacontroller::member;
using metacontroller::optionalString;
using metacontroller::requiredString;
using nlohmann::json;

Error invalid(std::string message) {
  return makeError(kc::errc::kInvalid, std::move(message));
}

constexpr std::int32_t kMaxAttempt = 999;

// "<job>-bridge-<n>" -> n (decimal, no leading zeros), or nullopt.
std::optional<std::int32_t> attemptOf(const std::string& job, const std::string& pod) {
  const std::string prefix = job + "-bridge-";
  if (pod.size() <= prefix.size() || pod.compare(0, prefix.size(), prefix) != 0) {
    return std::nullopt;
  }
  const char* first = pod.data() + prefix.size();
  const char* last = pod.data() + pod.size();
  if (*first == '0' && last - first > 1) {
    return std::nullopt;
  }
  std::int32_t n = 0;
  const auto [end, ec] = std::from_chars(first, last, n, 10);
  if (ec != std::errc() || end != last || n < 0 || n > kMaxAttempt) {
    return std::nullopt;
  }
  return n;
}

json labelsFor(const ObservedJob& job) {
  return json{{"app.kubernetes.io/name", "bridge-pod"},
              {"app.kubernetes.io/managed-by", "bridge-operator"},
              {kJobLabel, job.name},
              {kJobUidLabel, job.uid}};
}

json objectMeta(const ObservedJob& job, const std::string& name) {
  return json{{"name", name}, {"namespace", job.ns}, {"labels", labelsFor(job)}};
}

json configMapObject(const ObservedJob& job, const JobParameters& p, bool kill) {
  json data = json::object();
  for (const auto& [k, v] : parameterData(p)) {
    data[k] = v;
  }
  data[cmkey::kJobName] = job.name;
  data[cmkey::kJobNamespace] = job.ns;
  data[cmkey::kJobUid] = job.uid;
  data[cmkey::kKill] = kill ? "true" : "false";
  return json{{"apiVersion", "v1"},
              {"kind", "ConfigMap"},
              {"metadata", objectMeta(job, configMapName(job.name))},
              {"data", std::move(data)}};
}

std::vector<json> rbacObjects(const ObservedJob& job) {
  const std::string name = rbacName(job.name);
  json sa{{"apiVersion", "v1"},
          {"kind", "ServiceAccount"},
          {"metadata", objectMeta(job, name)},
          {"automountServiceAccountToken", false}};
  // Only its own ConfigMap: resourceNames cannot restrict list/create, so neither is granted.
  json role{
      {"apiVersion", "rbac.authorization.k8s.io/v1"},
      {"kind", "Role"},
      {"metadata", objectMeta(job, name)},
      {"rules", json::array({{{"apiGroups", json::array({""})},
                              {"resources", json::array({"configmaps"})},
                              {"resourceNames", json::array({configMapName(job.name)})},
                              {"verbs", json::array({"get", "watch", "update", "patch"})}}})}};
  json binding{
      {"apiVersion", "rbac.authorization.k8s.io/v1"},
      {"kind", "RoleBinding"},
      {"metadata", objectMeta(job, name)},
      {"subjects",
       json::array({{{"kind", "ServiceAccount"}, {"name", name}, {"namespace", job.ns}}})},
      {"roleRef", {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", name}}}};
  return {std::move(sa), std::move(role), std::move(binding)};
}

json envVar(const char* name, const std::string& value) {
  return json{{"name", name}, {"value", value}};
}

json podObject(const ObservedJob& job, const JobParameters& p, std::int32_t attempt,
               const DecisionConfig& config) {
  json meta = objectMeta(job, podName(job.name, attempt));
  meta["labels"][kAttemptLabel] = std::to_string(attempt);
  json env = json::array({
      envVar("BRIDGE_CONFIGMAP", configMapName(job.name)),
      envVar("BRIDGE_JOB_NAME", job.name),
      envVar("BRIDGE_JOB_UID", job.uid),
      envVar("BRIDGE_ATTEMPT", std::to_string(attempt)),
      json{{"name", "BRIDGE_NAMESPACE"},
           {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.namespace"}}}}}},
      envVar("BRIDGE_CREDENTIALS_DIR", kCredentialsDir),
  });
  // Secrets read-only, readable by the pod's group only (fsGroup), never in env.
  constexpr int kSecretMode = 0440;
  json mounts =
      json::array({{{"name", "credentials"}, {"mountPath", kCredentialsDir}, {"readOnly", true}}});
  json volumes =
      json::array({{{"name", "credentials"},
                    {"secret", {{"secretName", p.resourceSecret}, {"defaultMode", kSecretMode}}}}});
  if (!p.s3Secret.empty()) {
    env.push_back(envVar("BRIDGE_S3_CREDENTIALS_DIR", kS3CredentialsDir));
    mounts.push_back(
        {{"name", "s3credentials"}, {"mountPath", kS3CredentialsDir}, {"readOnly", true}});
    volumes.push_back({{"name", "s3credentials"},
                       {"secret", {{"secretName", p.s3Secret}, {"defaultMode", kSecretMode}}}});
  }
  // The API token is mounted explicitly (the ServiceAccount opts out of automount), so the
  // only credentials in the pod are the ones listed here.
  mounts.push_back({{"name", "kube-api"},
                    {"mountPath", "/var/run/secrets/kubernetes.io/serviceaccount"},
                    {"readOnly", true}});
  volumes.push_back(
      {{"name", "kube-api"},
       {"projected",
        {{"defaultMode", kSecretMode},
         {"sources",
          json::array(
              {{{"serviceAccountToken", {{"path", "token"}, {"expirationSeconds", 3600}}}},
               {{"configMap",
                 {{"name", "kube-root-ca.crt"},
                  {"items", json::array({{{"key", "ca.crt"}, {"path", "ca.crt"}}})}}}}})}}}});
  json container{
      {"name", kContainerName},
      {"image", p.image},
      {"imagePullPolicy", p.imagePullPolicy},
      {"env", std::move(env)},
      {"volumeMounts", std::move(mounts)},
      {"resources",
       {{"requests", {{"cpu", config.podCpuRequest}, {"memory", config.podMemoryRequest}}},
        {"limits", {{"memory", config.podMemoryLimit}}}}},
      {"securityContext",
       {{"allowPrivilegeEscalation", false},
        {"readOnlyRootFilesystem", true},
        {"capabilities", {{"drop", json::array({"ALL"})}}}}}};
  json spec{{"restartPolicy", "Never"},
            {"serviceAccountName", rbacName(job.name)},
            {"automountServiceAccountToken", false},
            {"securityContext",
             {{"runAsNonRoot", true},
              {"runAsUser", config.podRunAsUser},
              {"runAsGroup", config.podRunAsUser},
              {"fsGroup", config.podRunAsUser},
              {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
            {"containers", json::array({std::move(container)})},
            {"volumes", std::move(volumes)}};
  return json{{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", std::move(meta)},
              {"spec", std::move(spec)}};
}

// What the bridge pod wrote into the ConfigMap.
struct PodReport {
  std::optional<JobStatus> status;
  std::string unknownStatus;  // a value outside the enum (not copied)
  std::string remoteId;
  std::map<std::string, std::string> times;  // status field -> canonical RFC 3339
  std::vector<std::string> badTimes;         // ConfigMap keys whose value is not RFC 3339
  std::string message;
};

PodReport readReport(const std::optional<std::map<std::string, std::string>>& data) {
  PodReport r;
  if (!data) {
    return r;
  }
  auto get = [&](const char* key) {
    auto it = data->find(key);
    return it == data->end() ? std::string() : it->second;
  };
  const std::string raw = get(cmkey::kStatus);
  r.status = parseJobStatus(raw);
  if (!r.status && !raw.empty()) {
    r.unknownStatus = raw;
  }
  r.remoteId = get(cmkey::kRemoteId);
  for (const auto& [key, field] :
       {std::pair{cmkey::kSubmitTime, "submitTime"}, std::pair{cmkey::kStartTime, "startTime"},
        std::pair{cmkey::kCompletionTime, "completionTime"}}) {
    const std::string v = get(key);
    if (v.empty()) {
      continue;
    }
    if (auto t = parseRfc3339(v)) {
      r.times[field] = formatRfc3339(*t);
    } else {
      r.badTimes.push_back(key);
    }
  }
  r.message = get(cmkey::kMessage);
  return r;
}

json condition(const json& previous, const std::string& type, bool value, const std::string& reason,
               const std::string& message, std::chrono::system_clock::time_point now) {
  const std::string status = value ? "True" : "False";
  std::string since = formatRfc3339(now);
  if (const json* conds = member(previous, "conditions"); conds != nullptr && conds->is_array()) {
    for (const json& c : *conds) {
      if (optionalString(c, "type") == type && optionalString(c, "status") == status &&
          parseRfc3339(optionalString(c, "lastTransitionTime"))) {
        since = optionalString(c, "lastTransitionTime");
      }
    }
  }
  json c{{"type", type}, {"status", status}, {"reason", reason}, {"lastTransitionTime", since}};
  if (!message.empty()) {
    c["message"] = message;
  }
  return c;
}

std::int32_t previousAttempts(const json& status) {
  const json* a = member(status, "attempts");
  if (a == nullptr || !a->is_number_integer()) {
    return 0;
  }
  return static_cast<std::int32_t>(
      std::clamp<std::int64_t>(a->get<std::int64_t>(), 0, kMaxAttempt + 1));
}

std::string reasonOf(JobStatus s) {
  switch (s) {
    case JobStatus::kDone:
      return "Done";
    case JobStatus::kFailed:
      return "Failed";
    case JobStatus::kKilled:
      return "Killed";
    case JobStatus::kUnknown:
      return "Unknown";
    case JobStatus::kSubmitted:
      return "Submitted";
    case JobStatus::kRunning:
      return "Running";
  }
  return "Unknown";
}

}  // namespace

const char* hookName(HookKind kind) {
  return kind == HookKind::kFinalize ? "finalize" : "sync";
}

std::string configMapName(const std::string& job) {
  return job + "-bridge";
}
std::string podName(const std::string& job, std::int32_t attempt) {
  return job + "-bridge-" + std::to_string(attempt);
}
std::string rbacName(const std::string& job) {
  return job + "-bridge";
}

Result<HookRequest> parseHookRequest(HookKind kind, const std::string& body) {
  auto doc = metacontroller::parseBody(body);
  if (!doc) {
    return doc.error();
  }
  HookRequest r;
  r.kind = kind;
  if (const json* f = member(*doc, "finalizing"); f != nullptr && !f->is_null()) {
    if (!f->is_boolean()) {
      return invalid("finalizing must be a boolean");
    }
    if (f->get<bool>()) {
      r.kind = HookKind::kFinalize;  // one URL may serve both hooks
    }
  }
  auto version = metacontroller::declaredHookVersion(*doc, hookName(r.kind));
  if (!version) {
    return version.error();
  }
  r.version = *version;

  const json* parent = member(*doc, "parent");
  if (parent == nullptr || !parent->is_object()) {
    return invalid("hook request has no \"parent\" object");
  }
  if (optionalString(*parent, "apiVersion") != api::kBridgeJobApiVersion ||
      optionalString(*parent, "kind") != api::kBridgeJobKind) {
    return invalid("parent must be a " + std::string(api::kBridgeJobApiVersion) + " " +
                   std::string(api::kBridgeJobKind) + ", got " +
                   json(optionalString(*parent, "apiVersion")).dump() + " " +
                   json(optionalString(*parent, "kind")).dump());
  }
  const json* meta = member(*parent, "metadata");
  if (meta == nullptr || !meta->is_object()) {
    return invalid("parent.metadata must be an object");
  }
  auto name = requiredString(*meta, "name", "parent.metadata");
  auto ns = requiredString(*meta, "namespace", "parent.metadata");
  auto uid = requiredString(*meta, "uid", "parent.metadata");
  for (const auto* field : {&name, &ns, &uid}) {
    if (!*field) {
      return field->error();
    }
  }
  if (name->size() > kMaxJobName) {
    return invalid("parent.metadata.name is longer than " + std::to_string(kMaxJobName) +
                   " characters (the bridge pod's name would not be valid)");
  }
  r.job.name = *name;
  r.job.ns = *ns;
  r.job.uid = *uid;
  const json* del = member(*meta, "deletionTimestamp");
  r.job.deleting = del != nullptr && !del->is_null();
  if (const json* spec = member(*parent, "spec"); spec != nullptr) {
    r.job.spec = *spec;
  }
  if (const json* status = member(*parent, "status"); status != nullptr && status->is_object()) {
    r.job.status = *status;
  }

  auto configMaps = groupObjects(*doc, "children", metacontroller::groupKey("ConfigMap", "v1"));
  if (!configMaps) {
    return configMaps.error();
  }
  for (const json* cm : *configMaps) {
    const json& m = (*cm)["metadata"];
    if (optionalString(m, "name") != configMapName(r.job.name)) {
      continue;  // not ours: Metacontroller deletes children we do not return
    }
    std::map<std::string, std::string> data;
    if (const json* d = member(*cm, "data"); d != nullptr && !d->is_null()) {
      if (!d->is_object()) {
        return invalid("children ConfigMap " + configMapName(r.job.name) +
                       ": data must be an object");
      }
      for (const auto& [k, v] : d->items()) {
        if (!v.is_string()) {
          return invalid("children ConfigMap " + configMapName(r.job.name) + ": data[" +
                         json(k).dump() + "] is not a string");
        }
        data.emplace(k, v.get<std::string>());
      }
    }
    r.configMap = std::move(data);
  }
  auto pods = groupObjects(*doc, "children", metacontroller::groupKey("Pod", "v1"));
  if (!pods) {
    return pods.error();
  }
  for (const json* pod : *pods) {
    const json& m = (*pod)["metadata"];
    ObservedPod p;
    p.name = optionalString(m, "name");
    auto attempt = attemptOf(r.job.name, p.name);
    if (!attempt) {
      continue;
    }
    p.attempt = *attempt;
    const json* podDel = member(m, "deletionTimestamp");
    p.terminating = podDel != nullptr && !podDel->is_null();
    if (const json* st = member(*pod, "status"); st != nullptr) {
      p.phase = optionalString(*st, "phase");
    }
    r.pods.push_back(std::move(p));
  }
  std::sort(r.pods.begin(), r.pods.end(),
            [](const ObservedPod& a, const ObservedPod& b) { return a.attempt < b.attempt; });
  return r;
}

Desired decide(const HookRequest& request, const DecisionConfig& config,
               std::chrono::system_clock::time_point now) {
  const ObservedJob& job = request.job;
  const bool finalizing = request.kind == HookKind::kFinalize;
  Desired out;

  // Parameters: frozen in the ConfigMap once the job started; from the spec before that.
  auto fromSpec = parseSpec(job.spec);
  std::optional<JobParameters> params;
  std::string paramsNote;
  if (request.configMap) {
    if (auto fromMap = parametersFromData(*request.configMap)) {
      params = *fromMap;
    } else if (fromSpec) {
      params = *fromSpec;
      paramsNote = fromMap.error().message + "; rewritten from the spec";
    } else {
      paramsNote = fromMap.error().message;
    }
  } else if (fromSpec) {
    params = *fromSpec;
  }

  const PodReport report = readReport(request.configMap);
  const bool terminal = report.status && isTerminal(*report.status);
  const std::int32_t prevAttempts = previousAttempts(job.status);
  const bool started = request.configMap.has_value() || !request.pods.empty() || prevAttempts > 0;

  // Which attempt is current, and whether it has to be replaced.
  std::int32_t current = std::max<std::int32_t>(0, prevAttempts - 1);
  if (!request.pods.empty()) {
    current = std::max(current, request.pods.back().attempt);
  }
  auto observed = [&](std::int32_t attempt) -> const ObservedPod* {
    for (const ObservedPod& p : request.pods) {
      if (p.attempt == attempt) {
        return &p;
      }
    }
    return nullptr;
  };
  bool exhausted = false;
  if (!terminal) {
    if (const ObservedPod* pod = observed(current); pod != nullptr && pod->stopped()) {
      if (current < config.maxPodRestarts) {
        ++current;
      } else {
        exhausted = true;
      }
    }
  }
  const bool podLive = std::any_of(request.pods.begin(), request.pods.end(),
                                   [](const ObservedPod& p) { return !p.stopped(); });

  // Children.
  bool wantChildren = true;
  if (finalizing) {
    if (!started || exhausted || (terminal && !podLive)) {
      out.finalized = true;
      wantChildren = false;
    } else {
      out.finalized = false;
      out.resyncAfterSeconds = config.finalizeResyncSec;
    }
  }
  if (wantChildren && !params && started) {
    // Nothing can be rendered (ConfigMap and spec both unusable). Refusing leaves every child
    // as it is (Metacontroller applies nothing on an error) instead of deleting a running pod.
    out.refusal =
        makeError(kc::errc::kUnprocessable, "BridgeJob " + job.ns + "/" + job.name +
                                                ": cannot render its children: " + paramsNote +
                                                "; spec: " + fromSpec.error().message);
    return out;
  }
  const bool kill = killRequested(job.spec) || finalizing;
  std::int32_t podsStarted = 0;
  if (wantChildren && params) {
    out.children.push_back(configMapObject(job, *params, kill));
    for (json& o : rbacObjects(job)) {
      out.children.push_back(std::move(o));
    }
    for (const ObservedPod& p : request.pods) {
      if (p.attempt < current) {
        out.children.push_back(podObject(job, *params, p.attempt, config));  // kept for logs
      }
    }
    const bool currentObserved = observed(current) != nullptr;
    if (currentObserved || (!terminal && !exhausted)) {
      out.children.push_back(podObject(job, *params, current, config));
    }
    podsStarted = current + 1;
  } else if (started) {
    podsStarted = std::max<std::int32_t>(prevAttempts, request.pods.empty() ? 0 : current + 1);
  }

  // Status.
  json status = json::object();
  std::optional<JobStatus> jobStatus = report.status;
  std::string message = report.message;
  if (!jobStatus) {
    if (auto prev = parseJobStatus(optionalString(job.status, "jobStatus"))) {
      jobStatus = prev;  // keep what was known while the pod reports nothing usable
    }
  }
  if (!report.unknownStatus.empty()) {
    message = "bridge pod reported an unknown job status " + json(report.unknownStatus).dump();
  }
  if (exhausted) {
    jobStatus = JobStatus::kFailed;
    message = "bridge pod stopped " + std::to_string(current + 1) +
              " times before the job reached a terminal state; giving up" +
              (report.remoteId.empty() ? std::string()
                                       : " (remote job " + report.remoteId + " may still exist)");
  }
  if (!fromSpec && !started) {
    message = fromSpec.error().message;
  }
  if (jobStatus) {
    status["jobStatus"] = jobStatusName(*jobStatus);
  }
  if (!report.remoteId.empty()) {
    status["remoteJobId"] = report.remoteId;
  }
  for (const auto& [field, value] : report.times) {
    status[field] = value;
  }
  if (!report.badTimes.empty() && message.empty()) {
    std::string keys;
    for (const auto& k : report.badTimes) {
      keys += (keys.empty() ? "" : ", ") + k;
    }
    message = "bridge pod wrote times that are not RFC 3339 (ignored): " + keys;
  }
  if (!message.empty()) {
    status["message"] = message;
  }
  status["attempts"] = podsStarted;
  json conditions = json::array();
  if (fromSpec) {
    conditions.push_back(condition(job.status, "SpecValid", true, "Valid", "", now));
  } else {
    conditions.push_back(
        condition(job.status, "SpecValid", false, started ? "InvalidSpecIgnored" : "InvalidSpec",
                  fromSpec.error().message +
                      (started ? " (the job keeps the parameters it started with)" : ""),
                  now));
  }
  if (!paramsNote.empty()) {
    conditions.push_back(
        condition(job.status, "ParametersReadable", false, "ConfigMapEdited", paramsNote, now));
  }
  conditions.push_back(condition(job.status, "Submitted", !report.remoteId.empty(),
                                 report.remoteId.empty() ? "NoRemoteJob" : "RemoteJobKnown", "",
                                 now));
  const bool finished = (jobStatus && isTerminal(*jobStatus)) || exhausted;
  conditions.push_back(condition(job.status, "Finished", finished,
                                 finished ? reasonOf(*jobStatus) : "NotFinished", "", now));
  status["conditions"] = std::move(conditions);
  out.status = std::move(status);
  return out;
}

nlohmann::json renderResponse(const Desired& desired) {
  json response{{"status", desired.status},
                {"children", json(desired.children)},
                {"resyncAfterSeconds", desired.resyncAfterSeconds}};
  if (desired.finalized) {
    response["finalized"] = *desired.finalized;
  }
  return response;
}

}  // namespace kc::bridge
