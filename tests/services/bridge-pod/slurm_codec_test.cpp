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
      {"env array of numbers", R"({"environment":[1]})",
       "jobproperties.environment entries must be"},
      {"env array entry without =", R"({"environment":["PATH"]})",
       "entry \"PATH\" is not NAME=value"},
      {"env array entry =x", R"({"environment":["=x"]})", "entry \"=x\" is not NAME=value"},
      {"env empty array", R"({"environment":[]})", "jobproperties.environment must be a non-empty"},
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

// ==== newer slurmrestd versions: v0.0.39 (Slurm 23.02), v0.0.40 (23.11), v0.0.41 (24.05) ====
// Reply bodies in the shapes of the published OpenAPI specifications of each version (field
// names and types from the specs' job_info, job_submit_response, errors and warnings schemas;
// the values are a job's life as the v0.0.38 cases above). v0.0.39+ numbers may be objects
// {"set", "infinite", "number"} (uint32/uint64 "no_val" in the specs).

namespace {

using slurm::ApiVersion;

json noVal(std::int64_t n) {
  return json{{"set", true}, {"infinite", false}, {"number", n}};
}
json unset() {
  return json{{"set", false}, {"infinite", false}, {"number", 0}};
}
json infinite() {
  return json{{"set", false}, {"infinite", true}, {"number", 0}};
}

json meta(ApiVersion v) {
  const std::string name = slurm::versionName(v);
  const int minor = v == ApiVersion::kV0039 ? 2 : v == ApiVersion::kV0040 ? 11 : 5;
  const int major = v == ApiVersion::kV0041 ? 24 : 23;
  json plugin = v == ApiVersion::kV0039 ? json{{"type", "openapi/" + name},
                                               {"name", "Slurm OpenAPI " + name},
                                               {"data_parser", name}}
                                        : json{{"type", "openapi/slurmctld"},
                                               {"name", "Slurm OpenAPI slurmctld"},
                                               {"data_parser", "data_parser/" + name},
                                               {"accounting_storage", ""}};
  return json{
      {"plugin", plugin},
      {"client", {{"source", "[127.0.0.1]:40422"}, {"user", "root"}, {"group", "root"}}},
      {"command", json::array()},
      {"slurm",
       {{"version",
         {{"major", std::to_string(major)}, {"micro", "1"}, {"minor", std::to_string(minor)}}},
        {"release",
         std::to_string(major) + "." + (minor < 10 ? "0" : "") + std::to_string(minor) + ".1"},
        {"cluster", "bridgetest"}}}};
}

std::string reply(ApiVersion v, json body) {
  body["meta"] = meta(v);
  if (!body.contains("errors")) {
    body["errors"] = json::array();
  }
  if (!body.contains("warnings")) {
    body["warnings"] = json::array();
  }
  return body.dump();
}

// A v0.0.39 job: job_state a string, exit_code a uint32 no_val holding the raw wait status,
// times plain integers.
json job39(std::int64_t id, const char* state, json exitCode, const char* reason = "None") {
  return json{{"job_id", id},
              {"job_state", state},
              {"state_reason", reason},
              {"exit_code", std::move(exitCode)},
              {"derived_exit_code", noVal(0)},
              {"submit_time", 1795348692},
              {"start_time", 1795348693},
              {"end_time", 1795348699},
              {"time_limit", noVal(5)},
              {"tasks", noVal(1)},
              {"name", "ns1.bj1"},
              {"comment", "bridgejob-uid=7f3c-11"},
              {"partition", "debug"},
              {"user_name", "root"}};
}

// The v0.0.40+ process_exit_code_verbose object.
json verboseExit(std::vector<std::string> status, json returnCode, json signalId = unset(),
                 const char* signalName = "") {
  return json{{"status", std::move(status)},
              {"return_code", std::move(returnCode)},
              {"signal", {{"id", std::move(signalId)}, {"name", signalName}}}};
}

// A v0.0.40/41 job: job_state an array, exit_code verbose, times uint64 no_val.
json job40(std::int64_t id, std::vector<std::string> state, json exitCode,
           const char* reason = "None") {
  return json{{"job_id", id},
              {"job_state", std::move(state)},
              {"state_reason", reason},
              {"exit_code", std::move(exitCode)},
              {"derived_exit_code", verboseExit({"SUCCESS"}, noVal(0))},
              {"submit_time", noVal(1795348692)},
              {"start_time", noVal(1795348693)},
              {"end_time", noVal(1795348699)},
              {"time_limit", noVal(5)},
              {"tasks", noVal(1)},
              {"name", "ns1.bj1"},
              {"comment", "bridgejob-uid=7f3c-11"},
              {"partition", "debug"},
              {"user_name", "root"}};
}

json purgedBody() {
  return json{{"errors", json::array({{{"description", "Unable to query JobId=999"},
                                       {"error_number", 2017},
                                       {"error", "Invalid job id specified"},
                                       {"source", "_handle_job_get"}}})},
              {"jobs", json::array()}};
}

}  // namespace

TEST_CASE("versions: names, order and the newest implemented one", "[bridge]") {
  CHECK(slurm::versionName(ApiVersion::kV0040) == "v0.0.40");
  CHECK(slurm::parseVersion("v0.0.41") == ApiVersion::kV0041);
  CHECK(slurm::parseVersion("v0.0.38") == ApiVersion::kV0038);
  CHECK_FALSE(slurm::parseVersion("v0.0.37").has_value());
  CHECK_FALSE(slurm::parseVersion("v0.0.42").has_value());
  CHECK_FALSE(slurm::parseVersion("0.0.40").has_value());
  CHECK(slurm::implementedVersions() ==
        std::vector<ApiVersion>{ApiVersion::kV0041, ApiVersion::kV0040, ApiVersion::kV0039,
                                ApiVersion::kV0038});
  CHECK(slurm::newestImplemented({"v0.0.36", "v0.0.37", "v0.0.38"}) ==
        ApiVersion::kV0038);                                                      // Slurm 22.05
  CHECK(slurm::newestImplemented({"v0.0.39", "v0.0.40"}) == ApiVersion::kV0040);  // 23.11
  CHECK(slurm::newestImplemented({"v0.0.40", "v0.0.41", "v0.0.42"}) ==
        ApiVersion::kV0041);  // 24.11
  CHECK_FALSE(slurm::newestImplemented({"v0.0.36", "v0.0.37"}).has_value());
  CHECK_FALSE(slurm::newestImplemented({"v0.0.42", "v0.0.43"}).has_value());
  CHECK_FALSE(slurm::newestImplemented({}).has_value());
}

TEST_CASE("a resourceURL is split into its root and the version it names", "[bridge]") {
  struct Row {
    const char* url;
    const char* root;
    const char* version;
  };
  auto row = GENERATE(values<Row>({
      {"http://h:6820/slurm/v0.0.38/", "http://h:6820", "v0.0.38"},
      {"http://h:6820/slurm/v0.0.40", "http://h:6820", "v0.0.40"},
      {"https://gw.example/hpc/slurm/v0.0.42//", "https://gw.example/hpc", "v0.0.42"},
      {"http://h:6820/", "http://h:6820", ""},
      {"http://h:6820", "http://h:6820", ""},
      {"https://gw.example/hpc/", "https://gw.example/hpc", ""},
  }));
  INFO(row.url);
  auto u = slurm::splitResourceUrl(row.url);
  REQUIRE(u.ok());
  CHECK(u->root == row.root);
  CHECK(u->version == row.version);
  for (const char* bad :
       {"http://h:6820/slurm/", "http://h:6820/slurm/latest/", "http://h:6820/slurm/v0.0.38/jobs",
        "http://h:6820/slurm/v0.0/", "h:6820/slurm/v0.0.38/"}) {
    INFO(bad);
    auto e = slurm::splitResourceUrl(bad);
    REQUIRE_FALSE(e.ok());
    CHECK(e.error().code == kc::errc::kInvalid);
  }
}

TEST_CASE("the versions an OpenAPI document offers are read from its /slurm/ paths", "[bridge]") {
  // GET /openapi/v3 of slurmrestd 22.05 (-s openapi/v0.0.36,v0.0.37,v0.0.38), paths abridged.
  const json doc2205 = {{"openapi", "3.0.2"},
                        {"info", {{"title", "Slurm Rest API"}, {"version", "0.0.38"}}},
                        {"paths",
                         {{"/slurm/v0.0.36/ping", json::object()},
                          {"/slurm/v0.0.38/job/submit", json::object()},
                          {"/slurm/v0.0.37/jobs", json::object()},
                          {"/slurm/v0.0.38/job/{job_id}", json::object()},
                          {"/openapi/v3", json::object()}}}};
  auto v = slurm::offeredVersions(doc2205.dump());
  REQUIRE(v.ok());
  CHECK(*v == std::vector<std::string>{"v0.0.36", "v0.0.37", "v0.0.38"});
  // 24.11: slurmdb paths of the same versions, and v0.0.9 sorts before v0.0.40.
  const json doc2411 = {{"openapi", "3.0.3"},
                        {"paths",
                         {{"/slurm/v0.0.42/job/submit", json::object()},
                          {"/slurmdb/v0.0.42/jobs/", json::object()},
                          {"/slurm/v0.0.40/jobs/", json::object()},
                          {"/slurm/v0.0.41/ping/", json::object()},
                          {"/slurm/v0.0.9/ping/", json::object()}}}};
  v = slurm::offeredVersions(doc2411.dump());
  REQUIRE(v.ok());
  CHECK(*v == std::vector<std::string>{"v0.0.9", "v0.0.40", "v0.0.41", "v0.0.42"});
  CHECK(slurm::newestImplemented(*v) == ApiVersion::kV0041);
  for (const char* bad :
       {"Authentication failure", "[]", R"({"openapi":"3.0.2"})", R"({"paths":[]})"}) {
    INFO(bad);
    auto e = slurm::offeredVersions(bad);
    REQUIRE_FALSE(e.ok());
    CHECK(e.error().code == kc::errc::kProtocol);
  }
}

TEST_CASE("v0.0.39+ submit bodies: script in the job, environment as NAME=value strings",
          "[bridge]") {
  auto v = GENERATE(ApiVersion::kV0039, ApiVersion::kV0040, ApiVersion::kV0041);
  INFO(slurm::versionName(v));
  auto in = input();
  in.jobProperties =
      R"({"partition":"debug","tasks":1,"current_working_directory":"/scratch/x",)"
      R"("environment":{"PATH":"/bin:/usr/bin","OMP_NUM_THREADS":"2"},"nodes":[1,2],)"
      R"("mail_type":"END, FAIL","mail_user":"u@example.org","gres":"gpu:1,mps:10","time_limit":5})";
  auto body = slurm::buildSubmitBody(in, v);
  REQUIRE(body.ok());
  const json expected = json::parse(R"({"job":{
      "partition":"debug","tasks":1,"current_working_directory":"/scratch/x",
      "environment":["OMP_NUM_THREADS=2","PATH=/bin:/usr/bin"],"nodes":"1-2",
      "mail_type":["END","FAIL"],"mail_user":"u@example.org","tres_per_node":"gres/gpu:1,gres/mps:10",
      "time_limit":5,"name":"ns1.bj1","comment":"bridgejob-uid=7f3c-11",
      "script":"#!/bin/bash\necho hi"}})");
  CHECK(*body == expected);

  // Equal bounds are one count; an array environment passes through.
  in.jobProperties =
      R"({"current_working_directory":"/w","environment":["A=1","B=x=y"],"nodes":[3,3]})";
  body = slurm::buildSubmitBody(in, v);
  REQUIRE(body.ok());
  CHECK((*body)["job"]["environment"] == json::array({"A=1", "B=x=y"}));
  CHECK((*body)["job"]["nodes"] == "3");
  CHECK_FALSE(body->contains("script"));
}

TEST_CASE("v0.0.38 takes an array environment as the object it needs", "[bridge]") {
  auto in = input();
  in.jobProperties = R"({"current_working_directory":"/w","environment":["A=1","B=x=y"]})";
  auto body = slurm::buildSubmitBody(in, ApiVersion::kV0038);
  REQUIRE(body.ok());
  CHECK((*body)["job"]["environment"] == json{{"A", "1"}, {"B", "x=y"}});
  CHECK((*body)["script"] == in.script);
  CHECK_FALSE((*body)["job"].contains("script"));
}

TEST_CASE("v0.0.39+ submit replies yield the job id (with warnings, and v0.0.41's result)",
          "[bridge]") {
  auto v = GENERATE(ApiVersion::kV0039, ApiVersion::kV0040, ApiVersion::kV0041);
  INFO(slurm::versionName(v));
  json body{{"job_id", 9}, {"step_id", "batch"}, {"job_submit_user_msg", ""}};
  if (v == ApiVersion::kV0041) {
    body["result"] = {{"job_id", 9},
                      {"step_id", "batch"},
                      {"error_code", 0},
                      {"error", "No error"},
                      {"job_submit_user_msg", ""}};
  }
  body["warnings"] = json::array({{{"description", "Unknown field \"x\""}, {"source", "parse"}}});
  auto id = slurm::parseSubmitResponse(200, reply(v, body));
  REQUIRE(id.ok());
  CHECK(*id == 9);
  body["warnings"] = json::array({"loose"});
  auto bad = slurm::parseSubmitResponse(200, reply(v, body));
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message, Catch::Contains("a warnings entry is not an object"));
}

TEST_CASE("v0.0.39 job replies: job_state a string, exit_code a plain or no_val wait status",
          "[bridge]") {
  struct Row {
    const char* state;
    json exitCode;
    const char* reason;
    JobStatus status;
    std::string exit;
  };
  auto row = GENERATE(values<Row>({
      {"PENDING", noVal(0), "Priority", JobStatus::kSubmitted, "exited with code 0"},
      {"RUNNING", unset(), "None", JobStatus::kRunning, "no exit status"},
      {"COMPLETED", noVal(0), "None", JobStatus::kDone, "exited with code 0"},
      {"COMPLETED", 0, "None", JobStatus::kDone, "exited with code 0"},
      {"FAILED", noVal(768), "NonZeroExitCode", JobStatus::kFailed, "exited with code 3"},
      {"CANCELLED", noVal(9), "None", JobStatus::kKilled, "killed by signal 9"},
      {"COMPLETING", noVal(15), "None", JobStatus::kRunning, "killed by signal 15"},
      {"FAILED", noVal(4021), "JobLaunchFailure", JobStatus::kFailed,
       "launch failed (Slurm error 4021)"},
  }));
  INFO(row.state << " " << row.exitCode.dump());
  auto q = slurm::parseJobResponse(
      200, reply(ApiVersion::kV0039, {{"jobs", {job39(3, row.state, row.exitCode, row.reason)}}}),
      3, ApiVersion::kV0039);
  REQUIRE(q.ok());
  REQUIRE(q->job);
  CHECK(q->job->jobState == row.state);
  CHECK(q->job->status == row.status);
  CHECK(slurm::describe(q->job->exit) == row.exit);
  CHECK(q->job->submitTime == 1795348692);
  CHECK(q->job->endTime == 1795348699);

  // Times as no_val objects are read as well.
  json j = job39(3, "RUNNING", noVal(0));
  j["start_time"] = noVal(1795348693);
  j["end_time"] = infinite();
  q = slurm::parseJobResponse(200, reply(ApiVersion::kV0039, {{"jobs", {j}}}), 3,
                              ApiVersion::kV0039);
  REQUIRE(q.ok());
  CHECK(q->job->startTime == 1795348693);
  CHECK_FALSE(q->job->endTime.has_value());
}

TEST_CASE("v0.0.40+ job replies over a job's life: state arrays, verbose exit codes, no_val times",
          "[bridge]") {
  struct Row {
    std::vector<std::string> state;
    json exitCode;
    const char* reason;
    const char* shown;
    JobStatus status;
    std::string exit;
  };
  auto v = GENERATE(ApiVersion::kV0040, ApiVersion::kV0041);
  auto row = GENERATE(values<Row>({
      {{"PENDING"},
       verboseExit({"PENDING"}, unset()),
       "Priority",
       "PENDING",
       JobStatus::kSubmitted,
       "no exit status"},
      {{"PENDING", "REQUEUED"},
       verboseExit({"INVALID"}, unset()),
       "BeginTime",
       "REQUEUED",
       JobStatus::kSubmitted,
       "no exit status"},
      {{"RUNNING", "CONFIGURING"},
       verboseExit({"PENDING"}, unset()),
       "None",
       "CONFIGURING",
       JobStatus::kSubmitted,
       "no exit status"},
      {{"RUNNING"},
       verboseExit({"SUCCESS"}, noVal(0)),
       "None",
       "RUNNING",
       JobStatus::kRunning,
       "exited with code 0"},
      {{"RUNNING", "UPDATE_DB"},
       verboseExit({"SUCCESS"}, noVal(0)),
       "None",
       "RUNNING",
       JobStatus::kRunning,
       "exited with code 0"},
      {{"CANCELLED", "COMPLETING"},
       verboseExit({"SIGNALED"}, noVal(0), noVal(9), "KILL"),
       "None",
       "COMPLETING",
       JobStatus::kRunning,
       "killed by signal 9"},
      {{"COMPLETED"},
       verboseExit({"SUCCESS"}, noVal(0)),
       "None",
       "COMPLETED",
       JobStatus::kDone,
       "exited with code 0"},
      {{"FAILED"},
       verboseExit({"ERROR"}, noVal(3)),
       "NonZeroExitCode",
       "FAILED",
       JobStatus::kFailed,
       "exited with code 3"},
      {{"CANCELLED"},
       verboseExit({"SIGNALED"}, noVal(0), noVal(15), "TERM"),
       "None",
       "CANCELLED",
       JobStatus::kKilled,
       "killed by signal 15"},
      {{"FAILED"},
       verboseExit({"SIGNALED", "CORE_DUMPED"}, noVal(0), noVal(11), "SEGV"),
       "None",
       "FAILED",
       JobStatus::kFailed,
       "killed by signal 11 (core dumped)"},
      {{"TIMEOUT"},
       verboseExit({"SIGNALED"}, noVal(0), noVal(15), "TERM"),
       "TimeLimit",
       "TIMEOUT",
       JobStatus::kFailed,
       "killed by signal 15"},
      {{"FAILED", "LAUNCH_FAILED"},
       verboseExit({"SIGNALED"}, noVal(0), noVal(53), ""),
       "JobLaunchFailure",
       "FAILED",
       JobStatus::kFailed,
       "launch failed"},
      {{"PENDING", "SPECIAL_EXIT"},
       verboseExit({"ERROR"}, noVal(1)),
       "None",
       "SPECIAL_EXIT",
       JobStatus::kFailed,
       "exited with code 1"},
  }));
  INFO(slurm::versionName(v) << " " << json(row.state).dump());
  auto q = slurm::parseJobResponse(
      200, reply(v, {{"jobs", {job40(3, row.state, row.exitCode, row.reason)}}}), 3, v);
  REQUIRE(q.ok());
  REQUIRE(q->job);
  CHECK(q->job->jobState == row.shown);
  CHECK(q->job->jobStateFlags == row.state);
  CHECK(q->job->status == row.status);
  CHECK(slurm::describe(q->job->exit) == row.exit);
  CHECK(q->job->submitTime == 1795348692);
  CHECK(q->job->startTime == 1795348693);
  CHECK(q->job->endTime == 1795348699);
}

TEST_CASE("v0.0.40+ unset and infinite times are unset and plain integers are read too",
          "[bridge]") {
  json j = job40(3, {"RUNNING"}, verboseExit({"SUCCESS"}, noVal(0)));
  j["start_time"] = 1795348693;
  j["end_time"] = infinite();
  j["submit_time"] = unset();
  auto q = slurm::parseJobResponse(200, reply(ApiVersion::kV0040, {{"jobs", {j}}}), 3,
                                   ApiVersion::kV0040);
  REQUIRE(q.ok());
  CHECK(q->job->startTime == 1795348693);
  CHECK_FALSE(q->job->endTime.has_value());
  CHECK_FALSE(q->job->submitTime.has_value());
}

TEST_CASE("a job_state array collapses to the name squeue shows", "[bridge]") {
  struct Row {
    std::vector<std::string> states;
    const char* shown;
  };
  auto row = GENERATE(values<Row>({
      {{"COMPLETED"}, "COMPLETED"},
      {{"COMPLETING", "CANCELLED"}, "COMPLETING"},
      {{"CANCELLED", "COMPLETING", "STAGE_OUT"}, "COMPLETING"},
      {{"RUNNING", "STAGE_OUT"}, "STAGE_OUT"},
      {{"PENDING", "REQUEUE_HOLD"}, "REQUEUE_HOLD"},
      {{"PENDING", "REQUEUED", "REQUEUE_FED"}, "REQUEUED"},
      {{"PENDING", "RESV_DEL_HOLD"}, "RESV_DEL_HOLD"},
      {{"RUNNING", "SIGNALING"}, "SIGNALING"},
      {{"RUNNING", "POWER_UP_NODE", "CONFIGURING"}, "CONFIGURING"},
      {{"RUNNING", "STOPPED"}, "STOPPED"},
      {{"RUNNING", "RESIZING"}, "RESIZING"},
      {{"PENDING", "REVOKED"}, "REVOKED"},
      {{"FAILED", "LAUNCH_FAILED", "RECONFIG_FAIL", "UPDATE_DB"}, "FAILED"},
      {{"OUT_OF_MEMORY"}, "OUT_OF_MEMORY"},
      {{"RUNNING", "RUNNING"}, "RUNNING"},
  }));
  INFO(json(row.states).dump());
  auto shown = slurm::collapseJobState(row.states);
  REQUIRE(shown.ok());
  CHECK(*shown == row.shown);
  CHECK(slurm::mapJobState(*shown).has_value());
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {}, {"COMPLETING"}, {"RUNNING", "COMPLETED"}, {"RUNNING", "FINISHING"}, {"running"}}) {
    INFO(json(bad).dump());
    auto e = slurm::collapseJobState(bad);
    REQUIRE_FALSE(e.ok());
    CHECK(e.error().code == kc::errc::kProtocol);
  }
}

TEST_CASE("newer replies in the wrong shape are protocol errors naming the field", "[bridge]") {
  struct Row {
    const char* what;
    ApiVersion version;
    std::function<void(json&)> change;
    std::string message;
  };
  auto row = GENERATE(values<Row>({
      {"v40 job_state string", ApiVersion::kV0040, [](json& j) { j["job_state"] = "RUNNING"; },
       "jobs[0].job_state is missing or not an array"},
      {"v41 job_state two base states", ApiVersion::kV0041,
       [](json& j) {
         j["job_state"] = {"RUNNING", "FAILED"};
       },
       "two base states, RUNNING and FAILED"},
      {"v40 job_state unknown flag", ApiVersion::kV0040,
       [](json& j) {
         j["job_state"] = {"RUNNING", "WARPING"};
       },
       "\"WARPING\" is not a Slurm job state or flag"},
      {"v40 job_state number entry", ApiVersion::kV0040, [](json& j) { j["job_state"] = {1}; },
       "jobs[0].job_state has a non-string entry"},
      {"v40 exit_code integer", ApiVersion::kV0040, [](json& j) { j["exit_code"] = 0; },
       "jobs[0].exit_code is not an object"},
      {"v40 exit status unknown", ApiVersion::kV0040,
       [](json& j) { j["exit_code"] = verboseExit({"EXPLODED"}, noVal(0)); },
       "\"EXPLODED\" is not an exit status"},
      {"v40 SUCCESS with a code", ApiVersion::kV0040,
       [](json& j) { j["exit_code"] = verboseExit({"SUCCESS"}, noVal(3)); },
       "says SUCCESS with return_code 3"},
      {"v40 ERROR without a code", ApiVersion::kV0040,
       [](json& j) { j["exit_code"] = verboseExit({"ERROR"}, unset()); },
       "return_code is not an exit code"},
      {"v41 signaled without a signal", ApiVersion::kV0041,
       [](json& j) { j["exit_code"] = verboseExit({"SIGNALED"}, noVal(0), unset()); },
       "signal.id is not a signal"},
      {"v40 time as string", ApiVersion::kV0040, [](json& j) { j["end_time"] = "1795348699"; },
       "jobs[0].end_time is not an integer or a {set, infinite, number} object"},
      {"v40 no_val without set", ApiVersion::kV0040,
       [](json& j) {
         j["end_time"] = {{"number", 5}};
       },
       "jobs[0].end_time.set is missing"},
      {"v40 no_val set without number", ApiVersion::kV0040,
       [](json& j) {
         j["end_time"] = {{"set", true}, {"infinite", false}};
       },
       "jobs[0].end_time.number is missing"},
      {"v39 job_state array", ApiVersion::kV0039, [](json& j) { j["job_state"] = {"RUNNING"}; },
       "jobs[0].job_state is not a string"},
      {"v39 exit_code string", ApiVersion::kV0039, [](json& j) { j["exit_code"] = "0"; },
       "jobs[0].exit_code is not an integer or a {set, infinite, number} object"},
      {"v38 no_val time", ApiVersion::kV0038, [](json& j) { j["end_time"] = noVal(1795348699); },
       "jobs[0].end_time is not an integer"},
  }));
  INFO(row.what);
  json j = row.version >= ApiVersion::kV0040
               ? job40(3, {"RUNNING"}, verboseExit({"SUCCESS"}, noVal(0)))
               : job39(3, "RUNNING", 0);
  row.change(j);
  auto q = slurm::parseJobResponse(200, reply(row.version, {{"jobs", {j}}}), 3, row.version);
  REQUIRE_FALSE(q.ok());
  CHECK(q.error().code == kc::errc::kProtocol);
  CHECK_THAT(q.error().message, Catch::Contains(row.message));
}

TEST_CASE("v0.0.39+ purged jobs answer 500 with error 2017: gone, for query and cancel",
          "[bridge]") {
  auto v = GENERATE(ApiVersion::kV0039, ApiVersion::kV0040, ApiVersion::kV0041);
  INFO(slurm::versionName(v));
  auto gone = slurm::parseJobResponse(500, reply(v, purgedBody()), 999, v);
  REQUIRE(gone.ok());
  CHECK(gone->gone);
  json cancelBody{{"errors", json::array({{{"description", "Unable to signal JobId=999"},
                                           {"error_number", 2017},
                                           {"error", "Invalid job id specified"},
                                           {"source", "slurm_kill_job()"}}})}};
  auto cancel = slurm::parseCancelResponse(500, reply(v, cancelBody));
  REQUIRE(cancel.ok());
  CHECK_FALSE(*cancel);
  auto cancelled = slurm::parseCancelResponse(200, reply(v, json::object()));
  REQUIRE(cancelled.ok());
  CHECK(*cancelled);
  // 2017 next to a 200 is not "gone": the reply contradicts itself.
  auto odd = slurm::parseJobResponse(200, reply(v, purgedBody()), 999, v);
  REQUIRE_FALSE(odd.ok());
}

TEST_CASE("v0.0.40+ adoption finds the tagged job in a jobs list of arrays", "[bridge]") {
  auto v = GENERATE(ApiVersion::kV0040, ApiVersion::kV0041);
  json other = job40(4, {"RUNNING"}, verboseExit({"SUCCESS"}, noVal(0)));
  other["comment"] = "";
  json foreign = {{"job_id", 2}, {"job_state", "WEIRD"}};  // not ours: not read strictly
  json mine = job40(5, {"PENDING"}, verboseExit({"PENDING"}, unset()), "Resources");
  auto found =
      slurm::findTaggedJob(200, reply(v, {{"jobs", {other, foreign, mine}}}), "7f3c-11", v);
  REQUIRE(found.ok());
  REQUIRE(found->has_value());
  CHECK((*found)->jobId == 5);
  CHECK((*found)->status == JobStatus::kSubmitted);
  // The same tagged job in v0.0.38's shape is not read as v0.0.40.
  json old = job(5, "PENDING", 0);
  auto wrong = slurm::findTaggedJob(200, reply(v, {{"jobs", {old}}}), "7f3c-11", v);
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().code == kc::errc::kProtocol);
}
