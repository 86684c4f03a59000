// An expired Slurm token (issue 24 section 5): the expiry a JWT carries, read by jwtExpiry
// (valid, expired, malformed, not a JWT, huge); the Slurm backend's alert from the token in the
// Secret (fake clock); and the runner's answer to it against a scripted backend and an
// in-memory ConfigMap (simulated time): status.message, one Warning Event, the slow retry, the
// renewed token picked up.

#include <catch2/catch.hpp>
#include <deque>

#include "services/bridge-pod/credentials.hpp"
#include "services/bridge-pod/runner.hpp"
#include "services/bridge-pod/slurm_backend.hpp"
#include "tests/services/bridge-pod/backend_proxy.hpp"
#include "tests/support/fakes/fake_clock.hpp"
#include "tests/support/temp_dir.hpp"

using namespace kc::bridge;
using namespace kc::bridge::pod;
using namespace std::chrono_literals;

namespace {

// A token with this payload text (header and signature as Slurm's).
std::string tokenWithPayload(const std::string& payload) {
  return base64Url(R"({"alg":"HS256","typ":"JWT"})") + "." + base64Url(payload) + ".c2ln";
}

}  // namespace

TEST_CASE("slurm token: jwtExpiry reads exp from a JWT's payload") {
  using Row = std::tuple<std::string, std::string, std::int64_t>;
  auto [what, token, exp] = GENERATE(table<std::string, std::string, std::int64_t>({
      Row{"a token minted as Slurm's scontrol token does", mintSlurmJwt("k", "root", 1000, 1600),
          1600},
      Row{"an expired one reads the same way", mintSlurmJwt("k", "root", 10, 20), 20},
      Row{"claims in another order, other claims",
          tokenWithPayload(R"({"sun":"a","exp":7,"x":[]})"), 7},
      Row{"a fractional NumericDate is cut", tokenWithPayload(R"({"exp":1700000000.9})"),
          1'700'000'000},
      Row{"the last second of 9999", tokenWithPayload(R"({"exp":253402300799})"), 253'402'300'799},
      Row{"base64url's - and _ in the payload",
          tokenWithPayload(R"({"exp":5,"sun":"\u00ff\u00fe>>>???"})"), 5},
  }));
  CAPTURE(what, token);
  auto got = jwtExpiry(token);
  INFO((got.ok() ? std::string() : got.error().message));
  REQUIRE(got.ok());
  CHECK(got->time_since_epoch().count() == exp);
}

TEST_CASE("slurm token: jwtExpiry refuses what is not a JWT with an exp, without quoting it") {
  const std::string huge = "eyJ" + std::string(kMaxJwtBytes, 'A') + ".eyJleHAiOjV9.c2ln";
  const std::string whole = tokenWithPayload(R"({"exp":5})");
  const std::string unsigned_ = whole.substr(0, whole.rfind('.') + 1);
  using Row = std::tuple<std::string, std::string, std::string>;
  auto [what, token, why] = GENERATE_COPY(table<std::string, std::string, std::string>({
      Row{"empty", "", "not three dot-separated parts"},
      Row{"an opaque token, not a JWT", "s3cr3t-0paque-t0ken", "not three dot-separated parts"},
      Row{"two parts", "eyJhIjoxfQ.eyJleHAiOjV9", "not three dot-separated parts"},
      Row{"four parts", tokenWithPayload(R"({"exp":5})") + ".x", "not three dot-separated parts"},
      Row{"an empty signature", unsigned_, "an empty part"},
      Row{"an empty payload", "eyJhIjoxfQ..c2ln", "an empty part"},
      Row{"standard base64's '/' and '+'", "eyJhIjoxfQ.eyJleHAiOjV9+/.c2ln", "not base64url"},
      Row{"padding", "eyJhIjoxfQ.eyJleHAiOjV9fQ==.c2ln", "not base64url"},
      Row{"a payload that is not base64 at all", "eyJhIjoxfQ.!!!!.c2ln", "not base64url"},
      Row{"a payload one character too long", "eyJhIjoxfQ.eyJleHAiOjV9A.c2ln", "not base64url"},
      Row{"a payload that is not JSON", tokenWithPayload("exp=5"), "not a JSON object"},
      Row{"a JSON array", tokenWithPayload("[5]"), "not a JSON object"},
      Row{"JSON with bytes after it", tokenWithPayload(R"({"exp":5}x)"), "not a JSON object"},
      Row{"no exp", tokenWithPayload(R"({"iat":5,"sun":"a"})"), "has no exp"},
      Row{"exp as a string", tokenWithPayload(R"({"exp":"1700000000"})"), "not a number"},
      Row{"exp as a boolean", tokenWithPayload(R"({"exp":true})"), "not a number"},
      Row{"exp null", tokenWithPayload(R"({"exp":null})"), "not a number"},
      Row{"exp before 1970", tokenWithPayload(R"({"exp":-1})"), "outside 1970 .. 9999"},
      Row{"exp after 9999", tokenWithPayload(R"({"exp":253402300800})"), "outside 1970 .. 9999"},
      Row{"exp beyond int64", tokenWithPayload(R"({"exp":1e300})"), "outside 1970 .. 9999"},
      Row{"exp beyond uint64", tokenWithPayload(R"({"exp":99999999999999999999999})"),
          "outside 1970 .. 9999"},
      Row{"huge", huge, "more than 16384"},
  }));
  CAPTURE(what);
  auto got = jwtExpiry(token);
  REQUIRE_FALSE(got.ok());
  CHECK(got.error().code == "invalid");
  CHECK_THAT(got.error().message,
             Catch::Matchers::StartsWith("the token is not a JWT with a readable expiry: "));
  CHECK_THAT(got.error().message, Catch::Matchers::Contains(why));
  if (token.size() > 4) {
    CHECK_THAT(got.error().message, !Catch::Matchers::Contains(token.substr(token.size() - 4)));
  }
}

namespace {

// A Secret directory with `username` and the given token, and a Slurm backend reading it.
struct SlurmSecret {
  kc::testing::TempDir dir;
  kc::testing::FakeClock clock;  // 2026-01-01T00:00:00Z
  std::unique_ptr<SlurmBackend> backend;

  explicit SlurmSecret(const std::string& token) {
    dir.write("username", "root\n");
    dir.write("token", token + "\n");
    SlurmOptions o;
    o.resourceUrl = "http://127.0.0.1:9/slurm/v0.0.38/";  // never reached
    o.credentialsDir = dir.path().string();
    o.clock = &clock;
    auto b = SlurmBackend::create(o);
    REQUIRE(b.ok());
    backend = std::move(b).value();
  }
};

}  // namespace

TEST_CASE("slurm token: the backend tells an expired or expiring token from the Secret") {
  const std::string key = "k";
  kc::testing::FakeClock start;
  const std::int64_t t0 =
      std::chrono::duration_cast<std::chrono::seconds>(start.wallNow().time_since_epoch()).count();

  SECTION("expired: the time it expired, never the token") {
    const std::string token = mintSlurmJwt(key, "root", t0 - 3600, t0 - 60);
    SlurmSecret s(token);
    auto alert = s.backend->credentialAlert();
    REQUIRE(alert.has_value());
    CHECK(alert->expired);
    CHECK(alert->reason == "SlurmTokenExpired");
    CHECK(alert->message == "Slurm token expired at 2025-12-31T23:59:00Z");
    CHECK(alert->message.find(token.substr(token.rfind('.'))) == std::string::npos);
  }
  SECTION("expiring within five minutes: a warning, and expired once its exp has passed") {
    SlurmSecret s(mintSlurmJwt(key, "root", t0, t0 + 600));
    CHECK_FALSE(s.backend->credentialAlert().has_value());
    s.clock.advance(299s);
    CHECK_FALSE(s.backend->credentialAlert().has_value());
    s.clock.advance(1s);
    auto soon = s.backend->credentialAlert();
    REQUIRE(soon.has_value());
    CHECK_FALSE(soon->expired);
    CHECK(soon->reason == "SlurmTokenExpiring");
    CHECK(soon->message == "Slurm token expires at 2026-01-01T00:10:00Z");
    s.clock.advance(300s);
    auto gone = s.backend->credentialAlert();
    REQUIRE(gone.has_value());
    CHECK(gone->expired);
    CHECK(gone->message == "Slurm token expired at 2026-01-01T00:10:00Z");
  }
  SECTION("the Secret is re-read: a renewed token ends the alert") {
    SlurmSecret s(mintSlurmJwt(key, "root", t0 - 3600, t0 - 60));
    REQUIRE(s.backend->credentialAlert().has_value());
    s.dir.write("token", mintSlurmJwt(key, "root", t0, t0 + 86'400));
    CHECK_FALSE(s.backend->credentialAlert().has_value());
  }
  SECTION("nothing is known of a token that is not a JWT, or a malformed or huge one") {
    const std::string token = GENERATE(std::string("opaque-token"), std::string("a.b.c"),
                                       tokenWithPayload(R"({"iat":1})"),
                                       // expired, but too long to be a Slurm token: not read
                                       mintSlurmJwt("k", std::string(kMaxJwtBytes, 'u'), 0, 60));
    SlurmSecret s(token);
    CHECK_FALSE(s.backend->credentialAlert().has_value());
  }
  SECTION("minted tokens (jwtkey) are renewed before they expire: no alert") {
    SlurmSecret s(mintSlurmJwt(key, "root", t0 - 3600, t0 - 60));
    s.dir.write("jwtkey", "raw-key");
    CHECK_FALSE(s.backend->credentialAlert().has_value());
  }
}

namespace {

class MemoryStore final : public JobStore {
 public:
  Data data;
  std::vector<Data> writes;
  kc::Result<Data> read() override { return data; }
  kc::Status write(const Data& keys) override {
    writes.push_back(keys);
    for (const auto& [k, v] : keys) {
      data[k] = v;
    }
    return kc::okStatus();
  }
};

struct Told {
  std::string name, uid, reason, message;
};

class RecordedEvents final : public JobEvents {
 public:
  std::vector<Told> told;
  void warning(const JobContext& job, const std::string& reason,
               const std::string& message) override {
    told.push_back({job.jobName, job.uid, reason, message});
  }
};

// A backend whose calls fail with `failure` while its token is expired (as slurmrestd 22.05's
// do: HTTP 500 whatever the call); the Secret is renewed while the runner waits after the
// `renewAfter`-th failure. credentialAlert() says `expiredAlert` while expired (when the
// token's expiry is known at all) and `whileValid` otherwise.
class ExpiringBackend final : public Backend {
 public:
  kc::Error failure = kc::makeError("server_error", "HTTP 500 (Unable to find JobId=7)");
  CredentialAlert expiredAlert{true, "SlurmTokenExpired",
                               "Slurm token expired at 2025-12-31T23:59:00Z"};
  bool expiryKnown = true;  // false: a token that is not a JWT
  std::optional<CredentialAlert> whileValid;
  bool expired = true;
  int renewAfter = 3;
  int expireAtQuery = 0;  // 1-based: the token expires just before that query
  int failures = 0, submits = 0, queries = 0;
  std::deque<JobStatus> states{JobStatus::kRunning, JobStatus::kDone};

  const char* name() const override { return "expiring"; }
  std::uint64_t stagingLimit() const override { return 0; }
  kc::Status prepare() override { return call<kc::Status>(kc::okStatus()); }
  kc::Result<std::optional<std::string>> findTagged(const JobContext&) override {
    return call<kc::Result<std::optional<std::string>>>(std::optional<std::string>{});
  }
  kc::Result<std::string> submit(const JobContext&) override {
    ++submits;
    return call<kc::Result<std::string>>(std::string("7"));
  }
  kc::Result<Query> query(const std::string&) override {
    if (++queries == expireAtQuery) {
      expired = true;
      failures = 0;
    }
    auto r = call<kc::Result<Query>>(Query{});
    if (r.ok()) {
      r->job.status = states.front();
      r->job.message = "Slurm " + std::string(jobStatusName(states.front()));
      if (states.size() > 1) {
        states.pop_front();
      }
    }
    return r;
  }
  kc::Result<bool> cancel(const std::string&) override { return true; }
  kc::Result<std::string> fetchOutput(const JobContext&, const std::string&,
                                      const std::string&) override {
    return kc::makeError("not_found", "no output");
  }
  std::optional<CredentialAlert> credentialAlert() override {
    if (expired) {
      return expiryKnown ? std::optional(expiredAlert) : std::nullopt;
    }
    return whileValid;
  }

 private:
  template <typename R>
  R call(R ok) {
    if (renewed_) {
      expired = false;
      renewed_ = false;
    }
    if (expired) {
      renewed_ = ++failures == renewAfter;
      return failure;
    }
    return ok;
  }
  bool renewed_ = false;
};

using Proxy = kc::bridge::pod::testing::BackendProxy;

struct Harness {
  kc::testing::FakeClock clock;
  MemoryStore store;
  ExpiringBackend backend;
  RecordedEvents events;
  RunnerOptions options;
  Harness() {
    clock.setAutoAdvance(true);
    options.clock = &clock;
    options.events = &events;
    options.credentialRetry = 120s;
    options.backoff = {1000ms, 60'000ms, 2.0, 0.0};
    JobParameters p;
    p.image = "img";
    p.resourceUrl = "http://x/";
    p.resourceSecret = "slurm-jwt";
    p.jobScript = "#!/bin/sh\n";
    p.scriptLocation = "inline";
    p.updateIntervalSec = 5;
    store.data = parameterData(p);
    store.data[cmkey::kJobName] = "j";
    store.data[cmkey::kJobNamespace] = "ns";
    store.data[cmkey::kJobUid] = "u-1";
    store.data[cmkey::kKill] = "false";
  }
  int run() {
    BackendFactory f = [&](const JobParameters&) -> kc::Result<std::unique_ptr<Backend>> {
      return std::unique_ptr<Backend>(std::make_unique<Proxy>(backend));
    };
    return runBridgePod(store, f, options);
  }
  // How many writes set status.message to `text`.
  int messagesWritten(const std::string& text) const {
    int n = 0;
    for (const Data& w : store.writes) {
      auto it = w.find(cmkey::kMessage);
      n += it != w.end() && it->second == text ? 1 : 0;
    }
    return n;
  }
  int messagesMentioning(const std::string& text) const {
    int n = 0;
    for (const Data& w : store.writes) {
      auto it = w.find(cmkey::kMessage);
      n += it != w.end() && it->second.find(text) != std::string::npos ? 1 : 0;
    }
    return n;
  }
};

const std::string kExpiredStatus =
    "Slurm token expired at 2025-12-31T23:59:00Z; renew the credential in Secret slurm-jwt "
    "(retrying every 120 s)";

}  // namespace

TEST_CASE(
    "slurm token: expired at start, the pod says so once, retries slowly and submits once "
    "renewed") {
  Harness h;
  CHECK(h.run() == 0);
  CHECK(h.backend.submits == 1);  // nothing submitted with the expired token
  CHECK(h.store.data[cmkey::kStatus] == "DONE");
  CHECK(h.messagesWritten(kExpiredStatus) == 1);
  REQUIRE(h.events.told.size() == 1);
  CHECK(h.events.told[0].reason == "SlurmTokenExpired");
  CHECK(h.events.told[0].message == "Slurm token expired at 2025-12-31T23:59:00Z");
  CHECK(h.events.told[0].name == "j");
  CHECK(h.events.told[0].uid == "u-1");
  // each of the three failed calls is followed by the slow retry, not by the backoff
  const auto waits = h.clock.requestedWaits();
  REQUIRE(waits.size() >= 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(waits[i] == 120s);
  }
}

TEST_CASE(
    "slurm token: expired while polling (even a permanent-looking refusal), status.message says "
    "so, then the job's own message comes back") {
  Harness h;
  h.store.data[cmkey::kRemoteId] = "7";
  h.store.data[cmkey::kStatus] = "RUNNING";
  h.backend.failure = kc::makeError("forbidden", "HTTP 500 error 2002");
  h.backend.expired = false;
  h.backend.expireAtQuery = 2;
  h.backend.renewAfter = 2;
  h.backend.states = {JobStatus::kRunning, JobStatus::kRunning, JobStatus::kDone};
  CHECK(h.run() == 0);
  CHECK(h.store.data[cmkey::kStatus] == "DONE");
  CHECK(h.backend.queries == 5);  // one good, two refused, two good
  CHECK(h.messagesWritten(kExpiredStatus) == 1);
  CHECK(h.messagesWritten("Slurm RUNNING") == 1);  // rewritten once the token worked again
  REQUIRE(h.events.told.size() == 1);
  CHECK(h.events.told[0].reason == "SlurmTokenExpired");
  const auto waits = h.clock.requestedWaits();
  REQUIRE(waits.size() >= 3);
  CHECK(waits[0] == 5s);  // the poll interval, then the slow retry twice
  CHECK(waits[1] == 120s);
  CHECK(waits[2] == 120s);
}

TEST_CASE(
    "slurm token: a failure while nothing is known of the token backs off as before, and one "
    "that expires soon is warned of once") {
  Harness h;
  h.backend.renewAfter = 2;
  h.backend.expiryKnown = false;  // not a JWT: today's handling
  CHECK(h.run() == 0);
  CHECK(h.events.told.empty());
  const auto waits = h.clock.requestedWaits();
  REQUIRE(waits.size() >= 2);
  CHECK(waits[0] == 1000ms);
  CHECK(waits[1] == 2000ms);
  CHECK(h.messagesMentioning("Slurm token") == 0);

  Harness soon;
  soon.backend.expired = false;
  soon.backend.whileValid =
      CredentialAlert{false, "SlurmTokenExpiring", "Slurm token expires at 2026-01-01T00:04:00Z"};
  CHECK(soon.run() == 0);
  REQUIRE(soon.events.told.size() == 1);  // not once per call
  CHECK(soon.events.told[0].reason == "SlurmTokenExpiring");
  CHECK(soon.events.told[0].message == "Slurm token expires at 2026-01-01T00:04:00Z");
  CHECK(soon.messagesMentioning("Slurm token") == 0);  // the status stays the job's
}
