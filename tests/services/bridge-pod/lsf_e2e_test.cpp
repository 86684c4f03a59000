// The bridge pod's LSF backend against the LSF Application Center test double (lsf_double.hpp:
// jobs are real processes), the API server double holding the BridgeJob and the operator's
// ConfigMap, and npm's s3rver for the outputs.

#include <csignal>

#include "libcore/base/rfc3339.hpp"
#include "tests/services/bridge-pod/bridge_pod_fixture.hpp"
#include "tests/services/bridge-pod/lsf_double.hpp"

using nlohmann::json;
using namespace kc::bridge::testing;
using namespace std::chrono_literals;

namespace {

struct LsfWorld : BridgeWorld {
  // Tokens live 64 s; the pod logs on again with a minute left, i.e. after 4 s.
  LsfDouble lsf{dir.file("lsf"), "lsfuser", "pa<ss\"word&", std::chrono::seconds(64)};
  LsfWorld() {
    dir.write("creds/username", "lsfuser\n");
    dir.write("creds/password", "pa<ss\"word&\n");
  }
  json spec(const std::string& script, const std::string& location = "inline") {
    return json{{"resourceURL", lsf.url()},
                {"resourcesecret", "lsf-pac"},
                {"image", "ghcr.io/kubecomp/bridge-pod-lsf:0.1"},
                {"updateinterval", 1},
                {"jobproperties",
                 R"({"queue": "normal", "runLimitHour": 1, "runLimitMinute": 0, "nodes": 1})"},
                {"jobdata", {{"scriptlocation", location}, {"jobscript", script}}},
                {"s3storage", s3Spec()},
                {"s3upload", {{"bucket", "results"}, {"files", "hello.out,output.log"}}}};
  }
  std::unique_ptr<kc::testing::ChildProcess> pod(const std::vector<std::string>& env) {
    return BridgeWorld::pod("lsf", env);
  }
  Scenario scenario() {
    return {api,
            [this](const std::vector<std::string>& env) { return pod(env); },
            [this] { return lsf.submissions(); },
            [this] { lsf.down(); },
            [this] { lsf.up(); },
            [this] { return lsf.openSessions(); }};
  }
};

bool isRfc3339(const json& v) {
  return v.is_string() && kc::parseRfc3339(v.get<std::string>()).ok();
}

}  // namespace

TEST_CASE(
    "lsf: an inline script runs to DONE with a re-logon before the token expires and outputs in "
    "S3") {
  LsfWorld w;
  CHECK(runsToEnd(w.scenario(), "hello",
                  w.spec("#!/bin/sh\nsleep 6\necho \"hello from $LSB_JOBID\" > hello.out\necho "
                         "'it''s done'\n"),
                  60s) == 0);
  CHECK(w.api.value("hello", "status.jobStatus") == "DONE");
  const std::string id = w.api.value("hello", "id");
  CHECK(w.lsf.submissions() == 1);
  CHECK(w.lsf.logons() >= 2);
  CHECK(w.lsf.logouts() == w.lsf.logons());
  CHECK(w.lsf.expiredCalls() == 0);
  const auto params = w.lsf.params(id);
  CHECK(params.at("JOB_NAME") == "bridge-" + w.api.uid());
  CHECK(params.at("QUEUE") == "normal");
  CHECK(params.at("RUNLIMITHOUR") == "1");
  CHECK(params.at("EXTRA_PARAMS") == "-nnodes 1");
  CHECK(w.s3.object("results", "hello/hello.out") == "hello from " + id + "\n");
  CHECK(w.s3.object("results", "hello/output.log") == "its done\n");
  const json status = w.api.operatorStatus("hello", "Succeeded");
  CHECK(status["jobStatus"] == "DONE");
  CHECK(isRfc3339(status["submitTime"]));
  CHECK(isRfc3339(status["startTime"]));
  CHECK(isRfc3339(status["completionTime"]));
  CHECK(w.lsf.openSessions() == 0);  // the renewed token and the last one logged out
}

TEST_CASE("lsf: kill runs bkill: EXIT after the kill -> KILLED") {
  LsfWorld w;
  killedWhileRunning(w.scenario(), "long", w.spec("sleep 120\n"));
  CHECK(w.lsf.job(w.api.value("long", "id"))->killed());
}

TEST_CASE("lsf: a failing script is FAILED with its exit code and its outputs uploaded") {
  LsfWorld w;
  failsWithExitCode3(w.scenario(), "boom", w.spec("echo partial > hello.out\nexit 3\n"),
                     "exited with code 3");
  CHECK(w.s3.object("results", "boom/hello.out") == "partial\n");
}

TEST_CASE("lsf: a remote command line is run as given") {
  LsfWorld w;
  CHECK(runsToEnd(w.scenario(), "remote", w.spec("echo remote > hello.out", "remote"), 30s) == 0);
  CHECK(w.s3.object("results", "remote/hello.out") == "remote\n");
  CHECK(w.lsf.params(w.api.value("remote", "id")).at("COMMANDTORUN") == "echo remote > hello.out");
}

TEST_CASE("lsf: additionaldata files from S3 are uploaded with the submit and the job reads them") {
  LsfWorld w;
  w.putS3("results", "inputs/data/in.txt", "staged line\n");
  const std::string binary("\0\x01--\r\n\xff", 7);
  w.putS3("results", "inputs/table.bin", binary);
  json spec = w.spec("cat in.txt > hello.out\nwc -c < table.bin | tr -d ' ' >> hello.out\n");
  spec["jobdata"]["additionaldata"] = "results:inputs/data/in.txt,results:inputs/table.bin";
  CHECK(runsToEnd(w.scenario(), "staged", spec, 60s) == 0);
  CHECK(w.api.value("staged", "status.jobStatus") == "DONE");
  const std::string id = w.api.value("staged", "id");
  const auto files = w.lsf.files(id);
  CHECK(files.at("in.txt") == "staged line\n");
  CHECK(files.at("table.bin") == binary);
  CHECK(files.count("bridge-script.sh") == 1);
  CHECK(w.s3.object("results", "staged/hello.out") == "staged line\n7\n");
}

TEST_CASE(
    "lsf: an additionaldata object missing from S3 fails the job before anything is submitted") {
  LsfWorld w;
  w.putS3("results", "a/x.txt", "one");
  json spec = w.spec("cat x.txt > hello.out\n");
  spec["jobdata"]["additionaldata"] = "results:a/x.txt,results:missing.txt";
  CHECK(runsToEnd(w.scenario(), "missing", spec, 30s) == 1);
  CHECK(w.api.value("missing", "status.jobStatus") == "FAILED");
  CHECK(w.api.value("missing", "status.message").find("s3://results/missing.txt: HTTP 404") !=
        std::string::npos);
  CHECK(w.lsf.submissions() == 0);
}

TEST_CASE("lsf: jobs LSF forgot at once are DONE, KILLED and FAILED through ws/jobhistory") {
  LsfWorld w;
  w.lsf.forgetFinishedAfter(0ms);  // ws/jobs never shows a final state: only the history does

  auto env = w.api.start("hist-done", w.spec("sleep 1\necho from-history > hello.out\n"));
  auto pod = w.pod(env);
  auto exit = pod->waitExit(30s);
  REQUIRE(exit.has_value());
  CHECK(*exit == 0);
  CHECK(w.api.value("hist-done", "status.jobStatus") == "DONE");
  CHECK(w.api.value("hist-done", "status.message").find("LSF job history: Done successfully") !=
        std::string::npos);
  CHECK(w.s3.object("results", "hist-done/hello.out") == "from-history\n");
  CHECK(w.lsf.historyCalls() >= 1);

  CHECK(runsToEnd(w.scenario(), "hist-fail", w.spec("sleep 1\nexit 3\n"), 30s) == 1);
  CHECK(w.api.value("hist-fail", "status.jobStatus") == "FAILED");
  CHECK(w.api.value("hist-fail", "status.message").find("Completed <exit>, exited with code 3") !=
        std::string::npos);

  // bkill by an administrator: the pod sent no cancel, the history's <KILL> says KILLED
  env = w.api.start("hist-kill", w.spec("sleep 120\n"));
  pod = w.pod(env);
  REQUIRE(kc::testing::eventually(
      [&] { return w.api.value("hist-kill", "status.jobStatus") == "RUNNING"; }, 30s));
  w.lsf.adminKill(w.api.value("hist-kill", "id"));
  exit = pod->waitExit(30s);
  REQUIRE(exit.has_value());
  CHECK(*exit == 1);
  CHECK(w.api.value("hist-kill", "status.jobStatus") == "KILLED");
  CHECK(w.api.value("hist-kill", "status.message").find("after a KILL signal") !=
        std::string::npos);
  CHECK(w.lsf.submissions() == 3);
  CHECK(w.lsf.openSessions() == 0);
}

TEST_CASE("lsf: a job neither ws/jobs nor ws/jobhistory knows is UNKNOWN and not resubmitted") {
  LsfWorld w;
  w.lsf.forgetFinishedAfter(0ms);
  auto env = w.api.start("lost", w.spec("sleep 2\n"));
  auto pod = w.pod(env);
  REQUIRE(kc::testing::eventually(
      [&] { return w.api.value("lost", "status.jobStatus") == "RUNNING"; }, 30s));
  w.lsf.forgetHistory(w.api.value("lost", "id"));
  const auto exit = pod->waitExit(30s);
  REQUIRE(exit.has_value());
  CHECK(*exit == 1);
  CHECK(w.api.value("lost", "status.jobStatus") == "UNKNOWN");
  CHECK(w.lsf.submissions() == 1);
  CHECK(w.lsf.openSessions() == 0);
}

TEST_CASE("lsf: a wrong password is retried and never submits") {
  LsfWorld w;
  w.dir.write("creds/password", "wrong");
  badCredentialWaits(w.scenario(), "denied", w.spec("echo ok > hello.out\n"),
                     [&] { w.dir.write("creds/password", "pa<ss\"word&"); });
}

TEST_CASE(
    "lsf: the pod SIGKILLed right after submit and again while polling then restarted: exactly one "
    "job") {
  LsfWorld w;
  CHECK(crashedTwiceRunsOnce(w.scenario(), "crashy",
                             w.spec("sleep 3\necho survived > hello.out\n")) == "101");
  CHECK(w.s3.object("results", "crashy/hello.out") == "survived\n");
}

TEST_CASE("lsf: Application Center down at start and while polling: retries and one job and DONE") {
  LsfWorld w;
  outageRunsOnce(w.scenario(), "patient", w.spec("sleep 2\necho late > hello.out\n"), 3s);
  CHECK(w.s3.object("results", "patient/hello.out") == "late\n");
}

TEST_CASE("lsf: the pod SIGTERMed while its job runs logs out and leaves the job to the next pod") {
  LsfWorld w;
  const std::string gate = w.dir.file("go");
  terminatedLeavesJob(
      w.scenario(), "evicted",
      w.spec("while [ ! -e '" + gate + "' ]; do sleep 0.2; done\necho resumed > hello.out\n"),
      [&] { w.dir.write("go", ""); });
  CHECK(w.s3.object("results", "evicted/hello.out") == "resumed\n");
}

TEST_CASE("lsf: a refused logout is logged and changes nothing: DONE, exit 0") {
  LsfWorld w;
  w.lsf.failLogouts();
  auto pod = w.pod(w.api.start("sticky", w.spec("echo ok > hello.out\n")));
  const auto exit = pod->waitExit(30s);
  REQUIRE(exit.has_value());
  CHECK(*exit == 0);
  CHECK(w.api.value("sticky", "status.jobStatus") == "DONE");
  CHECK(w.s3.object("results", "sticky/hello.out") == "ok\n");
  CHECK(w.lsf.openSessions() == w.lsf.logons());  // the double kept every session it refused to end
}
