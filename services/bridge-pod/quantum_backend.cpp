#include "services/bridge-pod/quantum_backend.hpp"

#include "libcore/base/percent_encoding.hpp"
#include "libcore/base/rfc3339.hpp"
#include "services/bridge-pod/credentials.hpp"

namespace kc::bridge::pod {

namespace {

using nlohmann::json;

std::optional<WallSeconds> rfcTime(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) {
    return std::nullopt;
  }
  auto t = kc::parseRfc3339(j[key].get<std::string>());
  if (!t.ok()) {
    return std::nullopt;
  }
  return std::chrono::time_point_cast<std::chrono::seconds>(*t);
}

}  // namespace

std::string quantumTag(const std::string& uid) {
  return "bridgejob-uid:" + uid;
}

Result<json> buildQuantumSubmitBody(const JobContext& ctx) {
  if (ctx.params.scriptLocation == "s3") {
    return makeError(errc::kInvalid,
                     "jobdata.scriptlocation s3: Qiskit Runtime runs IBM's programs only "
                     "(jobscript is the program "
                     "id, e.g. sampler); custom program upload is no longer offered");
  }
  std::string program = ctx.script;
  while (!program.empty() && (program.back() == '\n' || program.back() == ' ')) {
    program.pop_back();
  }
  if (program.empty() || program.find_first_of(" \n\t/") != std::string::npos) {
    return makeError(errc::kInvalid,
                     "jobdata.jobscript must be a program id (sampler, estimator, ...), got '" +
                         program.substr(0, 40) + "'");
  }
  json body{{"program_id", program}, {"tags", json::array({quantumTag(ctx.uid)})}};
  json params = json::object();
  if (!ctx.jobParametersJson.empty()) {
    params = json::parse(ctx.jobParametersJson, nullptr, false);
    if (params.is_discarded() || !params.is_object()) {
      return makeError(errc::kInvalid, "jobparameters is not a JSON object");
    }
  }
  body["params"] = params;
  json props = json::parse(ctx.params.jobProperties.empty() ? "{}" : ctx.params.jobProperties,
                           nullptr, false);
  if (props.is_discarded() || !props.is_object()) {
    return makeError(errc::kInvalid, "jobproperties is not a JSON object");
  }
  for (const auto& [k, v] : props.items()) {
    if (k == "backend" || k == "session_id" || k == "log_level") {
      if (!v.is_string() || v.get<std::string>().empty()) {
        return makeError(errc::kInvalid, "jobproperties." + k + " must be a non-empty string");
      }
    } else if (k == "private") {
      if (!v.is_boolean()) {
        return makeError(errc::kInvalid, "jobproperties.private must be a boolean");
      }
    } else {
      return makeError(
          errc::kInvalid,
          "jobproperties." + k +
              " is not a Qiskit Runtime job field (backend, session_id, log_level, private)");
    }
    body[k] = v;
  }
  if (!body.contains("backend")) {
    return makeError(errc::kInvalid,
                     "jobproperties.backend (the quantum system, e.g. ibm_brisbane) is required");
  }
  return body;
}

Result<Query> parseQuantumJob(unsigned httpStatus, const std::string& body) {
  if (httpStatus == 404) {
    Query q;
    q.gone = true;
    return q;
  }
  if (httpStatus != 200) {
    return httpError("Qiskit Runtime job", httpStatus, body);
  }
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return makeError(errc::kProtocol, "Qiskit Runtime job: reply is not a JSON object");
  }
  std::string status, reason;
  std::int64_t reasonCode = 0;
  if (j.contains("state") && j["state"].is_object() && j["state"].contains("status") &&
      j["state"]["status"].is_string()) {
    status = j["state"]["status"];
    reason = j["state"].value("reason", "");
    if (j["state"].contains("reason_code") && j["state"]["reason_code"].is_number_integer()) {
      reasonCode = j["state"]["reason_code"];
    }
  } else if (j.contains("status") && j["status"].is_string()) {
    status = j["status"];
  } else {
    return makeError(errc::kProtocol, "Qiskit Runtime job: no state.status in the reply");
  }
  std::string upper;
  for (char c : status) {
    upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  Query q;
  q.job.nativeState = status;
  if (upper == "QUEUED") {
    q.job.status = JobStatus::kSubmitted;
  } else if (upper == "RUNNING") {
    q.job.status = JobStatus::kRunning;
  } else if (upper == "COMPLETED") {
    q.job.status = JobStatus::kDone;
  } else if (upper == "CANCELLED - RAN TOO LONG" ||
             (upper == "CANCELLED" && (reasonCode == 1305 || reason == "RAN TOO LONG"))) {
    q.job.status = JobStatus::kFailed;
  } else if (upper == "CANCELLED") {
    q.job.status = JobStatus::kKilled;
  } else if (upper == "FAILED") {
    q.job.status = JobStatus::kFailed;
  } else {
    return makeError(errc::kProtocol, "Qiskit Runtime job status '" + status + "' is not known");
  }
  q.job.submitTime = rfcTime(j, "created");
  q.job.message = "Qiskit Runtime " + status;
  if (!reason.empty()) {
    q.job.message +=
        ": " + reason + (reasonCode != 0 ? " (code " + std::to_string(reasonCode) + ")" : "");
  }
  return q;
}

IamTokenSource::IamTokenSource(std::string iamUrl, std::string credentialsDir, std::string caFile,
                               kc::Clock* clock)
    : url_(std::move(iamUrl)),
      dir_(std::move(credentialsDir)),
      caFile_(std::move(caFile)),
      clock_(kc::clockOr(clock)) {}

void IamTokenSource::invalidate() {
  std::lock_guard lock(mu_);
  token_.clear();
}

int IamTokenSource::exchanges() const {
  std::lock_guard lock(mu_);
  return exchanges_;
}

Result<std::string> IamTokenSource::token() {
  std::lock_guard lock(mu_);
  const auto now = clock_.wallNow();
  if (!token_.empty() && now + lifetime_ / 5 < expires_) {
    return token_;
  }
  auto key = readSecretKey(dir_, "password");
  if (!key.ok()) {
    return key.error();
  }
  auto url = kc::net::parseUrl(url_);
  if (!url.ok()) {
    return makeError(errc::kInvalid, "IAM URL: " + url.error().message);
  }
  const auto schemeEnd = url_.find("://");
  const auto pathStart = url_.find('/', schemeEnd + 3);
  const std::string origin = pathStart == std::string::npos ? url_ : url_.substr(0, pathStart);
  const std::string path = pathStart == std::string::npos ? "/" : url_.substr(pathStart);
  kc::net::ClientOptions co;
  co.baseUrl = origin;
  co.tls.caFile = caFile_;
  auto http = kc::net::HttpClient::create(std::move(co));
  if (!http.ok()) {
    return makeError(errc::kInvalid, "IAM URL: " + http.error().message);
  }
  const std::string form =
      "grant_type=" + kc::percentEncode("urn:ibm:params:oauth:grant-type:apikey") +
      "&apikey=" + kc::percentEncode(*key);
  auto r = (*http)->request(
      "POST", path, form,
      {{"Content-Type", "application/x-www-form-urlencoded"}, {"Accept", "application/json"}});
  if (!r.ok()) {
    return r.error();
  }
  if (r->status == 400 || r->status == 401) {
    // The API key was refused (the reply says why without echoing the key).
    return makeError(errc::kUnauthorized,
                     "IAM refused the API key: HTTP " + std::to_string(r->status));
  }
  if (r->status != 200) {
    return httpError("IAM token", r->status, r->body);
  }
  json j = json::parse(r->body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("access_token") ||
      !j["access_token"].is_string() || !j.contains("expires_in") ||
      !j["expires_in"].is_number_integer() || j["expires_in"].get<std::int64_t>() <= 0) {
    return makeError(errc::kProtocol,
                     "IAM token reply without access_token and a positive expires_in");
  }
  token_ = j["access_token"];
  lifetime_ = std::chrono::seconds(j["expires_in"].get<std::int64_t>());
  expires_ = now + lifetime_;
  ++exchanges_;
  return token_;
}

Result<std::unique_ptr<QuantumBackend>> QuantumBackend::create(QuantumOptions options) {
  auto http = backendHttpClient(options.resourceUrl, options.caFile, options.timeout);
  if (!http.ok()) {
    return http.error();
  }
  return std::unique_ptr<QuantumBackend>(
      new QuantumBackend(std::move(options), std::move(http).value()));
}

QuantumBackend::QuantumBackend(QuantumOptions options, std::unique_ptr<kc::net::HttpClient> http)
    : options_(std::move(options)),
      http_(std::move(http)),
      tokens_(options_.iamUrl, options_.credentialsDir, options_.caFile, options_.clock) {}

Result<kc::net::Response> QuantumBackend::send(const std::string& method, const std::string& target,
                                               std::string body) {
  auto crn = readSecretKey(options_.credentialsDir, "username");
  if (!crn.ok()) {
    return crn.error();
  }
  for (int attempt = 0;; ++attempt) {
    auto token = tokens_.token();
    if (!token.ok()) {
      return token.error();
    }
    kc::net::Headers h{{"Authorization", "Bearer " + *token},
                       {"Service-CRN", *crn},
                       {"IBM-API-Version", kQuantumApiVersion}};
    if (!body.empty()) {
      h.push_back({"Content-Type", "application/json"});
    }
    auto r = http_->request(method, target, body, std::move(h));
    if (r.ok() && r->status == 401 && attempt == 0) {
      tokens_.invalidate();  // revoked or expired early: one more try with a fresh token
      continue;
    }
    return r;
  }
}

Status QuantumBackend::prepare() {
  auto token = tokens_.token();
  if (!token.ok()) {
    return token.error();
  }
  return okStatus();
}

Result<std::optional<std::string>> QuantumBackend::findTagged(const JobContext& ctx) {
  auto r = send("GET", "/jobs?limit=10&tags=" + kc::percentEncode(quantumTag(ctx.uid)));
  if (!r.ok()) {
    return r.error();
  }
  if (r->status != 200) {
    return httpError("Qiskit Runtime job list", r->status, r->body);
  }
  json j = json::parse(r->body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("jobs") || !j["jobs"].is_array()) {
    return makeError(errc::kProtocol, "Qiskit Runtime job list: no jobs array");
  }
  std::vector<std::string> ids;
  for (const json& job : j["jobs"]) {
    if (!job.is_object() || !job.contains("id") || !job["id"].is_string()) {
      return makeError(errc::kProtocol, "Qiskit Runtime job list: a job without id");
    }
    // The server filters by tag; check again rather than adopt someone else's job.
    bool tagged = false;
    if (job.contains("tags") && job["tags"].is_array()) {
      for (const json& t : job["tags"]) {
        tagged = tagged || t == quantumTag(ctx.uid);
      }
    }
    if (tagged) {
      ids.push_back(job["id"]);
    }
  }
  if (ids.size() > 1) {
    return makeError(errc::kConflict, "more than one Qiskit Runtime job is tagged " +
                                          quantumTag(ctx.uid) + ": " + ids[0] + ", " + ids[1]);
  }
  if (ids.empty()) {
    return std::optional<std::string>{};
  }
  return std::optional<std::string>{ids[0]};
}

Result<std::string> QuantumBackend::submit(const JobContext& ctx) {
  auto body = buildQuantumSubmitBody(ctx);
  if (!body.ok()) {
    return body.error();
  }
  auto r = send("POST", "/jobs", body->dump());
  if (!r.ok()) {
    return r.error();
  }
  if (r->status != 200 && r->status != 201) {
    if (r->status == 409) {
      return makeError(errc::kThrottled,
                       "Qiskit Runtime: usage exceeds the instance limit (409), will retry");
    }
    return httpError("Qiskit Runtime submit", r->status, r->body);
  }
  json j = json::parse(r->body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("id") || !j["id"].is_string() ||
      j["id"].get<std::string>().empty()) {
    return makeError(errc::kProtocol, "Qiskit Runtime submit: reply without a job id");
  }
  return j["id"].get<std::string>();
}

Result<Query> QuantumBackend::query(const std::string& id) {
  auto r = send("GET", "/jobs/" + kc::percentEncode(id));
  if (!r.ok()) {
    return r.error();
  }
  auto q = parseQuantumJob(r->status, r->body);
  if (!q.ok() || q->gone || !isTerminal(q->job.status)) {
    return q;
  }
  // The run's times are in the metrics (best effort: the status stands without them).
  auto m = send("GET", "/jobs/" + kc::percentEncode(id) + "/metrics");
  if (m.ok() && m->status == 200) {
    json j = json::parse(m->body, nullptr, false);
    if (!j.is_discarded() && j.is_object() && j.contains("timestamps")) {
      q->job.startTime = rfcTime(j["timestamps"], "running");
      q->job.endTime = rfcTime(j["timestamps"], "finished");
      if (auto created = rfcTime(j["timestamps"], "created")) {
        q->job.submitTime = created;
      }
    }
  }
  return q;
}

Result<bool> QuantumBackend::cancel(const std::string& id) {
  auto r = send("POST", "/jobs/" + kc::percentEncode(id) + "/cancel", "{}");
  if (!r.ok()) {
    return r.error();
  }
  if (r->status == 404) {
    return false;
  }
  if (r->status == 409) {
    return true;  // already final: the next poll says how it ended
  }
  if (r->status != 204 && r->status != 200) {
    return httpError("Qiskit Runtime cancel", r->status, r->body);
  }
  return true;
}

Result<std::string> QuantumBackend::fetchOutput(const JobContext&, const std::string& id,
                                                const std::string& file) {
  if (file != "results" && file != "logs" && file != "metrics") {
    return makeError(errc::kNotFound, "Qiskit Runtime keeps results, logs and metrics; '" + file +
                                          "' is none of them");
  }
  auto r = send("GET", "/jobs/" + kc::percentEncode(id) + "/" + file);
  if (!r.ok()) {
    return r.error();
  }
  if (r->status != 200) {
    return httpError("Qiskit Runtime " + file, r->status, r->body);
  }
  return std::move(r->body);
}

}  // namespace kc::bridge::pod
