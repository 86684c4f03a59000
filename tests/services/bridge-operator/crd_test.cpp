// The BridgeJob CRD: loaded into the API server test double, the examples per backend are
// stored and the hook's children for them are accepted; the operator's own validation agrees
// with every enum, required field and limit of the schema. The double does not validate
// OpenAPI schemas (docs/apiserver-double.md), so invalid objects are stored there and it is the
// operator that refuses to start them; the schema-driven case below keeps the two in step.

#include <catch2/catch.hpp>
#include <filesystem>
#include <set>
#include <thread>

#include "libcore/api/bridge_job.hpp"
#include "libcore/kube/client.hpp"
#include "services/bridge-operator/hook_decision.hpp"
#include "tests/services/bridge-operator/hook_request_builder.hpp"
#include "tests/support/manifests.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/kube/double_process.hpp"

using kc::bridge::testing::validSpec;
using kc::kube::GroupVersionResource;
using kc::kube::KubeClient;
using kc::testing::loadYamlFile;
using nlohmann::json;

namespace {

const std::string kCrdFile =
    std::string(KC_SOURCE_DIR) + "/charts/kubecomp/crds/bridgejobs.bridge.kubecomp.io.yaml";
const std::string kExamples = std::string(KC_SOURCE_DIR) + "/charts/kubecomp/examples";

const GroupVersionResource kCrds{"apiextensions.k8s.io", "v1", "customresourcedefinitions", false};
const GroupVersionResource kBridgeJobs{"bridge.kubecomp.io", "v1alpha1", "bridgejobs", true};
const GroupVersionResource kNamespaces{"", "v1", "namespaces", false};

GroupVersionResource gvrOf(const json& child) {
  const std::string kind = child["kind"];
  if (kind == "ConfigMap") {
    return {"", "v1", "configmaps", true};
  }
  if (kind == "Pod") {
    return {"", "v1", "pods", true};
  }
  if (kind == "ServiceAccount") {
    return {"", "v1", "serviceaccounts", true};
  }
  return {};  // RBAC: the double serves no rbac.authorization.k8s.io
}

std::vector<std::string> exampleFiles() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(kExamples)) {
    if (e.path().filename().string().rfind("bridgejob-", 0) == 0) {
      out.push_back(e.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The hook request Metacontroller would send for a stored BridgeJob with no children yet.
std::string firstSyncBody(const json& stored) {
  return json{{"controller", {{"spec", {{"hooks", {{"sync", {{"version", "v2"}}}}}}}}},
              {"parent", stored},
              {"children", {{"ConfigMap.v1", json::object()}, {"Pod.v1", json::object()}}},
              {"related", json::object()},
              {"finalizing", false}}
      .dump();
}

const json& specSchema(const json& crd) {
  return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
}

}  // namespace

TEST_CASE("the BridgeJob CRD and the examples per backend in the API server double", "[bridge]") {
  kc::testing::TempDir dir;
  kc::kube::testing::DoubleProcess apiserver(KC_APISERVER_DOUBLE_EXE, dir.path().string());
  kc::kube::KubeClientOptions options;
  options.qps = 0;
  auto client = KubeClient::create(apiserver.config(), options);
  REQUIRE(client.ok());
  KubeClient& c = **client;

  const json crd = loadYamlFile(kCrdFile);
  auto created = c.create(kCrds, "", crd);
  REQUIRE(created.ok());
  // Served at once, with the status subresource and the short name.
  auto discovery = c.call("GET", "/apis/bridge.kubecomp.io/v1alpha1");
  REQUIRE(discovery.ok());
  std::set<std::string> served;
  for (const json& r : (*discovery)["resources"]) {
    served.insert(r["name"].get<std::string>());
  }
  CHECK(served.count("bridgejobs") == 1);
  CHECK(served.count("bridgejobs/status") == 1);

  const auto files = exampleFiles();
  REQUIRE(files.size() == 4);
  std::set<std::string> namespaces;
  for (const std::string& file : files) {
    CAPTURE(file);
    const json example = loadYamlFile(file);
    const std::string ns = example["metadata"]["namespace"];
    if (namespaces.insert(ns).second) {
      REQUIRE(c.create(kNamespaces, "",
                       {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}})
                  .ok());
    }
    auto stored = c.create(kBridgeJobs, ns, example);
    REQUIRE(stored.ok());
    CHECK((*stored)["spec"] == example["spec"]);

    // The operator's first answer for it, applied as Metacontroller would.
    auto reply = kc::bridge::parseHookRequest(kc::bridge::HookKind::kSync, firstSyncBody(*stored));
    REQUIRE(reply.ok());
    auto desired = kc::bridge::decide(*reply, {}, std::chrono::system_clock::now());
    REQUIRE_FALSE(desired.refusal);
    REQUIRE(desired.children.size() == 5);
    for (json child : desired.children) {
      const GroupVersionResource gvr = gvrOf(child);
      if (gvr.resource.empty()) {
        continue;
      }
      child["metadata"]["ownerReferences"] =
          json::array({{{"apiVersion", "bridge.kubecomp.io/v1alpha1"},
                        {"kind", "BridgeJob"},
                        {"name", (*stored)["metadata"]["name"]},
                        {"uid", (*stored)["metadata"]["uid"]},
                        {"controller", true},
                        {"blockOwnerDeletion", true}}});
      auto applied = c.create(gvr, ns, child);
      CAPTURE(child.dump());
      REQUIRE(applied.ok());
    }
    json withStatus = *stored;
    withStatus["status"] = desired.status;
    auto status = c.updateStatus(kBridgeJobs, ns, withStatus);
    REQUIRE(status.ok());
    CHECK((*status)["status"]["attempts"] == 1);
  }

  SECTION("invalid objects: the double stores them, the operator starts nothing") {
    REQUIRE(c.create(kNamespaces, "",
                     {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "bad"}}}})
                .ok());
    auto bad = GENERATE(std::string("bad enum"), std::string("missing required"));
    CAPTURE(bad);
    json obj{
        {"apiVersion", "bridge.kubecomp.io/v1alpha1"},
        {"kind", "BridgeJob"},
        {"metadata", {{"name", bad == "bad enum" ? "bad-enum" : "missing"}, {"namespace", "bad"}}},
        {"spec", validSpec()}};
    if (bad == "bad enum") {
      obj["spec"]["jobdata"]["scriptlocation"] = "ftp";
    } else {
      obj["spec"].erase("resourcesecret");
    }
    auto stored = c.create(kBridgeJobs, "bad", obj);
    REQUIRE(stored.ok());  // a real API server answers 422 here
    auto request =
        kc::bridge::parseHookRequest(kc::bridge::HookKind::kSync, firstSyncBody(*stored));
    REQUIRE(request.ok());
    auto desired = kc::bridge::decide(*request, {}, std::chrono::system_clock::now());
    CHECK(desired.children.empty());
    CHECK(kc::bridge::testing::conditionStatus(desired.status, "SpecValid") == "False");
  }
}

TEST_CASE("the operator's validation agrees with the CRD schema", "[bridge]") {
  const json crd = loadYamlFile(kCrdFile);
  const json& spec = specSchema(crd);

  // Walk every property of spec (one level of nesting: jobdata, s3storage, s3upload).
  struct Field {
    std::vector<std::string> path;
    json schema;
  };
  std::vector<Field> fields;
  for (const auto& [name, schema] : spec["properties"].items()) {
    if (schema.value("type", "") == "object") {
      for (const auto& [sub, subSchema] : schema["properties"].items()) {
        fields.push_back({{name, sub}, subSchema});
      }
    } else {
      fields.push_back({{name}, schema});
    }
  }
  REQUIRE(fields.size() == 18);

  auto withValue = [](json base, const std::vector<std::string>& path, const json* value) {
    json* at = &base;
    for (std::size_t i = 0; i + 1 < path.size(); ++i) {
      at = &(*at)[path[i]];
    }
    if (value == nullptr) {
      at->erase(path.back());
    } else {
      (*at)[path.back()] = *value;
    }
    return base;
  };
  json base = validSpec();
  base["jobdata"]["scriptlocation"] = "remote";
  base["jobdata"]["jobscript"] = "inputs:job.sh";  // valid for remote, inline and s3
  REQUIRE(kc::bridge::parseSpec(base).ok());

  int checks = 0;
  for (const Field& f : fields) {
    std::string where;
    for (const auto& p : f.path) {
      where += "." + p;
    }
    CAPTURE(where);
    if (f.schema.contains("enum")) {
      for (const json& v : f.schema["enum"]) {
        CAPTURE(v);
        CHECK(kc::bridge::parseSpec(withValue(base, f.path, &v)).ok());
        ++checks;
      }
      const json bogus = "Bogus";
      CHECK_FALSE(kc::bridge::parseSpec(withValue(base, f.path, &bogus)).ok());
    }
    const std::string type = f.schema.value("type", "");
    const json wrongType = type == "string" ? json(12) : json("12");
    CHECK_FALSE(kc::bridge::parseSpec(withValue(base, f.path, &wrongType)).ok());
    if (f.schema.contains("maxLength")) {
      const json tooLong = std::string(f.schema["maxLength"].get<std::size_t>() + 1, 'a');
      CHECK_FALSE(kc::bridge::parseSpec(withValue(base, f.path, &tooLong)).ok());
      ++checks;
    }
    if (f.schema.contains("maximum")) {
      const json above = f.schema["maximum"].get<std::int64_t>() + 1;
      CHECK_FALSE(kc::bridge::parseSpec(withValue(base, f.path, &above)).ok());
      const json max = f.schema["maximum"];
      CHECK(kc::bridge::parseSpec(withValue(base, f.path, &max)).ok());
    }
    if (f.schema.contains("minimum")) {
      const json below = f.schema["minimum"].get<std::int64_t>() - 1;
      CHECK_FALSE(kc::bridge::parseSpec(withValue(base, f.path, &below)).ok());
    }
    if (f.schema.contains("default")) {
      // Absent means the default: same parameters as the default spelled out.
      auto absent = kc::bridge::parseSpec(withValue(base, f.path, nullptr));
      auto spelled = kc::bridge::parseSpec(withValue(base, f.path, &f.schema["default"]));
      REQUIRE(absent.ok());
      REQUIRE(spelled.ok());
      CHECK(*absent == *spelled);
      ++checks;
    }
  }
  for (const json& required : spec["required"]) {
    CAPTURE(required);
    CHECK_FALSE(
        kc::bridge::parseSpec(withValue(base, {required.get<std::string>()}, nullptr)).ok());
  }
  CHECK_FALSE(kc::bridge::parseSpec(withValue(base, {"jobdata", "jobscript"}, nullptr)).ok());
  CHECK(checks > 20);

  // status.jobStatus: exactly the statuses a bridge pod may report.
  std::set<std::string> schemaStatuses;
  for (const json& v : crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
                          ["status"]["properties"]["jobStatus"]["enum"]) {
    schemaStatuses.insert(v.get<std::string>());
    CHECK(kc::bridge::parseJobStatus(v.get<std::string>()).has_value());
  }
  CHECK(schemaStatuses ==
        std::set<std::string>{"SUBMITTED", "RUNNING", "DONE", "FAILED", "KILLED", "UNKNOWN"});
  CHECK(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["metadata"]
           ["properties"]["name"]["maxLength"] == kc::bridge::kMaxJobName);
}
