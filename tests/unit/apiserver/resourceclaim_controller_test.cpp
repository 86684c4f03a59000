// The in-process resourceclaim controller of the API test double: claims generated from
// templates for pods (owner, name, annotation, pod status), idempotence, cleanup when pods go
// or finish, and the pure decisions it is made of. Expectations are worked out by hand from
// upstream's pkg/controller/resourceclaim.

// GCC 12 reports a false -Wrestrict inside std::string assignment at -O3 (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"

#include "tools/kube-apiserver-double/resourceclaim_controller.hpp"

#include <catch2/catch.hpp>
#include <regex>

#include "tests/unit/apiserver/api_harness.hpp"
#include "tests/unit/apiserver/dra_builders.hpp"
#include "tools/kube-apiserver-double/api_server.hpp"

using namespace kc::apiserver;
using nlohmann::json;
using namespace kc::apiserver::testing;

namespace {

const std::string kPods = "/api/v1/namespaces/default/pods";
const std::string kClaims = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims";
const std::string kTemplates = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates";

struct Cluster {
  Cluster() : api(store, {}) {}
  json call(std::string method, const std::string& path, const json& body, unsigned status) {
    return apiCall(api, apiRequest(std::move(method), path, body.is_null() ? "" : body.dump()),
                   status);
  }
  json claims() { return call("GET", kClaims, nullptr, 200)["items"]; }
  json pod(const std::string& name) { return call("GET", kPods + "/" + name, nullptr, 200); }
  json claim(const std::string& name) { return call("GET", kClaims + "/" + name, nullptr, 200); }
  bool claimExists(const std::string& name) {
    return api.handle(apiRequest("GET", kClaims + "/" + name)).status == 200;
  }
  // Allocates `name` and reserves it for the pods, as the scheduler would, with the
  // delete-protection finalizer the scheduler adds.
  void allocate(const std::string& name, const std::vector<json>& pods) {
    call("PATCH", kClaims + "/" + name,
         json{{"metadata", {{"finalizers", {"resource.kubernetes.io/delete-protection"}}}}}, 200);
    json reserved = json::array();
    for (const auto& p : pods) {
      reserved.push_back(
          {{"resource", "pods"}, {"name", p["metadata"]["name"]}, {"uid", p["metadata"]["uid"]}});
    }
    call("PATCH", kClaims + "/" + name + "/status",
         json{{"status",
               {{"allocation",
                 {{"devices",
                   {{"results",
                     {{{"request", "gpu"},
                       {"driver", kGpuDriver},
                       {"pool", "node-1"},
                       {"device", "gpu-0"}}}}}}}},
                {"reservedFor", reserved}}}},
         200);
  }
  ObjectStore store;
  ApiServer api;
};

}  // namespace

TEST_CASE_METHOD(Cluster, "a pod naming a template gets one claim, owned by it, in its status",
                 "[dra][claimctl]") {
  json tmpl = makeClaimTemplate("one-gpu");
  tmpl["spec"]["metadata"] = {{"labels", {{"team", "ml"}}}, {"annotations", {{"note", "x"}}}};
  call("POST", kTemplates, tmpl, 201);
  auto created = call("POST", kPods, makeClaimingPod("trainer", {{"gpu", "one-gpu"}}), 201);

  auto list = claims();
  REQUIRE(list.size() == 1);
  const json& claim = list[0];
  const std::string name = claim["metadata"]["name"];
  CHECK(std::regex_match(name, std::regex("trainer-gpu-[bcdfghjklmnpqrstvwxz2456789]{5}")));
  CHECK(claim["metadata"]["generateName"] == "trainer-gpu-");
  CHECK(claim["metadata"]["ownerReferences"] == json::array({{{"apiVersion", "v1"},
                                                              {"kind", "Pod"},
                                                              {"name", "trainer"},
                                                              {"uid", created["metadata"]["uid"]},
                                                              {"controller", true},
                                                              {"blockOwnerDeletion", true}}}));
  CHECK(claim["metadata"]["annotations"] ==
        json{{"note", "x"}, {"resource.kubernetes.io/pod-claim-name", "gpu"}});
  CHECK(claim["metadata"]["labels"] == json{{"team", "ml"}});
  CHECK(claim["spec"] == call("GET", kTemplates + "/one-gpu", nullptr, 200)["spec"]["spec"]);
  CHECK(pod("trainer")["status"]["resourceClaimStatuses"] ==
        json::array({{{"name", "gpu"}, {"resourceClaimName", name}}}));
}

TEST_CASE_METHOD(Cluster, "idempotent: pod updates and a lost status never make a second claim",
                 "[dra][claimctl]") {
  call("POST", kTemplates, makeClaimTemplate("one-gpu"), 201);
  call("POST", kPods, makeClaimingPod("trainer", {{"gpu", "one-gpu"}, {"nic", "one-gpu"}}), 201);
  REQUIRE(claims().size() == 2);
  const json statuses = pod("trainer")["status"]["resourceClaimStatuses"];
  for (int i = 0; i < 3; ++i) {
    call("PATCH", kPods + "/trainer", json{{"metadata", {{"labels", {{"i", std::to_string(i)}}}}}},
         200);
  }
  CHECK(claims().size() == 2);
  CHECK(pod("trainer")["status"]["resourceClaimStatuses"] == statuses);
  // The status write lost (a controller that crashed after creating the claims): the claims
  // the pod owns are adopted, not made again.
  call("PATCH", kPods + "/trainer/status", json{{"status", {{"resourceClaimStatuses", nullptr}}}},
       200);
  CHECK(claims().size() == 2);
  CHECK(pod("trainer")["status"]["resourceClaimStatuses"] == statuses);
}

TEST_CASE_METHOD(Cluster, "deleting the pod deletes its generated claims", "[dra][claimctl]") {
  call("POST", kTemplates, makeClaimTemplate("one-gpu"), 201);
  call("POST", kPods, makeClaimingPod("trainer", {{"gpu", "one-gpu"}}), 201);
  call("POST", kPods, makeClaimingPod("other", {{"gpu", "one-gpu"}}), 201);
  REQUIRE(claims().size() == 2);
  call("DELETE", kPods + "/trainer", nullptr, 200);
  auto left = claims();
  REQUIRE(left.size() == 1);
  CHECK(left[0]["metadata"]["ownerReferences"][0]["name"] == "other");
}

TEST_CASE_METHOD(Cluster, "a deleted pod leaves reservedFor, an unused protected claim is freed",
                 "[dra][claimctl]") {
  // A claim by name, shared by two pods: not the controller's to delete.
  call("POST", kClaims, makeClaim("shared"), 201);
  json spec = {{"resourceClaims", {{{"name", "gpu"}, {"resourceClaimName", "shared"}}}},
               {"containers", {{{"name", "c"}, {"image", "busybox"}}}}};
  auto p1 = call("POST", kPods, json{{"metadata", {{"name", "p1"}}}, {"spec", spec}}, 201);
  auto p2 = call("POST", kPods, json{{"metadata", {{"name", "p2"}}}, {"spec", spec}}, 201);
  allocate("shared", {p1, p2});
  call("DELETE", kPods + "/p1", nullptr, 200);
  auto claim1 = claim("shared");
  REQUIRE(claim1["status"]["reservedFor"].size() == 1);
  CHECK(claim1["status"]["reservedFor"][0]["name"] == "p2");
  CHECK(claim1["status"].contains("allocation"));
  CHECK(claim1["metadata"]["finalizers"] == json{"resource.kubernetes.io/delete-protection"});
  call("DELETE", kPods + "/p2", nullptr, 200);
  auto claim2 = claim("shared");
  CHECK_FALSE(claim2.contains("status"));  // deallocated, no consumers
  CHECK_FALSE(claim2["metadata"].contains("finalizers"));
}

TEST_CASE_METHOD(Cluster, "an allocated, reserved generated claim goes with its pod",
                 "[dra][claimctl]") {
  call("POST", kTemplates, makeClaimTemplate("one-gpu"), 201);
  auto trainer = call("POST", kPods, makeClaimingPod("trainer", {{"gpu", "one-gpu"}}), 201);
  const std::string name = claims()[0]["metadata"]["name"];
  allocate(name, {trainer});
  CHECK(claim(name)["metadata"]["finalizers"].size() == 1);
  call("DELETE", kPods + "/trainer", nullptr, 200);
  CHECK_FALSE(claimExists(name));  // the finalizer came off, then the garbage collector
}

TEST_CASE_METHOD(Cluster, "a finished pod releases and deletes its generated claim",
                 "[dra][claimctl]") {
  call("POST", kTemplates, makeClaimTemplate("one-gpu"), 201);
  auto job = call("POST", kPods, makeClaimingPod("job", {{"gpu", "one-gpu"}}), 201);
  const std::string name = claims()[0]["metadata"]["name"];
  allocate(name, {job});
  call("PATCH", kPods + "/job/status", json{{"status", {{"phase", "Succeeded"}}}}, 200);
  CHECK_FALSE(claimExists(name));
  CHECK(pod("job")["status"]["phase"] == "Succeeded");  // the pod itself stays
}

TEST_CASE_METHOD(Cluster,
                 "a missing template: no claim but a Warning event, the claim comes with it",
                 "[dra][claimctl]") {
  auto waiter = call("POST", kPods, makeClaimingPod("waiter", {{"gpu", "later"}}), 201);
  CHECK(claims().empty());
  CHECK_FALSE(pod("waiter")["status"].contains("resourceClaimStatuses"));
  auto events = call("GET", "/api/v1/namespaces/default/events", nullptr, 200)["items"];
  REQUIRE(events.size() == 1);
  CHECK(events[0]["type"] == "Warning");
  CHECK(events[0]["reason"] == "FailedResourceClaimCreation");
  CHECK(events[0]["message"] ==
        "PodResourceClaim gpu: resource claim template \"later\": "
        "resourceclaimtemplate.resource.k8s.io \"later\" not found");
  CHECK(events[0]["involvedObject"]["uid"] == waiter["metadata"]["uid"]);
  CHECK(events[0]["source"]["component"] == "resource_claim");
  call("PATCH", kPods + "/waiter", json{{"metadata", {{"labels", {{"retry", "1"}}}}}}, 200);
  CHECK(call("GET", "/api/v1/namespaces/default/events", nullptr, 200)["items"].size() == 1);

  call("POST", kTemplates, makeClaimTemplate("later"), 201);
  auto list = claims();
  REQUIRE(list.size() == 1);
  CHECK(pod("waiter")["status"]["resourceClaimStatuses"][0]["resourceClaimName"] ==
        list[0]["metadata"]["name"]);
}

TEST_CASE_METHOD(Cluster, "a generated claim deleted under a live pod is made again",
                 "[dra][claimctl]") {
  call("POST", kTemplates, makeClaimTemplate("one-gpu"), 201);
  call("POST", kPods, makeClaimingPod("trainer", {{"gpu", "one-gpu"}}), 201);
  const std::string first = claims()[0]["metadata"]["name"];
  call("DELETE", kClaims + "/" + first, nullptr, 200);
  auto list = claims();
  REQUIRE(list.size() == 1);
  const std::string second = list[0]["metadata"]["name"];
  CHECK(second != first);
  CHECK(pod("trainer")["status"]["resourceClaimStatuses"][0]["resourceClaimName"] == second);
}

TEST_CASE_METHOD(Cluster, "a pod bound without the scheduler gets its allocated claim reserved",
                 "[dra][claimctl]") {
  call("POST", kClaims, makeClaim("shared"), 201);
  call("PATCH", kClaims + "/shared/status",
       json{{"status",
             {{"allocation",
               {{"devices",
                 {{"results",
                   {{{"request", "gpu"},
                     {"driver", kGpuDriver},
                     {"pool", "node-1"},
                     {"device", "gpu-0"}}}}}}}}}}},
       200);
  json spec = {{"nodeName", "node-1"},
               {"resourceClaims", {{{"name", "gpu"}, {"resourceClaimName", "shared"}}}},
               {"containers", {{{"name", "c"}, {"image", "busybox"}}}}};
  auto bound = call("POST", kPods, json{{"metadata", {{"name", "bound"}}}, {"spec", spec}}, 201);
  CHECK(
      claim("shared")["status"]["reservedFor"] ==
      json::array({{{"resource", "pods"}, {"name", "bound"}, {"uid", bound["metadata"]["uid"]}}}));
}

TEST_CASE("generateName: <pod>-<claim>-, long names cut in proportion", "[dra][claimctl]") {
  CHECK(claimctl::generateNameFor("trainer", "gpu") == "trainer-gpu-");
  // 40 + 1 + 30 + 1 = 72 > 57: 40*57/72 = 31 and 30*57/72 = 23 characters are kept.
  CHECK(claimctl::generateNameFor(std::string(40, 'p'), std::string(30, 'c')) ==
        std::string(31, 'p') + "-" + std::string(23, 'c'));
  // Exactly 57 stays as it is.
  CHECK(claimctl::generateNameFor(std::string(50, 'p'), "abcde") ==
        std::string(50, 'p') + "-abcde-");
}

TEST_CASE("isPodDone: terminal phase, or deleted before being scheduled", "[dra][claimctl]") {
  auto [phase, deleted, node, done] = GENERATE(table<const char*, bool, const char*, bool>({
      {"Pending", false, "", false},
      {"Running", false, "n1", false},
      {"Succeeded", false, "n1", true},
      {"Failed", false, "n1", true},
      {"Pending", true, "", true},
      {"Running", true, "n1", false},
  }));
  CAPTURE(phase, deleted, node);
  json pod = {{"metadata", {{"name", "p"}}},
              {"spec", {{"nodeName", node}}},
              {"status", {{"phase", phase}}}};
  if (deleted) {
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  }
  CHECK(claimctl::isPodDone(pod) == done);
}
