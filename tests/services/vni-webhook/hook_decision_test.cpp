#include "services/vni-webhook/hook_decision.hpp"

#include <catch2/catch.hpp>
#include <string>

#include "tests/services/vni-webhook/hook_request_builder.hpp"

using kc::vni::HookKind;
using kc::vni::HookVersion;
using kc::vni::StoreOp;
using kc::vni::StoreOutcome;
using kc::vni::testing::makeParent;
using nlohmann::json;

namespace {

constexpr std::int64_t kNow = 1'795'000'000;  // 2026-11-18, Unix seconds

kc::vni::HookRequest parse(HookKind kind, const std::string& body) {
  auto r = kc::vni::parseHookRequest(kind, body);
  REQUIRE(r.ok());
  return std::move(r).value();
}

}  // namespace

TEST_CASE("Hook requests of both versions parse to the same observed state", "[vni]") {
  const std::string version = GENERATE("v1", "v2");
  CAPTURE(version);
  auto b = makeParent("Job", "train")
               .ns("ml")
               .optIn()
               .hookVersion(version)
               .vniObserved(2048)
               .pod("train-abc", "Running");
  auto r = parse(HookKind::kSync, b.body(HookKind::kSync));
  CHECK(r.version == (version == "v1" ? HookVersion::kV1 : HookVersion::kV2));
  CHECK(r.controllerName == "vni-controller");
  CHECK(r.parent.kind == "Job");
  CHECK(r.parent.ns == "ml");
  CHECK(r.parent.uid == b.uidValue());
  REQUIRE(r.vnis.size() == 1);
  CHECK(r.vnis[0].name == "vni-" + b.uidValue());
  CHECK(r.vnis[0].vni == kc::alloc::Vni{2048});
  REQUIRE(r.pods.size() == 1);
  CHECK(r.pods[0].phase == "Running");
}

TEST_CASE("Malformed hook requests are rejected with a reason", "[vni]") {
  auto [body, fragment] = GENERATE(table<std::string, std::string>({
      {"{not json", "not valid JSON"},
      {"[1,2]", "JSON object"},
      {R"({"controller":{}})", "no \"object\""},
      {R"({"object":{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"a","namespace":"n"}}})",
       "metadata.uid"},
      {R"({"object":{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"a","namespace":"n","uid":"u"}},"attachments":[]})",
       "attachments must be an object"},
      {R"({"object":{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"a","namespace":"n","uid":"u"}},"finalizing":"yes"})",
       "finalizing must be a boolean"},
      {R"({"controller":{"spec":{"hooks":{"sync":{"version":"v3"}}}},"object":{}})",
       "unknown hook version"},
      {R"({"object":{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"a","namespace":"n","uid":"u","deletionTimestamp":"yesterday"}}})",
       "RFC 3339"},
  }));
  CAPTURE(body);
  auto r = kc::vni::parseHookRequest(HookKind::kSync, body);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == "invalid");
  CHECK_THAT(r.error().message, Catch::Contains(fragment));
}

TEST_CASE("deletionTimestamp is read as RFC 3339 with fractions and offsets, floored to seconds",
          "[vni]") {
  auto [stamp, secs] = GENERATE(table<std::string, std::int64_t>({
      {"2026-11-22T21:00:00Z", 1795381200},
      {"2026-11-22T21:00:00.999999Z", 1795381200},
      {"2026-11-22T22:00:00+01:00", 1795381200},
      {"1969-12-31T23:59:59.5Z", -1},
  }));
  CAPTURE(stamp);
  auto r = kc::vni::parseHookRequest(
      HookKind::kFinalize, makeParent("Job", "j").deleting(stamp).body(HookKind::kFinalize));
  REQUIRE(r.ok());
  CHECK(r->parent.deletionTimestampSec == secs);
}

TEST_CASE("Sync plans: opt-in acquires, no opt-in only looks up, RS defers to its Deployment",
          "[vni]") {
  kc::vni::DecisionConfig config;
  SECTION("opted-in Job acquires, adopting its observed value") {
    auto r = parse(HookKind::kSync,
                   makeParent("Job", "j").optIn().vniObserved(3000).body(HookKind::kSync));
    auto plan = kc::vni::planHook(r, config, kNow);
    CHECK(plan.op.kind == StoreOp::Kind::kAcquire);
    CHECK(plan.op.adopt == kc::alloc::Vni{3000});
    CHECK_FALSE(plan.op.deferTo.has_value());
  }
  SECTION("annotation value yes works, false does not") {
    auto yes = parse(HookKind::kSync, makeParent("Job", "j").optIn("Yes").body(HookKind::kSync));
    CHECK(kc::vni::planHook(yes, config, kNow).op.kind == StoreOp::Kind::kAcquire);
    auto no = parse(HookKind::kSync, makeParent("Job", "j").optIn("false").body(HookKind::kSync));
    CHECK(kc::vni::planHook(no, config, kNow).op.kind == StoreOp::Kind::kLookup);
  }
  SECTION("ReplicaSet controlled by a Deployment defers to it") {
    auto r = parse(HookKind::kSync, makeParent("ReplicaSet", "web-7d9")
                                        .optIn()
                                        .ownedByDeployment("web", "dep-uid")
                                        .body(HookKind::kSync));
    auto plan = kc::vni::planHook(r, config, kNow);
    REQUIRE(plan.op.deferTo.has_value());
    CHECK(plan.op.deferTo->uid == "dep-uid");
  }
}

TEST_CASE("Finalize plans wait for remaining pods, bounded after deletion", "[vni]") {
  kc::vni::DecisionConfig config;
  config.podWaitTimeoutSec = 300;
  struct Case {
    const char* why;
    std::vector<std::pair<std::string, bool>> pods;  // phase, terminating
    std::optional<std::string> deletion;
    std::int64_t now;
    StoreOp::Kind want;
    bool timedOut;
  };
  const auto c = GENERATE(values<Case>({
      {"no pods: release", {}, "2026-11-22T21:00:00Z", 1795381200, StoreOp::Kind::kRelease, false},
      {"finished pods: release",
       {{"Succeeded", false}, {"Failed", false}},
       "2026-11-22T21:00:00Z",
       1795381200,
       StoreOp::Kind::kRelease,
       false},
      {"running pod: wait",
       {{"Running", false}},
       "2026-11-22T21:00:00Z",
       1795381200 + 299,
       StoreOp::Kind::kLookup,
       false},
      {"terminating finished pod: wait",
       {{"Succeeded", true}},
       "2026-11-22T21:00:00Z",
       1795381200 + 10,
       StoreOp::Kind::kLookup,
       false},
      {"running pod past timeout: release",
       {{"Running", false}},
       "2026-11-22T21:00:00Z",
       1795381200 + 300,
       StoreOp::Kind::kRelease,
       true},
      {"annotation removed, pods run: hold forever",
       {{"Running", false}},
       std::nullopt,
       1795381200 + 1'000'000,
       StoreOp::Kind::kLookup,
       false},
  }));
  CAPTURE(c.why);
  auto b = makeParent("Job", "j").optIn();
  int i = 0;
  for (const auto& [phase, terminating] : c.pods) {
    b.pod("p" + std::to_string(i++), phase, terminating);
  }
  if (c.deletion) {
    b.deleting(*c.deletion);
  }
  auto plan =
      kc::vni::planHook(parse(HookKind::kFinalize, b.body(HookKind::kFinalize)), config, c.now);
  CHECK(plan.op.kind == c.want);
  CHECK(plan.podWaitTimedOut == c.timedOut);
}

TEST_CASE("Sync responses carry the VNI object and label, and only known fields", "[vni]") {
  const std::string version = GENERATE("v1", "v2");
  kc::vni::DecisionConfig config;
  auto b = makeParent("Job", "train").ns("ml").uid("u-1").optIn().hookVersion(version);
  auto request = parse(HookKind::kSync, b.body(HookKind::kSync));
  auto plan = kc::vni::planHook(request, config, kNow);
  StoreOutcome out;
  out.vni = 1024;
  const json got = kc::vni::renderHookResponse(request, plan, out, config);
  const json want = json::parse(R"({
    "labels": {"vni.kubecomp.io/vni": "1024"},
    "annotations": {},
    "status": null,
    "attachments": [{"apiVersion": "kubecomp.io/v1", "kind": "VNI",
                     "metadata": {"name": "vni-u-1", "namespace": "ml",
                                  "labels": {"vni.kubecomp.io/owner-uid": "u-1"}},
                     "spec": {"vni": 1024}}],
    "resyncAfterSeconds": 0.0
  })");
  CHECK(got == want);
}

TEST_CASE("Finalize responses: finalized only once the VNI object is gone", "[vni]") {
  kc::vni::DecisionConfig config;
  StoreOutcome released;
  released.vni = 1024;
  released.released = true;
  auto observed =
      parse(HookKind::kFinalize,
            makeParent("Job", "j").uid("u").optIn().vniObserved(1024).body(HookKind::kFinalize));
  auto plan = kc::vni::planHook(observed, config, kNow);
  json first = kc::vni::renderHookResponse(observed, plan, released, config);
  CHECK(first["finalized"] == false);
  CHECK(first["attachments"] == json::array());
  CHECK(first["labels"] == json{{"vni.kubecomp.io/vni", nullptr}});
  CHECK(first["resyncAfterSeconds"] == 1.0);

  auto gone =
      parse(HookKind::kFinalize, makeParent("Job", "j").uid("u").optIn().body(HookKind::kFinalize));
  json second = kc::vni::renderHookResponse(gone, kc::vni::planHook(gone, config, kNow),
                                            StoreOutcome{}, config);
  CHECK(second["finalized"] == true);
  CHECK(second["attachments"] == json::array());
}

TEST_CASE("Sync with finalizing=true is a finalize (one URL for both hooks)", "[vni]") {
  auto r = parse(HookKind::kSync,
                 makeParent("Job", "j").optIn().finalizingFlag(true).body(HookKind::kSync));
  CHECK(r.kind == HookKind::kFinalize);
}

TEST_CASE("Customize relates the parent's pods", "[vni]") {
  auto job = parse(HookKind::kCustomize,
                   makeParent("Job", "j").uid("u-9").ns("ml").body(HookKind::kCustomize));
  CHECK(kc::vni::renderCustomizeResponse(job) == json::parse(R"({"relatedResources": [
      {"apiVersion": "v1", "resource": "pods", "namespace": "ml",
       "labelSelector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-9"}}}]})"));
  auto dep = parse(HookKind::kCustomize, makeParent("Deployment", "web")
                                             .ns("ml")
                                             .selector(json{{"matchLabels", {{"app", "web"}}}})
                                             .body(HookKind::kCustomize));
  CHECK(kc::vni::renderCustomizeResponse(dep)["relatedResources"][0]["labelSelector"] ==
        json{{"matchLabels", {{"app", "web"}}}});
  // A Job from a cluster older than 1.27: its generated selector uses controller-uid.
  auto oldJob =
      parse(HookKind::kCustomize, makeParent("Job", "j")
                                      .uid("u-9")
                                      .ns("ml")
                                      .selector(json{{"matchLabels", {{"controller-uid", "u-9"}}}})
                                      .body(HookKind::kCustomize));
  CHECK(kc::vni::renderCustomizeResponse(oldJob)["relatedResources"][0]["labelSelector"] ==
        json{{"matchLabels", {{"controller-uid", "u-9"}}}});
}
