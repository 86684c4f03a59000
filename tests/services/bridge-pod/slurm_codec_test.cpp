// The Slurm REST codec of the bridge pod against replies shaped as slurmrestd 22.05.8 returns
// them (v0.0.38; written by hand from observed payloads), and the original Bridge Operator's
// Slurm-side bugs, one test each.

#include "services/bridge-pod/slurm_codec.hpp"

#include <catch2/catch.hpp>
#include <string>

using kc::bridge::JobStatus;
using kc::bridge::slurm::ExitStatus;
using nlohmann::json;
namespace slurm = kc::bridge::slurm;

namespace {

const char* kMeta = R"("meta":{"plugin":{"type":"openapi/v0.0.38","name":"Slurm OpenAPI v0.0.38"},)"
                    R"("Slurm":{"version":{"major":22,"micro":8,"minor":5},"release":"22.05.8"}})";

std::string withMeta(const std::string& rest) {
  return std::string("{") + kMeta + "," + rest + "}";
}

slurm::SubmitInput input() {
  slurm::SubmitInput in;
  in.script = "#!/bin/bash\necho hi";
  in.jobProperties =
      R"({"partition":"debug","tasks":1,"current_working_directory":"/scratch/x",)"
      R"("environment":{"PATH":"/bin:/usr/bin"},"standard_output":"/scratch/x/out-%j.txt",)"
      R"("standard_error":"/scratch/x/err-%j.txt","time_limit":5})";
  in.bridgeJobUid = "7f3c-11";
  in.defaultName = "ns1.bj1";
  return in;
}

// A job as GET /job/{id} lists it (a few of the ~115 keys).
json job(std::int64_t id, const char* state, std::int64_t exitCode, const char* reason = "None") {
  return json{{"job_id", id},
              {"job_state", state},
              {"state_reason", reason},
              {"exit_code", exitCode},
              {"derived_exit_code", 0},
              {"submit_time", 1795348692},
              {"start_time", 1795348693},
              {"end_time", 1795348699},
              {"name", "ns1.bj1"},
              {"comment", "bridgejob-uid=7f3c-11"},
              {"partition", "debug"},
              {"standard_output", "/scratch/x/out-%j.txt"},
              {"user_name", "root"}};
}

std::string jobsReply(const json& jobs) {
  return withMeta(R"("errors":[],"jobs":)" + jobs.dump());
}

const char* kPurged =
    R"({"errors":[{"description":"Unable to find JobId=999","error_number":2017,)"
    R"("error":"Invalid job id specified","source":"slurm_load_job"}],"jobs":[]})";
const char* kBadToken =
    R"({"errors":[{"description":"slurmctld config is unable to load","error_number":-1,)"
    R"("error":"Unspecified error","source":"slurm_load_ctl_conf"}]})";

}  // namespace

// ---- submit body --------------------------------------------------------------------------

TEST_CASE("the submit body carries the script, the job properties and the uid tag", "[bridge]") {
  auto body = slurm::buildSubmitBody(input());
  REQUIRE(body.ok());
  const json expected = json::parse(R"({"script":"#!/bin/bash\necho hi","job":{
      "partition":"debug","tasks":1,"current_working_directory":"/scratch/x",
      "environment":{"PATH":"/bin:/usr/bin"},"standard_output":"/scratch/x/out-%j.txt",
      "standard_error":"/scratch/x/err-%j.txt","time_limit":5,
      "name":"ns1.bj1","comment":"bridgejob-uid=7f3c-11"}})");
  CHECK(*body == expected);
}

TEST_CASE("every documented job property passes through with its value", "[bridge]") {
  json props = {{"account", "a"},
                {"begin_time", 0},
                {"constraints", "gpu"},
                {"cpus_per_task", 2},
                {"current_working_directory", "/w"},
                {"deadline", 1900000000},
                {"dependency", "afterok:3"},
                {"environment", {{"PATH", "/bin"}, {"OMP_NUM_THREADS", "2"}}},
                {"gres", "gpu:1"},
                {"hold", false},
                {"licenses", "lic:1"},
                {"mail_type", "END"},
                {"mail_user", "u@example.org"},
                {"memory_per_cpu", 512},
                {"memory_per_node", 1024},
                {"minimum_nodes", 1},
                {"name", "n"},
                {"nice", -5},
                {"nodes", {1, 2}},
                {"partition", "debug"},
                {"qos", "normal"},
                {"requeue", true},
                {"reservation", "r"},
                {"standard_error", "/w/e"},
                {"standard_input", "/w/i"},
                {"standard_output", "/w/o"},
                {"tasks", 4},
                {"tasks_per_node", 2},
                {"time_limit", 60},
                {"time_minimum", 30},
                {"wckey", "k"}};
  CHECK(props.size() == slurm::jobFieldNames().size());
  auto in = input();
  in.jobProperties = props.dump();
  auto body = slurm::buildSubmitBody(in);
  REQUIRE(body.ok());
  json want = props;
  want["comment"] = "bridgejob-uid=7f3c-11";
  CHECK((*body)["job"] == want);
}

// Original bug 3: the body was built by Sprintf, so a quote or newline in the script gave
// HTTP 400 "Unable to parse query." (IBM/Bridge-Operator issue #3).
TEST_CASE("a script with quotes, backslashes and newlines survives the body", "[bridge]") {
  auto in = input();
  in.script = "#!/bin/bash\necho \"hello \\\"world\\\"\"\tprintf '%s\\n' $HOME\r\n\x01 end";
  auto body = slurm::buildSubmitBody(in);
  REQUIRE(body.ok());
  json reparsed = json::parse(body->dump());
  CHECK(reparsed["script"] == in.script);
}

// Original bug 4: #SBATCH lines are ignored by slurmrestd (issue #6). The codec passes the
// script verbatim and takes resources only from jobproperties: it neither reads #SBATCH lines
// nor invents fields.
TEST_CASE("#SBATCH lines do not become job fields, jobproperties do", "[bridge]") {
  auto in = input();
  in.script = "#!/bin/bash\n#SBATCH --cpus-per-task=8\n#SBATCH --job-name=x\nhostname";
  auto body = slurm::buildSubmitBody(in);
  REQUIRE(body.ok());
  CHECK_FALSE((*body)["job"].contains("cpus_per_task"));
  CHECK((*body)["job"]["name"] == "ns1.bj1");
  CHECK((*body)["script"] == in.script);
}

TEST_CASE("bad job properties are rejected naming the key", "[bridge]") {
  struct Row {
    const char* what;
    std::string props;
    std::string message;
  };
  auto row = GENERATE(values<Row>({
      {"empty (original issue 2)", "", "jobproperties is required for Slurm"},
      {"not JSON", R"({"tasks":1)", "jobproperties is not a JSON object"},
      {"not an object", R"([1,2])", "jobproperties is not a JSON object"},
      {"unknown key", R"({"bogus_field":1})", "jobproperties.bogus_field is not a supported"},
      {"array jobs", R"({"array":"0-3"})", "jobproperties.array is not a supported"},
      {"comment", R"({"comment":"x"})", "jobproperties.comment is reserved"},
      {"tasks as string", R"({"tasks":"1"})", "jobproperties.tasks must be an integer"},
      {"tasks zero", R"({"tasks":0})", "jobproperties.tasks must be greater than 0"},
      {"time_limit float", R"({"time_limit":1.5})", "jobproperties.time_limit must be an integer"},
      {"memory negative", R"({"memory_per_node":-1})",
       "jobproperties.memory_per_node must be greater"},
      {"begin_time negative", R"({"begin_time":-1})",
       "jobproperties.begin_time must not be negative"},
      {"hold as string", R"({"hold":"true"})", "jobproperties.hold must be a boolean"},
      {"partition empty", R"({"partition":""})", "jobproperties.partition must be a non-empty"},
      {"partition number", R"({"partition":3})", "jobproperties.partition must be a non-empty"},
      {"relative cwd", R"({"current_working_directory":"x"})",
       "jobproperties.current_working_directory must be an absolute path"},
      {"relative output", R"({"standard_output":"out.txt"})",
       "jobproperties.standard_output must be an absolute path"},
      {"nodes scalar", R"({"nodes":2})", "jobproperties.nodes must be [min, max]"},
      {"nodes reversed", R"({"nodes":[3,2]})", "jobproperties.nodes must be [min, max]"},
      {"env empty", R"({"environment":{}})", "jobproperties.environment must be a non-empty"},
      {"env array", R"({"environment":["PATH=/bin"]})", "jobproperties.environment must be"},
      {"env value number", R"({"environment":{"N":1}})",
       "jobproperties.environment.N must be a string"},
      {"env name with =", R"({"environment":{"A=B":"c"}})", "invalid variable name \"A=B\""},
      {"env missing", R"({"current_working_directory":"/w"})",
       "jobproperties.environment is required"},
      {"cwd missing", R"({"environment":{"PATH":"/bin"}})",
       "jobproperties.current_working_directory is required"},
  }));
  INFO(row.what);
  auto in = input();
  in.jobProperties = row.props;
  auto body = slurm::buildSubmitBody(in);
  REQUIRE_FALSE(body.ok());
  CHECK(body.error().code == kc::errc::kInvalid);
  CHECK_THAT(body.error().message, Catch::Contains(row.message));
}

TEST_CASE("an empty script, uid or name is rejected", "[bridge]") {
  auto a = input();
  a.script.clear();
  CHECK_THAT(slurm::buildSubmitBody(a).error().message, Catch::Contains("script is empty"));
  auto b = input();
  b.bridgeJobUid.clear();
  CHECK_THAT(slurm::buildSubmitBody(b).error().message, Catch::Contains("uid is empty"));
  auto c = input();
  c.defaultName.clear();
  CHECK_THAT(slurm::buildSubmitBody(c).error().message, Catch::Contains("no default name"));
}

// ---- submit reply -------------------------------------------------------------------------

TEST_CASE("a submit reply yields the job id", "[bridge]") {
  auto id = slurm::parseSubmitResponse(
      200, withMeta(R"("errors":[],"job_id":1,"step_id":"BATCH","job_submit_user_msg":"")"));
  REQUIRE(id.ok());
  CHECK(*id == 1);
}

// Original bug 2: a failed submit was recorded as job id 0 and SUBMITTED (issue #3).
TEST_CASE("failed submit replies are errors, never a job id", "[bridge]") {
  struct Row {
    const char* what;
    int status;
    std::string body;
    const char* code;
    std::string message;
  };
  auto row = GENERATE(values<Row>({
      {"malformed JSON sent (original issue 3)", 400, "Unable to parse query.", kc::errc::kInvalid,
       "HTTP 400: Unable to parse query."},
      {"no environment", 400,
       R"({"errors":[{"error":"environment must be set","error_code":2127},)"
       R"({"error_code":9001,"error":"Failure during parsing"}]})",
       kc::errc::kInvalid, "error 2127 environment must be set"},
      {"unknown key", 400, R"({"errors":[{"error":"Unknown key \"bogus_field\""}]})",
       kc::errc::kInvalid, "Unknown key \"bogus_field\""},
      {"no script", 500, R"({"errors":[{"error_code":2009,"error":"Job script not specified"}]})",
       kc::errc::kServerError, "error 2009 Job script not specified"},
      {"bad token", 500, kBadToken, kc::errc::kUnauthorized, "token rejected"},
      {"no auth headers", 401, "Authentication failure", kc::errc::kUnauthorized,
       "Authentication failure"},
      {"errors with 200", 200, R"({"errors":[{"error_number":1,"error":"x"}],"job_id":5})",
       kc::errc::kServerError, "error 1 x"},
      {"job id 0", 200, R"({"errors":[],"job_id":0})", kc::errc::kProtocol, "job_id 0"},
      {"job id missing", 200, R"({"errors":[]})", kc::errc::kProtocol, "submit.job_id is missing"},
      {"job id string", 200, R"({"errors":[],"job_id":"5"})", kc::errc::kProtocol,
       "submit.job_id is not an integer"},
      {"errors not array", 200, R"({"errors":{},"job_id":5})", kc::errc::kProtocol,
       "errors is not an array"},
      {"200 not JSON", 200, "ok", kc::errc::kProtocol, "not a JSON object"},
  }));
  INFO(row.what);
  auto id = slurm::parseSubmitResponse(row.status, row.body);
  REQUIRE_FALSE(id.ok());
  CHECK(id.error().code == row.code);
  CHECK_THAT(id.error().message, Catch::Contains(row.message));
}

// ---- job query ----------------------------------------------------------------------------

TEST_CASE("job replies over a job's life map to status, exit and times", "[bridge]") {
  struct Row {
    const char* state;
    std::int64_t exitCode;
    const char* reason;
    JobStatus status;
    std::string exit;
  };
  auto row = GENERATE(values<Row>({
      {"PENDING", 0, "Resources", JobStatus::kSubmitted, "exited with code 0"},
      {"RUNNING", 0, "None", JobStatus::kRunning, "exited with code 0"},
      {"COMPLETING", 15, "None", JobStatus::kRunning, "killed by signal 15"},
      {"COMPLETED", 0, "None", JobStatus::kDone, "exited with code 0"},
      {"FAILED", 768, "NonZeroExitCode", JobStatus::kFailed, "exited with code 3"},
      {"CANCELLED", 15, "None", JobStatus::kKilled, "killed by signal 15"},
      {"TIMEOUT", 15, "TimeLimit", JobStatus::kFailed, "killed by signal 15"},
      {"FAILED", 4021, "JobLaunchFailure", JobStatus::kFailed, "launch failed (Slurm error 4021)"},
  }));
  INFO(row.state);
  auto q = slurm::parseJobResponse(
      200, jobsReply(json::array({job(3, row.state, row.exitCode, row.reason)})), 3);
  REQUIRE(q.ok());
  REQUIRE_FALSE(q->gone);
  REQUIRE(q->job);
  CHECK(q->job->jobId == 3);
  CHECK(q->job->jobState == row.state);
  CHECK(q->job->stateReason == row.reason);
  CHECK(q->job->status == row.status);
  CHECK(slurm::describe(q->job->exit) == row.exit);
  CHECK(q->job->comment == "bridgejob-uid=7f3c-11");
  CHECK(q->job->submitTime == 1795348692);
  CHECK(q->job->startTime == 1795348693);
  CHECK(q->job->endTime == 1795348699);
}

TEST_CASE("times of 0 are unset", "[bridge]") {
  json j = job(4, "PENDING", 0, "Resources");
  j["start_time"] = 0;
  j["end_time"] = 0;
  auto q = slurm::parseJobResponse(200, jobsReply(json::array({j})), 4);
  REQUIRE(q.ok());
  CHECK_FALSE(q->job->startTime.has_value());
  CHECK_FALSE(q->job->endTime.has_value());
  CHECK(q->job->submitTime == 1795348692);
}

// Original bug 7: a purged job (MinJobAge) answers 500 with error 2017 and the pod logged
// errors forever. It is "gone", distinct from every other failure.
TEST_CASE("a purged job is gone, other 500s are errors", "[bridge]") {
  auto gone = slurm::parseJobResponse(500, kPurged, 999);
  REQUIRE(gone.ok());
  CHECK(gone->gone);
  CHECK_FALSE(gone->job.has_value());

  auto token = slurm::parseJobResponse(500, kBadToken, 999);
  REQUIRE_FALSE(token.ok());
  CHECK(token.error().code == kc::errc::kUnauthorized);

  // 2017 with another status is not the purged-job answer.
  auto odd = slurm::parseJobResponse(400, kPurged, 999);
  REQUIRE_FALSE(odd.ok());
  CHECK(odd.error().code == kc::errc::kInvalid);

  auto other = slurm::parseJobResponse(
      500,
      R"({"errors":[{"error_number":1007,"error":"Protocol authentication error"}],"jobs":[]})", 9);
  REQUIRE_FALSE(other.ok());
  CHECK(other.error().code == kc::errc::kServerError);
  CHECK_THAT(other.error().message, Catch::Contains("error 1007 Protocol authentication error"));
}

// Original bug 7 too: an empty jobs array made the Go pod panic (job.Job[0]).
TEST_CASE("malformed job replies are protocol errors naming the field", "[bridge]") {
  struct Row {
    const char* what;
    std::function<void(json&)> change;
    std::string message;
  };
  auto row = GENERATE(values<Row>({
      {"empty jobs", [](json& r) { r["jobs"] = json::array(); }, "jobs has 0 entries"},
      {"two jobs", [](json& r) { r["jobs"].push_back(r["jobs"][0]); }, "jobs has 2 entries"},
      {"jobs missing", [](json& r) { r.erase("jobs"); }, "jobs is missing"},
      {"jobs object", [](json& r) { r["jobs"] = json::object(); }, "jobs is not an array"},
      {"job not object", [](json& r) { r["jobs"][0] = 3; }, "jobs[0] is not an object"},
      {"other job", [](json& r) { r["jobs"][0]["job_id"] = 4; }, "jobs[0].job_id 4 is not the job"},
      {"no job_id", [](json& r) { r["jobs"][0].erase("job_id"); }, "jobs[0].job_id is missing"},
      {"no job_state", [](json& r) { r["jobs"][0].erase("job_state"); },
       "jobs[0].job_state is missing"},
      {"job_state number", [](json& r) { r["jobs"][0]["job_state"] = 1; },
       "jobs[0].job_state is not a string"},
      {"unknown state", [](json& r) { r["jobs"][0]["job_state"] = "FINISHED"; },
       "\"FINISHED\" is not a Slurm job state"},
      {"exit_code object",
       [](json& r) {
         r["jobs"][0]["exit_code"] = {{"return_code", 0}};
       },
       "jobs[0].exit_code is not an integer"},
      {"exit_code missing", [](json& r) { r["jobs"][0].erase("exit_code"); },
       "jobs[0].exit_code is missing"},
      {"exit_code too big", [](json& r) { r["jobs"][0]["exit_code"] = 70000; },
       "not a wait status"},
      {"end_time string", [](json& r) { r["jobs"][0]["end_time"] = "1795348699"; },
       "jobs[0].end_time is not an integer"},
      {"start_time negative", [](json& r) { r["jobs"][0]["start_time"] = -1; },
       "jobs[0].start_time is negative"},
      {"comment number", [](json& r) { r["jobs"][0]["comment"] = 5; },
       "jobs[0].comment is not a string"},
  }));
  INFO(row.what);
  json reply = json::parse(jobsReply(json::array({job(3, "RUNNING", 0)})));
  row.change(reply);
  auto q = slurm::parseJobResponse(200, reply.dump(), 3);
  REQUIRE_FALSE(q.ok());
  CHECK(q.error().code == kc::errc::kProtocol);
  CHECK_THAT(q.error().message, Catch::Contains(row.message));
}

TEST_CASE("a job reply with errors is an error even with HTTP 200", "[bridge]") {
  json reply = json::parse(jobsReply(json::array({job(3, "RUNNING", 0)})));
  reply["errors"] = json::array({{{"error_number", 5}, {"error", "partial"}}});
  auto q = slurm::parseJobResponse(200, reply.dump(), 3);
  REQUIRE_FALSE(q.ok());
  CHECK_THAT(q.error().message, Catch::Contains("error 5 partial"));
}

// ---- states and exit codes ----------------------------------------------------------------

// Original bug 1: COMPLETING was taken as terminal, COMPLETED/CANCELLED never reached the CR,
// and the killed value was "KILL".
TEST_CASE("every Slurm job state maps to a BridgeJob status", "[bridge]") {
  struct Row {
    const char* state;
    JobStatus status;
  };
  auto row = GENERATE(values<Row>({
      {"PENDING", JobStatus::kSubmitted},       {"CONFIGURING", JobStatus::kSubmitted},
      {"POWER_UP_NODE", JobStatus::kSubmitted}, {"REQUEUED", JobStatus::kSubmitted},
      {"REQUEUE_FED", JobStatus::kSubmitted},   {"REQUEUE_HOLD", JobStatus::kSubmitted},
      {"RESV_DEL_HOLD", JobStatus::kSubmitted}, {"RUNNING", JobStatus::kRunning},
      {"SUSPENDED", JobStatus::kRunning},       {"COMPLETING", JobStatus::kRunning},
      {"RESIZING", JobStatus::kRunning},        {"SIGNALING", JobStatus::kRunning},
      {"STAGE_OUT", JobStatus::kRunning},       {"STOPPED", JobStatus::kRunning},
      {"COMPLETED", JobStatus::kDone},          {"CANCELLED", JobStatus::kKilled},
      {"FAILED", JobStatus::kFailed},           {"TIMEOUT", JobStatus::kFailed},
      {"NODE_FAIL", JobStatus::kFailed},        {"PREEMPTED", JobStatus::kFailed},
      {"BOOT_FAIL", JobStatus::kFailed},        {"DEADLINE", JobStatus::kFailed},
      {"OUT_OF_MEMORY", JobStatus::kFailed},    {"SPECIAL_EXIT", JobStatus::kFailed},
      {"REVOKED", JobStatus::kUnknown},
  }));
  INFO(row.state);
  CHECK(slurm::mapJobState(row.state) == row.status);
}

TEST_CASE("the state table is complete and terminal only where Slurm is done", "[bridge]") {
  CHECK(slurm::jobStateNames().size() == 25);
  CHECK_FALSE(kc::bridge::isTerminal(*slurm::mapJobState("COMPLETING")));
  CHECK(kc::bridge::isTerminal(*slurm::mapJobState("COMPLETED")));
  CHECK(kc::bridge::isTerminal(*slurm::mapJobState("CANCELLED")));
  CHECK(std::string(kc::bridge::jobStatusName(*slurm::mapJobState("CANCELLED"))) == "KILLED");
  CHECK_FALSE(slurm::mapJobState("KILL").has_value());
  CHECK_FALSE(slurm::mapJobState("completed").has_value());
  CHECK_FALSE(slurm::mapJobState("").has_value());
}

TEST_CASE("exit_code is decoded as a raw wait status", "[bridge]") {
  using K = ExitStatus::Kind;
  CHECK(*slurm::decodeExitCode(0, "None") == ExitStatus{K::kExited, 0, false});
  CHECK(*slurm::decodeExitCode(768, "NonZeroExitCode") == ExitStatus{K::kExited, 3, false});
  CHECK(*slurm::decodeExitCode(255 << 8, "NonZeroExitCode") == ExitStatus{K::kExited, 255, false});
  CHECK(*slurm::decodeExitCode(15, "None") == ExitStatus{K::kSignaled, 15, false});
  CHECK(*slurm::decodeExitCode(0x80 | 9, "None") == ExitStatus{K::kSignaled, 9, true});
  CHECK(slurm::describe(*slurm::decodeExitCode(0x80 | 9, "None")) ==
        "killed by signal 9 (core dumped)");
  CHECK(*slurm::decodeExitCode(4021, "JobLaunchFailure") ==
        ExitStatus{K::kLaunchFailed, 4021, false});
  for (std::int64_t bad : {std::int64_t{-1}, std::int64_t{0x7f}, std::int64_t{0x137f},
                           std::int64_t{4021}, std::int64_t{65536}}) {
    INFO(bad);
    auto e = slurm::decodeExitCode(bad, "None");
    REQUIRE_FALSE(e.ok());
    CHECK(e.error().code == kc::errc::kProtocol);
  }
}

// ---- paths and cancel ---------------------------------------------------------------------

// Original bug 5: the cancel URL was HPCURL + "job" + id (no '/').
TEST_CASE("paths join the resource URL with exactly one slash", "[bridge]") {
  for (const char* base : {"http://h:6820/slurm/v0.0.38", "http://h:6820/slurm/v0.0.38/",
                           "http://h:6820/slurm/v0.0.38//"}) {
    INFO(base);
    CHECK(slurm::jobPath(base, 42) == "http://h:6820/slurm/v0.0.38/job/42");
    CHECK(slurm::submitPath(base) == "http://h:6820/slurm/v0.0.38/job/submit");
    CHECK(slurm::jobsPath(base) == "http://h:6820/slurm/v0.0.38/jobs");
  }
}

TEST_CASE("cancel replies: cancelled, already gone, or an error", "[bridge]") {
  auto done = slurm::parseCancelResponse(200, withMeta(R"("errors":[])"));
  REQUIRE(done.ok());
  CHECK(*done);
  auto gone = slurm::parseCancelResponse(
      500,
      R"({"errors":[{"error_number":2017,"error":"unable to kill JobId=9999 with signal 9: Invalid job id specified"}]})");
  REQUIRE(gone.ok());
  CHECK_FALSE(*gone);
  auto denied = slurm::parseCancelResponse(
      500, R"({"errors":[{"error_number":2002,"error":"Access/permission denied"}]})");
  REQUIRE_FALSE(denied.ok());
  CHECK(denied.error().code == kc::errc::kForbidden);
  auto token = slurm::parseCancelResponse(500, kBadToken);
  REQUIRE_FALSE(token.ok());
  CHECK(token.error().code == kc::errc::kUnauthorized);
}

// ---- adoption -----------------------------------------------------------------------------

// Original bug 6: the id was recorded only after submit returned, so a crash in between made
// a duplicate job. The tagged job is found and adopted instead.
TEST_CASE("the job tagged with the BridgeJob uid is found in the jobs list", "[bridge]") {
  json other = job(4, "RUNNING", 0);
  other["comment"] = "bridgejob-uid=7f3c-1";               // a prefix of the uid: not ours
  json foreign = {{"job_id", 2}, {"job_state", "WEIRD"}};  // not ours, not read strictly
  json mine = job(5, "PENDING", 0, "Resources");
  auto found = slurm::findTaggedJob(200, jobsReply(json::array({other, foreign, mine})), "7f3c-11");
  REQUIRE(found.ok());
  REQUIRE(found->has_value());
  CHECK((*found)->jobId == 5);
  CHECK((*found)->status == JobStatus::kSubmitted);

  auto none = slurm::findTaggedJob(200, jobsReply(json::array({other, foreign})), "7f3c-11");
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());

  auto empty = slurm::findTaggedJob(200, jobsReply(json::array()), "7f3c-11");
  REQUIRE(empty.ok());
  CHECK_FALSE(empty->has_value());
}

TEST_CASE("adoption never guesses", "[bridge]") {
  json a = job(5, "PENDING", 0);
  json b = job(6, "RUNNING", 0);
  auto two = slurm::findTaggedJob(200, jobsReply(json::array({a, b})), "7f3c-11");
  REQUIRE_FALSE(two.ok());
  CHECK(two.error().code == kc::errc::kConflict);
  CHECK_THAT(two.error().message, Catch::Contains("5, 6"));

  json broken = job(5, "PENDING", 0);
  broken.erase("exit_code");
  auto bad = slurm::findTaggedJob(200, jobsReply(json::array({broken})), "7f3c-11");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == kc::errc::kProtocol);

  auto noJobs = slurm::findTaggedJob(200, withMeta(R"("errors":[])"), "7f3c-11");
  REQUIRE_FALSE(noJobs.ok());
  CHECK_THAT(noJobs.error().message, Catch::Contains("jobs is missing"));

  auto token = slurm::findTaggedJob(500, kBadToken, "7f3c-11");
  REQUIRE_FALSE(token.ok());
  CHECK(token.error().code == kc::errc::kUnauthorized);

  auto noUid = slurm::findTaggedJob(200, jobsReply(json::array({a})), "");
  REQUIRE_FALSE(noUid.ok());
  CHECK(noUid.error().code == kc::errc::kInvalid);
}
