#pragma once
// TEST DOUBLE of slurmrestd speaking the OpenAPI versions of Slurm 23.02 (v0.0.39), 23.11
// (v0.0.40) and 24.05 (v0.0.41), in the shapes of their published specifications, for the
// bridge pod's Slurm backend where no newer real slurmrestd can be installed (Debian bookworm
// ships 22.05, which the real-Slurm tests drive). What it reproduces, per version:
//  - GET /openapi/v3 listing `/slurm/<version>/...` paths for the versions it offers (or 404,
//    then only GET /slurm/<version>/ping tells which versions answer);
//  - X-SLURM-USER-NAME / X-SLURM-USER-TOKEN required (401 "Authentication failure" text);
//  - POST job/submit: {"job": {...}} with `script` inside the job (v0.0.39 and v0.0.40 also
//    take a top-level `script`, v0.0.41 refuses it), `environment` an array of "NAME=value"
//    strings, `nodes` a string, `mail_type` an array; any other job key, or a v0.0.38 shape,
//    is refused with 400 and an errors array, as the data parser does;
//  - replies with meta/errors/warnings; v0.0.41 submit replies also carry `result`;
//  - jobs: job_state a string (v0.0.39) or an array of the base state and flags (v0.0.40+),
//    COMPLETING for a moment after a job ends; exit_code a {set, infinite, number} wait status
//    (v0.0.39) or {status, return_code, signal} (v0.0.40+); times plain integers (v0.0.39) or
//    {set, infinite, number} (v0.0.40+), end_time of a running job its expected end;
//  - DELETE job/{id}: SIGKILL, the job CANCELLED;
//  - MinJobAge: a job ended more than `minJobAge` ago is forgotten: 500 with error 2017.
// Jobs really run (LocalJob): the script in the job's current_working_directory, with its
// environment and SLURM_JOB_ID.

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "libcore/net/http_server.hpp"
#include "tests/services/bridge-pod/local_jobs.hpp"

namespace kc::bridge::testing {

class SlurmrestdDouble {
 public:
  struct Options {
    std::vector<std::string> offered{"v0.0.39", "v0.0.40", "v0.0.41"};  // only 39..41 are served
    bool openapiDocument = true;  // false: GET /openapi* is 404
    std::chrono::milliseconds minJobAge{3'600'000};
    std::string user = "alice";
    std::string token = "double-token";
  };

  explicit SlurmrestdDouble(Options o) : o_(std::move(o)) { listener_.up(); }
  ~SlurmrestdDouble() { listener_.down(); }

  std::string base() const { return listener_.base() + "/"; }
  std::string url(const std::string& version) const { return base() + "slurm/" + version + "/"; }
  void down() { listener_.down(); }
  void up() { listener_.up(); }

  // Jobs ever submitted with this BridgeJob's tag (purged ones too).
  std::size_t tagged(const std::string& uid) {
    std::lock_guard lock(mu_);
    std::size_t n = 0;
    for (const auto& [id, j] : jobs_) {
      n += j.comment == "bridgejob-uid=" + uid ? 1 : 0;
    }
    return n;
  }
  // Jobs slurmrestd still knows (not purged).
  std::size_t known() {
    std::lock_guard lock(mu_);
    std::size_t n = 0;
    for (auto& [id, j] : jobs_) {
      n += purged(j) ? 0 : 1;
    }
    return n;
  }
  // The version and body of the last accepted submit.
  std::pair<std::string, nlohmann::json> lastSubmit() {
    std::lock_guard lock(mu_);
    return {lastVersion_, lastBody_};
  }

 private:
  struct Job {
    std::shared_ptr<LocalJob> run;
    std::string comment, name, cwd;
    std::int64_t submitted = 0, timeLimit = 0;  // epoch s, minutes (0 = none)
    bool cancelled = false;
  };

  static kc::net::Response errors(unsigned status, const std::string& version, std::int64_t number,
                                  const std::string& error, const std::string& description) {
    nlohmann::json body{{"errors", nlohmann::json::array({{{"error_number", number},
                                                           {"error", error},
                                                           {"description", description},
                                                           {"source", "slurmrestd double"}}})},
                        {"warnings", nlohmann::json::array()},
                        {"meta", meta(version)}};
    return kc::net::Response::json(status, body);
  }

  static nlohmann::json meta(const std::string& version) {
    nlohmann::json plugin{
        {"type", version == "v0.0.39" ? "openapi/" + version : "openapi/slurmctld"},
        {"name", "Slurm OpenAPI " + version},
        {"data_parser", "data_parser/" + version}};
    const char* release = version == "v0.0.39"   ? "23.02.7"
                          : version == "v0.0.40" ? "23.11.10"
                                                 : "24.05.4";
    return {{"plugin", plugin}, {"slurm", {{"release", release}, {"cluster", "double"}}}};
  }

  static nlohmann::json noVal(std::optional<std::int64_t> n, bool infinite = false) {
    return {{"set", n.has_value()}, {"infinite", infinite}, {"number", n.value_or(0)}};
  }

  bool purged(Job& j) {  // with mu_ held
    auto end = j.run->ended();
    return end && std::chrono::system_clock::now() - *end > o_.minJobAge;
  }

  std::optional<kc::net::Response> auth(const kc::net::Request& r) const {
    if (r.header("X-SLURM-USER-NAME").value_or("") != o_.user ||
        r.header("X-SLURM-USER-TOKEN").value_or("") != o_.token) {
      return kc::net::Response::text(401, "Authentication failure");
    }
    return std::nullopt;
  }

  kc::net::Response openapi(const kc::net::Request& r) {
    if (auto denied = auth(r)) {
      return *denied;
    }
    if (!o_.openapiDocument) {
      return kc::net::Response::text(
          404, "Unable find requested URL. Please view /openapi/v3 for API reference.");
    }
    nlohmann::json paths = nlohmann::json::object();
    for (const std::string& v : o_.offered) {
      for (const char* p : {"/ping/", "/jobs/", "/job/{job_id}", "/job/submit"}) {
        paths["/slurm/" + v + p] = nlohmann::json::object();
      }
      paths["/slurmdb/" + v + "/jobs/"] = nlohmann::json::object();
    }
    return kc::net::Response::json(
        200, {{"openapi", "3.0.3"}, {"info", {{"title", "Slurm REST API"}}}, {"paths", paths}});
  }

  // The job as GET /job/{id} or /jobs shows it in `version`'s shape.
  nlohmann::json show(std::int64_t id, Job& j, const std::string& version) {
    const bool v39 = version == "v0.0.39";
    const auto exit = j.run->exitStatus();
    const auto ended = j.run->ended();
    const bool completing =
        ended && std::chrono::system_clock::now() - *ended < std::chrono::milliseconds(300);
    std::string base = "RUNNING", reason = "None";
    if (exit) {
      base = j.cancelled ? "CANCELLED" : *exit == 0 ? "COMPLETED" : "FAILED";
      reason = base == "FAILED" ? "NonZeroExitCode" : "None";
    }
    const std::int64_t start =
        std::chrono::duration_cast<std::chrono::seconds>(j.run->started().time_since_epoch())
            .count();
    std::optional<std::int64_t> end;
    bool endInfinite = false;
    if (ended) {
      end = std::chrono::duration_cast<std::chrono::seconds>(ended->time_since_epoch()).count();
    } else if (j.timeLimit > 0) {
      end = start + j.timeLimit * 60;
    } else {
      endInfinite = true;
    }
    nlohmann::json out{
        {"job_id", id},
        {"name", j.name},
        {"comment", j.comment},
        {"state_reason", reason},
        {"partition", "debug"},
        {"user_name", o_.user},
        {"current_working_directory", j.cwd},
        {"time_limit",
         noVal(j.timeLimit > 0 ? std::optional<std::int64_t>(j.timeLimit) : std::nullopt,
               j.timeLimit == 0)},
        {"tasks", noVal(1)}};
    // A killed job's wait status: signal 9; LocalJob reports other ends as the exit code.
    const bool signaled = exit && j.cancelled;
    const int code = exit && !signaled ? *exit : 0;
    if (v39) {
      out["job_state"] = completing ? "COMPLETING" : base;
      out["exit_code"] = exit ? noVal(signaled ? 9 : code << 8) : noVal(std::nullopt);
      out["submit_time"] = j.submitted;
      out["start_time"] = start;
      out["end_time"] = end.value_or(0);
    } else {
      nlohmann::json state = nlohmann::json::array({base});
      if (completing) {
        state.push_back("COMPLETING");
      }
      out["job_state"] = state;
      nlohmann::json status = nlohmann::json::array({!exit       ? "PENDING"
                                                     : signaled  ? "SIGNALED"
                                                     : code == 0 ? "SUCCESS"
                                                                 : "ERROR"});
      out["exit_code"] = {
          {"status", status},
          {"return_code", noVal(exit ? std::optional<std::int64_t>(code) : std::nullopt)},
          {"signal",
           {{"id", noVal(signaled ? std::optional<std::int64_t>(9) : std::nullopt)},
            {"name", signaled ? "KILL" : ""}}}};
      out["submit_time"] = noVal(j.submitted);
      out["start_time"] = noVal(start);
      out["end_time"] = noVal(end, endInfinite);
    }
    return out;
  }

  kc::net::Response submit(const kc::net::Request& r, const std::string& version) {
    nlohmann::json body = nlohmann::json::parse(r.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      return kc::net::Response::text(400, "Unable to parse query.");
    }
    if (!body.contains("job") || !body["job"].is_object()) {
      return errors(400, version, 9001, "Failure during parsing", "job is required");
    }
    nlohmann::json job = body["job"];
    std::string script;
    if (body.contains("script")) {
      if (version == "v0.0.41") {
        return errors(400, version, 9001, "Failure during parsing",
                      "Unexpected field script at job_submit_req");
      }
      script = body["script"].get<std::string>();
    }
    if (job.contains("script")) {
      script = job["script"].get<std::string>();
    }
    if (script.empty()) {
      return errors(500, version, 2009, "Job script not specified", "Batch job script is missing");
    }
    static const std::set<std::string> known{"account",
                                             "begin_time",
                                             "constraints",
                                             "cpus_per_task",
                                             "current_working_directory",
                                             "deadline",
                                             "dependency",
                                             "environment",
                                             "tres_per_node",
                                             "hold",
                                             "licenses",
                                             "mail_type",
                                             "mail_user",
                                             "memory_per_cpu",
                                             "memory_per_node",
                                             "minimum_nodes",
                                             "name",
                                             "nice",
                                             "nodes",
                                             "partition",
                                             "qos",
                                             "requeue",
                                             "reservation",
                                             "standard_error",
                                             "standard_output",
                                             "standard_input",
                                             "tasks",
                                             "tasks_per_node",
                                             "time_limit",
                                             "time_minimum",
                                             "wckey",
                                             "comment",
                                             "script"};
    for (const auto& [k, v] : job.items()) {
      if (!known.count(k)) {
        return errors(400, version, 9001, "Failure during parsing", "Unknown field \"" + k + "\"");
      }
    }
    auto env = job.find("environment");
    if (env == job.end() || !env->is_array() || env->empty()) {
      return errors(400, version, 2127, "environment must be set",
                    "environment must be an array of strings");
    }
    std::vector<std::string> vars;
    for (const auto& e : *env) {
      if (!e.is_string() || e.get<std::string>().find('=') == std::string::npos) {
        return errors(400, version, 9001, "Failure during parsing",
                      "environment entries must be NAME=value");
      }
      vars.push_back(e.get<std::string>());
    }
    if (job.contains("nodes") && !job["nodes"].is_string()) {
      return errors(400, version, 9001, "Failure during parsing", "nodes must be a string");
    }
    if (job.contains("mail_type") && !job["mail_type"].is_array()) {
      return errors(400, version, 9001, "Failure during parsing",
                    "mail_type must be an array of flags");
    }
    const std::string cwd = job.value("current_working_directory", "");
    if (cwd.empty() || cwd.front() != '/') {
      return errors(400, version, 9001, "Failure during parsing",
                    "current_working_directory must be absolute");
    }
    std::lock_guard lock(mu_);
    const std::int64_t id = nextId_++;
    std::filesystem::create_directories(cwd);
    const std::string file = ".slurm-script-" + std::to_string(id);
    std::ofstream(cwd + "/" + file, std::ios::binary) << script;
    vars.push_back("SLURM_JOB_ID=" + std::to_string(id));
    Job j;
    j.comment = job.value("comment", "");
    j.name = job.value("name", "");
    j.cwd = cwd;
    j.submitted = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
    if (job.contains("time_limit") && job["time_limit"].is_number_integer()) {
      j.timeLimit = job["time_limit"].get<std::int64_t>();
    }
    j.run = std::make_shared<LocalJob>(cwd, "/bin/sh " + file, vars);
    jobs_.emplace(id, std::move(j));
    lastVersion_ = version;
    lastBody_ = body;
    nlohmann::json out{{"job_id", id},
                       {"step_id", "batch"},
                       {"job_submit_user_msg", ""},
                       {"meta", meta(version)},
                       {"errors", nlohmann::json::array()},
                       {"warnings", nlohmann::json::array()}};
    if (version == "v0.0.41") {
      out["result"] = {{"job_id", id},
                       {"step_id", "batch"},
                       {"error_code", 0},
                       {"error", "No error"},
                       {"job_submit_user_msg", ""}};
    }
    return kc::net::Response::json(200, out);
  }

  kc::net::Response handle(const kc::net::Request& r) {
    if (auto denied = auth(r)) {
      return *denied;
    }
    // /slurm/<version>/<rest>
    std::string rest = r.path.substr(std::string("/slurm/").size());
    const std::string version = rest.substr(0, rest.find('/'));
    rest = rest.size() > version.size() ? rest.substr(version.size()) : "/";
    while (rest.size() > 1 && rest.back() == '/') {
      rest.pop_back();
    }
    const bool served =
        (version == "v0.0.39" || version == "v0.0.40" || version == "v0.0.41") &&
        std::find(o_.offered.begin(), o_.offered.end(), version) != o_.offered.end();
    if (!served) {
      return kc::net::Response::text(
          404, "Unable find requested URL. Please view /openapi/v3 for API reference.");
    }
    const nlohmann::json ok{{"meta", meta(version)},
                            {"errors", nlohmann::json::array()},
                            {"warnings", nlohmann::json::array()}};
    if (r.method == "GET" && rest == "/ping") {
      nlohmann::json out = ok;
      out["pings"] = {
          {{"hostname", "double"}, {"pinged", "UP"}, {"latency", 10}, {"mode", "primary"}}};
      return kc::net::Response::json(200, out);
    }
    if (r.method == "POST" && rest == "/job/submit") {
      return submit(r, version);
    }
    std::lock_guard lock(mu_);
    if (r.method == "GET" && rest == "/jobs") {
      nlohmann::json out = ok;
      out["jobs"] = nlohmann::json::array();
      for (auto& [id, j] : jobs_) {
        if (!purged(j)) {
          out["jobs"].push_back(show(id, j, version));
        }
      }
      return kc::net::Response::json(200, out);
    }
    if (rest.rfind("/job/", 0) == 0) {
      const std::string idText = rest.substr(5);
      std::int64_t id = 0;
      try {
        id = std::stoll(idText);
      } catch (const std::exception&) {
        return errors(400, version, 9001, "Failure during parsing", "Invalid job id " + idText);
      }
      auto it = jobs_.find(id);
      if (it == jobs_.end() || purged(it->second)) {
        return errors(500, version, 2017, "Invalid job id specified",
                      "Unable to query JobId=" + idText);
      }
      if (r.method == "GET") {
        nlohmann::json out = ok;
        out["jobs"] = nlohmann::json::array({show(id, it->second, version)});
        return kc::net::Response::json(200, out);
      }
      if (r.method == "DELETE") {
        if (it->second.run->running()) {
          it->second.cancelled = true;
          it->second.run->kill();
        }
        return kc::net::Response::json(200, ok);
      }
    }
    return kc::net::Response::text(
        404, "Unable find requested URL. Please view /openapi/v3 for API reference.");
  }

  Options o_;
  std::mutex mu_;  // guards jobs_, nextId_, lastVersion_, lastBody_
  std::map<std::int64_t, Job> jobs_;
  std::int64_t nextId_ = 100;
  std::string lastVersion_;
  nlohmann::json lastBody_;
  RestartableServer listener_{[this](kc::net::HttpServer& s) {
    s.route("GET", "/openapi/v3", [this](const kc::net::Request& r) { return openapi(r); });
    s.route("GET", "/openapi", [this](const kc::net::Request& r) { return openapi(r); });
    s.routePrefix("", "/slurm/", [this](const kc::net::Request& r) { return handle(r); });
  }};
};

}  // namespace kc::bridge::testing
