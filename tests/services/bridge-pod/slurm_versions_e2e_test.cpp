// The bridge-pod binary against the slurmrestd TEST DOUBLE (slurmrestd_double.hpp) speaking
// v0.0.39 (Slurm 23.02), v0.0.40 (23.11) and v0.0.41 (24.05), whose shapes no real slurmrestd
// on Debian bookworm serves (the real 22.05 and v0.0.38 are in slurm_e2e_test.cpp): the same
// scenarios as the real-Slurm tests per version, and the choice of the version.

#include <csignal>

#include "libcore/base/rfc3339.hpp"
#include "tests/services/bridge-pod/bridge_pod_fixture.hpp"
#include "tests/services/bridge-pod/slurmrestd_double.hpp"

using nlohmann::json;
using namespace kc::bridge::testing;
using namespace std::chrono_literals;

namespace {

struct World : BridgeWorld {
  SlurmrestdDouble slurm;

  explicit World(SlurmrestdDouble::Options o = {}) : slurm(std::move(o)) {
    dir.write("creds/username", "alice\n");
    dir.write("creds/token", "double-token\n");
  }

  json spec(const std::string& name, const std::string& script, const std::string& url) {
    const std::string cwd = dir.file("work/" + name);
    std::filesystem::create_directories(cwd);
    return json{
        {"resourceURL", url},
        {"resourcesecret", "slurm-jwt"},
        {"image", "ghcr.io/kubecomp/bridge-pod-slurm:0.1"},
        {"updateinterval", 1},
        {"jobproperties", json{{"name", name},
                               {"partition", "debug"},
                               {"tasks", 1},
                               {"time_limit", 5},
                               {"current_working_directory", cwd},
                               {"environment", {{"PATH", "/usr/bin:/bin"}, {"GREETING", "hello"}}}}
                              .dump()},
        {"jobdata", {{"scriptlocation", "inline"}, {"jobscript", script}}},
        {"s3storage", s3Spec()},
        {"s3upload", {{"bucket", "results"}, {"files", "hello.out"}}}};
  }

  std::unique_ptr<kc::testing::ChildProcess> pod(const std::vector<std::string>& env,
                                                 std::vector<std::string> extra = {}) {
    return BridgeWorld::pod("slurm", env, std::move(extra));
  }
  Scenario scenario() {
    return {api, [this](const std::vector<std::string>& env) { return pod(env); },
            [this] { return slurm.tagged(api.uid()); }, [this] { slurm.down(); },
            [this] { slurm.up(); }};
  }
};

bool isRfc3339(const json& v) {
  return v.is_string() && kc::parseRfc3339(v.get<std::string>()).ok();
}

}  // namespace

TEST_CASE(
    "slurm versions: a job runs to COMPLETED, its output lands in S3 and the status is DONE with "
    "times") {
  const std::string version = GENERATE("v0.0.39", "v0.0.40", "v0.0.41");
  INFO(version);
  World w;
  const std::string script = "#!/bin/sh\necho \"$GREETING from $SLURM_JOB_ID\" > hello.out\n";
  auto pod = w.pod(w.api.start("hello", w.spec("hello", script, w.slurm.url(version))));
  const auto exit = pod->waitExit(60s);
  REQUIRE(exit.has_value());
  CHECK(*exit == 0);
  auto data = w.api.data("hello");
  CHECK(data["status.jobStatus"] == "DONE");
  CHECK(data["status.message"].find("exited with code 0") != std::string::npos);
  CHECK(w.slurm.tagged(w.api.uid()) == 1);
  CHECK(w.s3.object("results", "hello/hello.out") == "hello from " + data["id"] + "\n");
  // The body as the version takes it: script inside the job, environment as NAME=value.
  const auto [spoken, body] = w.slurm.lastSubmit();
  CHECK(spoken == version);
  CHECK_FALSE(body.contains("script"));
  CHECK(body["job"]["script"] == script);
  CHECK(body["job"]["environment"] == json::array({"GREETING=hello", "PATH=/usr/bin:/bin"}));
  CHECK(body["job"]["comment"] == "bridgejob-uid=" + w.api.uid());
  const json status = w.api.operatorStatus("hello", "Succeeded");
  CHECK(status["jobStatus"] == "DONE");
  CHECK(isRfc3339(status["startTime"]));
  CHECK(isRfc3339(status["completionTime"]));
}

TEST_CASE("slurm versions: kill cancels the running job: CANCELLED -> KILLED") {
  const std::string version = GENERATE("v0.0.39", "v0.0.40", "v0.0.41");
  INFO(version);
  World w;
  killedWhileRunning(w.scenario(), "sleeper",
                     w.spec("sleeper", "#!/bin/sh\nsleep 120\n", w.slurm.url(version)));
  CHECK(w.api.value("sleeper", "status.message").find("killed by signal 9") != std::string::npos);
  CHECK(w.slurm.tagged(w.api.uid()) == 1);
}

TEST_CASE(
    "slurm versions: a failing script is FAILED with its exit code and its outputs still "
    "uploaded") {
  const std::string version = GENERATE("v0.0.39", "v0.0.40", "v0.0.41");
  INFO(version);
  World w;
  failsWithExitCode3(
      w.scenario(), "broken",
      w.spec("broken", "#!/bin/sh\necho partial > hello.out\nexit 3\n", w.slurm.url(version)),
      "exited with code 3");
  CHECK(w.s3.object("results", "broken/hello.out") == "partial\n");
}

TEST_CASE(
    "slurm versions: the pod SIGKILLed right after submit and again while polling: exactly one "
    "job") {
  const std::string version = GENERATE("v0.0.39", "v0.0.40", "v0.0.41");
  INFO(version);
  World w;
  crashedTwiceRunsOnce(
      w.scenario(), "crashy",
      w.spec("crashy", "#!/bin/sh\nsleep 3\necho survived > hello.out\n", w.slurm.url(version)));
  CHECK(w.s3.object("results", "crashy/hello.out") == "survived\n");
}

TEST_CASE(
    "slurm versions: a job purged before its end was seen (error 2017) is UNKNOWN and not "
    "resubmitted") {
  const std::string version = GENERATE("v0.0.39", "v0.0.40", "v0.0.41");
  INFO(version);
  SlurmrestdDouble::Options o;
  o.minJobAge = 1s;
  World w(o);
  auto env = w.api.start(
      "purged", w.spec("purged", "#!/bin/sh\necho gone > hello.out\n", w.slurm.url(version)));
  {
    auto pod = w.pod(env);
    REQUIRE(
        kc::testing::eventually([&] { return w.api.value("purged", "id") != "<absent>"; }, 30s));
    pod->kill(SIGKILL);
  }
  REQUIRE(kc::testing::eventually([&] { return w.slurm.known() == 0; }, 30s));
  auto pod = w.pod(env);
  const auto exit = pod->waitExit(30s);
  REQUIRE(exit.has_value());
  CHECK(*exit == 1);
  CHECK(w.api.value("purged", "status.jobStatus") == "UNKNOWN");
  CHECK(w.api.value("purged", "status.message").find("is gone") != std::string::npos);
  CHECK(w.slurm.tagged(w.api.uid()) == 1);
}

TEST_CASE(
    "slurm versions: a base resourceURL speaks the newest version the server offers and the pod "
    "knows") {
  struct Row {
    std::vector<std::string> offered;
    bool document;
    const char* spoken;
  };
  auto row = GENERATE(values<Row>({
      {{"v0.0.39", "v0.0.40", "v0.0.41"}, true, "v0.0.41"},
      {{"v0.0.39", "v0.0.40"}, true, "v0.0.40"},  // Slurm 23.11
      {{"v0.0.39"}, true, "v0.0.39"},
      {{"v0.0.39", "v0.0.40"}, false, "v0.0.40"},  // no OpenAPI document: the pings tell
  }));
  INFO(json(row.offered).dump() << (row.document ? " with" : " without") << " /openapi/v3");
  SlurmrestdDouble::Options o;
  o.offered = row.offered;
  o.openapiDocument = row.document;
  World w(o);
  auto pod = w.pod(
      w.api.start("found", w.spec("found", "#!/bin/sh\necho found > hello.out\n", w.slurm.base())));
  const auto exit = pod->waitExit(60s);
  REQUIRE(exit.has_value());
  CHECK(*exit == 0);
  CHECK(w.slurm.lastSubmit().first == row.spoken);
  CHECK(w.s3.object("results", "found/hello.out") == "found\n");
}

TEST_CASE(
    "slurm versions: --slurm-api-version newest discovers even when the resourceURL names a "
    "version") {
  World w;
  auto pod = w.pod(w.api.start("newer", w.spec("newer", "#!/bin/sh\necho n > hello.out\n",
                                               w.slurm.url("v0.0.39"))),
                   {"--slurm-api-version", "newest"});
  const auto exit = pod->waitExit(60s);
  REQUIRE(exit.has_value());
  CHECK(*exit == 0);
  CHECK(w.slurm.lastSubmit().first == "v0.0.41");
}

TEST_CASE(
    "slurm versions: a server offering no version the pod speaks ends the pod FAILED with nothing "
    "submitted") {
  struct Row {
    bool document;
    const char* message;
  };
  auto row = GENERATE(values<Row>({
      {true, "offers v0.0.42, none of the versions the bridge pod speaks"},
      {false, "answers no ping of v0.0.41, v0.0.40, v0.0.39, v0.0.38"},
  }));
  SlurmrestdDouble::Options o;
  o.offered = {"v0.0.42"};  // listed, but the double serves no v0.0.42 endpoint
  o.openapiDocument = row.document;
  World w(o);
  auto pod = w.pod(
      w.api.start("nothing", w.spec("nothing", "#!/bin/sh\necho x > hello.out\n", w.slurm.base())));
  const auto exit = pod->waitExit(30s);
  REQUIRE(exit.has_value());
  CHECK(*exit == 1);
  CHECK(w.api.value("nothing", "status.jobStatus") == "FAILED");
  CHECK_THAT(w.api.value("nothing", "status.message"), Catch::Contains(row.message));
  CHECK(w.api.value("nothing", "id") == "<absent>");
  CHECK(w.slurm.tagged(w.api.uid()) == 0);
}

TEST_CASE(
    "slurm versions: a resourceURL naming a version the pod does not speak ends the pod FAILED") {
  World w;
  auto pod = w.pod(
      w.api.start("old", w.spec("old", "#!/bin/sh\necho x > hello.out\n", w.slurm.url("v0.0.37"))));
  const auto exit = pod->waitExit(30s);
  REQUIRE(exit.has_value());
  CHECK(*exit == 1);
  CHECK(w.api.value("old", "status.jobStatus") == "FAILED");
  CHECK_THAT(w.api.value("old", "status.message"), Catch::Contains("names slurmrestd v0.0.37"));
  CHECK(w.slurm.tagged(w.api.uid()) == 0);
}

TEST_CASE(
    "slurm versions: an explicit version that is unknown or contradicts the resourceURL ends the "
    "pod FAILED") {
  struct Row {
    const char* urlVersion;  // "" = the base URL
    const char* flag;
    const char* message;
  };
  auto row = GENERATE(values<Row>({
      {"v0.0.39", "v0.0.40",
       "resourceURL names v0.0.39 but the Slurm API version asked for is v0.0.40"},
      {"", "v0.0.99", "Slurm API version 'v0.0.99' is not one the bridge pod speaks"},
  }));
  INFO(row.flag);
  World w;
  const std::string url =
      std::string(row.urlVersion).empty() ? w.slurm.base() : w.slurm.url(row.urlVersion);
  auto pod = w.pod(w.api.start("told", w.spec("told", "#!/bin/sh\necho x > hello.out\n", url)),
                   {"--slurm-api-version", row.flag});
  const auto exit = pod->waitExit(30s);
  REQUIRE(exit.has_value());
  CHECK(*exit == 1);
  CHECK(w.api.value("told", "status.jobStatus") == "FAILED");
  CHECK_THAT(w.api.value("told", "status.message"), Catch::Contains(row.message));
  CHECK(w.slurm.tagged(w.api.uid()) == 0);
}
