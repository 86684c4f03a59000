#include "services/bridge-pod/slurm_backend.hpp"

#include <fstream>
#include <sstream>

#include "services/bridge-pod/slurm_codec.hpp"
#include "services/bridge-pod/slurm_script.hpp"

namespace kc::bridge::pod {

namespace {

std::optional<WallSeconds> epoch(const std::optional<std::int64_t>& t) {
  if (!t) {
    return std::nullopt;
  }
  return WallSeconds(std::chrono::seconds(*t));
}

Result<std::int64_t> parseId(const std::string& id) {
  std::int64_t v = 0;
  if (id.empty() || id.size() > 18) {
    return makeError(errc::kInvalid, "Slurm job id '" + id + "' is not a positive integer");
  }
  for (char c : id) {
    if (c < '0' || c > '9') {
      return makeError(errc::kInvalid, "Slurm job id '" + id + "' is not a positive integer");
    }
    v = v * 10 + (c - '0');
  }
  if (v <= 0) {
    return makeError(errc::kInvalid, "Slurm job id '" + id + "' is not a positive integer");
  }
  return v;
}

}  // namespace

bool safeRelativePath(const std::string& file) {
  if (file.empty() || file.front() == '/' || file.find('\0') != std::string::npos) {
    return false;
  }
  std::stringstream ss(file);
  std::string part;
  while (std::getline(ss, part, '/')) {
    if (part == "..") {
      return false;
    }
  }
  return true;
}

Result<std::unique_ptr<SlurmBackend>> SlurmBackend::create(SlurmOptions options) {
  auto http = backendHttpClient(options.resourceUrl, options.caFile, options.timeout);
  if (!http.ok()) {
    return http.error();
  }
  return std::unique_ptr<SlurmBackend>(new SlurmBackend(std::move(options), std::move(http).value()));
}

SlurmBackend::SlurmBackend(SlurmOptions options, std::unique_ptr<kc::net::HttpClient> http)
    : options_(std::move(options)),
      http_(std::move(http)),
      tokens_(options_.credentialsDir, options_.tokenLifespan, options_.clock) {}

Result<kc::net::Response> SlurmBackend::send(const std::string& method, const std::string& target, std::string body) {
  auto user = tokens_.user();
  if (!user.ok()) {
    return user.error();
  }
  auto token = tokens_.token();
  if (!token.ok()) {
    return token.error();
  }
  kc::net::Headers h{{"X-SLURM-USER-NAME", *user}, {"X-SLURM-USER-TOKEN", *token}};
  if (!body.empty()) {
    h.push_back({"Content-Type", "application/json"});
  }
  return http_->request(method, target, std::move(body), std::move(h));
}

std::uint64_t SlurmBackend::stagingLimit() const { return kSlurmStagingLimit; }

Status SlurmBackend::prepare() {
  auto r = send("GET", "/ping");
  if (!r.ok()) {
    return r.error();
  }
  if (r->status == 401) {
    return makeError(errc::kUnauthorized, "slurmrestd ping: 401 (authentication failure)");
  }
  if (r->status >= 500) {
    // 22.05 answers a bad or expired token with 500 "slurmctld config is unable to load".
    const bool auth = r->body.find("slurm_load_ctl_conf") != std::string::npos;
    return makeError(auth ? errc::kUnauthorized : errc::kServerError,
                     "slurmrestd ping: HTTP " + std::to_string(r->status) + (auth ? " (token rejected)" : ""));
  }
  if (r->status != 200) {
    return makeError(errc::kInvalid, "slurmrestd ping: HTTP " + std::to_string(r->status) +
                                         " (is resourceURL the /slurm/v0.0.38/ prefix?)");
  }
  return okStatus();
}

Result<std::optional<std::string>> SlurmBackend::findTagged(const JobContext& ctx) {
  auto r = send("GET", "/jobs");
  if (!r.ok()) {
    return r.error();
  }
  auto found = slurm::findTaggedJob(static_cast<int>(r->status), r->body, ctx.uid);
  if (!found.ok()) {
    return found.error();
  }
  if (!*found) {
    return std::optional<std::string>{};
  }
  return std::optional<std::string>{std::to_string((*found)->jobId)};
}

Result<std::string> SlurmBackend::submit(const JobContext& ctx) {
  auto script = slurmBatchScript(ctx);  // the remote wrapper, the staging prologue
  if (!script.ok()) {
    return script.error();
  }
  slurm::SubmitInput in{*script, ctx.params.jobProperties, ctx.uid, ctx.jobName};
  auto body = slurm::buildSubmitBody(in);
  if (!body.ok()) {
    return body.error();
  }
  auto r = send("POST", "/job/submit", body->dump());
  if (!r.ok()) {
    return r.error();
  }
  auto id = slurm::parseSubmitResponse(static_cast<int>(r->status), r->body);
  if (!id.ok()) {
    return id.error();
  }
  return std::to_string(*id);
}

Result<Query> SlurmBackend::query(const std::string& id) {
  auto n = parseId(id);
  if (!n.ok()) {
    return n.error();
  }
  auto r = send("GET", "/job/" + id);
  if (!r.ok()) {
    return r.error();
  }
  auto q = slurm::parseJobResponse(static_cast<int>(r->status), r->body, *n);
  if (!q.ok()) {
    return q.error();
  }
  Query out;
  out.gone = q->gone;
  if (q->job) {
    const slurm::JobInfo& j = *q->job;
    out.job.status = j.status;
    out.job.nativeState = j.jobState;
    out.job.submitTime = epoch(j.submitTime);
    out.job.startTime = epoch(j.startTime);
    out.job.endTime = epoch(j.endTime);
    out.job.message = "Slurm " + j.jobState;
    if (j.stateReason != "None" && !j.stateReason.empty()) {
      out.job.message += " (" + j.stateReason + ")";
    }
    if (isTerminal(j.status)) {
      out.job.message += ", " + slurm::describe(j.exit);
    }
  }
  return out;
}

Result<bool> SlurmBackend::cancel(const std::string& id) {
  auto n = parseId(id);
  if (!n.ok()) {
    return n.error();
  }
  auto r = send("DELETE", "/job/" + id);
  if (!r.ok()) {
    return r.error();
  }
  return slurm::parseCancelResponse(static_cast<int>(r->status), r->body);
}

Result<std::string> SlurmBackend::fetchOutput(const JobContext& ctx, const std::string& /*id*/,
                                              const std::string& file) {
  if (!safeRelativePath(file)) {
    return makeError(errc::kInvalid, "output file '" + file + "' must be a relative path inside the job's directory");
  }
  std::string cwd;
  try {
    cwd = nlohmann::json::parse(ctx.params.jobProperties).at("current_working_directory").get<std::string>();
  } catch (const std::exception&) {
    return makeError(errc::kInvalid, "jobproperties has no current_working_directory to read outputs from");
  }
  const std::string path = options_.sharedRoot + cwd + "/" + file;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return makeError(errc::kNotFound, "output " + path + " cannot be read");
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace kc::bridge::pod
