// The bridge pod's IBM Quantum backend against the IAM + Qiskit Runtime test double
// (quantum_double.hpp), the API server double holding the BridgeJob and the operator's
// ConfigMap, and npm's s3rver for the results and logs.

#include <csignal>

#include "libcore/base/rfc3339.hpp"
#include "tests/services/bridge-pod/bridge_pod_fixture.hpp"
#include "tests/services/bridge-pod/quantum_double.hpp"

using nlohmann::json;
using namespace kc::bridge::testing;
using namespace std::chrono_literals;

namespace {

constexpr const char* kCrn = "crn:v1:bluemix:public:quantum-computing:us-east:a/abc:inst::";

struct QuantumWorld : BridgeWorld {
  // Tokens live 8 s: renewed with 1.6 s left, 0.5 s before the double (1.1 s ahead) refuses.
  QuantumDouble quantum{"api-key-123", kCrn, std::chrono::seconds(8)};
  QuantumWorld() {
    dir.write("creds/username", kCrn);
    dir.write("creds/password", "api-key-123\n");
  }
  json spec(const std::string& params) {
    return json{{"resourceURL", quantum.url()},
                {"resourcesecret", "ibm-quantum"},
                {"image", "ghcr.io/kubecomp/bridge-pod-quantum:0.1"},
                {"updateinterval", 1},
                {"jobproperties", R"({"backend": "ibm_brisbane"})"},
                {"jobdata",
                 {{"scriptlocation", "inline"},
                  {"jobscript", "sampler"},
                  {"scriptextralocation", "inline"},
                  {"jobparameters", params}}},
                {"s3storage", s3Spec()},
                {"s3upload", {{"bucket", "results"}, {"files", "results,logs"}}}};
  }
  std::unique_ptr<kc::testing::ChildProcess> pod(const std::vector<std::string>& env) {
    return BridgeWorld::pod("quantum", env, {"--iam-url", quantum.iamUrl()});
  }
  Scenario scenario() {
    return {api, [this](const std::vector<std::string>& env) { return pod(env); },
            [this] { return quantum.submissions(); }, [this] { quantum.down(); },
            [this] { quantum.up(); }};
  }
};

const char* kGood =
    R"({"pubs": [["OPENQASM 3.0; qubit[1] q; bit[1] c; h q[0]; c[0] = measure q[0];"]], "shots": 4})";

bool isRfc3339(const json& v) {
  return v.is_string() && kc::parseRfc3339(v.get<std::string>()).ok();
}

}  // namespace

TEST_CASE(
    "quantum: a sampler job runs to Completed with IAM tokens refreshed before expiry and results "
    "in S3") {
  QuantumWorld w;
  w.quantum.runFor = 8500ms;  // longer than a token lives
  CHECK(runsToEnd(w.scenario(), "bell", w.spec(kGood), 60s) == 0);
  CHECK(w.api.value("bell", "status.jobStatus") == "DONE");
  CHECK(w.quantum.submissions() == 1);
  CHECK(w.quantum.tokensIssued() >= 2);
  CHECK(w.quantum.expiredTokenCalls() == 0);
  const json results = json::parse(w.s3.object("results", "bell/results"));
  CHECK(results["results"][0]["data"]["c"]["num_bits"] == 1);
  CHECK(w.s3.object("results", "bell/logs").find("Completed") != std::string::npos);
  const json status = w.api.operatorStatus("bell", "Succeeded");
  CHECK(status["jobStatus"] == "DONE");
  CHECK(isRfc3339(status["submitTime"]));
  CHECK(isRfc3339(status["startTime"]));
  CHECK(isRfc3339(status["completionTime"]));
}

TEST_CASE("quantum: kill cancels the job: Cancelled -> KILLED") {
  QuantumWorld w;
  w.quantum.runFor = 60s;
  killedWhileRunning(w.scenario(), "long", w.spec(kGood));
  CHECK(w.quantum.status(w.api.value("long", "id")) == "Cancelled");
}

TEST_CASE("quantum: invalid input is FAILED with the service's reason") {
  QuantumWorld w;
  w.quantum.runFor = 200ms;
  CHECK(runsToEnd(w.scenario(), "bad", w.spec(R"({"pubs": "not a circuit"})"), 30s) == 1);
  CHECK(w.api.value("bad", "status.jobStatus") == "FAILED");
  CHECK(w.api.value("bad", "status.message").find("pubs must be a list (code 1517)") !=
        std::string::npos);
}

TEST_CASE("quantum: additionaldata is refused before anything is downloaded or submitted") {
  QuantumWorld w;
  json spec = w.spec(kGood);
  spec["jobdata"]["additionaldata"] =
      "results:inputs/never-read.txt";  // not even in S3: nothing is fetched
  auto pod = w.pod(w.api.start("files", spec));
  const auto exit = pod->waitExit(30s);
  REQUIRE(exit.has_value());
  CHECK(*exit == 1);
  CHECK(w.api.value("files", "status.jobStatus") == "FAILED");
  CHECK(w.api.value("files", "status.message").find("the quantum backend cannot stage files") !=
        std::string::npos);
  CHECK(w.quantum.submissions() == 0);
}

TEST_CASE("quantum: a wrong API key is retried and never submits") {
  QuantumWorld w;
  w.dir.write("creds/password", "wrong-key");
  badCredentialWaits(w.scenario(), "denied", w.spec(kGood),
                     [&] { w.dir.write("creds/password", "api-key-123"); });
}

TEST_CASE(
    "quantum: the pod SIGKILLed right after submit and again while polling then restarted: exactly "
    "one job") {
  QuantumWorld w;
  w.quantum.runFor = 3s;
  crashedTwiceRunsOnce(w.scenario(), "crashy", w.spec(kGood));
}

TEST_CASE("quantum: the service down at start and while polling: retries and one job and DONE") {
  QuantumWorld w;
  w.quantum.runFor = 2s;
  outageRunsOnce(w.scenario(), "patient", w.spec(kGood), 3s);
}
