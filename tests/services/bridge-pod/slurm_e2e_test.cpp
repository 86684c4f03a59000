// The bridge pod against a real single-node Slurm (Debian's slurmctld, slurmd, slurmrestd
// 22.05 and munged, started by slurm_cluster.sh on private ports in a scratch directory), the
// API server double holding the BridgeJob and the ConfigMap the operator asked for, and npm's
// s3rver receiving the outputs. Each TEST_CASE has its own cluster.

#include <csignal>
#include <fstream>
#include <sstream>

#include "libcore/base/rfc3339.hpp"
#include "services/bridge-pod/credentials.hpp"
#include "tests/services/bridge-pod/bridge_pod_fixture.hpp"

using nlohmann::json;
using namespace kc::bridge::testing;
using namespace std::chrono_literals;

namespace {

// The private Slurm, stopped (jobs cancelled, daemons killed by pid) on destruction.
class SlurmCluster {
 public:
  explicit SlurmCluster(const std::string& base, int minJobAge = 3600)
      : base_(base), minJobAge_(minJobAge) {
    rest_ = freePort();
    std::uint16_t ctld = freePort(), slurmd = freePort();
    while (slurmd == ctld || slurmd == rest_ || ctld == rest_) {
      ctld = freePort();
      slurmd = freePort();
    }
    REQUIRE(script({"start", base_, std::to_string(ctld), std::to_string(slurmd),
                    std::to_string(rest_)}) == 0);
  }
  ~SlurmCluster() { script({"stop", base_}); }

  std::string url() const { return base() + "slurm/v0.0.38/"; }
  std::string base() const { return "http://127.0.0.1:" + std::to_string(rest_) + "/"; }
  std::string jwtKeyFile() const { return base_ + "/jwt.key"; }
  // How many times slurmctld refused an expired JWT so far (one log line per RPC refused).
  int expiredTokensRefused() const {
    std::ifstream in(base_ + "/log/slurmctld.log");
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      n += line.find("auth_p_verify: token expired") != std::string::npos ? 1 : 0;
    }
    return n;
  }
  std::string work() const { return base_ + "/work"; }
  void stopRest() { REQUIRE(script({"stop-rest", base_}) == 0); }
  void startRest() { REQUIRE(script({"start-rest", base_}) == 0); }

  // "id state comment" of every job Slurm knows (MinJobAge keeps finished ones for an hour).
  std::vector<std::string> jobs() {
    kc::testing::ChildProcess p({"/usr/bin/squeue", "-h", "-t", "all", "-o", "%i %T %k"},
                                kc::testing::ChildOutput::kCapture,
                                {"SLURM_CONF=" + base_ + "/slurm.conf"});
    std::vector<std::string> out;
    std::istringstream in(p.readAll());
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) {
        out.push_back(line);
      }
    }
    p.wait();
    return out;
  }
  std::vector<std::string> jobsTagged(const std::string& uid) {
    std::vector<std::string> out;
    for (const auto& j : jobs()) {
      if (j.find("bridgejob-uid=" + uid) != std::string::npos) {
        out.push_back(j);
      }
    }
    return out;
  }

 private:
  int script(std::vector<std::string> args) {
    args.insert(args.begin(), {"/bin/bash", std::string(KC_SOURCE_DIR) +
                                                "/tests/services/bridge-pod/slurm_cluster.sh"});
    kc::testing::ChildProcess p(args, kc::testing::ChildOutput::kInherit,
                                {"MIN_JOB_AGE=" + std::to_string(minJobAge_)});
    return p.waitExit(60s).value_or(-1);
  }
  std::string base_;
  int minJobAge_;
  std::uint16_t rest_ = 0;
};

struct World : BridgeWorld {
  SlurmCluster slurm;

  explicit World(int minJobAge = 3600) : slurm(dir.file("slurm"), minJobAge) {
    dir.write("creds/username", "root\n");
    std::filesystem::copy_file(slurm.jwtKeyFile(), creds + "/jwtkey");
  }

  json spec(const std::string& name, const std::string& script) {
    const std::string cwd = slurm.work() + "/" + name;
    std::filesystem::create_directories(cwd);
    return json{{"resourceURL", slurm.url()},
                {"resourcesecret", "slurm-jwt"},
                {"image", "ghcr.io/kubecomp/bridge-pod-slurm:0.1"},
                {"updateinterval", 1},
                {"jobproperties", json{{"name", name},
                                       {"partition", "debug"},
                                       {"tasks", 1},
                                       {"time_limit", 5},
                                       {"current_working_directory", cwd},
                                       {"environment", {{"PATH", "/usr/bin:/bin"}}}}
                                      .dump()},
                {"jobdata", {{"scriptlocation", "inline"}, {"jobscript", script}}},
                {"s3storage", s3Spec()},
                {"s3upload", {{"bucket", "results"}, {"files", "hello.out"}}}};
  }

  std::unique_ptr<kc::testing::ChildProcess> pod(const std::vector<std::string>& env,
                                                 std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(), {"--slurm-token-lifespan", "60"});
    return BridgeWorld::pod("slurm", env, std::move(extra));
  }
  Scenario scenario() {
    return {api, [this](const std::vector<std::string>& env) { return pod(env); },
            [this] { return slurm.jobsTagged(api.uid()).size(); }, [this] { slurm.stopRest(); },
            [this] { slurm.startRest(); }};
  }
};

bool isRfc3339(const json& v) {
  return v.is_string() && kc::parseRfc3339(v.get<std::string>()).ok();
}

std::int64_t epochNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The Events about BridgeJob `name` with `reason`.
std::vector<json> eventsOf(BridgeApi& api, const std::string& name, const std::string& reason) {
  auto list = api.kube().list(kc::kube::gvr::events(), api.ns);
  REQUIRE(list.ok());
  std::vector<json> out;
  for (const json& e : list->items) {
    const json& about = e.value("involvedObject", json::object());
    if (about.value("kind", "") == "BridgeJob" && about.value("name", "") == name &&
        about.value("uid", "") == api.uid() && e.value("reason", "") == reason) {
      out.push_back(e);
    }
  }
  return out;
}

}  // namespace

TEST_CASE(
    "slurm: a BridgeJob runs to COMPLETED and its output lands in S3 and the status is DONE with "
    "times") {
  World w;
  const std::string script =
      "#!/bin/sh\n# a \"quoted\" line and a backslash \\ the original broke on\n"
      "echo \"hello from $SLURM_JOB_ID\" > hello.out\n";
  auto env = w.api.start("hello", w.spec("hello", script));
  auto pod = w.pod(env);
  const auto exit = pod->waitExit(90s);
  REQUIRE(exit.has_value());
  CHECK(*exit == 0);
  auto data = w.api.data("hello");
  CHECK(data["status.jobStatus"] == "DONE");
  const std::string id = data["id"];
  CHECK(w.slurm.jobsTagged(w.api.uid()) ==
        std::vector<std::string>{id + " COMPLETED bridgejob-uid=" + w.api.uid()});
  CHECK(w.s3.object("results", "hello/hello.out") == "hello from " + id + "\n");
  CHECK(data["status.message"].find("exited with code 0") != std::string::npos);

  const json status = w.api.operatorStatus("hello", "Succeeded");
  CHECK(status["jobStatus"] == "DONE");
  CHECK(status["remoteJobId"] == id);
  CHECK(isRfc3339(status["submitTime"]));
  CHECK(isRfc3339(status["startTime"]));
  CHECK(isRfc3339(status["completionTime"]));
  CHECK(status["startTime"].get<std::string>() <= status["completionTime"].get<std::string>());
}

TEST_CASE("slurm: kill cancels the running job: CANCELLED -> KILLED") {
  World w;
  killedWhileRunning(w.scenario(), "sleeper", w.spec("sleeper", "#!/bin/sh\nsleep 120\n"));
  const auto jobs = w.slurm.jobsTagged(w.api.uid());
  REQUIRE(jobs.size() == 1);
  CHECK(jobs[0].find(" CANCELLED ") != std::string::npos);
  CHECK(w.api.operatorStatus("sleeper", "Failed")["jobStatus"] == "KILLED");
}

TEST_CASE("slurm: a failing script is FAILED with its exit code and its outputs still uploaded") {
  World w;
  failsWithExitCode3(w.scenario(), "broken",
                     w.spec("broken", "#!/bin/sh\necho partial > hello.out\nexit 3\n"),
                     "exited with code 3");
  CHECK(w.s3.object("results", "broken/hello.out") == "partial\n");
}

TEST_CASE("slurm: a remote script (a path on the cluster) runs through a wrapper") {
  World w;
  const std::string path = w.slurm.work() + "/it's remote.sh";
  w.dir.write("slurm/work/it's remote.sh", "#!/bin/sh\necho \"remote $1\" > hello.out\n");
  std::filesystem::permissions(path, std::filesystem::perms::owner_all |
                                         std::filesystem::perms::others_read |
                                         std::filesystem::perms::others_exec);
  json spec = w.spec("far", "unused");
  spec["jobdata"] = {{"scriptlocation", "remote"}, {"jobscript", path}};
  auto pod = w.pod(w.api.start("far", spec));
  const auto exit = pod->waitExit(90s);
  REQUIRE(exit.has_value());
  CHECK(*exit == 0);
  CHECK(w.s3.object("results", "far/hello.out") == "remote \n");
}

TEST_CASE(
    "slurm: additionaldata from S3 is staged by the batch script's prologue and the job reads it") {
  World w;
  w.putS3("results", "inputs/it's-in.txt", "staged \"text\"\nBRIDGE_STAGED_EOF\n");
  std::string big(1536 * 1024, '\0');  // 1.5 MiB of every byte value: a batch script of ~2 MiB
  for (std::size_t i = 0; i < big.size(); ++i) {
    big[i] = static_cast<char>((i * 7919) >> 3);
  }
  w.putS3("results", "inputs/deep/big.bin", big);
  const std::string refs = "results:inputs/it's-in.txt,results:inputs/deep/big.bin";

  // an inline script, run unchanged after the prologue (its own interpreter line)
  json spec =
      w.spec("staged", "#!/bin/bash\ncat \"it's-in.txt\" > hello.out\ncp big.bin copy.bin\n");
  spec["jobdata"]["additionaldata"] = refs;
  spec["s3upload"]["files"] = "hello.out,copy.bin";
  auto pod = w.pod(w.api.start("staged", spec));
  auto exit = pod->waitExit(90s);
  REQUIRE(exit.has_value());
  CHECK(*exit == 0);
  CHECK(w.api.value("staged", "status.jobStatus") == "DONE");
  CHECK(w.s3.object("results", "staged/hello.out") == "staged \"text\"\nBRIDGE_STAGED_EOF\n");
  CHECK(w.s3.object("results", "staged/copy.bin") == big);
  const std::string id = w.api.value("staged", "id");
  CHECK(std::filesystem::exists(w.slurm.work() + "/staged/.bridge-script." + id));

  // a remote script through the wrapper, after the same prologue
  const std::string path = w.slurm.work() + "/reader.sh";
  w.dir.write("slurm/work/reader.sh", "#!/bin/sh\ncat \"it's-in.txt\" > hello.out\n");
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  json remote = w.spec("staged-remote", "unused");
  remote["jobdata"] = {{"scriptlocation", "remote"},
                       {"jobscript", path},
                       {"additionaldata", "results:inputs/it's-in.txt"}};
  pod = w.pod(w.api.start("staged-remote", remote));
  exit = pod->waitExit(90s);
  REQUIRE(exit.has_value());
  CHECK(*exit == 0);
  CHECK(w.s3.object("results", "staged-remote/hello.out") ==
        "staged \"text\"\nBRIDGE_STAGED_EOF\n");

  // over the limit: FAILED before anything reaches Slurm
  w.putS3("results", "inputs/more.bin", std::string(600 * 1024, 'x'));
  json tooMuch = w.spec("too-much", "#!/bin/sh\ntrue\n");
  tooMuch["jobdata"]["additionaldata"] = refs + ",results:inputs/more.bin";
  pod = w.pod(w.api.start("too-much", tooMuch));
  exit = pod->waitExit(60s);
  REQUIRE(exit.has_value());
  CHECK(*exit == 1);
  CHECK(w.api.value("too-much", "status.jobStatus") == "FAILED");
  CHECK(w.api.value("too-much", "status.message")
            .find("more than the slurm backend stages (2097152 bytes)") != std::string::npos);
  CHECK(w.slurm.jobsTagged(w.api.uid()).empty());
}

TEST_CASE(
    "slurm: a job purged before its end was seen (error 2017) is UNKNOWN and not resubmitted") {
  World w(2);  // MinJobAge=2: Slurm forgets finished jobs within seconds
  auto env = w.api.start("purged", w.spec("purged", "#!/bin/sh\necho gone > hello.out\n"));
  {
    auto pod = w.pod(env);
    REQUIRE(
        kc::testing::eventually([&] { return w.api.value("purged", "id") != "<absent>"; }, 60s));
    pod->kill(SIGKILL);  // nobody watches while the job ends and is purged
  }
  REQUIRE(kc::testing::eventually([&] { return w.slurm.jobs().empty(); }, 120s));
  auto pod = w.pod(env);
  const auto exit = pod->waitExit(60s);
  REQUIRE(exit.has_value());
  CHECK(*exit == 1);
  CHECK(w.api.value("purged", "status.jobStatus") == "UNKNOWN");
  CHECK(w.api.value("purged", "status.message").find("is gone") != std::string::npos);
  CHECK(w.slurm.jobs().empty());  // not submitted again
}

TEST_CASE("slurm: a kill before the job was ever submitted submits nothing") {
  World w;
  auto env = w.api.start("never", w.spec("never", "#!/bin/sh\necho x > hello.out\n"));
  w.api.kill("never");
  auto pod = w.pod(env);
  const auto exit = pod->waitExit(60s);
  REQUIRE(exit.has_value());
  CHECK(*exit == 1);
  CHECK(w.api.value("never", "status.jobStatus") == "KILLED");
  CHECK(w.slurm.jobsTagged(w.api.uid()).empty());
}

TEST_CASE(
    "slurm: the pod SIGKILLed right after submit and again while polling then restarted: exactly "
    "one job") {
  World w;
  const std::string id = crashedTwiceRunsOnce(
      w.scenario(), "crashy", w.spec("crashy", "#!/bin/sh\nsleep 4\necho survived > hello.out\n"));
  CHECK(w.slurm.jobsTagged(w.api.uid()) ==
        std::vector<std::string>{id + " COMPLETED bridgejob-uid=" + w.api.uid()});
  CHECK(w.s3.object("results", "crashy/hello.out") == "survived\n");
}

TEST_CASE("slurm: slurmrestd down at start and while polling: retries and one job and DONE") {
  World w;
  // The job finishes while nobody can ask.
  outageRunsOnce(w.scenario(), "patient",
                 w.spec("patient", "#!/bin/sh\nsleep 3\necho late > hello.out\n"), 5s);
  CHECK(w.s3.object("results", "patient/hello.out") == "late\n");
}

// Version discovery against the real slurmrestd 22.05, which offers v0.0.36, v0.0.37 and
// v0.0.38 (slurm_cluster.sh loads those three plugins): its GET /openapi/v3 lists them, and
// the newest the bridge pod speaks is v0.0.38.
TEST_CASE("slurm: a base resourceURL discovers v0.0.38 from the real slurmrestd and runs the job") {
  World w;
  json spec = w.spec("found", "#!/bin/sh\necho found > hello.out\n");
  spec["resourceURL"] = w.slurm.base();
  auto pod = w.pod(w.api.start("found", spec));
  const auto exit = pod->waitExit(90s);
  REQUIRE(exit.has_value());
  CHECK(*exit == 0);
  CHECK(w.api.value("found", "status.jobStatus") == "DONE");
  CHECK(w.slurm.jobsTagged(w.api.uid()).size() == 1);
  CHECK(w.s3.object("results", "found/hello.out") == "found\n");
}

TEST_CASE(
    "slurm: a version the real slurmrestd does not offer ends the pod with nothing submitted") {
  World w;
  json spec = w.spec("absent", "#!/bin/sh\necho x > hello.out\n");
  spec["resourceURL"] = w.slurm.base();
  auto pod = w.pod(w.api.start("absent", spec), {"--slurm-api-version", "v0.0.40"});
  const auto exit = pod->waitExit(60s);
  REQUIRE(exit.has_value());
  CHECK(*exit == 1);
  CHECK(w.api.value("absent", "status.jobStatus") == "FAILED");
  CHECK(w.api.value("absent", "status.message").find("v0.0.40") != std::string::npos);
  CHECK(w.api.value("absent", "id") == "<absent>");
  CHECK(w.slurm.jobs().empty());
}

// A token given as is (Secret key `token`, no `jwtkey`) that has expired. The real slurmrestd
// 22.05 does not say so: every call is answered HTTP 500 (ping: "slurmctld config is unable to
// load", GET job: "Unable to find JobId=N", error_number -1). The pod reads the token's exp
// and says when it expired - status.message (copied into the BridgeJob's status by the
// operator) and a Warning Event on the BridgeJob - retries at --credential-retry-ms instead of
// backing off, and runs the job once the Secret holds a new token (this one expiring within
// five minutes: warned of as SlurmTokenExpiring). The token itself is never written anywhere.
TEST_CASE(
    "slurm: an expired token is reported with its expiry and retried slowly until a renewed one "
    "runs the job") {
  World w;
  std::filesystem::remove(w.creds + "/jwtkey");
  const std::string key = kc::testing::readFile(w.slurm.jwtKeyFile());
  const std::int64_t expired = epochNow() - 120;
  const std::string stale = kc::bridge::pod::mintSlurmJwt(key, "root", expired - 3600, expired);
  w.dir.write("creds/token", stale + "\n");
  const std::string at =
      kc::formatRfc3339(std::chrono::system_clock::time_point(std::chrono::seconds(expired)));

  auto pod = w.pod(w.api.start("stale", w.spec("stale", "#!/bin/sh\necho renewed > hello.out\n")),
                   {"--credential-retry-ms", "4000"});
  REQUIRE(kc::testing::eventually(
      [&] {
        return w.api.value("stale", "status.message").rfind("Slurm token expired at ", 0) == 0;
      },
      60s));
  const std::string message = w.api.value("stale", "status.message");
  CHECK(message == "Slurm token expired at " + at +
                       "; renew the credential in Secret slurm-jwt (retrying every 4 s)");
  CHECK(w.api.operatorStatus("stale", "Running")["message"] == message);
  // The Event is recorded right after the status is written.
  REQUIRE(kc::testing::eventually(
      [&] { return !eventsOf(w.api, "stale", "SlurmTokenExpired").empty(); }, 10s));
  auto expiredEvents = eventsOf(w.api, "stale", "SlurmTokenExpired");
  REQUIRE(expiredEvents.size() == 1);
  CHECK(expiredEvents[0]["type"] == "Warning");
  CHECK(expiredEvents[0]["message"] == "Slurm token expired at " + at);
  CHECK(message.find(stale.substr(stale.rfind('.'))) == std::string::npos);

  // No more hammering: one call per retry period (the backoff would make several a second).
  const int refusedBefore = w.slurm.expiredTokensRefused();
  CHECK(refusedBefore >= 1);
  std::this_thread::sleep_for(3s);
  CHECK(w.slurm.expiredTokensRefused() - refusedBefore <= 1);
  CHECK(pod->running());
  CHECK(w.slurm.jobs().empty());
  CHECK(eventsOf(w.api, "stale", "SlurmTokenExpired").size() == 1);

  const std::int64_t renewed = epochNow() + 240;
  w.dir.write("creds/token", kc::bridge::pod::mintSlurmJwt(key, "root", renewed - 600, renewed));
  const auto exit = pod->waitExit(90s);
  REQUIRE(exit.has_value());
  CHECK(*exit == 0);
  CHECK(w.api.value("stale", "status.jobStatus") == "DONE");
  CHECK(w.api.value("stale", "status.message").find("exited with code 0") != std::string::npos);
  CHECK(w.slurm.jobsTagged(w.api.uid()).size() == 1);
  CHECK(w.s3.object("results", "stale/hello.out") == "renewed\n");
  auto soonEvents = eventsOf(w.api, "stale", "SlurmTokenExpiring");
  REQUIRE(soonEvents.size() == 1);
  CHECK(soonEvents[0]["type"] == "Warning");
  CHECK(soonEvents[0]["message"] ==
        "Slurm token expires at " + kc::formatRfc3339(std::chrono::system_clock::time_point(
                                        std::chrono::seconds(renewed))));
}
