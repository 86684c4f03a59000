// The Slurm codec's reply side (slurm_codec.hpp): the errors envelope, failures as kc::Errors,
// the fields of a job in each version's shapes, and the replies to submit, query, cancel and
// list.

#include <algorithm>
#include <array>

#include "services/bridge-pod/slurm_codec.hpp"
#include "services/bridge-pod/slurm_codec_errors.hpp"

namespace kc::bridge::slurm {

namespace {

using detail::invalid;
using detail::protocol;
using nlohmann::json;

constexpr std::int64_t kInvalidJobId = 2017;  // "Invalid job id specified"
constexpr std::int64_t kAccessDenied = 2002;  // "Access/permission denied"

struct ErrorEntry {
  std::int64_t number = 0;
  std::string error;
  std::string description;
  std::string source;
};

struct Reply {
  json body;  // an object, or null when the body was not JSON
  std::vector<ErrorEntry> errors;
};

std::string str(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Result<Reply> readReply(std::string_view text) {
  Reply r;
  json body = json::parse(text, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    return r;  // plain text (e.g. 400 "Unable to parse query.", 401 "Authentication failure")
  }
  auto it = body.find("errors");
  if (it != body.end()) {
    if (!it->is_array()) {
      return protocol("errors is not an array");
    }
    for (const json& e : *it) {
      if (!e.is_object()) {
        return protocol("an errors entry is not an object");
      }
      ErrorEntry entry;
      // The key differs between errors: error_number (2017, 2002, -1) or error_code (2127).
      const json* n = nullptr;
      if (auto a = e.find("error_number"); a != e.end()) {
        n = &*a;
      } else if (auto b = e.find("error_code"); b != e.end()) {
        n = &*b;
      }
      if (n != nullptr && !n->is_number_integer()) {
        return protocol("an errors entry has a non-integer error number");
      }
      entry.number = n != nullptr ? n->get<std::int64_t>() : 0;
      entry.error = str(e, "error");
      entry.description = str(e, "description");
      entry.source = str(e, "source");
      r.errors.push_back(std::move(entry));
    }
  }
  // v0.0.39+ add `warnings` ([{"description", "source"}]); they never fail a call but a
  // malformed list is a malformed reply.
  if (auto w = body.find("warnings"); w != body.end()) {
    if (!w->is_array()) {
      return protocol("warnings is not an array");
    }
    for (const json& e : *w) {
      if (!e.is_object()) {
        return protocol("a warnings entry is not an object");
      }
    }
  }
  r.body = std::move(body);
  return r;
}

std::string describeFailure(int httpStatus, const Reply& r, std::string_view text) {
  std::string m = "slurmrestd: HTTP " + std::to_string(httpStatus);
  if (r.body.is_null()) {
    std::string t(text.substr(0, 200));
    return t.empty() ? m : m + ": " + t;
  }
  for (const ErrorEntry& e : r.errors) {
    m += "; error " + std::to_string(e.number);
    if (!e.error.empty()) {
      m += " " + e.error;
    }
    if (!e.description.empty()) {
      m += " (" + e.description + ")";
    }
  }
  return m;
}

bool has(const Reply& r, std::int64_t number) {
  return std::any_of(r.errors.begin(), r.errors.end(),
                     [&](const ErrorEntry& e) { return e.number == number; });
}

bool ok(int httpStatus, const Reply& r) {
  return httpStatus >= 200 && httpStatus < 300 && !r.body.is_null() && r.errors.empty();
}

// A failed reply as a kc::Error. slurmrestd 22.05 answers a bad or expired token with 500
// "slurmctld config is unable to load" (source slurm_load_ctl_conf), not 401.
Error failure(int httpStatus, const Reply& r, std::string_view text) {
  std::string m = describeFailure(httpStatus, r, text);
  if (httpStatus == 401) {
    return makeError(errc::kUnauthorized, m);
  }
  for (const ErrorEntry& e : r.errors) {
    if (e.source == "slurm_load_ctl_conf") {
      return makeError(errc::kUnauthorized, m + " (token rejected)");
    }
  }
  if (has(r, kAccessDenied)) {
    return makeError(errc::kForbidden, m);
  }
  if (httpStatus >= 400 && httpStatus < 500) {
    return makeError(errc::kInvalid, m);
  }
  if (httpStatus >= 200 && httpStatus < 300 && r.body.is_null()) {
    return protocol("HTTP " + std::to_string(httpStatus) + " body is not a JSON object");
  }
  return makeError(errc::kServerError, m);
}

Result<std::int64_t> intField(const json& o, const char* key, const std::string& where) {
  auto it = o.find(key);
  if (it == o.end()) {
    return protocol(where + "." + key + " is missing");
  }
  if (!it->is_number_integer()) {
    return protocol(where + "." + key + " is not an integer");
  }
  return it->get<std::int64_t>();
}

Result<std::string> stringField(const json& o, const char* key, const std::string& where,
                                bool required) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) {
    if (required) {
      return protocol(where + "." + key + " is missing");
    }
    return std::string();
  }
  if (!it->is_string()) {
    return protocol(where + "." + key + " is not a string");
  }
  return it->get<std::string>();
}

// A number as v0.0.38 sends it (a plain integer) or as v0.0.39+ may (a {"set", "infinite",
// "number"} object). nullopt: unset or infinite.
struct Number {
  std::optional<std::int64_t> value;
  bool infinite = false;
};

Result<Number> numberValue(const json& v, const std::string& where, bool allowObject) {
  if (v.is_number_integer()) {
    return Number{v.get<std::int64_t>(), false};
  }
  if (!allowObject || !v.is_object()) {
    return protocol(where + " is not an integer" +
                    std::string(allowObject ? " or a {set, infinite, number} object" : ""));
  }
  auto set = v.find("set");
  if (set == v.end() || !set->is_boolean()) {
    return protocol(where + ".set is missing or not a boolean");
  }
  bool infinite = false;
  if (auto inf = v.find("infinite"); inf != v.end()) {
    if (!inf->is_boolean()) {
      return protocol(where + ".infinite is not a boolean");
    }
    infinite = inf->get<bool>();
  }
  if (infinite) {
    return Number{std::nullopt, true};
  }
  if (!set->get<bool>()) {
    return Number{};
  }
  auto number = v.find("number");
  if (number == v.end() || !number->is_number_integer()) {
    return protocol(where + ".number is missing or not an integer");
  }
  return Number{number->get<std::int64_t>(), false};
}

Result<Number> numberField(const json& o, const char* key, const std::string& where,
                           bool allowObject) {
  auto it = o.find(key);
  if (it == o.end()) {
    return protocol(where + "." + key + " is missing");
  }
  return numberValue(*it, where + "." + key, allowObject);
}

Result<std::optional<std::int64_t>> timeField(const json& o, const char* key,
                                              const std::string& where, ApiVersion version) {
  auto v = numberField(o, key, where, version >= ApiVersion::kV0039);
  if (!v.ok()) {
    return v.error();
  }
  if (!v->value) {
    return std::optional<std::int64_t>();  // unset, or infinite (a running job without limit)
  }
  if (*v->value < 0) {
    return protocol(where + "." + key + " is negative");
  }
  return *v->value == 0 ? std::nullopt : v->value;
}

// v0.0.40+ exit_code: {"status": ["SUCCESS" | "ERROR" | "SIGNALED" | "CORE_DUMPED" |
// "PENDING" | "INVALID", ...], "return_code": number, "signal": {"id": number, "name"}}.
Result<ExitStatus> verboseExitCode(const json& v, const std::string& where,
                                   std::string_view reason) {
  if (!v.is_object()) {
    return protocol(where + " is not an object (v0.0.40+ exit_code)");
  }
  auto st = v.find("status");
  if (st == v.end() || !st->is_array()) {
    return protocol(where + ".status is missing or not an array");
  }
  std::vector<std::string> status;
  for (const json& e : *st) {
    if (!e.is_string()) {
      return protocol(where + ".status has a non-string entry");
    }
    static const std::array<const char*, 6> known{"INVALID", "PENDING",  "SUCCESS",
                                                  "ERROR",   "SIGNALED", "CORE_DUMPED"};
    const std::string& s = e.get_ref<const std::string&>();
    if (std::find(known.begin(), known.end(), s) == known.end()) {
      return protocol(where + ".status \"" + s + "\" is not an exit status");
    }
    status.push_back(s);
  }
  auto hasStatus = [&](const char* s) {
    return std::find(status.begin(), status.end(), s) != status.end();
  };
  if (reason == "JobLaunchFailure") {
    return ExitStatus{ExitStatus::Kind::kLaunchFailed, -1, false};
  }
  if (hasStatus("SIGNALED") || hasStatus("CORE_DUMPED")) {
    auto sig = v.find("signal");
    if (sig == v.end() || !sig->is_object()) {
      return protocol(where + ".signal is missing for a signaled process");
    }
    auto id = numberField(*sig, "id", where + ".signal", true);
    if (!id.ok()) {
      return id.error();
    }
    if (!id->value || *id->value <= 0 || *id->value > 127) {
      return protocol(where + ".signal.id is not a signal number");
    }
    return ExitStatus{ExitStatus::Kind::kSignaled, static_cast<int>(*id->value),
                      hasStatus("CORE_DUMPED")};
  }
  if (hasStatus("SUCCESS") || hasStatus("ERROR")) {
    auto rc = numberField(v, "return_code", where, true);
    if (!rc.ok()) {
      return rc.error();
    }
    if (!rc->value || *rc->value < 0 || *rc->value > 255) {
      return protocol(where + ".return_code is not an exit code");
    }
    if (hasStatus("SUCCESS") != (*rc->value == 0)) {
      return protocol(where + " says " + (hasStatus("SUCCESS") ? "SUCCESS" : "ERROR") +
                      " with return_code " + std::to_string(*rc->value));
    }
    return ExitStatus{ExitStatus::Kind::kExited, static_cast<int>(*rc->value), false};
  }
  // PENDING (not ended yet), INVALID (no status recorded), or an empty list.
  return ExitStatus{ExitStatus::Kind::kUnknown, 0, false};
}

Result<ExitStatus> exitField(const json& j, const std::string& where, std::string_view reason,
                             ApiVersion version) {
  auto it = j.find("exit_code");
  if (it == j.end()) {
    return protocol(where + ".exit_code is missing");
  }
  if (version >= ApiVersion::kV0040) {
    return verboseExitCode(*it, where + ".exit_code", reason);
  }
  auto raw = numberValue(*it, where + ".exit_code", version >= ApiVersion::kV0039);
  if (!raw.ok()) {
    return raw.error();
  }
  if (!raw->value) {
    return ExitStatus{ExitStatus::Kind::kUnknown, 0, false};
  }
  return decodeExitCode(*raw->value, reason);
}

Result<JobInfo> readJob(const json& j, const std::string& where, ApiVersion version) {
  if (!j.is_object()) {
    return protocol(where + " is not an object");
  }
  JobInfo info;
  auto id = intField(j, "job_id", where);
  if (!id.ok()) {
    return id.error();
  }
  info.jobId = *id;
  if (version >= ApiVersion::kV0040) {
    auto it = j.find("job_state");
    if (it == j.end() || !it->is_array()) {
      return protocol(where + ".job_state is missing or not an array (v0.0.40+)");
    }
    for (const json& e : *it) {
      if (!e.is_string()) {
        return protocol(where + ".job_state has a non-string entry");
      }
      info.jobStateFlags.push_back(e.get<std::string>());
    }
    auto shown = collapseJobState(info.jobStateFlags);
    if (!shown.ok()) {
      return protocol(where + ".job_state: " + shown.error().message);
    }
    info.jobState = *shown;
  } else {
    auto state = stringField(j, "job_state", where, true);
    if (!state.ok()) {
      return state.error();
    }
    info.jobState = *state;
  }
  auto status = mapJobState(info.jobState);
  if (!status) {
    return protocol(where + ".job_state \"" + info.jobState + "\" is not a Slurm job state");
  }
  info.status = *status;
  auto name = stringField(j, "name", where, false);
  auto comment = stringField(j, "comment", where, false);
  auto reason = stringField(j, "state_reason", where, false);
  for (const auto* r : {&name, &comment, &reason}) {
    if (!r->ok()) {
      return r->error();
    }
  }
  info.name = *name;
  info.comment = *comment;
  info.stateReason = *reason;
  auto exit = exitField(j, where, info.stateReason, version);
  if (!exit.ok()) {
    return exit.error();
  }
  info.exit = *exit;
  auto submit = timeField(j, "submit_time", where, version);
  auto start = timeField(j, "start_time", where, version);
  auto end = timeField(j, "end_time", where, version);
  for (const auto* r : {&submit, &start, &end}) {
    if (!r->ok()) {
      return r->error();
    }
  }
  info.submitTime = *submit;
  info.startTime = *start;
  info.endTime = *end;
  return info;
}

Result<const json*> jobsArray(const json& body) {
  auto it = body.find("jobs");
  if (it == body.end()) {
    return protocol("jobs is missing");
  }
  if (!it->is_array()) {
    return protocol("jobs is not an array");
  }
  return &*it;
}

}  // namespace

Result<std::int64_t> parseSubmitResponse(int httpStatus, std::string_view body) {
  auto reply = readReply(body);
  if (!reply.ok()) {
    return reply.error();
  }
  if (!ok(httpStatus, *reply)) {
    return failure(httpStatus, *reply, body);
  }
  auto id = intField(reply->body, "job_id", "submit");
  if (!id.ok()) {
    return id.error();
  }
  if (*id <= 0) {
    return protocol("submit.job_id " + std::to_string(*id) + " is not a job id");
  }
  return *id;
}

Result<JobQuery> parseJobResponse(int httpStatus, std::string_view body, std::int64_t jobId,
                                  ApiVersion version) {
  auto reply = readReply(body);
  if (!reply.ok()) {
    return reply.error();
  }
  // Every version we know answers a purged job with 500 and error 2017; a 404 with it counts
  // as the same answer (a proxy or a later release), a 2xx with it does not (a reply that
  // says both "here is the job" and "no such job" is malformed).
  if ((httpStatus == 500 || httpStatus == 404) && has(*reply, kInvalidJobId)) {
    return JobQuery{true, std::nullopt};
  }
  if (!ok(httpStatus, *reply)) {
    return failure(httpStatus, *reply, body);
  }
  auto jobs = jobsArray(reply->body);
  if (!jobs.ok()) {
    return jobs.error();
  }
  if ((*jobs)->size() != 1) {
    return protocol("jobs has " + std::to_string((*jobs)->size()) + " entries, expected 1");
  }
  auto job = readJob((**jobs)[0], "jobs[0]", version);
  if (!job.ok()) {
    return job.error();
  }
  if (job->jobId != jobId) {
    return protocol("jobs[0].job_id " + std::to_string(job->jobId) + " is not the job asked for (" +
                    std::to_string(jobId) + ")");
  }
  return JobQuery{false, std::move(*job)};
}

Result<bool> parseCancelResponse(int httpStatus, std::string_view body) {
  auto reply = readReply(body);
  if (!reply.ok()) {
    return reply.error();
  }
  if ((httpStatus == 500 || httpStatus == 404) && has(*reply, kInvalidJobId)) {
    return false;
  }
  if (!ok(httpStatus, *reply)) {
    return failure(httpStatus, *reply, body);
  }
  return true;
}

Result<std::optional<JobInfo>> findTaggedJob(int httpStatus, std::string_view body,
                                             std::string_view bridgeJobUid, ApiVersion version) {
  if (bridgeJobUid.empty()) {
    return invalid("the BridgeJob uid is empty");
  }
  auto reply = readReply(body);
  if (!reply.ok()) {
    return reply.error();
  }
  if (!ok(httpStatus, *reply)) {
    return failure(httpStatus, *reply, body);
  }
  auto jobs = jobsArray(reply->body);
  if (!jobs.ok()) {
    return jobs.error();
  }
  const std::string tag = uidTag(bridgeJobUid);
  std::vector<JobInfo> found;
  for (std::size_t i = 0; i < (*jobs)->size(); ++i) {
    const json& j = (**jobs)[i];
    // Only the tagged jobs are read strictly: another user's odd job must not block adoption.
    if (!j.is_object() || str(j, "comment") != tag) {
      continue;
    }
    auto job = readJob(j, "jobs[" + std::to_string(i) + "]", version);
    if (!job.ok()) {
      return job.error();
    }
    found.push_back(std::move(*job));
  }
  if (found.size() > 1) {
    std::string ids;
    for (const JobInfo& j : found) {
      ids += (ids.empty() ? "" : ", ") + std::to_string(j.jobId);
    }
    return makeError(errc::kConflict, "more than one Slurm job carries " + tag + ": " + ids);
  }
  if (found.empty()) {
    return std::optional<JobInfo>();
  }
  return std::optional<JobInfo>(std::move(found.front()));
}

}  // namespace kc::bridge::slurm
