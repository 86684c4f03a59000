// The pure decision of bridge-operator, table-driven: observed BridgeJob + children (built as
// Metacontroller sends them) -> desired children and status.

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>

#include "tests/services/bridge-operator/hook_request_builder.hpp"

using kc::bridge::DecisionConfig;
using kc::bridge::Desired;
using kc::bridge::HookKind;
using kc::bridge::parseHookRequest;
using kc::bridge::renderResponse;
using kc::bridge::testing::conditionStatus;
using kc::bridge::testing::findChild;
using kc::bridge::testing::podNames;
using kc::bridge::testing::RequestBuilder;
using kc::bridge::testing::run;
using kc::bridge::testing::startedConfigMap;
using kc::metacontroller::HookVersion;
using nlohmann::json;
using Strings = std::vector<std::string>;

namespace {

std::string env(const json& pod, const std::string& name) {
  for (const json& e : pod["spec"]["containers"][0]["env"]) {
    if (e.value("name", "") == name) {
      return e.value("value", "");
    }
  }
  return "<absent>";
}

const json* volume(const json& pod, const std::string& name) {
  for (const json& v : pod["spec"]["volumes"]) {
    if (v.value("name", "") == name) {
      return &v;
    }
  }
  return nullptr;
}

const json* mount(const json& pod, const std::string& path) {
  for (const json& m : pod["spec"]["containers"][0]["volumeMounts"]) {
    if (m.value("mountPath", "") == path) {
      return &m;
    }
  }
  return nullptr;
}

}  // namespace

TEST_CASE("a fresh BridgeJob gets its ConfigMap, one bridge pod and RBAC for that ConfigMap only",
          "[bridge]") {
  RequestBuilder b;
  Desired d = run(b);
  REQUIRE_FALSE(d.refusal);
  CHECK(d.children.size() == 5);

  const json* cm = findChild(d, "ConfigMap", "job1-bridge");
  REQUIRE(cm != nullptr);
  const json& data = (*cm)["data"];
  CHECK(data["resourceURL"] == "http://slurm-head:6820/slurm/v0.0.38/");
  CHECK(data["jobData.jobScript"] == "#!/bin/sh\necho \"hi\"\n");
  CHECK(data["jobData.scriptLocation"] == "inline");
  CHECK(data["updateInterval"] == "20");  // the CRD default
  CHECK(data["kill"] == "false");
  CHECK(data["bridgeJob.uid"] == b.uid);
  CHECK(data["s3upload.bucket"] == "results");
  CHECK_FALSE(data.contains("id"));  // pod-owned keys are never written by the operator
  CHECK_FALSE(data.contains("status.jobStatus"));
  CHECK((*cm)["metadata"]["namespace"] == "team");

  REQUIRE(podNames(d) == Strings{"job1-bridge-0"});
  const json* pod = findChild(d, "Pod", "job1-bridge-0");
  CHECK((*pod)["spec"]["restartPolicy"] == "Never");
  CHECK((*pod)["spec"]["serviceAccountName"] == "job1-bridge");
  CHECK((*pod)["spec"]["containers"][0]["image"] == "ghcr.io/kubecomp/bridge-pod-slurm:0.1");
  CHECK(env(*pod, "BRIDGE_CONFIGMAP") == "job1-bridge");
  CHECK(env(*pod, "BRIDGE_JOB_UID") == b.uid);
  CHECK(env(*pod, "BRIDGE_ATTEMPT") == "0");
  const json* creds = volume(*pod, "credentials");
  REQUIRE(creds != nullptr);
  CHECK((*creds)["secret"]["secretName"] == "slurm-jwt");
  const json* s3 = volume(*pod, "s3credentials");
  REQUIRE(s3 != nullptr);
  CHECK((*s3)["secret"]["secretName"] == "s3-creds");
  for (const char* path : {"/credentials", "/s3credentials"}) {
    CAPTURE(path);
    const json* m = mount(*pod, path);
    REQUIRE(m != nullptr);
    CHECK((*m)["readOnly"] == true);
  }
  // Credentials reach the pod as files only.
  for (const json& e : (*pod)["spec"]["containers"][0]["env"]) {
    CHECK_FALSE((e.contains("valueFrom") && e["valueFrom"].contains("secretKeyRef")));
  }

  const json* role = findChild(d, "Role", "job1-bridge");
  REQUIRE(role != nullptr);
  REQUIRE((*role)["rules"].size() == 2);
  CHECK((*role)["rules"][1] == json{{"apiGroups", json::array({""})},
                                    {"resources", json::array({"events"})},
                                    {"verbs", json::array({"create", "patch"})}});
  const json& rule = (*role)["rules"][0];
  CHECK(rule["resources"] == json::array({"configmaps"}));
  CHECK(rule["resourceNames"] == json::array({"job1-bridge"}));
  for (const json& verb : rule["verbs"]) {
    CHECK(std::set<std::string>{"get", "watch", "update", "patch"}.count(verb.get<std::string>()) ==
          1);
  }
  const json* binding = findChild(d, "RoleBinding", "job1-bridge");
  REQUIRE(binding != nullptr);
  CHECK((*binding)["roleRef"]["name"] == "job1-bridge");
  CHECK((*binding)["subjects"][0]["name"] == "job1-bridge");
  CHECK((*binding)["subjects"][0]["namespace"] == "team");
  CHECK(findChild(d, "ServiceAccount", "job1-bridge") != nullptr);

  CHECK_FALSE(d.status.contains("jobStatus"));  // nothing reported yet
  CHECK(d.status["attempts"] == 1);
  CHECK(conditionStatus(d.status, "SpecValid") == "True");
  CHECK(conditionStatus(d.status, "Submitted") == "False");
  CHECK(conditionStatus(d.status, "Finished") == "False");
  CHECK_FALSE(d.finalized.has_value());
}

TEST_CASE("pods and ConfigMap states decide which bridge pods exist and the job status",
          "[bridge]") {
  // observed pods (attempt:phase), reported status, attempts in the previous status,
  // -> desired pod names, jobStatus ("" = none), attempts
  struct Row {
    const char* what;
    std::vector<std::pair<int, std::string>> pods;
    std::string reported;
    int prevAttempts;
    Strings wantPods;
    std::string wantStatus;
    int wantAttempts;
  };
  auto row = GENERATE(values<Row>({
      {"pod running", {{0, "Running"}}, "RUNNING", 1, {"job1-bridge-0"}, "RUNNING", 1},
      {"pod pending, nothing reported", {{0, "Pending"}}, "", 1, {"job1-bridge-0"}, "", 1},
      {"node lost (phase Unknown) is not a stopped pod",
       {{0, "Unknown"}},
       "RUNNING",
       1,
       {"job1-bridge-0"},
       "RUNNING",
       1},
      {"pod failed while RUNNING -> replacement",
       {{0, "Failed"}},
       "RUNNING",
       1,
       {"job1-bridge-0", "job1-bridge-1"},
       "RUNNING",
       2},
      {"pod exited 0 without a terminal status -> replacement",
       {{0, "Succeeded"}},
       "SUBMITTED",
       1,
       {"job1-bridge-0", "job1-bridge-1"},
       "SUBMITTED",
       2},
      {"second replacement",
       {{0, "Failed"}, {1, "Failed"}},
       "RUNNING",
       2,
       {"job1-bridge-0", "job1-bridge-1", "job1-bridge-2"},
       "RUNNING",
       3},
      {"DONE: pod kept, none added", {{0, "Succeeded"}}, "DONE", 1, {"job1-bridge-0"}, "DONE", 1},
      {"FAILED job: the pod exits 1, no replacement",
       {{0, "Failed"}},
       "FAILED",
       1,
       {"job1-bridge-0"},
       "FAILED",
       1},
      {"KILLED", {{0, "Failed"}}, "KILLED", 1, {"job1-bridge-0"}, "KILLED", 1},
      {"UNKNOWN is final (the backend lost the job)",
       {{0, "Failed"}},
       "UNKNOWN",
       1,
       {"job1-bridge-0"},
       "UNKNOWN",
       1},
      {"terminal and the pod deleted: not recreated", {}, "DONE", 1, {}, "DONE", 1},
      {"deleted pod (not stopped) is recreated under the same attempt",
       {},
       "RUNNING",
       2,
       {"job1-bridge-1"},
       "RUNNING",
       2},
      {"stale cache: replacement not observed yet is kept",
       {{0, "Failed"}},
       "RUNNING",
       2,
       {"job1-bridge-0", "job1-bridge-1"},
       "RUNNING",
       2},
      {"retry limit (3 restarts) reached -> FAILED, no new pod",
       {{0, "Failed"}, {1, "Failed"}, {2, "Failed"}, {3, "Failed"}},
       "RUNNING",
       4,
       {"job1-bridge-0", "job1-bridge-1", "job1-bridge-2", "job1-bridge-3"},
       "FAILED",
       4},
  }));
  CAPTURE(row.what);
  RequestBuilder b;
  std::map<std::string, std::string> podKeys{{"id", "4711"}};
  if (!row.reported.empty()) {
    podKeys["status.jobStatus"] = row.reported;
  }
  b.configMap = startedConfigMap(b, podKeys);
  for (const auto& [attempt, phase] : row.pods) {
    b.withPod(attempt, phase);
  }
  b.withAttempts(row.prevAttempts);
  Desired d = run(b);
  REQUIRE_FALSE(d.refusal);
  CHECK(podNames(d) == row.wantPods);
  CHECK(d.status.value("jobStatus", "") == row.wantStatus);
  CHECK(d.status["attempts"] == row.wantAttempts);
  CHECK(d.status["remoteJobId"] == "4711");
  CHECK(findChild(d, "ConfigMap", "job1-bridge") != nullptr);
}

TEST_CASE("the replacement pod adopts the remote job: same ConfigMap, id left to the pod",
          "[bridge]") {
  RequestBuilder b;
  b.configMap = startedConfigMap(b, {{"id", "4711"},
                                     {"status.jobStatus", "RUNNING"},
                                     {"status.submitTime", "2026-11-24T10:00:00Z"}});
  b.withPod(0, "Failed").withAttempts(1);
  Desired d = run(b);
  const json* next = findChild(d, "Pod", "job1-bridge-1");
  REQUIRE(next != nullptr);
  CHECK(env(*next, "BRIDGE_CONFIGMAP") == "job1-bridge");
  CHECK(env(*next, "BRIDGE_ATTEMPT") == "1");
  // The desired ConfigMap carries no pod-owned key, so Metacontroller's three-way merge keeps
  // the id and status the pods wrote; the parameters are the ones observed.
  const json* cm = findChild(d, "ConfigMap", "job1-bridge");
  REQUIRE(cm != nullptr);
  for (const char* key : {"id", "status.jobStatus", "status.submitTime"}) {
    CAPTURE(key);
    CHECK_FALSE((*cm)["data"].contains(key));
  }
  for (const auto& [k, v] : (*cm)["data"].items()) {
    CAPTURE(k);
    CHECK(b.configMap->at(k) == v.get<std::string>());
  }
  CHECK(d.status["submitTime"] == "2026-11-24T10:00:00Z");
}

TEST_CASE("the retry limit is a flag", "[bridge]") {
  RequestBuilder b;
  b.configMap = startedConfigMap(b, {{"status.jobStatus", "SUBMITTED"}});
  b.withPod(0, "Failed").withAttempts(1);
  DecisionConfig none;
  none.maxPodRestarts = 0;
  Desired d = run(b, none);
  CHECK(podNames(d) == Strings{"job1-bridge-0"});
  CHECK(d.status["jobStatus"] == "FAILED");
  CHECK(d.status["message"].get<std::string>().find("giving up") != std::string::npos);
  CHECK(conditionStatus(d.status, "Finished") == "True");
  DecisionConfig one;
  one.maxPodRestarts = 1;
  CHECK(podNames(run(b, one)) == Strings{"job1-bridge-0", "job1-bridge-1"});
}

TEST_CASE("kill: true reaches the pod through the ConfigMap", "[bridge]") {
  bool kill = GENERATE(false, true);
  RequestBuilder b;
  b.configMap = startedConfigMap(b, {{"id", "7"}, {"status.jobStatus", "RUNNING"}});
  b.withPod(0, "Running").withAttempts(1);
  b.withSpec("kill", kill);
  Desired d = run(b);
  const json* cm = findChild(d, "ConfigMap", "job1-bridge");
  REQUIRE(cm != nullptr);
  CHECK((*cm)["data"]["kill"] == (kill ? "true" : "false"));
  CHECK(podNames(d) == Strings{"job1-bridge-0"});  // the pod itself is not touched
}

TEST_CASE("parameters are frozen once the job started, only kill follows the spec", "[bridge]") {
  RequestBuilder b;
  b.configMap = startedConfigMap(b, {{"status.jobStatus", "RUNNING"}});
  b.withPod(0, "Running").withAttempts(1);
  b.withSpec("updateinterval", 99);
  b.spec["jobdata"]["jobscript"] = "#!/bin/sh\necho changed\n";
  Desired d = run(b);
  const json* cm = findChild(d, "ConfigMap", "job1-bridge");
  REQUIRE(cm != nullptr);
  CHECK((*cm)["data"]["updateInterval"] == "20");
  CHECK((*cm)["data"]["jobData.jobScript"] == "#!/bin/sh\necho \"hi\"\n");

  SECTION("an invalid edit is reported and ignored") {
    b.withSpec("imagepullpolicy", "Sometimes");
    Desired e = run(b);
    REQUIRE_FALSE(e.refusal);
    CHECK(podNames(e) == Strings{"job1-bridge-0"});
    CHECK(conditionStatus(e.status, "SpecValid") == "False");
  }
  SECTION("a hand-broken ConfigMap is rewritten from a valid spec") {
    b.configMap->erase("resourceURL");
    Desired e = run(b);
    REQUIRE_FALSE(e.refusal);
    CHECK(findChild(e, "ConfigMap", "job1-bridge")->at("data")["resourceURL"] ==
          "http://slurm-head:6820/slurm/v0.0.38/");
    CHECK(conditionStatus(e.status, "ParametersReadable") == "False");
  }
  SECTION("ConfigMap and spec both unusable: refuse, so nothing is deleted") {
    b.configMap->erase("resourceURL");
    b.withSpec("resourceURL", "ftp://nope");
    Desired e = run(b);
    REQUIRE(e.refusal);
    CHECK(e.refusal->message.find("resourceURL") != std::string::npos);
  }
}

TEST_CASE("an invalid spec before the start creates nothing and says why", "[bridge]") {
  RequestBuilder b;
  b.withSpec("imagepullpolicy", "Sometimes");
  Desired d = run(b);
  REQUIRE_FALSE(d.refusal);
  CHECK(d.children.empty());
  CHECK(conditionStatus(d.status, "SpecValid") == "False");
  CHECK(d.status["message"].get<std::string>().find("imagepullpolicy") != std::string::npos);
  CHECK_FALSE(d.status.contains("jobStatus"));
  CHECK(d.status["attempts"] == 0);
}

TEST_CASE("finalize cancels a running remote job before letting the BridgeJob go", "[bridge]") {
  struct Row {
    const char* what;
    std::vector<std::pair<int, std::string>> pods;
    std::string reported;
    bool haveConfigMap;
    bool wantFinalized;
    Strings wantPods;
  };
  auto row = GENERATE(values<Row>({
      {"never started", {}, "", false, true, {}},
      {"running: keep the pod, ask it to kill",
       {{0, "Running"}},
       "RUNNING",
       true,
       false,
       {"job1-bridge-0"}},
      {"submitted, pod pending", {{0, "Pending"}}, "SUBMITTED", true, false, {"job1-bridge-0"}},
      {"pod died before cancelling: a replacement adopts and cancels",
       {{0, "Failed"}},
       "RUNNING",
       true,
       false,
       {"job1-bridge-0", "job1-bridge-1"}},
      {"KILLED, pod stopped: done", {{0, "Failed"}}, "KILLED", true, true, {}},
      {"DONE, pod stopped: done", {{0, "Succeeded"}}, "DONE", true, true, {}},
      {"terminal but the pod still writing: wait",
       {{0, "Running"}},
       "KILLED",
       true,
       false,
       {"job1-bridge-0"}},
      {"retry limit reached: give up",
       {{0, "Failed"}, {1, "Failed"}, {2, "Failed"}, {3, "Failed"}},
       "RUNNING",
       true,
       true,
       {}},
  }));
  CAPTURE(row.what);
  RequestBuilder b;
  b.deleting = true;
  b.finalizing = true;
  if (row.haveConfigMap) {
    std::map<std::string, std::string> keys{{"id", "4711"}};
    if (!row.reported.empty()) {
      keys["status.jobStatus"] = row.reported;
    }
    b.configMap = startedConfigMap(b, keys);
    b.withAttempts(static_cast<int>(row.pods.size()));
  }
  for (const auto& [attempt, phase] : row.pods) {
    b.withPod(attempt, phase);
  }
  Desired d = run(b);
  REQUIRE(d.finalized.has_value());
  CHECK(*d.finalized == row.wantFinalized);
  CHECK(podNames(d) == row.wantPods);
  if (!row.wantFinalized) {
    const json* cm = findChild(d, "ConfigMap", "job1-bridge");
    REQUIRE(cm != nullptr);
    CHECK((*cm)["data"]["kill"] == "true");  // even though spec.kill is false
    CHECK(d.resyncAfterSeconds > 0);
  } else {
    CHECK(d.children.empty());
  }
  json response = renderResponse(d);
  CHECK(response["finalized"] == row.wantFinalized);
}

TEST_CASE("a sync request with finalizing=true is a finalize (one URL for both hooks)",
          "[bridge]") {
  RequestBuilder b;
  b.deleting = true;
  b.finalizing = true;
  b.configMap = startedConfigMap(b, {{"status.jobStatus", "RUNNING"}});
  b.withPod(0, "Running").withAttempts(1);
  auto request = parseHookRequest(HookKind::kSync, b.body().dump());
  REQUIRE(request.ok());
  CHECK(request->kind == HookKind::kFinalize);
}

TEST_CASE("v1 and v2 bodies (name vs namespace/name keys) give the same decision", "[bridge]") {
  RequestBuilder v1;
  v1.configMap = startedConfigMap(v1, {{"id", "9"}, {"status.jobStatus", "RUNNING"}});
  v1.withPod(0, "Failed").withAttempts(1);
  RequestBuilder v2 = v1;
  v2.version = HookVersion::kV2;
  const json b1 = v1.body();
  const json b2 = v2.body();
  CHECK(b1["children"]["Pod.v1"].contains("job1-bridge-0"));
  CHECK(b2["children"]["Pod.v1"].contains("team/job1-bridge-0"));
  CHECK(b2["children"]["ConfigMap.v1"].contains("team/job1-bridge"));

  auto r1 = parseHookRequest(HookKind::kSync, b1.dump());
  auto r2 = parseHookRequest(HookKind::kSync, b2.dump());
  REQUIRE(r1.ok());
  REQUIRE(r2.ok());
  CHECK(r1->version == HookVersion::kV1);
  CHECK(r2->version == HookVersion::kV2);
  const json out1 = renderResponse(run(v1));
  const json out2 = renderResponse(run(v2));
  CHECK(out1 == out2);
  CHECK(podNames(run(v2)) == Strings{"job1-bridge-0", "job1-bridge-1"});

  // Only the fields of Metacontroller's CompositeHookResponse (v2 parses strictly).
  std::set<std::string> sync;
  for (const auto& [k, v] : out2.items()) {
    sync.insert(k);
  }
  CHECK(sync == std::set<std::string>{"status", "children", "resyncAfterSeconds"});
  v2.finalizing = true;
  v2.deleting = true;
  std::set<std::string> fin;
  const json finalizeResponse = renderResponse(run(v2));
  for (const auto& [k, v] : finalizeResponse.items()) {
    fin.insert(k);
  }
  CHECK(fin == std::set<std::string>{"status", "children", "resyncAfterSeconds", "finalized"});
}

TEST_CASE("bad hook bodies are rejected with a message", "[bridge]") {
  RequestBuilder good;
  const json base = good.body();
  auto mutated = [&](auto&& f) {
    json j = base;
    f(j);
    return j.dump();
  };
  struct Row {
    const char* what;
    std::string body;
    std::string message;
  };
  auto row = GENERATE_COPY(values<Row>({
      {"not JSON", "{\"parent\": ", "not valid JSON"},
      {"an array", "[]", "JSON object"},
      {"no parent", mutated([](json& j) { j.erase("parent"); }), "no \"parent\""},
      {"parent of another kind", mutated([](json& j) { j["parent"]["kind"] = "Job"; }),
       "BridgeJob"},
      {"the original's group",
       mutated([](json& j) { j["parent"]["apiVersion"] = "bridgejob.ibm.com/v1alpha1"; }),
       "bridge.kubecomp.io/v1alpha1"},
      {"no uid", mutated([](json& j) { j["parent"]["metadata"].erase("uid"); }), "uid"},
      {"name too long",
       mutated([](json& j) { j["parent"]["metadata"]["name"] = std::string(231, 'a'); }),
       "longer than 230"},
      {"unknown hook version",
       mutated([](json& j) { j["controller"]["spec"]["hooks"]["sync"]["version"] = "v3"; }),
       "unknown hook version"},
      {"children not an object", mutated([](json& j) { j["children"] = json::array(); }),
       "children must be an object"},
      {"child key names another object", mutated([](json& j) {
         j["children"]["Pod.v1"]["other"] = {
             {"metadata", {{"name", "job1-bridge-0"}, {"namespace", "team"}}}};
       }),
       "names neither"},
      {"ConfigMap data not strings", mutated([](json& j) {
         j["children"]["ConfigMap.v1"]["job1-bridge"] = {
             {"metadata", {{"name", "job1-bridge"}, {"namespace", "team"}}},
             {"data", {{"kill", true}}}};
       }),
       "is not a string"},
      {"finalizing not a boolean", mutated([](json& j) { j["finalizing"] = "yes"; }),
       "finalizing must be a boolean"},
  }));
  CAPTURE(row.what);
  auto r = parseHookRequest(HookKind::kSync, row.body);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == "invalid");
  CHECK_THAT(r.error().message, Catch::Contains(row.message));
}

TEST_CASE("condition transition times move only when the condition changes", "[bridge]") {
  RequestBuilder b;
  b.configMap = startedConfigMap(b, {{"status.jobStatus", "RUNNING"}, {"id", "1"}});
  b.withPod(0, "Running");
  b.status = {
      {"attempts", 1},
      {"conditions",
       {{{"type", "Submitted"}, {"status", "True"}, {"lastTransitionTime", "2026-01-01T00:00:00Z"}},
        {{"type", "Finished"},
         {"status", "True"},
         {"lastTransitionTime", "2026-01-01T00:00:00Z"}}}}};
  Desired d = run(b);
  for (const json& c : d.status["conditions"]) {
    if (c["type"] == "Submitted") {
      CHECK(c["lastTransitionTime"] == "2026-01-01T00:00:00Z");  // still True
    }
    if (c["type"] == "Finished") {
      CHECK(c["status"] == "False");
      CHECK(c["lastTransitionTime"] != "2026-01-01T00:00:00Z");  // changed now
    }
  }
}

// ---- the original Bridge Operator's operator-side bugs (reference §1.2 and §1.4) -------------

TEST_CASE("bug: status keys and values (status.jobStatus vs jobStatus, KILL vs KILLED)",
          "[bridge]") {
  // The original read `status.jobStatus` while the Slurm and LSF pods wrote `jobStatus`, and
  // treated "KILL" as terminal while documenting "KILLED": the CR never finished.
  struct Row {
    std::string written;
    std::string want;
    bool terminal;
  };
  auto row = GENERATE(values<Row>({{"SUBMITTED", "SUBMITTED", false},
                                   {"RUNNING", "RUNNING", false},
                                   {"DONE", "DONE", true},
                                   {"FAILED", "FAILED", true},
                                   {"KILLED", "KILLED", true},
                                   {"UNKNOWN", "UNKNOWN", true},
                                   {"KILL", "", false},
                                   {"COMPLETED", "", false},
                                   {"done", "", false}}));
  CAPTURE(row.written);
  RequestBuilder b;
  b.configMap = startedConfigMap(b, {{"status.jobStatus", row.written},
                                     {"status.startTime", "2026-11-24T10:00:00Z"},
                                     {"status.completionTime", "2026-11-24T10:05:00+01:00"},
                                     {"status.message", "exit 0"},
                                     {"id", "88"}});
  b.withPod(0, "Succeeded").withAttempts(1);
  Desired d = run(b);
  CHECK(d.status.value("jobStatus", "") == row.want);
  CHECK(conditionStatus(d.status, "Finished") == (row.terminal ? "True" : "False"));
  // A stopped pod with a terminal state is final; anything else gets a replacement.
  CHECK(podNames(d).size() == (row.terminal ? 1u : 2u));
  CHECK(d.status["remoteJobId"] == "88");
  CHECK(d.status["startTime"] == "2026-11-24T10:00:00Z");
  CHECK(d.status["completionTime"] == "2026-11-24T09:05:00Z");  // normalised to UTC
  if (row.want.empty()) {
    CHECK_THAT(d.status["message"].get<std::string>(), Catch::Contains(row.written));
  } else {
    CHECK(d.status["message"] == "exit 0");
  }
  // A bad key spelling on the pod side is not read: only status.jobStatus counts.
  RequestBuilder c;
  c.configMap = startedConfigMap(c, {{"jobStatus", "DONE"}});
  c.withPod(0, "Running").withAttempts(1);
  CHECK_FALSE(run(c).status.contains("jobStatus"));
}

TEST_CASE("bug: times in mixed formats never reach the status", "[bridge]") {
  // The Ray pod wrote "%d/%m/%Y %H:%M:%S", Slurm epoch seconds; the CRD says date-time.
  std::string bad = GENERATE(std::string("24/11/2026 10:00:00"), std::string("1764000000"),
                             std::string("2026-02-30T10:00:00Z"));
  CAPTURE(bad);
  RequestBuilder b;
  b.configMap = startedConfigMap(b, {{"status.jobStatus", "DONE"}, {"status.startTime", bad}});
  b.withPod(0, "Succeeded").withAttempts(1);
  Desired d = run(b);
  CHECK_FALSE(d.status.contains("startTime"));
  CHECK_THAT(d.status["message"].get<std::string>(), Catch::Contains("status.startTime"));
}

TEST_CASE("bug: updateInterval has one spelling and is decimal", "[bridge]") {
  // The original operator wrote `updateInterval`, the LSF pod read `updateinterval` (poll 0,
  // busy loop) and the Ray pod parsed "20" in base 20.
  auto [interval, text] =
      GENERATE(table<int, std::string>({{1, "1"}, {20, "20"}, {45, "45"}, {86400, "86400"}}));
  RequestBuilder b;
  b.withSpec("updateinterval", interval);
  Desired d = run(b);
  const json* cm = findChild(d, "ConfigMap", "job1-bridge");
  REQUIRE(cm != nullptr);
  CHECK((*cm)["data"][kc::bridge::cmkey::kUpdateInterval] == text);
  CHECK(std::string(kc::bridge::cmkey::kUpdateInterval) == "updateInterval");
  CHECK_FALSE((*cm)["data"].contains("updateinterval"));
}

TEST_CASE("bug: a crashed bridge pod failed the CR instead of being resumed", "[bridge]") {
  // The original failed the BridgeJob when its pod was Failed and never re-created the pod,
  // although the remote job was still running.
  RequestBuilder b;
  b.configMap = startedConfigMap(b, {{"id", "4711"}, {"status.jobStatus", "RUNNING"}});
  b.withPod(0, "Failed").withAttempts(1);
  Desired d = run(b);
  CHECK(d.status["jobStatus"] == "RUNNING");
  CHECK(findChild(d, "Pod", "job1-bridge-1") != nullptr);
}

TEST_CASE("bug: deleting the BridgeJob orphaned the remote job (no finalizer)", "[bridge]") {
  RequestBuilder b;
  b.deleting = true;
  b.finalizing = true;
  b.configMap = startedConfigMap(b, {{"id", "4711"}, {"status.jobStatus", "RUNNING"}});
  b.withPod(0, "Running").withAttempts(1);
  Desired d = run(b);
  CHECK(d.finalized == false);
  CHECK(findChild(d, "ConfigMap", "job1-bridge")->at("data")["kill"] == "true");
  // Once the pod reports KILLED and stops, the finalizer may go.
  b.configMap = startedConfigMap(b, {{"id", "4711"}, {"status.jobStatus", "KILLED"}});
  b.pods = {{0, "Failed", false}};
  CHECK(run(b).finalized == true);
}

TEST_CASE("bug: one ServiceAccount and Role per namespace, without owner, for every job",
          "[bridge]") {
  // The original shared bridge-cm-viewer/bridge-cm-role (all ConfigMaps of the namespace).
  RequestBuilder a;
  RequestBuilder b;
  b.name = "job2";
  b.uid = "uid-2";
  Desired da = run(a);
  Desired db = run(b);
  CHECK(findChild(da, "Role", "job1-bridge")->at("rules")[0]["resourceNames"] ==
        json::array({"job1-bridge"}));
  CHECK(findChild(db, "Role", "job2-bridge")->at("rules")[0]["resourceNames"] ==
        json::array({"job2-bridge"}));
  CHECK(findChild(db, "Pod", "job2-bridge-0")->at("spec")["serviceAccountName"] == "job2-bridge");
  CHECK(findChild(da, "ServiceAccount", "job2-bridge") == nullptr);
}

TEST_CASE("bug: jobproperties with quotes and newlines survive byte for byte, none is fine",
          "[bridge]") {
  // The original built JSON with Sprintf (issue #3: "Unable to parse query") and produced
  // invalid JSON when jobproperties was missing (issue #2).
  const std::string props = "{\"comment\": \"say \\\"hi\\\"\\nand bye\", \"environment\": {}}";
  RequestBuilder b;
  b.withSpec("jobproperties", props);
  const Desired withProps = run(b);
  const json* cm = findChild(withProps, "ConfigMap", "job1-bridge");
  REQUIRE(cm != nullptr);
  CHECK((*cm)["data"]["jobProperties"] == props);
  // The body Metacontroller sends back parses to the same bytes.
  b.configMap = startedConfigMap(b);
  CHECK(b.configMap->at("jobProperties") == props);
  RequestBuilder none;
  none.spec.erase("jobproperties");
  const Desired withoutProps = run(none);
  const json* cm2 = findChild(withoutProps, "ConfigMap", "job1-bridge");
  REQUIRE(cm2 != nullptr);
  CHECK((*cm2)["data"]["jobProperties"] == "");
}
