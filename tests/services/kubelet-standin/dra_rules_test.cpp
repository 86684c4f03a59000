// The stand-in's DRA rules, table-driven, expected values written from kubelet's v1.34 source
// (pkg/kubelet/cm/dra, its plugin manager, component-helpers' resourceclaim): which service a
// plugin is spoken to in, the registration checks and their wording, the checks of a claim for
// a pod, the claims of each container (PodResources), and the DRA manager's steps without a
// plugin (what it checks before its cache changes, its checkpoint).

#include "tools/kubelet-standin/dra_rules.hpp"

#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/temp_dir.hpp"
#include "tools/kubelet-standin/dra_manager.hpp"

using namespace kc::kubelet;
using nlohmann::json;

namespace {

json pod(const json& claimEntries, const json& statuses = json::array()) {
  return {{"metadata", {{"name", "job"}, {"namespace", "default"}, {"uid", "pod-uid"}}},
          {"spec",
           {{"resourceClaims", claimEntries},
            {"initContainers",
             json::array({{{"name", "init"}, {"resources", {{"claims", {{{"name", "a"}}}}}}}})},
            {"containers",
             json::array(
                 {{{"name", "c1"}, {"resources", {{"claims", {{{"name", "a"}}, {{"name", "b"}}}}}}},
                  {{"name", "c2"}}})}}},
          {"status", {{"resourceClaimStatuses", statuses}}}};
}

json claim(const std::string& name, bool allocated, const json& reservedFor,
           const json& ownerReferences = json::array()) {
  json c = {{"metadata",
             {{"name", name},
              {"namespace", "default"},
              {"uid", name + "-uid"},
              {"ownerReferences", ownerReferences}}},
            {"spec", json::object()},
            {"status", json::object()}};
  if (allocated) {
    c["status"]["allocation"] = {{"devices",
                                  {{"results", json::array({{{"request", "gpu"},
                                                             {"driver", "gpu.example.com"},
                                                             {"pool", "p"},
                                                             {"device", "d0"}},
                                                            {{"request", "nic"},
                                                             {"driver", "nic.example.com"},
                                                             {"pool", "p"},
                                                             {"device", "n0"}}})}}}};
  }
  c["status"]["reservedFor"] = reservedFor;
  return c;
}

const json kReserved = json::array({{{"resource", "pods"}, {"name", "job"}, {"uid", "pod-uid"}}});

}  // namespace

TEST_CASE("the DRA service kubelet speaks to a plugin: the first of its list kubelet knows",
          "[dra][unit]") {
  struct Row {
    std::vector<std::string> offered;
    std::optional<DraService> chosen;  // nullopt = refused
    std::string error;
  };
  const Row row = GENERATE(values<Row>({
      {{"v1.DRAPlugin", "v1beta1.DRAPlugin"}, DraService::kV1, ""},
      {{"v1beta1.DRAPlugin"}, DraService::kV1beta1, ""},
      {{"v1beta1.DRAPlugin", "v1.DRAPlugin"}, DraService::kV1beta1, ""},  // the plugin's order
      {{"v1alpha4.Node", "v1.DRAPlugin"}, DraService::kV1, ""},
      {{}, std::nullopt, "empty list of supported gRPC services (aka supported versions)"},
      {{"1.0.0"},
       std::nullopt,
       "none of services supported by the plugin ([\"1.0.0\"]) are supported by the kubelet "
       "([\"v1.DRAPlugin\" \"v1beta1.DRAPlugin\"])"},
  }));
  auto got = chooseDraService(row.offered);
  REQUIRE(got.ok() == row.chosen.has_value());
  if (row.chosen) {
    CHECK(*got == *row.chosen);
  } else {
    CHECK(got.error().message == row.error);
  }
}

TEST_CASE("a DRA plugin's registration: versions, driver name, endpoint", "[dra][unit]") {
  struct Row {
    std::string driver;
    std::string endpoint;
    std::vector<std::string> versions;
    std::string error;  // "" = valid
  };
  const Row row = GENERATE(values<Row>({
      {"gpu.kubecomp.io", "/p/dra.sock", {"v1.DRAPlugin"}, ""},
      {"gpu.kubecomp.io",
       "/p/dra.sock",
       {},
       "invalid supported gRPC versions of DRA driver plugin gpu.kubecomp.io at endpoint "
       "/p/dra.sock: empty list of supported gRPC services (aka supported versions)"},
      {"GPU.io",
       "/p/dra.sock",
       {"v1.DRAPlugin"},
       "invalid DRA driver name \"GPU.io\": a DRA driver name must be a DNS subdomain"},
      {"gpu.kubecomp.io",
       "dra.sock",
       {"v1.DRAPlugin"},
       "endpoint dra.sock of DRA driver plugin gpu.kubecomp.io is not an absolute path"},
  }));
  auto st = validateDraPlugin(row.driver, row.endpoint, row.versions);
  CHECK(st.ok() == row.error.empty());
  if (!st) {
    CHECK(st.error().message == row.error);
  }
}

TEST_CASE("the claims a pod names, and the template claim not created yet", "[dra][unit]") {
  const json entries = json::array({{{"name", "a"}, {"resourceClaimName", "shared"}},
                                    {{"name", "b"}, {"resourceClaimTemplateName", "one-gpu"}}});
  auto missing = podClaimNames(pod(entries));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message == "pod \"default/job\": ResourceClaim not created yet");

  auto names = podClaimNames(
      pod(entries, json::array({{{"name", "b"}, {"resourceClaimName", "job-b-x1"}}})));
  REQUIRE(names.ok());
  REQUIRE(names->size() == 2);
  CHECK((*names)[0].claim == "shared");
  CHECK_FALSE((*names)[0].fromTemplate);
  CHECK((*names)[1].claim == "job-b-x1");
  CHECK((*names)[1].fromTemplate);
}

TEST_CASE("a claim for a pod: owner (template claims), reservedFor by uid, allocation",
          "[dra][unit]") {
  const json owner =
      json::array({{{"kind", "Pod"}, {"name", "job"}, {"uid", "pod-uid"}, {"controller", true}}});
  const json notController = json::array({{{"kind", "Pod"}, {"name", "job"}, {"uid", "pod-uid"}}});
  const json otherPod = json::array({{{"resource", "pods"}, {"name", "job"}, {"uid", "other"}}});
  struct Row {
    const char* what;
    bool fromTemplate;
    json claim;
    std::string error;  // "" = may be prepared
  };
  const Row row = GENERATE_COPY(values<Row>({
      {"allocated and reserved", false, claim("c", true, kReserved), ""},
      {"reserved for another pod of the same name", false, claim("c", true, otherPod),
       "pod job (pod-uid) is not allowed to use ResourceClaim c (c-uid)"},
      {"not allocated (so not reserved either)", false, claim("c", false, json::array()),
       "pod job (pod-uid) is not allowed to use ResourceClaim c (c-uid)"},
      {"a template claim the pod controls", true, claim("c", true, kReserved, owner), ""},
      {"a template claim the pod owns without controlling it", true,
       claim("c", true, kReserved, notController),
       "ResourceClaim default/c was not created for pod default/job (pod is not owner)"},
      {"a named claim needs no owner", false, claim("c", true, kReserved, json::array()), ""},
  }));
  CAPTURE(row.what);
  auto got = claimForPod(pod(json::array()), {"gpu", "c", row.fromTemplate}, row.claim);
  REQUIRE(got.ok() == row.error.empty());
  if (!got) {
    CHECK(got.error().message == row.error);
    return;
  }
  CHECK(got->uid == "c-uid");
  CHECK(got->ns == "default");
  // Every driver of the allocation, no devices until NodePrepareResources answers.
  CHECK(got->drivers == std::map<std::string, std::vector<PreparedDevice>>{
                            {"gpu.example.com", {}}, {"nic.example.com", {}}});
}

TEST_CASE("the claims each container uses, for PodResources", "[dra][unit]") {
  const json p = pod(json::array({{{"name", "a"}, {"resourceClaimName", "shared"}},
                                  {{"name", "b"}, {"resourceClaimTemplateName", "one-gpu"}}}),
                     json::array({{{"name", "b"}, {"resourceClaimName", "job-b-x1"}}}));
  CHECK(containerClaims(p) == std::map<std::string, std::vector<std::string>>{
                                  {"init", {"shared"}}, {"c1", {"shared", "job-b-x1"}}});
  // Before the template's claim exists, only the named one.
  const json early = pod(json::array({{{"name", "a"}, {"resourceClaimName", "shared"}},
                                      {{"name", "b"}, {"resourceClaimTemplateName", "one-gpu"}}}));
  CHECK(containerClaims(early) ==
        std::map<std::string, std::vector<std::string>>{{"init", {"shared"}}, {"c1", {"shared"}}});
  CHECK(usesResourceClaims(p));
  CHECK_FALSE(usesResourceClaims(pod(json::array())));
}

TEST_CASE("the DRA manager checks everything before its cache changes", "[dra][unit]") {
  kc::testing::TempDir dir;
  DraPlugins plugins(std::chrono::seconds(1));  // no driver registered
  std::map<std::string, json> claims = {{"c", claim("c", true, kReserved)}};
  DraCallbacks cb;
  cb.getClaim = [&](const std::string&, const std::string& name) -> kc::Result<json> {
    auto it = claims.find(name);
    if (it == claims.end()) {
      return kc::makeError("not_found",
                           "resourceclaims.resource.k8s.io \"" + name + "\" not found");
    }
    return it->second;
  };
  cb.prepared = [](const std::string&) {};
  cb.prepareFailed = [](const json&, const std::string&) {};
  DraManagerOptions o;
  o.checkpointPath = dir.file("dra_manager_state");
  DraManager m(o, plugins, cb);
  REQUIRE(m.restore());

  auto missing = m.prepare(pod(json::array({{{"name", "a"}, {"resourceClaimName", "nope"}}})));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message ==
        "prepare dynamic resources: fetch ResourceClaim nope: resourceclaims.resource.k8s.io "
        "\"nope\" not found");

  auto unregistered = m.prepare(pod(json::array({{{"name", "a"}, {"resourceClaimName", "c"}}})));
  REQUIRE_FALSE(unregistered.ok());
  // The first driver of the allocation by name.
  CHECK(unregistered.error().message ==
        "prepare dynamic resources: DRA driver gpu.example.com is not registered");
  CHECK_FALSE(m.claim("default", "c").has_value());  // nothing to unprepare later
  CHECK(m.unprepare("pod-uid").ok());                // and unpreparing is a no-op
}

TEST_CASE("the DRA checkpoint: a corrupt file stops the start", "[dra][unit]") {
  kc::testing::TempDir dir;
  DraPlugins plugins(std::chrono::seconds(1));
  const std::string path = dir.write("dra_manager_state", "{\"Data\": \"{}\", \"Checksum\": 1}\n");
  DraManagerOptions o;
  o.checkpointPath = path;
  DraManager m(o, plugins, {});
  auto st = m.restore();
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == "invalid");
  CHECK(st.error().message.find(path) != std::string::npos);
}
