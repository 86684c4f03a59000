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
  // Events (create, and patch to count repeats): the pod says on the BridgeJob what it cannot
  // put in a status, such as an expired Slurm token (docs/bridge.md).
  json role{{"apiVersion", "rbac.authorization.k8s.io/v1"},
            {"kind", "Role"},
            {"metadata", objectMeta(job, name)},
            {"rules", json::array({{{"apiGroups", json::array({""})},
                                    {"resources", json::array({"configmaps"})},
                                    {"resourceNames", json::array({configMapName(job.name)})},
                                    {"verbs", json::array({"get", "watch", "update", "patch"})}},
                                   {{"apiGroups", json::array({""})},
                                    {"resources", json::array({"events"})},
                                    {"verbs", json::array({"create", "patch"})}}})}};
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

namespace {

// The hook the request is for: `requested`, or finalize when the body says "finalizing" (one
// URL may serve both hooks).
Result<HookKind> hookKindOf(HookKind requested, const json& doc) {
  if (const json* f = member(doc, "finalizing"); f != nullptr && !f->is_null()) {
    if (!f->is_boolean()) {
      return invalid("finalizing must be a boolean");
    }
    if (f->get<bool>()) {
      return HookKind::kFinalize;
    }
  }
  return requested;
}

// The parent BridgeJob: its identity from metadata, spec and status as observed.
Result<ObservedJob> readParent(const json& doc) {
  const json* parent = member(doc, "parent");
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
  ObservedJob job;
  job.name = *name;
  job.ns = *ns;
  job.uid = *uid;
  const json* del = member(*meta, "deletionTimestamp");
  job.deleting = del != nullptr && !del->is_null();
  if (const json* spec = member(*parent, "spec"); spec != nullptr) {
    job.spec = *spec;
  }
  if (const json* status = member(*parent, "status"); status != nullptr && status->is_object()) {
    job.status = *status;
  }
  return job;
}

// The data of the job's own ConfigMap among the children (nullopt when there is none).
Result<std::optional<std::map<std::string, std::string>>> readOwnConfigMap(const json& doc,
                                                                           const std::string& job) {
  auto configMaps = groupObjects(doc, "children", metacontroller::groupKey("ConfigMap", "v1"));
  if (!configMaps) {
    return configMaps.error();
  }
  std::optional<std::map<std::string, std::string>> own;
  for (const json* cm : *configMaps) {
    const json& m = (*cm)["metadata"];
    if (optionalString(m, "name") != configMapName(job)) {
      continue;  // not ours: Metacontroller deletes children we do not return
    }
    std::map<std::string, std::string> data;
    if (const json* d = member(*cm, "data"); d != nullptr && !d->is_null()) {
      if (!d->is_object()) {
        return invalid("children ConfigMap " + configMapName(job) + ": data must be an object");
      }
      for (const auto& [k, v] : d->items()) {
        if (!v.is_string()) {
          return invalid("children ConfigMap " + configMapName(job) + ": data[" + json(k).dump() +
                         "] is not a string");
        }
        data.emplace(k, v.get<std::string>());
      }
    }
    own = std::move(data);
  }
  return own;
}

// The job's bridge pods among the children (named "<job>-bridge-<n>"), by attempt.
Result<std::vector<ObservedPod>> readBridgePods(const json& doc, const std::string& job) {
  auto pods = groupObjects(doc, "children", metacontroller::groupKey("Pod", "v1"));
  if (!pods) {
    return pods.error();
  }
  std::vector<ObservedPod> out;
  for (const json* pod : *pods) {
    const json& m = (*pod)["metadata"];
    ObservedPod p;
    p.name = optionalString(m, "name");
    auto attempt = attemptOf(job, p.name);
    if (!attempt) {
      continue;
    }
    p.attempt = *attempt;
    const json* podDel = member(m, "deletionTimestamp");
    p.terminating = podDel != nullptr && !podDel->is_null();
    if (const json* st = member(*pod, "status"); st != nullptr) {
      p.phase = optionalString(*st, "phase");
    }
    out.push_back(std::move(p));
  }
  std::sort(out.begin(), out.end(),
            [](const ObservedPod& a, const ObservedPod& b) { return a.attempt < b.attempt; });
  return out;
}

}  // namespace

Result<HookRequest> parseHookRequest(HookKind kind, const std::string& body) {
  auto doc = metacontroller::parseBody(body);
  if (!doc) {
    return doc.error();
  }
  HookRequest r;
  auto actualKind = hookKindOf(kind, *doc);
  if (!actualKind) {
    return actualKind.error();
  }
  r.kind = *actualKind;
  auto version = metacontroller::declaredHookVersion(*doc, hookName(r.kind));
  if (!version) {
    return version.error();
  }
  r.version = *version;
  auto job = readParent(*doc);
  if (!job) {
    return job.error();
  }
  r.job = std::move(*job);
  auto configMap = readOwnConfigMap(*doc, r.job.name);
  if (!configMap) {
    return configMap.error();
  }
  r.configMap = std::move(*configMap);
  auto pods = readBridgePods(*doc, r.job.name);
  if (!pods) {
    return pods.error();
  }
  r.pods = std::move(*pods);
  return r;
}

namespace {

// The job's parameters and, when its ConfigMap's could not be read, why (`note`).
struct ChosenParameters {
  std::optional<JobParameters> params;
  std::string note;
};

// Parameters: frozen in the ConfigMap once the job started; from the spec before that.
ChosenParameters chooseParameters(
    const std::optional<std::map<std::string, std::string>>& configMap,
    const Result<JobParameters>& fromSpec) {
  ChosenParameters chosen;
  if (configMap) {
    if (auto fromMap = parametersFromData(*configMap)) {
      chosen.params = *fromMap;
    } else if (fromSpec) {
      chosen.params = *fromSpec;
      chosen.note = fromMap.error().message + "; rewritten from the spec";
    } else {
      chosen.note = fromMap.error().message;
    }
  } else if (fromSpec) {
    chosen.params = *fromSpec;
  }
  return chosen;
}

// Where the job stands: the pod's report, the attempts and whether the current one is over.
struct Progress {
  PodReport report;
  bool terminal = false;          // the pod reported a terminal job status
  std::int32_t prevAttempts = 0;  // attempts the last status counted
  bool started = false;           // a ConfigMap, a pod or a counted attempt exists
  std::int32_t current = 0;       // the attempt whose pod should exist
  bool exhausted = false;         // its pod stopped and no restart is left
  bool podLive = false;           // some pod has not stopped
};

const ObservedPod* observedPod(const std::vector<ObservedPod>& pods, std::int32_t attempt) {
  for (const ObservedPod& p : pods) {
    if (p.attempt == attempt) {
      return &p;
    }
  }
  return nullptr;
}

Progress readProgress(const HookRequest& request, std::int32_t maxPodRestarts) {
  Progress progress;
  progress.report = readReport(request.configMap);
  progress.terminal = progress.report.status && isTerminal(*progress.report.status);
  progress.prevAttempts = previousAttempts(request.job.status);
  progress.started =
      request.configMap.has_value() || !request.pods.empty() || progress.prevAttempts > 0;

  // Which attempt is current, and whether it has to be replaced.
  progress.current = std::max<std::int32_t>(0, progress.prevAttempts - 1);
  if (!request.pods.empty()) {
    progress.current = std::max(progress.current, request.pods.back().attempt);
  }
  if (!progress.terminal) {
    if (const ObservedPod* pod = observedPod(request.pods, progress.current);
        pod != nullptr && pod->stopped()) {
      if (progress.current < maxPodRestarts) {
        ++progress.current;
      } else {
        progress.exhausted = true;
      }
    }
  }
  progress.podLive = std::any_of(request.pods.begin(), request.pods.end(),
                                 [](const ObservedPod& p) { return !p.stopped(); });
  return progress;
}

// The ConfigMap, the RBAC objects, the pods of earlier attempts (kept for their logs) and the
// current attempt's pod while it exists or may still be started.
std::vector<json> renderChildren(const HookRequest& request, const JobParameters& params,
                                 const Progress& progress, bool kill,
                                 const DecisionConfig& config) {
  const ObservedJob& job = request.job;
  std::vector<json> children;
  children.push_back(configMapObject(job, params, kill));
  for (json& o : rbacObjects(job)) {
    children.push_back(std::move(o));
  }
  for (const ObservedPod& p : request.pods) {
    if (p.attempt < progress.current) {
      children.push_back(podObject(job, params, p.attempt, config));  // kept for logs
    }
  }
  const bool currentObserved = observedPod(request.pods, progress.current) != nullptr;
  if (currentObserved || (!progress.terminal && !progress.exhausted)) {
    children.push_back(podObject(job, params, progress.current, config));
  }
  return children;
}

// The job status to show: the pod's, else the last one known; FAILED once restarts run out.
std::optional<JobStatus> shownJobStatus(const Progress& progress, const json& previous) {
  std::optional<JobStatus> jobStatus = progress.report.status;
  if (!jobStatus) {
    if (auto prev = parseJobStatus(optionalString(previous, "jobStatus"))) {
      jobStatus = prev;  // keep what was known while the pod reports nothing usable
    }
  }
  if (progress.exhausted) {
    jobStatus = JobStatus::kFailed;
  }
  return jobStatus;
}

// The status message: the pod's, overridden in turn by an unknown reported status, exhausted
// restarts and an invalid spec before the start; bad times only when nothing else is said.
std::string statusMessage(const Progress& progress, const Result<JobParameters>& fromSpec) {
  const PodReport& report = progress.report;
  std::string message = report.message;
  if (!report.unknownStatus.empty()) {
    message = "bridge pod reported an unknown job status " + json(report.unknownStatus).dump();
  }
  if (progress.exhausted) {
    message = "bridge pod stopped " + std::to_string(progress.current + 1) +
              " times before the job reached a terminal state; giving up" +
              (report.remoteId.empty() ? std::string()
                                       : " (remote job " + report.remoteId + " may still exist)");
  }
  if (!fromSpec && !progress.started) {
    message = fromSpec.error().message;
  }
  if (!report.badTimes.empty() && message.empty()) {
    std::string keys;
    for (const auto& k : report.badTimes) {
      keys += (keys.empty() ? "" : ", ") + k;
    }
    message = "bridge pod wrote times that are not RFC 3339 (ignored): " + keys;
  }
  return message;
}

json statusConditions(const json& previous, const Progress& progress,
                      const Result<JobParameters>& fromSpec, const std::string& paramsNote,
                      const std::optional<JobStatus>& jobStatus,
                      std::chrono::system_clock::time_point now) {
  const bool started = progress.started;
  const std::string& remoteId = progress.report.remoteId;
  json conditions = json::array();
  if (fromSpec) {
    conditions.push_back(condition(previous, "SpecValid", true, "Valid", "", now));
  } else {
    conditions.push_back(
        condition(previous, "SpecValid", false, started ? "InvalidSpecIgnored" : "InvalidSpec",
                  fromSpec.error().message +
                      (started ? " (the job keeps the parameters it started with)" : ""),
                  now));
  }
  if (!paramsNote.empty()) {
    conditions.push_back(
        condition(previous, "ParametersReadable", false, "ConfigMapEdited", paramsNote, now));
  }
  conditions.push_back(condition(previous, "Submitted", !remoteId.empty(),
                                 remoteId.empty() ? "NoRemoteJob" : "RemoteJobKnown", "", now));
  const bool finished = (jobStatus && isTerminal(*jobStatus)) || progress.exhausted;
  conditions.push_back(condition(previous, "Finished", finished,
                                 finished ? reasonOf(*jobStatus) : "NotFinished", "", now));
  return conditions;
}

// The BridgeJob's whole .status.
json renderStatus(const ObservedJob& job, const Progress& progress,
                  const Result<JobParameters>& fromSpec, const std::string& paramsNote,
                  std::int32_t podsStarted, std::chrono::system_clock::time_point now) {
  json status = json::object();
  const std::optional<JobStatus> jobStatus = shownJobStatus(progress, job.status);
  const std::string message = statusMessage(progress, fromSpec);
  if (jobStatus) {
    status["jobStatus"] = jobStatusName(*jobStatus);
  }
  if (!progress.report.remoteId.empty()) {
    status["remoteJobId"] = progress.report.remoteId;
  }
  for (const auto& [field, value] : progress.report.times) {
    status[field] = value;
  }
  if (!message.empty()) {
    status["message"] = message;
  }
  status["attempts"] = podsStarted;
  status["conditions"] =
      statusConditions(job.status, progress, fromSpec, paramsNote, jobStatus, now);
  return status;
}

}  // namespace

Desired decide(const HookRequest& request, const DecisionConfig& config,
               std::chrono::system_clock::time_point now) {
  const ObservedJob& job = request.job;
  const bool finalizing = request.kind == HookKind::kFinalize;
  Desired out;

  const auto fromSpec = parseSpec(job.spec);
  const ChosenParameters chosen = chooseParameters(request.configMap, fromSpec);
  const Progress progress = readProgress(request, config.maxPodRestarts);

  // Children.
  bool wantChildren = true;
  if (finalizing) {
    if (!progress.started || progress.exhausted || (progress.terminal && !progress.podLive)) {
      out.finalized = true;
      wantChildren = false;
    } else {
      out.finalized = false;
      out.resyncAfterSeconds = config.finalizeResyncSec;
    }
  }
  if (wantChildren && !chosen.params && progress.started) {
    // Nothing can be rendered (ConfigMap and spec both unusable). Refusing leaves every child
    // as it is (Metacontroller applies nothing on an error) instead of deleting a running pod.
    out.refusal =
        makeError(kc::errc::kUnprocessable, "BridgeJob " + job.ns + "/" + job.name +
                                                ": cannot render its children: " + chosen.note +
                                                "; spec: " + fromSpec.error().message);
    return out;
  }
  const bool kill = killRequested(job.spec) || finalizing;
  std::int32_t podsStarted = 0;
  if (wantChildren && chosen.params) {
    out.children = renderChildren(request, *chosen.params, progress, kill, config);
    podsStarted = progress.current + 1;
  } else if (progress.started) {
    podsStarted = std::max<std::int32_t>(progress.prevAttempts,
                                         request.pods.empty() ? 0 : progress.current + 1);
  }

  out.status = renderStatus(job, progress, fromSpec, chosen.note, podsStarted, now);
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
