// The bridge pod's parts without a network: credentials and JWT minting, path checks, and the
// runner's decisions against a scripted backend and an in-memory ConfigMap (simulated time).

#include <catch2/catch.hpp>
#include <deque>
#include <fstream>
#include <functional>
#include <regex>

#include "libcore/base/rfc3339.hpp"
#include "libcore/net/sigv4.hpp"
#include "services/bridge-pod/credentials.hpp"
#include "services/bridge-pod/lsf_backend.hpp"
#include "services/bridge-pod/multipart.hpp"
#include "services/bridge-pod/quantum_backend.hpp"
#include "services/bridge-pod/ray_backend.hpp"
#include "services/bridge-pod/ray_package.hpp"
#include "services/bridge-pod/runner.hpp"
#include "services/bridge-pod/s3_client.hpp"
#include "services/bridge-pod/slurm_backend.hpp"
#include "services/bridge-pod/slurm_script.hpp"
#include "tests/services/bridge-pod/backend_proxy.hpp"
#include "tests/support/fakes/fake_clock.hpp"
#include "tests/support/temp_dir.hpp"

using namespace kc::bridge;
using namespace kc::bridge::pod;

namespace {

std::string hex(const std::string& bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

}  // namespace

TEST_CASE("bridge-pod credentials: HMAC-SHA256 (RFC 4231 case 2) and base64url") {
  CHECK(hex(hmacSha256("Jefe", "what do ya want for nothing?")) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK(base64Url("\xfb\xff") == "-_8");
  CHECK(base64Url("hi") == "aGk");
}

TEST_CASE(
    "bridge-pod credentials: a minted Slurm JWT is HS256 over header.payload with exp iat sun") {
  const std::string t = mintSlurmJwt("k3y", "alice", 1000, 1600);
  const auto dot1 = t.find('.');
  const auto dot2 = t.rfind('.');
  REQUIRE(dot1 != dot2);
  CHECK(t.substr(0, dot1) ==
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9");  // {"alg":"HS256","typ":"JWT"}
  CHECK(t.substr(dot1 + 1, dot2 - dot1 - 1) ==
        base64Url(R"({"exp":1600,"iat":1000,"sun":"alice"})"));
  CHECK(t.substr(dot2 + 1) == base64Url(hmacSha256("k3y", t.substr(0, dot2))));
  CHECK(t.find('=') == std::string::npos);
}

TEST_CASE(
    "bridge-pod credentials: tokens are re-minted before expiry and a token file is re-read") {
  kc::testing::TempDir dir;
  kc::testing::FakeClock clock;
  dir.write("username", "alice\n");
  dir.write("jwtkey", std::string("key\n", 4));  // raw key bytes: the newline is part of the key
  SlurmTokenSource src(dir.path().string(), std::chrono::seconds(100), &clock);
  auto t1 = src.token();
  REQUIRE(t1.ok());
  const std::string sig = t1->substr(t1->rfind('.') + 1);
  const std::string input = t1->substr(0, t1->rfind('.'));
  CHECK(sig == base64Url(hmacSha256(std::string("key\n", 4), input)));
  clock.advance(std::chrono::seconds(79));
  CHECK(*src.token() == *t1);
  CHECK(src.minted() == 1);
  clock.advance(std::chrono::seconds(2));  // less than a fifth of the lifespan left
  auto t2 = src.token();
  CHECK(*t2 != *t1);
  CHECK(src.minted() == 2);

  kc::testing::TempDir plain;
  plain.write("username", "bob");
  plain.write("token", "tok-1\n");
  SlurmTokenSource file(plain.path().string(), std::chrono::seconds(100), &clock);
  CHECK(*file.token() == "tok-1");
  plain.write("token", "tok-2");  // the kubelet rotated the Secret
  CHECK(*file.token() == "tok-2");
  kc::testing::TempDir none;
  SlurmTokenSource missing(none.path().string(), std::chrono::seconds(100), &clock);
  auto err = missing.token();
  REQUIRE_FALSE(err.ok());
  CHECK(err.error().code == "not_found");
}

TEST_CASE("bridge-pod: output names stay inside the job directory and bucket:object references") {
  CHECK(safeRelativePath("hello.out"));
  CHECK(safeRelativePath("out/a.txt"));
  CHECK_FALSE(safeRelativePath(""));
  CHECK_FALSE(safeRelativePath("/etc/passwd"));
  CHECK_FALSE(safeRelativePath("../x"));
  CHECK_FALSE(safeRelativePath("a/../../x"));
  CHECK(splitBucketObject("b:dir/o.py").value() ==
        std::pair<std::string, std::string>{"b", "dir/o.py"});
  CHECK_FALSE(splitBucketObject("nocolon").ok());
  CHECK_FALSE(splitBucketObject(":o").ok());
  CHECK_FALSE(splitBucketObject("b:").ok());
  S3Options withScheme;
  withScheme.endpoint = "http://host:9000";
  CHECK_FALSE(S3Client::create(withScheme).ok());
  S3Options withPath;
  withPath.endpoint = "host/path";
  CHECK_FALSE(S3Client::create(withPath).ok());
}

namespace {

class MemoryStore final : public JobStore {
 public:
  Data data;
  int failReads = 0;
  int writes = 0;
  std::function<void(Data&)> onWrite;
  kc::Result<Data> read() override {
    if (failReads > 0) {
      --failReads;
      return kc::makeError("unavailable", "api down");
    }
    return data;
  }
  kc::Status write(const Data& keys) override {
    ++writes;
    for (const auto& [k, v] : keys) {
      data[k] = v;
    }
    if (onWrite) {
      onWrite(data);
    }
    return kc::okStatus();
  }
};

class ScriptedBackend final : public Backend {
 public:
  std::deque<kc::Result<std::optional<std::string>>> tagged;
  std::deque<kc::Result<std::string>> submits;
  std::deque<kc::Result<Query>> queries;
  int submitCalls = 0, cancelCalls = 0;
  std::uint64_t limit = 0;
  std::vector<StagedFile> staged;  // what the last submit carried
  const char* name() const override { return "scripted"; }
  std::uint64_t stagingLimit() const override { return limit; }
  kc::Status prepare() override { return kc::okStatus(); }
  kc::Result<std::optional<std::string>> findTagged(const JobContext&) override {
    if (tagged.empty()) {
      return std::optional<std::string>{};
    }
    auto r = tagged.front();
    tagged.pop_front();
    return r;
  }
  kc::Result<std::string> submit(const JobContext& c) override {
    ++submitCalls;
    staged = c.additionalFiles;
    auto r = submits.front();
    submits.pop_front();
    return r;
  }
  kc::Result<Query> query(const std::string&) override {
    auto r = queries.front();
    if (queries.size() > 1) {
      queries.pop_front();
    }
    return r;
  }
  kc::Result<bool> cancel(const std::string&) override {
    ++cancelCalls;
    return true;
  }
  kc::Result<std::string> fetchOutput(const JobContext&, const std::string&,
                                      const std::string&) override {
    return kc::makeError("not_found", "no output");
  }
};

using Proxy = kc::bridge::pod::testing::BackendProxy;

Query state(JobStatus s, std::string msg = "m") {
  Query q;
  q.job.status = s;
  q.job.message = std::move(msg);
  q.job.startTime = WallSeconds(std::chrono::seconds(1'795'000'000));
  return q;
}

Data freshConfigMap() {
  JobParameters p;
  p.image = "img";
  p.resourceUrl = "http://x/";
  p.resourceSecret = "s";
  p.jobScript = "#!/bin/sh\n";
  p.scriptLocation = "inline";
  p.updateIntervalSec = 5;
  Data d = parameterData(p);
  d[cmkey::kJobName] = "j";
  d[cmkey::kJobNamespace] = "ns";
  d[cmkey::kJobUid] = "u-1";
  d[cmkey::kKill] = "false";
  return d;
}

struct Harness {
  kc::testing::FakeClock clock;
  MemoryStore store;
  ScriptedBackend backend;
  RunnerOptions options;
  Harness() {
    clock.setAutoAdvance(true);
    options.clock = &clock;
    store.data = freshConfigMap();
  }
  int run() {
    BackendFactory f = [&](const JobParameters&) -> kc::Result<std::unique_ptr<Backend>> {
      return std::unique_ptr<Backend>(std::make_unique<Proxy>(backend));
    };
    return runBridgePod(store, f, options);
  }
};

}  // namespace

TEST_CASE(
    "bridge-pod runner: a submit lost in transit is found by its tag and not submitted twice") {
  Harness h;
  h.backend.tagged = {std::optional<std::string>{}, std::optional<std::string>{"42"}};
  h.backend.submits = {kc::makeError("timeout", "no reply")};
  h.backend.queries = {state(JobStatus::kDone)};
  CHECK(h.run() == 0);
  CHECK(h.backend.submitCalls == 1);
  CHECK(h.store.data["id"] == "42");
  CHECK(h.store.data["status.jobStatus"] == "DONE");
}

TEST_CASE(
    "bridge-pod runner: the id is written before the first poll and transient poll errors back "
    "off") {
  Harness h;
  h.backend.submits = {std::string("7")};
  kc::Result<Query> down = kc::makeError("unavailable", "refused");
  h.backend.queries = {down, down, down, state(JobStatus::kRunning), state(JobStatus::kDone)};
  bool idBeforePoll = false;
  h.store.onWrite = [&](Data& d) {
    if (d.count("id") && h.backend.queries.size() == 5) {
      idBeforePoll = true;
    }
  };
  CHECK(h.run() == 0);
  CHECK(idBeforePoll);
  CHECK(h.backend.submitCalls == 1);
  // three backoff waits growing from 1 s, then the 5 s poll interval
  const auto waits = h.clock.requestedWaits();
  REQUIRE(waits.size() >= 4);
  CHECK(waits[0] >= std::chrono::seconds(1));
  CHECK(waits[1] > waits[0]);
  CHECK(waits[2] > waits[1]);
  CHECK(h.store.data["status.startTime"] == "2026-11-18T11:06:40Z");
}

TEST_CASE("bridge-pod runner: a refused submit is FAILED with the reason and nothing retried") {
  Harness h;
  h.backend.submits = {kc::makeError("invalid", "environment must be set")};
  CHECK(h.run() == 1);
  CHECK(h.backend.submitCalls == 1);
  CHECK(h.store.data["status.jobStatus"] == "FAILED");
  CHECK(h.store.data["status.message"].find("environment must be set") != std::string::npos);
  CHECK(h.store.data.count("id") == 0);
}

TEST_CASE("bridge-pod runner: kill cancels and waits for the backend to confirm") {
  Harness h;
  h.store.data["id"] = "9";
  h.store.data["kill"] = "true";
  h.backend.queries = {state(JobStatus::kRunning), state(JobStatus::kKilled)};
  CHECK(h.run() == 1);
  CHECK(h.backend.cancelCalls == 1);
  CHECK(h.backend.submitCalls == 0);
  CHECK(h.store.data["status.jobStatus"] == "KILLED");
}

TEST_CASE(
    "bridge-pod runner: a job gone before its end is UNKNOWN and a final ConfigMap ends the pod at "
    "once") {
  Harness h;
  h.store.data["id"] = "9";
  Query gone;
  gone.gone = true;
  h.backend.queries = {gone};
  CHECK(h.run() == 1);
  CHECK(h.store.data["status.jobStatus"] == "UNKNOWN");

  Harness done;
  done.store.data["status.jobStatus"] = "DONE";
  CHECK(done.run() == 0);
  CHECK(done.store.writes == 0);
}

TEST_CASE("bridge-pod runner: DONE without its outputs is FAILED naming the file") {
  Harness h;
  h.store.data["id"] = "9";
  h.store.data["s3upload.bucket"] = "results";
  h.store.data["s3upload.files"] = "a.out";
  h.store.data["s3.endpoint"] = "127.0.0.1:1";
  h.store.data["s3.secret"] = "s3";
  h.store.data["s3.secure"] = "false";
  h.backend.queries = {state(JobStatus::kDone)};
  CHECK(h.run() == 1);
  CHECK(h.store.data["status.jobStatus"] == "FAILED");
  CHECK(h.store.data["status.message"].find("a.out: no output") != std::string::npos);
}

TEST_CASE("ray: the submit body from the job's parameters") {
  JobContext ctx;
  ctx.jobName = "pi";
  ctx.jobNamespace = "ml";
  ctx.uid = "u-9";
  ctx.params.scriptLocation = "inline";
  ctx.script = "print(\"it's\")\n";
  ctx.scriptMetadata = R"({"pip": {"numpy": "1.26.4", "rich": ""}, "env": {"A": "b"}})";
  ctx.jobParametersJson = R"({"n": 3})";
  ctx.params.jobProperties = R"({"entrypoint_num_cpus": 0.5, "entrypoint_resources": {"TPU": 1}})";
  auto body = buildRaySubmitBody(ctx);
  REQUIRE(body.ok());
  CHECK((*body)["submission_id"] == "bridge-u-9");
  CHECK((*body)["runtime_env"]["pip"] == nlohmann::json::array({"numpy==1.26.4", "rich"}));
  CHECK((*body)["runtime_env"]["env_vars"]["BRIDGE_SCRIPT"] == ctx.script);
  CHECK((*body)["runtime_env"]["env_vars"]["BRIDGE_JOB_PARAMETERS"] == R"({"n":3})");
  CHECK((*body)["runtime_env"]["env_vars"]["A"] == "b");
  CHECK((*body)["entrypoint_num_cpus"] == 0.5);
  CHECK((*body)["metadata"]["bridgejob"] == "ml/pi");

  ctx.params.scriptLocation = "remote";
  ctx.script = "python /app/pi.py --fast";
  CHECK((*buildRaySubmitBody(ctx))["entrypoint"] == "python /app/pi.py --fast");

  for (const auto& [field, value] :
       std::vector<std::pair<int, std::string>>{{0, R"({"entrypoint": "x"})"},
                                                {0, R"({"entrypoint_num_cpus": -1})"},
                                                {0, R"({"entrypoint_memory": 1.5})"},
                                                {1, R"({"pip": ["numpy"]})"},
                                                {1, R"({"env": {"BRIDGE_SCRIPT": "x"}})"},
                                                {1, R"({"conda": {}})"},
                                                {2, "[1]"}}) {
    JobContext bad = ctx;
    (field == 0   ? bad.params.jobProperties
     : field == 1 ? bad.scriptMetadata
                  : bad.jobParametersJson) = value;
    auto r = buildRaySubmitBody(bad);
    CHECK_FALSE(r.ok());
    CHECK(r.error().code == "invalid");
  }
}

TEST_CASE("ray: job replies map to status and times and 404 is gone") {
  auto q = parseRayJob(
      200,
      R"({"status": "FAILED", "message": "Job entrypoint command failed with exit code 3, last logs:\nboom", "start_time": 1795000000123, "end_time": 1795000005999})");
  REQUIRE(q.ok());
  CHECK(q->job.status == JobStatus::kFailed);
  CHECK(q->job.message == "Ray FAILED: Job entrypoint command failed with exit code 3, last logs:");
  CHECK(q->job.startTime->time_since_epoch().count() == 1795000000);
  CHECK(q->job.endTime->time_since_epoch().count() == 1795000005);
  CHECK(parseRayJob(404, "Job x does not exist")->gone);
  CHECK(parseRayJob(200, R"({"status": "STOPPED"})")->job.status == JobStatus::kKilled);
  CHECK(parseRayJob(200, R"({"status": "PENDING", "end_time": null})")->job.status ==
        JobStatus::kSubmitted);
  CHECK(parseRayJob(200, R"({"status": "WEIRD"})").error().code == "protocol");
  CHECK(parseRayJob(200, "not json").error().code == "protocol");
  CHECK(parseRayJob(503, "busy").error().code == "server_error");
  CHECK(parseRayJob(401, "no").error().code == "unauthorized");
}

TEST_CASE("quantum: the submit body carries program and backend and params and the uid tag") {
  JobContext ctx;
  ctx.uid = "u-7";
  ctx.params.scriptLocation = "inline";
  ctx.script = "sampler\n";
  ctx.jobParametersJson = R"({"shots": 10})";
  ctx.params.jobProperties = R"({"backend": "ibm_kyiv", "private": true})";
  auto body = buildQuantumSubmitBody(ctx);
  REQUIRE(body.ok());
  CHECK(
      *body ==
      nlohmann::json::parse(
          R"({"program_id": "sampler", "backend": "ibm_kyiv", "private": true, "params": {"shots": 10}, "tags": ["bridgejob-uid:u-7"]})"));
  for (auto mutate : std::vector<std::function<void(JobContext&)>>{
           [](JobContext& c) { c.params.jobProperties = "{}"; },
           [](JobContext& c) { c.params.jobProperties = R"({"backend": "x", "shots": 3})"; },
           [](JobContext& c) { c.params.jobProperties = R"({"backend": 7})"; },
           [](JobContext& c) { c.script = "import qiskit\nprint(1)"; },
           [](JobContext& c) { c.params.scriptLocation = "s3"; },
           [](JobContext& c) { c.jobParametersJson = "[]"; }}) {
    JobContext bad = ctx;
    mutate(bad);
    auto r = buildQuantumSubmitBody(bad);
    CHECK_FALSE(r.ok());
  }
}

TEST_CASE("quantum: job states including the ran-too-long cancel") {
  auto st = [](const std::string& body) { return parseQuantumJob(200, body)->job.status; };
  CHECK(st(R"({"state": {"status": "Queued"}})") == JobStatus::kSubmitted);
  CHECK(st(R"({"state": {"status": "Running"}})") == JobStatus::kRunning);
  CHECK(st(R"({"state": {"status": "Completed"}, "created": "2026-11-24T10:00:00.5Z"})") ==
        JobStatus::kDone);
  CHECK(st(R"({"state": {"status": "Cancelled"}})") == JobStatus::kKilled);
  CHECK(
      st(R"({"state": {"status": "Cancelled", "reason": "RAN TOO LONG", "reason_code": 1305}})") ==
      JobStatus::kFailed);
  CHECK(st(R"({"status": "Cancelled - Ran too long"})") == JobStatus::kFailed);
  CHECK(st(R"({"status": "Failed"})") == JobStatus::kFailed);
  CHECK(parseQuantumJob(200, R"({"state": {"status": "Exploded"}})").error().code == "protocol");
  CHECK(parseQuantumJob(200, R"({"id": "x"})").error().code == "protocol");
  CHECK(parseQuantumJob(404, "{}")->gone);
  CHECK(parseQuantumJob(401, "{}").error().code == "unauthorized");
  auto q = parseQuantumJob(
      200,
      R"({"state": {"status": "Failed", "reason": "bad input", "reason_code": 1517}, "created": "2026-11-24T10:00:00Z"})");
  CHECK(q->job.message == "Qiskit Runtime Failed: bad input (code 1517)");
  CHECK(kc::formatRfc3339(*q->job.submitTime) == "2026-11-24T10:00:00Z");
}

TEST_CASE("multipart: nested parts round-trip and a longer boundary inside is not a delimiter") {
  MimePart inner{{{"Content-ID", "<x>"}}, "line1\r\nline2"};
  const std::string nested = buildMultipart("B-data", {inner, MimePart{{}, ""}});
  MimePart outer{{{"Content-Type", "multipart/mixed; boundary=B-data"}}, nested};
  const std::string body =
      buildMultipart("B", {MimePart{{{"Content-ID", "<AppName>"}}, "generic"}, outer});
  auto parts = parseMultipart(body, "B");
  REQUIRE(parts.ok());
  REQUIRE(parts->size() == 2);
  CHECK((*parts)[0].header("content-id") == "<AppName>");
  CHECK((*parts)[1].body == nested);
  auto in = parseMultipart((*parts)[1].body,
                           multipartBoundary((*parts)[1].header("Content-Type")).value());
  REQUIRE(in.ok());
  REQUIRE(in->size() == 2);
  CHECK((*in)[0].body == "line1\r\nline2");
  CHECK((*in)[1].body.empty());
  CHECK(parseMultipart("preamble\r\n" + body, "B")->size() == 2);
  CHECK_FALSE(parseMultipart("--B\r\nX: y\r\n\r\nno end", "B").ok());
  CHECK_FALSE(parseMultipart("nothing", "B").ok());
  CHECK(multipartBoundary("multipart/mixed; boundary=\"q b\"; charset=x").value() == "q b");
  CHECK_FALSE(multipartBoundary("multipart/mixed").ok());
  CHECK(xmlEscape("<a&'\">") == "&lt;a&amp;&apos;&quot;&gt;");
}

TEST_CASE("lsf: the submit request and the one-object-or-array job replies") {
  JobContext ctx;
  ctx.uid = "u-3";
  ctx.params.scriptLocation = "inline";
  ctx.script = "echo </value> & done\n";
  ctx.params.jobProperties = R"({"queue": "night", "nodes": 2, "runLimitMinute": 30})";
  auto req = buildLsfSubmit(ctx, "BND");
  REQUIRE(req.ok());
  CHECK(req->contentType == "multipart/mixed; boundary=BND");
  auto parts = parseMultipart(req->body, "BND");
  REQUIRE(parts.ok());
  REQUIRE(parts->size() == 3);
  CHECK((*parts)[2].body == ctx.script);  // the script as a file part, verbatim
  const std::string data = (*parts)[1].body;
  CHECK(data.find("<AppParam><id>JOB_NAME</id><value>bridge-u-3</value><type></type></AppParam>") !=
        std::string::npos);
  CHECK(data.find("<id>EXTRA_PARAMS</id><value>-nnodes 2</value>") != std::string::npos);
  CHECK(data.find("<id>QUEUE</id><value>night</value>") != std::string::npos);
  for (const char* bad : {R"({"queue": 1})", R"({"nodes": 0})", R"({"runLimitHour": -1})",
                          R"({"priority": 5})", "[]"}) {
    JobContext b = ctx;
    b.params.jobProperties = bad;
    CHECK_FALSE(buildLsfSubmit(b, "BND").ok());
  }
  JobContext remote = ctx;
  remote.params.scriptLocation = "remote";
  remote.script = "a\nb";
  CHECK_FALSE(buildLsfSubmit(remote, "BND").ok());

  auto one = lsfJobs(200, R"({"@total": "1", "job": {"id": "5", "jobStatus": "RUN"}})");
  REQUIRE(one.ok());
  CHECK(one->size() == 1);
  CHECK(lsfJobs(200, R"({"@total": "2", "job": [{"id": "5"}, {"id": "6"}]})")->size() == 2);
  CHECK(lsfJobs(200, R"({"@total": "0"})")->empty());
  CHECK(lsfJobs(200, R"({"job": {}})").error().code == "protocol");
  auto done = lsfRemoteJob(nlohmann::json::parse(
      R"({"jobStatus": "EXIT", "exitCode": "3", "startTime": "2026-11-24 10:00:00", "endTime": "2026-11-24T10:00:05Z"})"));
  REQUIRE(done.ok());
  CHECK(done->status == JobStatus::kFailed);
  CHECK(done->message == "LSF EXIT, exited with code 3");
  CHECK(kc::formatRfc3339(*done->startTime) == "2026-11-24T10:00:00Z");
  CHECK(kc::formatRfc3339(*done->endTime) == "2026-11-24T10:00:05Z");
  CHECK(lsfRemoteJob(nlohmann::json::parse(R"({"jobStatus": "PSUSP"})"))->status ==
        JobStatus::kSubmitted);
  CHECK(lsfRemoteJob(nlohmann::json::parse(R"({"jobStatus": "WAT"})")).error().code == "protocol");
  CHECK(kc::formatRfc3339(*lsfTokenExpiry("admin\"2010-04-03T09:31:02Z\"abc")) ==
        "2010-04-03T09:31:02Z");
  CHECK_FALSE(lsfTokenExpiry("opaque").has_value());
}

TEST_CASE("bridge-pod runner: a job that fails after the kill request is KILLED") {
  Harness h;
  h.store.data["id"] = "9";
  h.store.data["kill"] = "true";
  h.backend.queries = {state(JobStatus::kRunning), state(JobStatus::kFailed, "LSF EXIT")};
  CHECK(h.run() == 1);
  CHECK(h.store.data["status.jobStatus"] == "KILLED");
  CHECK(h.store.data["status.message"] == "LSF EXIT (after the kill request)");
}

TEST_CASE(
    "bridge-pod staging: an object's base name is its file name and unusable names are refused") {
  CHECK(stagedFileName("input.txt").value() == "input.txt");
  CHECK(stagedFileName("dir/sub/data.bin").value() == "data.bin");
  CHECK(stagedFileName("a b'c").value() == "a b'c");
  for (const char* bad : {"", "dir/", "..", "x/..", ".", "a/.", "tab\there", "nl\n", "del\x7f"}) {
    CHECK_FALSE(stagedFileName(bad).ok());
  }
  CHECK_FALSE(stagedFileName(std::string(256, 'a')).ok());
  CHECK(stagedFileName(std::string(255, 'a')).ok());
}

TEST_CASE(
    "bridge-pod runner: additionaldata on a backend that cannot stage is refused before any "
    "submit") {
  Harness h;
  h.store.data["jobData.additionalData"] = "inputs:a.txt";
  h.store.data["s3.endpoint"] = "127.0.0.1:1";
  h.store.data["s3.secret"] = "s3";
  h.backend.submits = {std::string("1")};
  CHECK(h.run() == 1);
  CHECK(h.backend.submitCalls == 0);
  CHECK(h.store.data["status.jobStatus"] == "FAILED");
  CHECK(h.store.data["status.message"].find("the scripted backend cannot stage files") !=
        std::string::npos);
  CHECK(h.store.data.count("id") == 0);
}

TEST_CASE(
    "bridge-pod runner: additionaldata names that collide or are unusable stop the pod before "
    "downloading") {
  // The ConfigMap's parameters are validated as a spec (the operator refuses these with
  // SpecValid=False first): the pod downloads and submits nothing.
  for (const std::string list : {"inputs:a/x.txt,other:b/x.txt", "inputs:dir/", "inputs:dir/.."}) {
    Harness h;
    h.backend.limit = 1000;
    h.store.data["jobData.additionalData"] = list;
    h.store.data["s3.endpoint"] =
        "127.0.0.1:1";  // nothing listens: a download would be retried, not refused
    h.store.data["s3.secret"] = "s3";
    h.backend.submits = {std::string("1")};
    CHECK(h.run() == 1);
    CHECK(h.backend.submitCalls == 0);
    CHECK(h.store.data.count("id") == 0);
  }
}

TEST_CASE("bridge-pod runner: an adopted job is not staged again") {
  Harness h;
  h.backend.limit = 1000;
  h.store.data["jobData.additionalData"] = "inputs:a.txt";
  h.store.data["s3.endpoint"] = "127.0.0.1:1";  // a download attempt would hang in retries
  h.store.data["s3.secret"] = "s3";
  h.backend.tagged = {std::optional<std::string>{"77"}};
  h.backend.queries = {state(JobStatus::kDone)};
  CHECK(h.run() == 0);
  CHECK(h.backend.submitCalls == 0);
  CHECK(h.store.data["id"] == "77");
}

TEST_CASE(
    "lsf: additionaldata files travel as file parameters and parts and unusable names are "
    "refused") {
  JobContext ctx;
  ctx.uid = "u-4";
  ctx.params.scriptLocation = "inline";
  ctx.script = "cat in.txt\n";
  ctx.additionalFiles = {{"in.txt", "line\r\n--BND\r\n"},
                         {"data & more.bin", std::string("\0\xff", 2)}};
  CHECK(buildLsfSubmit(ctx, "BND").error().code == "conflict");  // a file holds the delimiter
  auto req = buildLsfSubmit(ctx, "BND2");
  REQUIRE(req.ok());
  auto parts = parseMultipart(req->body, "BND2");
  REQUIRE(parts.ok());
  REQUIRE(parts->size() == 5);
  CHECK((*parts)[3].header("Content-ID") == "<in.txt>");
  CHECK((*parts)[3].body == "line\r\n--BND\r\n");
  CHECK((*parts)[4].header("Content-ID") == "<data & more.bin>");
  CHECK((*parts)[4].body == std::string("\0\xff", 2));
  const std::string data = (*parts)[1].body;
  CHECK(data.find("<id>ADDITIONAL_FILE_1</id><value>in.txt,upload</value><type>file</type>") !=
        std::string::npos);
  CHECK(
      data.find(
          "<id>ADDITIONAL_FILE_2</id><value>data &amp; more.bin,upload</value><type>file</type>") !=
      std::string::npos);
  for (const char* bad : {"a,b", "q\"", "<x>", "bridge-script.sh"}) {
    JobContext b = ctx;
    b.additionalFiles = {{bad, "x"}};
    CHECK(buildLsfSubmit(b, "BND").error().code == "invalid");
  }
  JobContext big = ctx;
  big.additionalFiles = {{"big", std::string(kLsfStagingLimit + 1, 'x')}};
  CHECK(buildLsfSubmit(big, "BND").error().message.find("more than LSF stages") !=
        std::string::npos);
}

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs a batch script as slurmd would (its own interpreter line, in the working directory,
// SLURM_JOB_ID set); the exit code.
int runBatch(const kc::testing::TempDir& dir, const std::string& script) {
  dir.write("work/batch", script);
  const std::string cmd =
      "cd '" + dir.file("work") + "' && chmod 700 batch && SLURM_JOB_ID=31 ./batch >out 2>err";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

}  // namespace

TEST_CASE(
    "slurm: the batch script stages additionaldata by base64 heredocs and runs the script "
    "unchanged") {
  JobContext ctx;
  ctx.params.scriptLocation = "inline";
  ctx.script =
      "#!/usr/bin/env python3\nimport sys\nprint(open('in put.txt').read(), end='')\n"
      "print(len(open(\"it's.bin\", 'rb').read()))\nsys.exit(4)\n";
  ctx.additionalFiles = {{"in put.txt", "BRIDGE_STAGED_EOF\nline 2\n"},
                         {"it's.bin", std::string(1000, '\0')}};
  JobContext plain = ctx;
  plain.additionalFiles.clear();
  CHECK(slurmBatchScript(plain).value() == ctx.script);  // nothing to stage: the script as it is
  auto script = slurmBatchScript(ctx);
  REQUIRE(script.ok());
  CHECK(script->rfind("#!/bin/sh\n", 0) == 0);
  kc::testing::TempDir dir;
  CHECK(runBatch(dir, *script) == 4);  // the user's exit code, through exec
  CHECK(slurp(dir.file("work/out")) == "BRIDGE_STAGED_EOF\nline 2\n1000\n");
  CHECK(slurp(dir.file("work/in put.txt")) == "BRIDGE_STAGED_EOF\nline 2\n");
  CHECK(slurp(dir.file("work/it's.bin")) == std::string(1000, '\0'));
  CHECK(slurp(dir.file("work/.bridge-script.31")) == ctx.script);

  JobContext remote = ctx;
  remote.params.scriptLocation = "remote";
  remote.script = dir.write("remote dir/it's run.sh", "#!/bin/sh\ncat 'in put.txt' > copy.txt\n");
  std::filesystem::permissions(remote.script, std::filesystem::perms::owner_all);
  auto wrapped = slurmBatchScript(remote);
  REQUIRE(wrapped.ok());
  kc::testing::TempDir dir2;
  CHECK(runBatch(dir2, *wrapped) == 0);
  CHECK(slurp(dir2.file("work/copy.txt")) == "BRIDGE_STAGED_EOF\nline 2\n");
  CHECK_FALSE(std::filesystem::exists(dir2.file("work/.bridge-script.31")));

  // a file that cannot be written ends the job before the script runs
  kc::testing::TempDir dir3;
  std::filesystem::create_directories(dir3.file("work/in put.txt"));
  CHECK(runBatch(dir3, *script) == 1);
  CHECK(slurp(dir3.file("work/err")).find("bridge: staging in put.txt failed") !=
        std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir3.file("work/.bridge-script.31")));

  JobContext big = ctx;
  big.additionalFiles = {{"a", std::string(kSlurmStagingLimit, 'x')}, {"b", "y"}};
  CHECK(slurmBatchScript(big).error().message.find("more than Slurm stages") != std::string::npos);
  JobContext slash = ctx;
  slash.additionalFiles = {{"d/a", "x"}};
  CHECK_FALSE(slurmBatchScript(slash).ok());
}

TEST_CASE("lsf: ws/jobhistory replies read robustly (wrapped bhist text, several jobs, not XML)") {
  const auto wrapDoc = [](const std::string& histories) {
    return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<jobHistory>" + histories + "</jobHistory>";
  };
  const auto hist = [](const std::string& content) {
    return "<history><content>" + content +
           "</content><timeSummary><timeOfCalculation>Tue Nov 24 10:00:09"
           "</timeOfCalculation></timeSummary></history>";
  };
  // bhist wraps at 80 columns even inside words; continuation lines are indented
  const std::string done =
      "Job &lt;12&gt;, User &lt;u&gt;, Project &lt;default&gt;, Command &lt;sleep 1&gt;\n"
      "Tue Nov 24 10:00:00: Submitted from host &lt;h&gt;;\n"
      "Tue Nov 24 10:00:05: Done successfu\n                     lly. The CPU time used is 0.1 "
      "s;\n";
  const std::string failed =
      "Job &lt;13&gt;, User &lt;u&gt;\nTue Nov 24 10:00:05: Exited with exit c\n"
      "                     ode 42. The CPU time used is 0.1 seconds;\n"
      "Tue Nov 24 10:00:05: Completed &lt;exit&gt;.\n";
  const std::string killed =
      "Job &lt;14&gt;, User &lt;u&gt;\nTue Nov 24 10:00:03: Signal &lt;KILL&gt; requested by "
      "user or administrator &lt;adm&gt;;\nTue Nov 24 10:00:03: Exited by LSF signal TERM_OWNER;\n"
      "Tue Nov 24 10:00:03: Completed &lt;exit&gt;; TERM_OWNER: job killed by owner.\n";
  auto d = lsfHistoryJob("12", 200, wrapDoc(hist(failed) + hist(done)));
  REQUIRE(d.ok());
  REQUIRE(d->has_value());
  CHECK((*d)->status == JobStatus::kDone);
  auto f = lsfHistoryJob("13", 200, wrapDoc(hist(failed) + hist(done)));
  REQUIRE(f.ok());
  CHECK((*f)->status == JobStatus::kFailed);
  CHECK((*f)->message == "LSF job history: Completed <exit>, exited with code 42");
  auto k = lsfHistoryJob("14", 200, wrapDoc(hist(killed)));
  CHECK((*k)->status == JobStatus::kKilled);
  CHECK_FALSE(
      lsfHistoryJob("1", 200, wrapDoc(hist(done)))->has_value());  // "Job <12>" is not "Job <1>"
  CHECK_FALSE(lsfHistoryJob("12", 200, wrapDoc(""))->has_value());
  CHECK_FALSE(lsfHistoryJob("12", 404, "<error/>")->has_value());
  CHECK_FALSE(
      lsfHistoryJob("12", 200, wrapDoc(hist("Job &lt;12&gt;\nTue Nov 24 10:00:00: Submitted;")))
          ->has_value());
  CHECK(
      lsfHistoryJob("12", 200, wrapDoc(hist("no job line; Done successfully.")))->value().status ==
      JobStatus::kDone);
  CHECK(lsfHistoryJob("12", 200, "{\"job\": []}").error().code == "protocol");
  CHECK(lsfHistoryJob("12", 200, "<jobHistory><history>").error().code == "protocol");
  CHECK(lsfHistoryJob("12", 200, "<jobs/>").error().code == "protocol");
  CHECK(lsfHistoryJob("12", 500, "oops").error().code == "server_error");
}

TEST_CASE(
    "ray: the additionaldata package is a zip python's zipfile unpacks, the same bytes for the "
    "same files") {
  const std::vector<StagedFile> files{
      {"a.txt", "alpha\n"}, {"it's b.bin", std::string("\0\xffPK", 4)}, {"empty", ""}};
  auto zip = rayZipPackage(files);
  REQUIRE(zip.ok());
  CHECK(rayZipPackage(files).value() == *zip);  // content-addressed: one name for one content
  const std::string uri = rayPackageUri(*zip);
  CHECK(std::regex_match(uri, std::regex("gcs://_ray_pkg_[0-9a-f]{32}\\.zip")));
  CHECK(rayPackageUri(rayZipPackage({{"a.txt", "alpha!\n"}}).value()) != uri);
  kc::testing::TempDir dir;
  dir.write("pkg.zip", *zip);
  const std::string cmd =
      "/usr/bin/python3 -m zipfile -e '" + dir.file("pkg.zip") + "' '" + dir.file("out") + "'";
  REQUIRE(std::system(cmd.c_str()) == 0);
  for (const StagedFile& f : files) {
    CHECK(slurp(dir.file("out/" + f.name)) == f.bytes);
  }

  JobContext ctx;
  ctx.uid = "u-1";
  ctx.params.scriptLocation = "remote";
  ctx.script = "python main.py";
  auto body = buildRaySubmitBody(ctx, uri);
  REQUIRE(body.ok());
  CHECK((*body)["runtime_env"]["working_dir"] == uri);
  CHECK_FALSE(buildRaySubmitBody(ctx).value().contains("runtime_env"));
}
