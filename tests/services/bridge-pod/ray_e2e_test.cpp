// The bridge pod's Ray backend against the Ray Jobs API test double (ray_jobs_double.hpp: jobs
// are real processes), the API server double holding the BridgeJob and the operator's
// ConfigMap, and npm's s3rver for the script and the logs.

#include <csignal>

#include "libcore/base/rfc3339.hpp"
#include "services/bridge-pod/s3_client.hpp"
#include "tests/services/bridge-pod/bridge_pod_fixture.hpp"
#include "tests/services/bridge-pod/ray_jobs_double.hpp"

using nlohmann::json;
using namespace kc::bridge::testing;
using namespace std::chrono_literals;

namespace {

struct RayWorld : BridgeWorld {
  RayJobsDouble ray{dir.file("ray"), "ray-secret-token"};
  RayWorld() { dir.write("creds/token", "ray-secret-token\n"); }

  json spec(const std::string& script, const std::string& location = "inline") {
    return json{{"resourceURL", ray.url()},
                {"resourcesecret", "ray-dashboard"},
                {"image", "ghcr.io/kubecomp/bridge-pod-ray:0.1"},
                {"updateinterval", 1},
                {"jobproperties", R"({"entrypoint_num_cpus": 1})"},
                {"jobdata",
                 {{"scriptlocation", location},
                  {"jobscript", script},
                  {"scriptextralocation", "inline"},
                  {"scriptmetadata", R"({"env": {"GREETING": "hello"}})"},
                  {"jobparameters", R"({"iterations": 3})"}}},
                {"s3storage", s3Spec()},
                {"s3upload", {{"bucket", "results"}, {"files", "logs"}}}};
  }
  std::unique_ptr<kc::testing::ChildProcess> pod(const std::vector<std::string>& env) {
    return BridgeWorld::pod("ray", env);
  }
  Scenario scenario() {
    return {api, [this](const std::vector<std::string>& env) { return pod(env); },
            [this] { return ray.submissions(); }, [this] { ray.down(); }, [this] { ray.up(); }};
  }
};

bool isRfc3339(const json& v) {
  return v.is_string() && kc::parseRfc3339(v.get<std::string>()).ok();
}

}  // namespace

TEST_CASE(
    "ray: a script from S3 runs to SUCCEEDED and its logs land in S3 and the status is DONE with "
    "times") {
  RayWorld w;
  kc::bridge::pod::S3Options o;
  o.endpoint = w.s3.endpoint();
  o.secure = false;
  o.credentialsDir = w.s3creds;
  auto s3 = kc::bridge::pod::S3Client::create(o);
  REQUIRE(s3.ok());
  REQUIRE((*s3)
              ->putObject("results", "inputs/pi.py",
                          "import json, os\n"
                          "p = json.loads(os.environ['BRIDGE_JOB_PARAMETERS'])\n"
                          "print(os.environ['GREETING'], 'iterations', p['iterations'])\n")
              .ok());
  CHECK(runsToEnd(w.scenario(), "pi", w.spec("results:inputs/pi.py", "s3"), 60s) == 0);
  CHECK(w.api.value("pi", "status.jobStatus") == "DONE");
  CHECK(w.api.value("pi", "id") == "bridge-" + w.api.uid());
  CHECK(w.ray.submissions() == 1);
  CHECK(w.s3.object("results", "pi/logs") == "hello iterations 3\n");
  const json body = w.ray.lastBody("bridge-" + w.api.uid());
  CHECK(body["entrypoint_num_cpus"] == 1);
  CHECK(body["metadata"]["bridgejob-uid"] == w.api.uid());
  const json status = w.api.operatorStatus("pi", "Succeeded");
  CHECK(status["jobStatus"] == "DONE");
  CHECK(isRfc3339(status["startTime"]));
  CHECK(isRfc3339(status["completionTime"]));
}

TEST_CASE("ray: kill stops the job: STOPPED -> KILLED") {
  RayWorld w;
  killedWhileRunning(w.scenario(), "long", w.spec("import time\ntime.sleep(120)\n"));
  auto job = w.ray.job("bridge-" + w.api.uid());
  REQUIRE(job);
  CHECK(job->killed());
}

TEST_CASE("ray: a failing script is FAILED with its exit code and its logs uploaded") {
  RayWorld w;
  failsWithExitCode3(w.scenario(), "boom", w.spec("import sys\nprint('boom')\nsys.exit(3)\n"),
                     "exit code 3");
  CHECK(w.s3.object("results", "boom/logs") == "boom\n");
}

TEST_CASE("ray: additionaldata becomes an uploaded working_dir package the job runs in") {
  RayWorld w;
  w.putS3("results", "inputs/cfg/settings.json", R"({"scale": 7})");
  const std::string binary("\0\x01PK\x03\x04\xff", 7);
  w.putS3("results", "inputs/blob.bin", binary);
  json spec = w.spec(
      "import json\n"
      "print('scale', json.load(open('settings.json'))['scale'], 'blob', len(open('blob.bin', "
      "'rb').read()))\n");
  spec["jobdata"]["additionaldata"] = "results:inputs/cfg/settings.json,results:inputs/blob.bin";
  auto pod = w.pod(w.api.start("withfiles", spec));
  auto exit = pod->waitExit(60s);
  REQUIRE(exit.has_value());
  CHECK(*exit == 0);
  CHECK(w.api.value("withfiles", "status.jobStatus") == "DONE");
  CHECK(w.s3.object("results", "withfiles/logs") == "scale 7 blob 7\n");
  const json body = w.ray.lastBody("bridge-" + w.api.uid());
  const std::string uri = body["runtime_env"]["working_dir"];
  CHECK(uri.rfind("gcs://_ray_pkg_", 0) == 0);
  CHECK(w.ray.packages().count(uri) == 1);
  CHECK(w.ray.packageUploads() == 1);
  CHECK(body["runtime_env"]["env_vars"]["GREETING"] ==
        "hello");  // the rest of the runtime_env kept

  // The same files for another job: the package is there already, not uploaded again.
  json again = spec;
  again["jobdata"]["jobscript"] =
      "print(open('blob.bin', 'rb').read() == bytes([0, 1, 80, 75, 3, 4, 255]))\n";
  pod = w.pod(w.api.start("again", again));
  exit = pod->waitExit(60s);
  REQUIRE(exit.has_value());
  CHECK(*exit == 0);
  CHECK(w.s3.object("results", "again/logs") == "True\n");
  CHECK(w.ray.packageUploads() == 1);
  CHECK(w.ray.submissions() == 2);
}

TEST_CASE("ray: a wrong token is retried as transient and never submits") {
  RayWorld w;
  w.dir.write("creds/token", "wrong");
  badCredentialWaits(w.scenario(), "denied", w.spec("print(1)\n"), [&] {
    w.dir.write("creds/token", "ray-secret-token");
  });  // the Secret rotated
}

TEST_CASE(
    "ray: the pod SIGKILLed right after submit and again while polling then restarted: exactly one "
    "job") {
  RayWorld w;
  const std::string id = crashedTwiceRunsOnce(
      w.scenario(), "crashy", w.spec("import time\ntime.sleep(3)\nprint('survived')\n"));
  CHECK(id == "bridge-" + w.api.uid());
  CHECK(w.s3.object("results", "crashy/logs") == "survived\n");
}

TEST_CASE("ray: the dashboard down at start and while polling: retries and one job and DONE") {
  RayWorld w;
  outageRunsOnce(w.scenario(), "patient", w.spec("import time\ntime.sleep(2)\nprint('late')\n"),
                 4s);
  CHECK(w.s3.object("results", "patient/logs") == "late\n");
}
