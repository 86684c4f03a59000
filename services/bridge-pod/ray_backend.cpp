#include "services/bridge-pod/ray_backend.hpp"

#include "libcore/base/percent_encoding.hpp"
#include "services/bridge-pod/credentials.hpp"
#include "services/bridge-pod/ray_package.hpp"

namespace kc::bridge::pod {

namespace {

using nlohmann::json;

Result<json> parseObject(const std::string& what, const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return makeError(errc::kInvalid, what + " is not a JSON object");
  }
  return j;
}

std::optional<WallSeconds> fromMillis(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number_integer()) {
    return std::nullopt;
  }
  const auto ms = j[key].get<std::int64_t>();
  if (ms <= 0) {
    return std::nullopt;
  }
  return WallSeconds(std::chrono::seconds(ms / 1000));
}

}  // namespace

std::string raySubmissionId(const std::string& uid) {
  return "bridge-" + uid;
}

std::optional<JobStatus> mapRayStatus(std::string_view s) {
  if (s == "PENDING") {
    return JobStatus::kSubmitted;
  }
  if (s == "RUNNING") {
    return JobStatus::kRunning;
  }
  if (s == "SUCCEEDED") {
    return JobStatus::kDone;
  }
  if (s == "FAILED") {
    return JobStatus::kFailed;
  }
  if (s == "STOPPED") {
    return JobStatus::kKilled;
  }
  return std::nullopt;
}

namespace {

// The entrypoint: the command itself (scriptLocation "remote"), else the inline Python script,
// passed in BRIDGE_SCRIPT of `env` and run from there.
Status setEntrypoint(const JobContext& ctx, json& body, json& env) {
  if (ctx.params.scriptLocation == "remote") {
    if (ctx.script.empty()) {
      return makeError(errc::kInvalid, "jobscript: the entrypoint command is empty");
    }
    body["entrypoint"] = ctx.script;
    return okStatus();
  }
  if (ctx.script.empty()) {
    return makeError(errc::kInvalid, "jobscript: the script is empty");
  }
  env["BRIDGE_SCRIPT"] = ctx.script;
  body["entrypoint"] =
      "python -c 'import os; exec(compile(os.environ[\"BRIDGE_SCRIPT\"], \"script.py\", "
      "\"exec\"))'";
  return okStatus();
}

// scriptmetadata.pip ({name: version}, "" for any version) as runtime_env.pip requirements.
Result<json> pipRequirements(const json& pip) {
  if (!pip.is_object()) {
    return makeError(errc::kInvalid, "scriptmetadata.pip must be an object of name: version");
  }
  json requirements = json::array();
  for (const auto& [name, version] : pip.items()) {
    if (!version.is_string()) {
      return makeError(errc::kInvalid, "scriptmetadata.pip." + name + " must be a version string");
    }
    requirements.push_back(
        version.get<std::string>().empty() ? name : name + "==" + version.get<std::string>());
  }
  return requirements;
}

// scriptmetadata.env ({name: value}) into `env`; BRIDGE_ names are the bridge's own.
Status addScriptEnv(const json& vars, json& env) {
  if (!vars.is_object()) {
    return makeError(errc::kInvalid, "scriptmetadata.env must be an object of strings");
  }
  for (const auto& [name, value] : vars.items()) {
    if (!value.is_string()) {
      return makeError(errc::kInvalid, "scriptmetadata.env." + name + " must be a string");
    }
    if (name.rfind("BRIDGE_", 0) == 0) {
      return makeError(errc::kInvalid,
                       "scriptmetadata.env." + name + ": BRIDGE_ names are reserved");
    }
    env[name] = value;
  }
  return okStatus();
}

// The scriptmetadata object (keys pip and env) into the runtime environment and `env`.
Status addScriptMetadata(const std::string& metadata, json& runtimeEnv, json& env) {
  auto m = parseObject("scriptmetadata", metadata);
  if (!m.ok()) {
    return m.error();
  }
  for (const auto& [k, v] : m->items()) {
    if (k == "pip") {
      auto pip = pipRequirements(v);
      if (!pip.ok()) {
        return pip.error();
      }
      runtimeEnv["pip"] = *pip;
    } else if (k == "env") {
      if (auto s = addScriptEnv(v, env); !s.ok()) {
        return s.error();
      }
    } else {
      return makeError(errc::kInvalid, "scriptmetadata." + k + " is not known (pip, env)");
    }
  }
  return okStatus();
}

// Why value `v` cannot be Ray job field `key` (jobproperties.<key>), or nullopt.
std::optional<std::string> rayJobFieldProblem(const std::string& key, const json& v) {
  if (key == "entrypoint_num_cpus" || key == "entrypoint_num_gpus") {
    if (!v.is_number() || v.get<double>() < 0) {
      return "jobproperties." + key + " must be a number >= 0";
    }
    return std::nullopt;
  }
  if (key == "entrypoint_memory") {
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0) {
      return "jobproperties.entrypoint_memory must be an integer >= 0 (bytes)";
    }
    return std::nullopt;
  }
  if (key == "entrypoint_resources") {
    if (!v.is_object()) {
      return "jobproperties.entrypoint_resources must be an object of numbers";
    }
    for (const auto& [r, n] : v.items()) {
      if (!n.is_number()) {
        return "jobproperties.entrypoint_resources." + r + " must be a number";
      }
    }
    return std::nullopt;
  }
  return "jobproperties." + key +
         " is not a Ray job field (entrypoint_num_cpus, entrypoint_num_gpus, entrypoint_memory, "
         "entrypoint_resources)";
}

// The jobproperties object (Ray's entrypoint_* fields) into the body.
Status addJobProperties(const std::string& properties, json& body) {
  auto props = parseObject("jobproperties", properties);
  if (!props.ok()) {
    return props.error();
  }
  for (const auto& [k, v] : props->items()) {
    if (auto problem = rayJobFieldProblem(k, v)) {
      return makeError(errc::kInvalid, *problem);
    }
    body[k] = v;
  }
  return okStatus();
}

}  // namespace

Result<json> buildRaySubmitBody(const JobContext& ctx, const std::string& workingDir) {
  json body{{"submission_id", raySubmissionId(ctx.uid)},
            {"metadata",
             {{"bridgejob-uid", ctx.uid}, {"bridgejob", ctx.jobNamespace + "/" + ctx.jobName}}}};
  json env = json::object();
  if (auto s = setEntrypoint(ctx, body, env); !s.ok()) {
    return s.error();
  }
  if (!ctx.jobParametersJson.empty()) {
    auto p = parseObject("jobparameters", ctx.jobParametersJson);
    if (!p.ok()) {
      return p.error();
    }
    env["BRIDGE_JOB_PARAMETERS"] = p->dump();
  }
  json runtimeEnv = json::object();
  if (!ctx.scriptMetadata.empty()) {
    if (auto s = addScriptMetadata(ctx.scriptMetadata, runtimeEnv, env); !s.ok()) {
      return s.error();
    }
  }
  if (!env.empty()) {
    runtimeEnv["env_vars"] = env;
  }
  if (!workingDir.empty()) {
    runtimeEnv["working_dir"] = workingDir;
  }
  if (!runtimeEnv.empty()) {
    body["runtime_env"] = runtimeEnv;
  }
  if (!ctx.params.jobProperties.empty()) {
    if (auto s = addJobProperties(ctx.params.jobProperties, body); !s.ok()) {
      return s.error();
    }
  }
  return body;
}

Result<Query> parseRayJob(unsigned httpStatus, const std::string& body) {
  if (httpStatus == 404) {
    Query q;
    q.gone = true;
    return q;
  }
  if (httpStatus != 200) {
    return httpError("Ray job status", httpStatus, body);
  }
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("status") || !j["status"].is_string()) {
    return makeError(errc::kProtocol, "Ray job status: no status string in the reply");
  }
  const std::string status = j["status"];
  auto mapped = mapRayStatus(status);
  if (!mapped) {
    return makeError(errc::kProtocol, "Ray job status '" + status + "' is not a Ray JobStatus");
  }
  Query q;
  q.job.status = *mapped;
  q.job.nativeState = status;
  q.job.startTime = fromMillis(j, "start_time");
  q.job.submitTime = q.job.startTime;
  q.job.endTime = fromMillis(j, "end_time");
  q.job.message = "Ray " + status;
  if (j.contains("message") && j["message"].is_string() &&
      !j["message"].get<std::string>().empty()) {
    // Ray appends the log tail after a newline: the status keeps the first line.
    const std::string m = j["message"];
    q.job.message += ": " + m.substr(0, m.find('\n'));
  }
  return q;
}

Result<std::unique_ptr<RayBackend>> RayBackend::create(RayOptions options) {
  auto http = backendHttpClient(options.resourceUrl, options.caFile, options.timeout);
  if (!http.ok()) {
    return http.error();
  }
  return std::unique_ptr<RayBackend>(new RayBackend(std::move(options), std::move(http).value()));
}

RayBackend::RayBackend(RayOptions options, std::unique_ptr<kc::net::HttpClient> http)
    : options_(std::move(options)), http_(std::move(http)) {}

Result<kc::net::Response> RayBackend::send(const std::string& method, const std::string& target,
                                           std::string body, const std::string& contentType) {
  kc::net::Headers h;
  if (secretKeyExists(options_.credentialsDir, "token")) {
    auto token = readSecretKey(options_.credentialsDir, "token");
    if (!token.ok()) {
      return token.error();
    }
    h.push_back({"Authorization", "Bearer " + *token});
  }
  if (!body.empty()) {
    h.push_back({"Content-Type", contentType});
  }
  return http_->request(method, target, std::move(body), std::move(h));
}

Status RayBackend::prepare() {
  auto r = send("GET", "/api/version");
  if (!r.ok()) {
    return r.error();
  }
  if (r->status != 200) {
    return httpError("Ray /api/version", r->status, r->body);
  }
  return okStatus();
}

Result<std::optional<std::string>> RayBackend::findTagged(const JobContext& ctx) {
  const std::string id = raySubmissionId(ctx.uid);
  auto r = send("GET", "/api/jobs/" + kc::percentEncode(id));
  if (!r.ok()) {
    return r.error();
  }
  if (r->status == 404) {
    return std::optional<std::string>{};
  }
  if (r->status != 200) {
    return httpError("Ray job lookup", r->status, r->body);
  }
  return std::optional<std::string>{id};
}

std::uint64_t RayBackend::stagingLimit() const {
  return kRayStagingLimit;
}

Result<std::string> RayBackend::uploadPackage(const std::vector<StagedFile>& files) {
  auto zip = rayZipPackage(files);
  if (!zip.ok()) {
    return zip.error();
  }
  const std::string uri = rayPackageUri(*zip);
  // The URI without "gcs://" is the route's {package_name}: GET (exists?) and PUT (upload).
  const std::string target = "/api/packages/gcs/" + kc::percentEncode(uri.substr(6));
  auto found = send("GET", target);
  if (!found.ok()) {
    return found.error();
  }
  if (found->status == 200) {
    return uri;  // uploaded before (content-addressed: the same files)
  }
  if (found->status != 404) {
    return httpError("Ray package lookup", found->status, found->body);
  }
  auto put = send("PUT", target, std::move(zip).value(), "application/zip");
  if (!put.ok()) {
    return put.error();
  }
  if (put->status != 200) {
    return httpError("Ray package upload", put->status, put->body);
  }
  return uri;
}

Result<std::string> RayBackend::submit(const JobContext& ctx) {
  std::string workingDir;
  if (!ctx.additionalFiles.empty()) {
    auto uri = uploadPackage(ctx.additionalFiles);
    if (!uri.ok()) {
      return uri.error();
    }
    workingDir = *uri;
  }
  auto body = buildRaySubmitBody(ctx, workingDir);
  if (!body.ok()) {
    return body.error();
  }
  const std::string id = raySubmissionId(ctx.uid);
  auto r = send("POST", "/api/jobs/", body->dump());
  if (!r.ok()) {
    return r.error();
  }
  if (r->status == 400 && r->body.find("already exists") != std::string::npos) {
    return id;  // our earlier submit arrived: the deterministic id makes this idempotent
  }
  if (r->status != 200) {
    return httpError("Ray submit", r->status, r->body);
  }
  json j = json::parse(r->body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("submission_id") ||
      j["submission_id"] != id) {
    return makeError(errc::kProtocol,
                     "Ray submit: reply without our submission_id: " + excerpt(r->body));
  }
  return id;
}

Result<Query> RayBackend::query(const std::string& id) {
  auto r = send("GET", "/api/jobs/" + kc::percentEncode(id));
  if (!r.ok()) {
    return r.error();
  }
  return parseRayJob(r->status, r->body);
}

Result<bool> RayBackend::cancel(const std::string& id) {
  auto r = send("POST", "/api/jobs/" + kc::percentEncode(id) + "/stop", "{}");
  if (!r.ok()) {
    return r.error();
  }
  if (r->status == 404) {
    return false;
  }
  if (r->status != 200) {
    return httpError("Ray stop", r->status, r->body);
  }
  json j = json::parse(r->body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("stopped") || !j["stopped"].is_boolean()) {
    return makeError(errc::kProtocol, "Ray stop: reply without 'stopped': " + excerpt(r->body));
  }
  return true;  // stopped=false: already finished; the next poll shows how
}

Result<std::string> RayBackend::fetchOutput(const JobContext&, const std::string& id,
                                            const std::string& file) {
  if (file != "logs") {
    return makeError(errc::kNotFound,
                     "Ray keeps no files but the job's logs: '" + file + "' cannot be fetched");
  }
  auto r = send("GET", "/api/jobs/" + kc::percentEncode(id) + "/logs");
  if (!r.ok()) {
    return r.error();
  }
  if (r->status != 200) {
    return httpError("Ray logs", r->status, r->body);
  }
  json j = json::parse(r->body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("logs") || !j["logs"].is_string()) {
    return makeError(errc::kProtocol, "Ray logs: reply without a 'logs' string");
  }
  return j["logs"].get<std::string>();
}

}  // namespace kc::bridge::pod
