#include "services/bridge-pod/slurm_backend.hpp"

#include <spdlog/spdlog.h>

#include <fstream>
#include <sstream>

#include "libcore/base/rfc3339.hpp"
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
  auto url = slurm::splitResourceUrl(options.resourceUrl);
  if (!url.ok()) {
    return url.error();
  }
  std::string implemented;
  for (slurm::ApiVersion v : slurm::implementedVersions()) {
    implemented += (implemented.empty() ? "" : ", ") + slurm::versionName(v);
  }
  // Which version: an explicit one, the resourceURL's (auto), or none yet (discovered).
  std::optional<slurm::ApiVersion> version;
  const std::string& wanted = options.apiVersion;
  if (wanted != "auto" && wanted != "newest") {
    version = slurm::parseVersion(wanted);
    if (!version) {
      return makeError(errc::kInvalid, "Slurm API version '" + wanted +
                                           "' is not one the bridge pod speaks (" + implemented +
                                           ", or auto / newest)");
    }
    if (!url->version.empty() && url->version != wanted) {
      return makeError(errc::kInvalid, "resourceURL names " + url->version +
                                           " but the Slurm API version asked for is " + wanted);
    }
  } else if (wanted == "auto" && !url->version.empty()) {
    version = slurm::parseVersion(url->version);
    if (!version) {
      return makeError(errc::kInvalid,
                       "resourceURL names slurmrestd " + url->version +
                           ", which the bridge pod does not speak (" + implemented +
                           "); give the base URL to use the newest one the server offers");
    }
  }
  auto http = backendHttpClient(url->root, options.caFile, options.timeout);
  if (!http.ok()) {
    return http.error();
  }
  return std::unique_ptr<SlurmBackend>(
      new SlurmBackend(std::move(options), std::move(http).value(), version));
}

SlurmBackend::SlurmBackend(SlurmOptions options, std::unique_ptr<kc::net::HttpClient> http,
                           std::optional<slurm::ApiVersion> version)
    : options_(std::move(options)),
      version_(version),
      http_(std::move(http)),
      tokens_(options_.credentialsDir, options_.tokenLifespan, options_.clock) {}

Result<kc::net::Response> SlurmBackend::sendRoot(const std::string& method,
                                                 const std::string& target, std::string body) {
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

Result<kc::net::Response> SlurmBackend::send(const std::string& method, const std::string& path,
                                             std::string body) {
  if (!version_) {
    return makeError(errc::kInvalid,
                     "the Slurm API version is not known yet (prepare() discovers it)");
  }
  return sendRoot(method, "/slurm/" + slurm::versionName(*version_) + path, std::move(body));
}

namespace {

// A reply that is not a usable answer, as a transient or permanent error (22.05 answers a bad
// or expired token with 500 "slurmctld config is unable to load").
Error replyError(const std::string& what, const kc::net::Response& r) {
  if (r.status == 401) {
    return makeError(errc::kUnauthorized, what + ": 401 (authentication failure)");
  }
  if (r.status >= 500) {
    const bool auth = r.body.find("slurm_load_ctl_conf") != std::string::npos;
    return makeError(
        auth ? errc::kUnauthorized : errc::kServerError,
        what + ": HTTP " + std::to_string(r.status) + (auth ? " (token rejected)" : ""));
  }
  return makeError(errc::kInvalid,
                   what + ": HTTP " + std::to_string(r.status) + " " + excerpt(r.body));
}

}  // namespace

Status SlurmBackend::ping() {
  auto r = send("GET", "/ping");
  if (!r.ok()) {
    return r.error();
  }
  if (r->status != 200) {
    Error e = replyError("slurmrestd ping", *r);
    if (e.code == errc::kInvalid) {
      e.message += " (does the server offer " + slurm::versionName(*version_) + "?)";
    }
    return e;
  }
  return okStatus();
}

Status SlurmBackend::discover() {
  std::string implemented;
  for (slurm::ApiVersion v : slurm::implementedVersions()) {
    implemented += (implemented.empty() ? "" : ", ") + slurm::versionName(v);
  }
  // The OpenAPI document lists every /slurm/v0.0.NN/ path the server serves.
  for (const char* doc : {"/openapi/v3", "/openapi"}) {
    auto r = sendRoot("GET", doc);
    if (!r.ok()) {
      return r.error();
    }
    if (r->status == 401 || r->status >= 500) {
      return replyError(std::string("slurmrestd GET ") + doc, *r);
    }
    if (r->status != 200) {
      continue;
    }
    auto offered = slurm::offeredVersions(r->body);
    if (!offered.ok() || offered->empty()) {
      continue;  // not a document we can read: ask the next way
    }
    std::string list;
    for (const std::string& v : *offered) {
      list += (list.empty() ? "" : ", ") + v;
    }
    version_ = slurm::newestImplemented(*offered);
    if (!version_) {
      return makeError(errc::kInvalid, "slurmrestd at " + options_.resourceUrl + " offers " + list +
                                           ", none of the versions the bridge pod speaks (" +
                                           implemented + ")");
    }
    spdlog::info("slurmrestd offers {} ({}); speaking {}", list, doc,
                 slurm::versionName(*version_));
    return okStatus();
  }
  // No readable document: the newest version whose ping answers.
  for (slurm::ApiVersion v : slurm::implementedVersions()) {
    auto r = sendRoot("GET", "/slurm/" + slurm::versionName(v) + "/ping");
    if (!r.ok()) {
      return r.error();
    }
    if (r->status == 200) {
      version_ = v;
      spdlog::info("slurmrestd answers ping on {} (no OpenAPI document); speaking it",
                   slurm::versionName(v));
      return okStatus();
    }
    if (r->status == 401 || r->status >= 500) {
      return replyError("slurmrestd ping " + slurm::versionName(v), *r);
    }
  }
  return makeError(errc::kInvalid, "slurmrestd at " + options_.resourceUrl +
                                       " serves no OpenAPI document and answers no ping of " +
                                       implemented);
}

std::uint64_t SlurmBackend::stagingLimit() const {
  return kSlurmStagingLimit;
}

Status SlurmBackend::prepare() {
  if (!version_) {
    if (auto d = discover(); !d.ok()) {
      return d;
    }
  }
  return ping();
}

Result<std::optional<std::string>> SlurmBackend::findTagged(const JobContext& ctx) {
  auto r = send("GET", "/jobs");
  if (!r.ok()) {
    return r.error();
  }
  auto found = slurm::findTaggedJob(static_cast<int>(r->status), r->body, ctx.uid, *version_);
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
  if (!version_) {
    return makeError(errc::kInvalid,
                     "the Slurm API version is not known yet (prepare() discovers it)");
  }
  auto body = slurm::buildSubmitBody(in, *version_);
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
  auto q = slurm::parseJobResponse(static_cast<int>(r->status), r->body, *n, *version_);
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

std::optional<CredentialAlert> SlurmBackend::credentialAlert() {
  const auto exp = tokens_.givenTokenExpiry();
  if (!exp) {
    return std::nullopt;
  }
  const auto now = kc::clockOr(options_.clock).wallNow();
  const std::string at = kc::formatRfc3339(*exp);
  if (*exp <= now) {
    return CredentialAlert{true, "SlurmTokenExpired", "Slurm token expired at " + at};
  }
  if (*exp - now <= options_.tokenWarning) {
    return CredentialAlert{false, "SlurmTokenExpiring", "Slurm token expires at " + at};
  }
  return std::nullopt;
}

Result<std::string> SlurmBackend::fetchOutput(const JobContext& ctx, const std::string& /*id*/,
                                              const std::string& file) {
  if (!safeRelativePath(file)) {
    return makeError(errc::kInvalid, "output file '" + file +
                                         "' must be a relative path inside the job's directory");
  }
  std::string cwd;
  try {
    cwd = nlohmann::json::parse(ctx.params.jobProperties)
              .at("current_working_directory")
              .get<std::string>();
  } catch (const std::exception&) {
    return makeError(errc::kInvalid,
                     "jobproperties has no current_working_directory to read outputs from");
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
