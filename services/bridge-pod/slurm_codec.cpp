#include "services/bridge-pod/slurm_codec.hpp"

#include <algorithm>
#include <array>
#include <functional>
#include <map>

namespace kc::bridge::slurm {

namespace {

using nlohmann::json;

constexpr std::int64_t kInvalidJobId = 2017;  // "Invalid job id specified"
constexpr std::int64_t kAccessDenied = 2002;  // "Access/permission denied"
constexpr std::size_t kMaxString = 4096;

Error invalid(std::string message) {
  return makeError(errc::kInvalid, std::move(message));
}
Error protocol(std::string message) {
  return makeError(errc::kProtocol, "slurmrestd reply: " + std::move(message));
}

// ---- job properties ----------------------------------------------------------------------

enum class Kind { kString, kPath, kPositive, kNonNegative, kInteger, kBool, kNodes, kEnv };

struct Field {
  const char* name;
  Kind kind;
};

// The Slurm v0.0.38 job fields a BridgeJob may set (documented in docs/bridge.md). Anything
// else is rejected: slurmrestd would reject unknown keys too, and some keys (array, argv,
// comment) would break how the bridge tracks one job.
constexpr std::array<Field, 31> kJobFields{{
    {"account", Kind::kString},
    {"begin_time", Kind::kNonNegative},
    {"constraints", Kind::kString},
    {"cpus_per_task", Kind::kPositive},
    {"current_working_directory", Kind::kPath},
    {"deadline", Kind::kNonNegative},
    {"dependency", Kind::kString},
    {"environment", Kind::kEnv},
    {"gres", Kind::kString},
    {"hold", Kind::kBool},
    {"licenses", Kind::kString},
    {"mail_type", Kind::kString},
    {"mail_user", Kind::kString},
    {"memory_per_cpu", Kind::kPositive},
    {"memory_per_node", Kind::kPositive},
    {"minimum_nodes", Kind::kPositive},
    {"name", Kind::kString},
    {"nice", Kind::kInteger},
    {"nodes", Kind::kNodes},
    {"partition", Kind::kString},
    {"qos", Kind::kString},
    {"requeue", Kind::kBool},
    {"reservation", Kind::kString},
    {"standard_error", Kind::kPath},
    {"standard_output", Kind::kPath},
    {"tasks", Kind::kPositive},
    {"standard_input", Kind::kPath},
    {"tasks_per_node", Kind::kPositive},
    {"time_limit", Kind::kPositive},
    {"time_minimum", Kind::kPositive},
    {"wckey", Kind::kString},
}};

const Field* findField(std::string_view key) {
  for (const Field& f : kJobFields) {
    if (key == f.name) {
      return &f;
    }
  }
  return nullptr;
}

std::optional<std::string> checkField(const Field& f, const json& v) {
  const std::string where = std::string("jobproperties.") + f.name;
  switch (f.kind) {
    case Kind::kString:
    case Kind::kPath:
      if (!v.is_string() || v.get_ref<const std::string&>().empty()) {
        return where + " must be a non-empty string";
      }
      if (v.get_ref<const std::string&>().size() > kMaxString) {
        return where + " is too long";
      }
      if (f.kind == Kind::kPath && v.get_ref<const std::string&>().front() != '/') {
        return where + " must be an absolute path";
      }
      return std::nullopt;
    case Kind::kPositive:
    case Kind::kNonNegative:
    case Kind::kInteger:
      if (!v.is_number_integer()) {
        return where + " must be an integer";
      }
      if (f.kind == Kind::kPositive && v.get<std::int64_t>() <= 0) {
        return where + " must be greater than 0";
      }
      if (f.kind == Kind::kNonNegative && v.get<std::int64_t>() < 0) {
        return where + " must not be negative";
      }
      return std::nullopt;
    case Kind::kBool:
      if (!v.is_boolean()) {
        return where + " must be a boolean";
      }
      return std::nullopt;
    case Kind::kNodes:
      if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() ||
          !v[1].is_number_integer() || v[0].get<std::int64_t>() <= 0 ||
          v[1].get<std::int64_t>() < v[0].get<std::int64_t>()) {
        return where + " must be [min, max] with 0 < min <= max";
      }
      return std::nullopt;
    case Kind::kEnv:
      // An object of strings (v0.0.38's shape) or an array of "NAME=value" strings (v0.0.39+);
      // either is sent in the shape of the version spoken.
      if (v.is_array() && !v.empty()) {
        for (const json& e : v) {
          if (!e.is_string()) {
            return where + " entries must be \"NAME=value\" strings";
          }
          const std::string& s = e.get_ref<const std::string&>();
          if (s.find('=') == std::string::npos || s.front() == '=') {
            return where + " entry \"" + s + "\" is not NAME=value";
          }
        }
        return std::nullopt;
      }
      if (!v.is_object() || v.empty()) {
        return where +
               " must be a non-empty object of strings or array of NAME=value strings (slurmrestd "
               "requires it)";
      }
      for (const auto& [name, value] : v.items()) {
        if (name.empty() || name.find('=') != std::string::npos) {
          return where + " has an invalid variable name \"" + name + "\"";
        }
        if (!value.is_string()) {
          return where + "." + name + " must be a string";
        }
      }
      return std::nullopt;
  }
  return where + " has an unknown kind";
}

// ---- replies -----------------------------------------------------------------------------

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

std::string uidTag(std::string_view bridgeJobUid) {
  return "bridgejob-uid=" + std::string(bridgeJobUid);
}

std::vector<std::string> jobFieldNames() {
  std::vector<std::string> names;
  for (const Field& f : kJobFields) {
    names.emplace_back(f.name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  std::string part;
  for (char c : s + ",") {
    if (c == ',') {
      if (!part.empty()) {
        out.push_back(part);
      }
      part.clear();
    } else if (c != ' ') {
      part += c;
    }
  }
  return out;
}

// The v0.0.38-shaped job object in the shapes v0.0.39+ take.
json newerJobShape(json job) {
  if (auto env = job.find("environment"); env != job.end() && env->is_object()) {
    json list = json::array();
    for (const auto& [name, value] : env->items()) {
      list.push_back(name + "=" + value.get<std::string>());
    }
    *env = std::move(list);
  }
  if (auto nodes = job.find("nodes"); nodes != job.end()) {
    const auto lo = (*nodes)[0].get<std::int64_t>(), hi = (*nodes)[1].get<std::int64_t>();
    *nodes = lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi);
  }
  if (auto mail = job.find("mail_type"); mail != job.end()) {
    json flags = json::array();
    for (const std::string& f : splitList(mail->get<std::string>())) {
      flags.push_back(f);
    }
    *mail = std::move(flags);
  }
  if (auto gres = job.find("gres"); gres != job.end()) {
    std::string tres;
    for (const std::string& g : splitList(gres->get<std::string>())) {
      tres += (tres.empty() ? "" : ",") + (g.rfind("gres/", 0) == 0 ? g : "gres/" + g);
    }
    job.erase(gres);
    job["tres_per_node"] = tres;
  }
  return job;
}

}  // namespace

Result<json> buildSubmitBody(const SubmitInput& in, ApiVersion version) {
  if (in.script.empty()) {
    return invalid("the job script is empty");
  }
  if (in.bridgeJobUid.empty()) {
    return invalid("the BridgeJob uid is empty (it tags the Slurm job for adoption)");
  }
  if (in.jobProperties.empty()) {
    return invalid(
        "jobproperties is required for Slurm (environment and current_working_directory)");
  }
  json props = json::parse(in.jobProperties, nullptr, false);
  if (props.is_discarded() || !props.is_object()) {
    return invalid("jobproperties is not a JSON object");
  }
  json job = json::object();
  for (const auto& [key, value] : props.items()) {
    if (key == "comment") {
      return invalid("jobproperties.comment is reserved (it carries the BridgeJob uid tag)");
    }
    const Field* f = findField(key);
    if (f == nullptr) {
      return invalid("jobproperties." + key + " is not a supported Slurm job field");
    }
    if (auto problem = checkField(*f, value)) {
      return invalid(*problem);
    }
    job[key] = value;
  }
  if (!job.contains("environment")) {
    return invalid("jobproperties.environment is required (slurmrestd rejects a job without it)");
  }
  if (!job.contains("current_working_directory")) {
    return invalid("jobproperties.current_working_directory is required");
  }
  if (!job.contains("name")) {
    if (in.defaultName.empty()) {
      return invalid("jobproperties.name is missing and there is no default name");
    }
    job["name"] = in.defaultName;
  }
  job["comment"] = uidTag(in.bridgeJobUid);
  if (version == ApiVersion::kV0038) {
    if (json& env = job["environment"]; env.is_array()) {  // "NAME=value" list -> object
      json object = json::object();
      for (const json& e : env) {
        const std::string& s = e.get_ref<const std::string&>();
        const auto eq = s.find('=');
        object[s.substr(0, eq)] = s.substr(eq + 1);
      }
      env = std::move(object);
    }
    return json{{"job", std::move(job)}, {"script", in.script}};
  }
  job = newerJobShape(std::move(job));
  job["script"] = in.script;  // v0.0.39 also took a top-level script; v0.0.41 no longer does
  return json{{"job", std::move(job)}};
}

std::string joinUrl(std::string_view base, std::string_view path) {
  while (!base.empty() && base.back() == '/') {
    base.remove_suffix(1);
  }
  while (!path.empty() && path.front() == '/') {
    path.remove_prefix(1);
  }
  return std::string(base) + "/" + std::string(path);
}

std::string jobPath(std::string_view resourceUrl, std::int64_t jobId) {
  return joinUrl(resourceUrl, "job/" + std::to_string(jobId));
}
std::string submitPath(std::string_view resourceUrl) {
  return joinUrl(resourceUrl, "job/submit");
}
std::string jobsPath(std::string_view resourceUrl) {
  return joinUrl(resourceUrl, "jobs");
}

Result<ExitStatus> decodeExitCode(std::int64_t raw, std::string_view stateReason) {
  // A job that never started (e.g. reason JobLaunchFailure, exit_code 4021) carries a Slurm
  // error number, not a wait status.
  if (stateReason == "JobLaunchFailure") {
    return ExitStatus{ExitStatus::Kind::kLaunchFailed, static_cast<int>(raw), false};
  }
  if (raw < 0 || raw > 0xffff) {
    return protocol("exit_code " + std::to_string(raw) + " is not a wait status");
  }
  const int low = static_cast<int>(raw & 0x7f);
  if (low == 0) {
    return ExitStatus{ExitStatus::Kind::kExited, static_cast<int>((raw >> 8) & 0xff), false};
  }
  if (low == 0x7f) {  // stopped: never an exit_code of a job Slurm reports
    return protocol("exit_code " + std::to_string(raw) + " is a stopped status");
  }
  if ((raw >> 8) != 0) {
    return protocol("exit_code " + std::to_string(raw) + " is not a wait status");
  }
  return ExitStatus{ExitStatus::Kind::kSignaled, low, (raw & 0x80) != 0};
}

std::string describe(const ExitStatus& e) {
  switch (e.kind) {
    case ExitStatus::Kind::kExited:
      return "exited with code " + std::to_string(e.code);
    case ExitStatus::Kind::kSignaled:
      return "killed by signal " + std::to_string(e.code) + (e.coreDumped ? " (core dumped)" : "");
    case ExitStatus::Kind::kLaunchFailed:
      return e.code < 0 ? std::string("launch failed")
                        : "launch failed (Slurm error " + std::to_string(e.code) + ")";
    case ExitStatus::Kind::kUnknown:
      return "no exit status";
  }
  return "unknown";
}

namespace {
struct StateRow {
  const char* name;
  JobStatus status;
};
// Base states, then the flag states job_state_string() reports instead of the base state.
constexpr std::array<StateRow, 25> kStates{{
    {"PENDING", JobStatus::kSubmitted},
    {"RUNNING", JobStatus::kRunning},
    {"SUSPENDED", JobStatus::kRunning},  // started, paused; resumes
    {"COMPLETED", JobStatus::kDone},
    {"CANCELLED", JobStatus::kKilled},
    {"FAILED", JobStatus::kFailed},
    {"TIMEOUT", JobStatus::kFailed},
    {"NODE_FAIL", JobStatus::kFailed},
    {"PREEMPTED", JobStatus::kFailed},
    {"BOOT_FAIL", JobStatus::kFailed},
    {"DEADLINE", JobStatus::kFailed},
    {"OUT_OF_MEMORY", JobStatus::kFailed},
    {"COMPLETING", JobStatus::kRunning},  // not terminal yet (the original stopped here)
    {"CONFIGURING", JobStatus::kSubmitted},
    {"POWER_UP_NODE", JobStatus::kSubmitted},
    {"REQUEUED", JobStatus::kSubmitted},
    {"REQUEUE_FED", JobStatus::kSubmitted},
    {"REQUEUE_HOLD", JobStatus::kSubmitted},
    {"RESV_DEL_HOLD", JobStatus::kSubmitted},
    {"RESIZING", JobStatus::kRunning},
    {"SIGNALING", JobStatus::kRunning},
    {"STAGE_OUT", JobStatus::kRunning},
    {"STOPPED", JobStatus::kRunning},      // SIGSTOPped, keeps its resources
    {"SPECIAL_EXIT", JobStatus::kFailed},  // ended with the special exit code; held
    {"REVOKED", JobStatus::kUnknown},      // federation: runs on a sibling cluster now
}};
}  // namespace

std::optional<JobStatus> mapJobState(std::string_view jobState) {
  for (const StateRow& row : kStates) {
    if (jobState == row.name) {
      return row.status;
    }
  }
  return std::nullopt;
}

std::vector<std::string> jobStateNames() {
  std::vector<std::string> names;
  for (const StateRow& row : kStates) {
    names.emplace_back(row.name);
  }
  return names;
}

namespace {
// The base states (job_state_codes: one per job) and the flags in the order Slurm's
// job_state_string() prefers them over the base state; the last three are never shown.
constexpr std::array<const char*, 12> kBaseStates{
    "PENDING", "RUNNING",   "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED",
    "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE",  "OUT_OF_MEMORY"};
constexpr std::array<const char*, 16> kFlagOrder{
    "COMPLETING",    "STAGE_OUT",     "CONFIGURING",   "RESIZING", "REQUEUED",      "REQUEUE_FED",
    "REQUEUE_HOLD",  "SPECIAL_EXIT",  "STOPPED",       "REVOKED",  "RESV_DEL_HOLD", "SIGNALING",
    "POWER_UP_NODE", "LAUNCH_FAILED", "RECONFIG_FAIL", "UPDATE_DB"};
constexpr std::size_t kShownFlags = 13;
}  // namespace

Result<std::string> collapseJobState(const std::vector<std::string>& states) {
  std::string base;
  std::size_t flag = kFlagOrder.size();
  for (const std::string& s : states) {
    if (std::find(kBaseStates.begin(), kBaseStates.end(), s) != kBaseStates.end()) {
      if (!base.empty() && base != s) {
        return makeError(errc::kProtocol, "two base states, " + base + " and " + s);
      }
      base = s;
      continue;
    }
    auto f = std::find(kFlagOrder.begin(), kFlagOrder.end(), s);
    if (f == kFlagOrder.end()) {
      return makeError(errc::kProtocol, "\"" + s + "\" is not a Slurm job state or flag");
    }
    flag = std::min(flag, static_cast<std::size_t>(f - kFlagOrder.begin()));
  }
  if (base.empty()) {
    return makeError(errc::kProtocol, "no base state");
  }
  return flag < kShownFlags ? std::string(kFlagOrder[flag]) : base;
}

std::vector<ApiVersion> implementedVersions() {
  return {ApiVersion::kV0041, ApiVersion::kV0040, ApiVersion::kV0039, ApiVersion::kV0038};
}

std::string versionName(ApiVersion v) {
  return "v0.0." + std::to_string(static_cast<int>(v));
}

std::optional<ApiVersion> parseVersion(std::string_view name) {
  for (ApiVersion v : implementedVersions()) {
    if (name == versionName(v)) {
      return v;
    }
  }
  return std::nullopt;
}

namespace {
// "v<digits>.<digits>.<digits>" (what slurmrestd calls a plugin version).
bool isVersionName(std::string_view s) {
  if (s.size() < 6 || s.front() != 'v') {
    return false;
  }
  int dots = 0;
  bool digit = false;
  for (char c : s.substr(1)) {
    if (c == '.') {
      if (!digit) {
        return false;
      }
      ++dots;
      digit = false;
    } else if (c >= '0' && c <= '9') {
      digit = true;
    } else {
      return false;
    }
  }
  return dots == 2 && digit;
}

// (major, minor, patch) of a version name, for ordering.
std::array<long, 3> versionKey(const std::string& v) {
  std::array<long, 3> k{0, 0, 0};
  std::size_t i = 0;
  for (char c : v.substr(1)) {
    if (c == '.') {
      ++i;
    } else {
      k[i] = k[i] * 10 + (c - '0');
    }
  }
  return k;
}
}  // namespace

Result<ResourceUrl> splitResourceUrl(std::string_view url) {
  const auto scheme = url.find("://");
  if (scheme == std::string_view::npos) {
    return invalid("resourceURL '" + std::string(url) + "' has no scheme (http:// or https://)");
  }
  const auto pathStart = url.find('/', scheme + 3);
  std::string_view path =
      pathStart == std::string_view::npos ? std::string_view() : url.substr(pathStart);
  const auto at = path.find("/slurm/");
  if (at == std::string_view::npos) {
    std::string root(url);
    while (!root.empty() && root.back() == '/') {
      root.pop_back();
    }
    return ResourceUrl{root, ""};
  }
  std::string_view rest = path.substr(at + 7);
  const auto slash = rest.find('/');
  std::string_view version = rest.substr(0, slash);
  std::string_view tail = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (!isVersionName(version) || tail.find_first_not_of('/') != std::string_view::npos) {
    return invalid("resourceURL '" + std::string(url) +
                   "' must end in /slurm/v<a>.<b>.<c>/ or name no /slurm/ path at all");
  }
  std::string root(
      url.substr(0, (pathStart == std::string_view::npos ? url.size() : pathStart) + at));
  return ResourceUrl{root, std::string(version)};
}

Result<std::vector<std::string>> offeredVersions(std::string_view openapiBody) {
  json doc = json::parse(openapiBody, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return protocol("the OpenAPI document is not a JSON object");
  }
  auto paths = doc.find("paths");
  if (paths == doc.end() || !paths->is_object()) {
    return protocol("the OpenAPI document has no paths object");
  }
  std::vector<std::string> found;
  for (const auto& [path, item] : paths->items()) {
    if (path.rfind("/slurm/", 0) != 0) {
      continue;  // /slurmdb/..., /openapi/...
    }
    std::string v = path.substr(7, path.find('/', 7) - 7);
    if (isVersionName(v) && std::find(found.begin(), found.end(), v) == found.end()) {
      found.push_back(v);
    }
  }
  std::sort(found.begin(), found.end(), [](const std::string& a, const std::string& b) {
    return versionKey(a) < versionKey(b);
  });
  return found;
}

std::optional<ApiVersion> newestImplemented(const std::vector<std::string>& offered) {
  for (ApiVersion v : implementedVersions()) {
    if (std::find(offered.begin(), offered.end(), versionName(v)) != offered.end()) {
      return v;
    }
  }
  return std::nullopt;
}

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
