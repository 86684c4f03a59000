#include "services/bridge-pod/lsf_backend.hpp"

#include <spdlog/spdlog.h>

#include <ctime>
#include <pugixml.hpp>
#include <regex>

#include "libcore/base/percent_encoding.hpp"
#include "libcore/base/rfc3339.hpp"
#include "services/bridge-pod/credentials.hpp"
#include "services/bridge-pod/multipart.hpp"

namespace kc::bridge::pod {

namespace {

using nlohmann::json;

constexpr const char* kScriptFile = "bridge-script.sh";

MimePart appParam(const std::string& id, const std::string& value, const std::string& type = {}) {
  MimePart p;
  p.headers = {{"Content-Disposition", "form-data; name=\"" + id + "\""},
               {"Content-Type", "application/xml; charset=UTF-8"},
               {"Content-ID", "<" + id + ">"}};
  p.body = "<AppParam><id>" + xmlEscape(id) + "</id><value>" + xmlEscape(value) + "</value><type>" +
           xmlEscape(type) + "</type></AppParam>";
  return p;
}

MimePart filePart(const std::string& param, const std::string& name, const std::string& bytes) {
  MimePart f;
  f.headers = {
      {"Content-Disposition", "form-data; name=\"" + param + "\"; filename=\"" + name + "\""},
      {"Content-Type", "application/octet-stream"},
      {"Content-Transfer-Encoding", "binary"},
      {"Content-ID", "<" + name + ">"}};
  f.body = bytes;
  return f;
}

std::optional<WallSeconds> lsfTime(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_string()) {
    return std::nullopt;
  }
  const std::string s = j[key];
  if (s.empty() || s == "-") {
    return std::nullopt;
  }
  if (auto t = kc::parseRfc3339(s); t.ok()) {
    return std::chrono::time_point_cast<std::chrono::seconds>(*t);
  }
  std::tm tm{};
  if (::strptime(s.c_str(), "%Y-%m-%d %H:%M:%S", &tm) == nullptr) {
    return std::nullopt;
  }
  return WallSeconds(std::chrono::seconds(::timegm(&tm)));
}

std::string str(const json& j, const char* key) {
  if (!j.contains(key)) {
    return {};
  }
  if (j[key].is_string()) {
    return j[key];
  }
  if (j[key].is_number()) {
    return j[key].dump();
  }
  return {};
}

}  // namespace

std::string lsfJobName(const std::string& uid) {
  return "bridge-" + uid;
}

Result<LsfSubmit> buildLsfSubmit(const JobContext& ctx, const std::string& boundary) {
  std::vector<MimePart> params{appParam("JOB_NAME", lsfJobName(ctx.uid))};
  std::vector<MimePart> files;
  if (ctx.params.scriptLocation == "remote") {
    if (ctx.script.empty() || ctx.script.find('\n') != std::string::npos) {
      return makeError(errc::kInvalid,
                       "jobdata.jobscript (remote) must be one command line on the cluster");
    }
    params.push_back(appParam("COMMANDTORUN", ctx.script));
  } else {
    if (ctx.script.empty()) {
      return makeError(errc::kInvalid, "jobdata.jobscript is empty");
    }
    params.push_back(appParam("COMMANDTORUN", std::string("sh ") + kScriptFile));
    params.push_back(appParam("FILE", std::string(kScriptFile) + ",upload", "file"));
    files.push_back(filePart("FILE", kScriptFile, ctx.script));
  }
  // jobdata.additionaldata: one file parameter and one file part each, as the script; LSF
  // Application Center puts uploaded files in the job's working directory.
  std::uint64_t staged = 0;
  for (std::size_t i = 0; i < ctx.additionalFiles.size(); ++i) {
    const StagedFile& f = ctx.additionalFiles[i];
    if (f.name.empty() || f.name.find_first_of("\"<>,\\/") != std::string::npos) {
      return makeError(errc::kInvalid,
                       "additionaldata file '" + f.name +
                           "': LSF file parameters cannot carry '\"', '<', '>', ',', '\\' or '/'");
    }
    if (ctx.params.scriptLocation != "remote" && f.name == kScriptFile) {
      return makeError(errc::kInvalid, std::string("additionaldata file '") + kScriptFile +
                                           "' would replace the job's script");
    }
    staged += f.bytes.size();
    const std::string id = "ADDITIONAL_FILE_" + std::to_string(i + 1);
    params.push_back(appParam(id, f.name + ",upload", "file"));
    files.push_back(filePart(id, f.name, f.bytes));
  }
  if (staged > kLsfStagingLimit) {
    return makeError(errc::kInvalid, "additionaldata: " + std::to_string(staged) +
                                         " bytes, more than LSF stages (" +
                                         std::to_string(kLsfStagingLimit) + ")");
  }
  json props = json::parse(ctx.params.jobProperties.empty() ? "{}" : ctx.params.jobProperties,
                           nullptr, false);
  if (props.is_discarded() || !props.is_object()) {
    return makeError(errc::kInvalid, "jobproperties is not a JSON object");
  }
  for (const auto& [k, v] : props.items()) {
    if (k == "queue" || k == "outputFile" || k == "errorFile") {
      if (!v.is_string() || v.get<std::string>().empty() ||
          v.get<std::string>().find('\n') != std::string::npos) {
        return makeError(errc::kInvalid,
                         "jobproperties." + k + " must be a non-empty one-line string");
      }
      params.push_back(appParam(k == "queue"        ? "QUEUE"
                                : k == "outputFile" ? "OUTPUT_FILE"
                                                    : "ERROR_FILE",
                                v));
    } else if (k == "runLimitHour" || k == "runLimitMinute" || k == "nodes") {
      if (!v.is_number_integer() || v.get<std::int64_t>() < 0 ||
          (k == "nodes" && v.get<std::int64_t>() == 0)) {
        return makeError(errc::kInvalid,
                         "jobproperties." + k + " must be a non-negative integer" +
                             (k == "nodes" ? std::string(" above 0") : std::string()));
      }
      const std::string n = std::to_string(v.get<std::int64_t>());
      params.push_back(k == "nodes"
                           ? appParam("EXTRA_PARAMS", "-nnodes " + n)
                           : appParam(k == "runLimitHour" ? "RUNLIMITHOUR" : "RUNLIMITMINUTE", n));
    } else {
      return makeError(errc::kInvalid,
                       "jobproperties." + k +
                           " is not known (queue, runLimitHour, runLimitMinute, nodes, outputFile, "
                           "errorFile)");
    }
  }
  const std::string inner = "data-" + boundary;  // not a prefix-extension of the outer one
  MimePart app;
  app.headers = {{"Content-Disposition", "form-data; name=\"AppName\""},
                 {"Content-ID", "<AppName>"}};
  app.body = "generic";
  MimePart data;
  data.headers = {{"Content-Disposition", "form-data; name=\"data\""},
                  {"Content-Type", "multipart/mixed; boundary=" + inner},
                  {"Content-ID", "<data>"}};
  data.body = buildMultipart(inner, params);
  std::vector<MimePart> parts{app, data};
  parts.insert(parts.end(), files.begin(), files.end());
  for (const MimePart& p : parts) {
    if (p.body.find("--" + boundary) != std::string::npos) {
      // Only possible with chosen boundaries or files that hold one: the caller picks another.
      return makeError(errc::kConflict,
                       "the multipart boundary " + boundary + " occurs in the body");
    }
  }
  return LsfSubmit{"multipart/mixed; boundary=" + boundary, buildMultipart(boundary, parts)};
}

Result<std::vector<json>> lsfJobs(unsigned httpStatus, const std::string& body) {
  if (httpStatus != 200) {
    return httpError("LSF Application Center", httpStatus, body);
  }
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("@total")) {
    return makeError(errc::kProtocol, "LSF job reply without @total");
  }
  std::vector<json> out;
  if (!j.contains("job") || j["job"].is_null()) {
    return out;
  }
  if (j["job"].is_object()) {
    out.push_back(j["job"]);  // XML converted to JSON: one element is an object...
  } else if (j["job"].is_array()) {
    for (const json& e : j["job"]) {  // ...several an array
      if (!e.is_object()) {
        return makeError(errc::kProtocol, "LSF job reply: a job that is not an object");
      }
      out.push_back(e);
    }
  } else {
    return makeError(errc::kProtocol, "LSF job reply: job is neither an object nor an array");
  }
  return out;
}

Result<RemoteJob> lsfRemoteJob(const json& job) {
  const std::string st = str(job, "jobStatus");
  RemoteJob r;
  r.nativeState = st;
  if (st == "PEND" || st == "PSUSP") {
    r.status = JobStatus::kSubmitted;
  } else if (st == "RUN" || st == "USUSP" || st == "SSUSP" || st == "UNKWN") {
    r.status = JobStatus::kRunning;
  } else if (st == "DONE") {
    r.status = JobStatus::kDone;
  } else if (st == "EXIT" || st == "ZOMBI") {
    r.status = JobStatus::kFailed;
  } else {
    return makeError(errc::kProtocol, "LSF jobStatus '" + st + "' is not known");
  }
  r.submitTime = lsfTime(job, "submitTime");
  r.startTime = lsfTime(job, "startTime");
  r.endTime = lsfTime(job, "endTime");
  r.message = "LSF " + st;
  if (const std::string code = str(job, "exitCode"); !code.empty() && isTerminal(r.status)) {
    r.message += ", exited with code " + code;
  }
  return r;
}

Result<std::optional<RemoteJob>> lsfHistoryJob(const std::string& id, unsigned httpStatus,
                                               const std::string& body) {
  if (httpStatus == 404) {
    return std::optional<RemoteJob>{};
  }
  if (httpStatus != 200) {
    return httpError("LSF job history", httpStatus, body);
  }
  pugi::xml_document doc;
  const pugi::xml_parse_result parsed = doc.load_buffer(body.data(), body.size());
  if (!parsed) {
    return makeError(errc::kProtocol, std::string("LSF job history is not XML: ") +
                                          parsed.description() + " at byte " +
                                          std::to_string(parsed.offset));
  }
  const pugi::xml_node root = doc.document_element();
  if (std::string(root.name()) != "jobHistory") {
    return makeError(errc::kProtocol, "LSF job history: root element <" + std::string(root.name()) +
                                          ">, not <jobHistory>");
  }
  const auto squeeze = [](const std::string& text) {
    std::string out;
    for (char c : text) {
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
        out += c;
      }
    }
    return out;
  };
  const std::string tag = "Job<" + id + ">";
  std::vector<std::string> texts;
  for (const pugi::xml_node h : root.children("history")) {
    texts.push_back(squeeze(h.child("content").text().as_string()));
  }
  std::optional<std::string> mine;
  for (const std::string& t : texts) {
    if (t.find(tag) != std::string::npos) {
      mine = t;
    }
  }
  if (!mine && texts.size() == 1 && texts[0].find("Job<") == std::string::npos) {
    mine = texts[0];  // one history that names no job: the one asked for
  }
  if (!mine) {
    return std::optional<RemoteJob>{};
  }
  RemoteJob r;
  r.message = "LSF job history: ";
  if (mine->find("Donesuccessfully") != std::string::npos) {
    r.status = JobStatus::kDone;
    r.nativeState = "DONE";
    r.message += "Done successfully";
  } else if (mine->find("Completed<exit>") != std::string::npos) {
    r.nativeState = "EXIT";
    std::smatch m;
    static const std::regex exitCode("Exitedwithexitcode([0-9]+)");
    const std::string code = std::regex_search(*mine, m, exitCode) ? m[1].str() : std::string();
    if (mine->find("<KILL>") != std::string::npos) {
      r.status = JobStatus::kKilled;
      r.message += "Completed <exit> after a KILL signal";
    } else {
      r.status = JobStatus::kFailed;
      r.message += "Completed <exit>";
    }
    if (!code.empty()) {
      r.message += ", exited with code " + code;
    }
  } else {
    return std::optional<RemoteJob>{};  // no end recorded: nothing to say about it
  }
  return std::optional<RemoteJob>{r};
}

std::optional<std::chrono::system_clock::time_point> lsfTokenExpiry(const std::string& token) {
  std::size_t pos = 0;
  while ((pos = token.find('"', pos)) != std::string::npos) {
    const auto end = token.find('"', pos + 1);
    if (end == std::string::npos) {
      break;
    }
    if (auto t = kc::parseRfc3339(token.substr(pos + 1, end - pos - 1)); t.ok()) {
      return *t;
    }
    pos = end;
  }
  return std::nullopt;
}

Result<std::unique_ptr<LsfBackend>> LsfBackend::create(LsfOptions options) {
  auto http = backendHttpClient(options.resourceUrl, options.caFile, options.timeout);
  if (!http.ok()) {
    return http.error();
  }
  return std::unique_ptr<LsfBackend>(new LsfBackend(std::move(options), std::move(http).value()));
}

LsfBackend::LsfBackend(LsfOptions options, std::unique_ptr<kc::net::HttpClient> http)
    : options_(std::move(options)), http_(std::move(http)), clock_(kc::clockOr(options_.clock)) {}

Status LsfBackend::logon() {
  auto user = readSecretKey(options_.credentialsDir, "username");
  if (!user.ok()) {
    return user.error();
  }
  auto pass = readSecretKey(options_.credentialsDir, "password");
  if (!pass.ok()) {
    return pass.error();
  }
  const std::string body =
      "<User><name>" + xmlEscape(*user) + "</name> <pass>" + xmlEscape(*pass) + "</pass> </User>";
  auto r = http_->request("POST", "/ws/logon", body,
                          {{"Content-Type", "application/xml"}, {"Accept", "application/json"}});
  if (!r.ok()) {
    return r.error();
  }
  if (r->status != 200) {
    // Never echo the request; the reply names the problem.
    return httpError("LSF logon", r->status == 403 ? 401 : r->status, r->body);
  }
  json j = json::parse(r->body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("token") || !j["token"].is_string() ||
      j["token"].get<std::string>().empty()) {
    return makeError(errc::kUnauthorized, "LSF logon: reply without a token");
  }
  std::string token = j["token"];
  const auto expiry = lsfTokenExpiry(token);
  std::string cookie;
  for (char c : token) {
    cookie += c == '"' ? std::string("#quote#") : std::string(1, c);
  }
  std::lock_guard lock(mu_);
  cookie_ = "platform_token=" + cookie;
  renewAt_ =
      expiry ? *expiry - std::chrono::minutes(1) : clock_.wallNow() + std::chrono::minutes(30);
  ++logons_;
  return okStatus();
}

Result<kc::net::Response> LsfBackend::send(const std::string& method, const std::string& target,
                                           std::string body, kc::net::Headers headers) {
  for (int attempt = 0;; ++attempt) {
    std::string cookie, renewed;
    {
      std::lock_guard lock(mu_);
      if (!cookie_.empty() && clock_.wallNow() < renewAt_) {
        cookie = cookie_;
      } else {
        renewed = cookie_;  // due for renewal but still valid: released once replaced
      }
    }
    if (cookie.empty()) {
      if (auto s = logon(); !s.ok()) {
        return s.error();
      }
      std::lock_guard lock(mu_);
      cookie = cookie_;
    }
    if (!renewed.empty()) {
      logout(renewed, "the token renewed before its expiry");
    }
    kc::net::Headers h = headers;
    h.push_back({"Cookie", cookie});
    auto r = http_->request(method, target, body, std::move(h));
    if (r.ok() && (r->status == 401 || r->status == 403) && attempt == 0) {
      std::lock_guard lock(mu_);
      cookie_.clear();  // the token was revoked or expired: log on again once
      continue;
    }
    return r;
  }
}

Status LsfBackend::prepare() {
  return logon();
}

void LsfBackend::logout(const std::string& cookie, const char* why) {
  auto r = http_->request("GET", "/webservice/pacclient/logout/", {},
                          {{"Content-Type", "text/plain"},
                           {"Accept", "text/plain,application/xml,text/xml"},
                           {"Cookie", cookie}});
  if (!r.ok()) {
    spdlog::warn("LSF logout ({}) failed: {}: {}", why, r.error().code, r.error().message);
    return;
  }
  std::string body = r->body;
  while (!body.empty() && (body.back() == '\n' || body.back() == '\r' || body.back() == ' ')) {
    body.pop_back();
  }
  if (r->status != 200 || body != "ok") {
    spdlog::warn("LSF logout ({}) refused: HTTP {}: {}", why, r->status, excerpt(r->body));
    return;
  }
  spdlog::info("logged out of LSF Application Center ({})", why);
}

void LsfBackend::release() {
  std::string cookie;
  {
    std::lock_guard lock(mu_);
    cookie.swap(cookie_);
  }
  if (!cookie.empty()) {
    logout(cookie, "the pod ends");
  }
}

Result<std::optional<std::string>> LsfBackend::findTagged(const JobContext& ctx) {
  const std::string name = lsfJobName(ctx.uid);
  auto r =
      send("GET", "/ws/jobs?name=" + kc::percentEncode(name), {}, {{"Accept", "application/json"}});
  if (!r.ok()) {
    return r.error();
  }
  auto jobs = lsfJobs(r->status, r->body);
  if (!jobs.ok()) {
    return jobs.error();
  }
  std::vector<std::string> ids;
  for (const json& j : *jobs) {
    if (str(j, "name") == name) {  // the filter checked again
      ids.push_back(str(j, "id"));
    }
  }
  if (ids.size() > 1) {
    return makeError(errc::kConflict,
                     "more than one LSF job is named " + name + ": " + ids[0] + ", " + ids[1]);
  }
  if (ids.empty()) {
    return std::optional<std::string>{};
  }
  if (ids[0].empty()) {
    return makeError(errc::kProtocol, "LSF job list: the job named " + name + " has no id");
  }
  return std::optional<std::string>{ids[0]};
}

Result<std::string> LsfBackend::submit(const JobContext& ctx) {
  auto req = buildLsfSubmit(ctx, newBoundary());
  for (int i = 0; i < 3 && !req.ok() && req.error().code == errc::kConflict; ++i) {
    req = buildLsfSubmit(ctx, newBoundary());
  }
  if (!req.ok()) {
    return req.error();
  }
  auto r = send("POST", "/ws/jobs/submit", req->body,
                {{"Content-Type", req->contentType}, {"Accept", "application/json"}});
  if (!r.ok()) {
    return r.error();
  }
  if (r->status != 200) {
    return httpError("LSF submit", r->status, r->body);
  }
  json j = json::parse(r->body, nullptr, false);
  const std::string id = j.is_object() ? str(j, "id") : std::string();
  if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos || id == "0") {
    return makeError(errc::kProtocol, "LSF submit: reply without a job id: " + excerpt(r->body));
  }
  return id;
}

Result<Query> LsfBackend::query(const std::string& id) {
  auto r = send("GET", "/ws/jobs/" + kc::percentEncode(id), {}, {{"Accept", "application/json"}});
  if (!r.ok()) {
    return r.error();
  }
  auto jobs = lsfJobs(r->status, r->body);
  if (!jobs.ok()) {
    return jobs.error();
  }
  Query q;
  if (jobs->empty()) {
    // LSF forgets finished jobs (CLEAN_PERIOD): its history may still know how this one ended.
    auto h = send("GET", "/ws/jobhistory?ids=" + kc::percentEncode(id), {},
                  {{"Accept", "application/xml,text/xml"}});
    if (!h.ok()) {
      return h.error();
    }
    auto found = lsfHistoryJob(id, h->status, h->body);
    if (!found.ok()) {
      return found.error();
    }
    q.gone = !found->has_value();
    if (*found) {
      q.job = **found;
    }
    return q;
  }
  if (jobs->size() != 1 || str((*jobs)[0], "id") != id) {
    return makeError(errc::kProtocol, "LSF job " + id + ": the reply is about another job");
  }
  auto job = lsfRemoteJob((*jobs)[0]);
  if (!job.ok()) {
    return job.error();
  }
  q.job = *job;
  return q;
}

Result<bool> LsfBackend::cancel(const std::string& id) {
  const std::string body = "<UserCmd><cmd>bkill " + xmlEscape(id) + "</cmd></UserCmd>";
  auto r = send("POST", "/ws/userCmd", body,
                {{"Content-Type", "application/xml"}, {"Accept", "application/json"}});
  if (!r.ok()) {
    return r.error();
  }
  if (r->status != 200) {
    return httpError("LSF bkill", r->status, r->body);
  }
  return true;
}

Result<std::string> LsfBackend::fetchOutput(const JobContext&, const std::string& id,
                                            const std::string& file) {
  if (file.empty() || file.find_first_of("\r\n") != std::string::npos) {
    return makeError(errc::kInvalid, "output file name '" + file + "' is not usable");
  }
  auto r = send("GET", "/webservice/pacclient/file/" + kc::percentEncode(id), file,
                {{"Accept", "text/plain,application/xml,text/xml,multipart/mixed"}});
  if (!r.ok()) {
    return r.error();
  }
  if (r->status != 200) {
    return httpError("LSF file " + file, r->status, r->body);
  }
  const std::string type = r->header("Content-Type").value_or("");
  if (type.rfind("multipart/", 0) != 0) {
    return std::move(r->body);
  }
  auto boundary = multipartBoundary(type);
  if (!boundary.ok()) {
    return makeError(errc::kProtocol, "LSF file " + file + ": " + boundary.error().message);
  }
  auto parts = parseMultipart(r->body, *boundary);
  if (!parts.ok()) {
    return makeError(errc::kProtocol, "LSF file " + file + ": " + parts.error().message);
  }
  for (const MimePart& p : *parts) {
    if (p.header("Content-ID") == "<" + file + ">") {
      return p.body;
    }
  }
  return makeError(errc::kNotFound, "LSF file " + file + ": not in the reply");
}

}  // namespace kc::bridge::pod
