// Validation of resource.k8s.io/v1 objects in the API test double: each refusal names the
// field and the rule as kube-apiserver does (messages written out by hand from upstream's
// pkg/apis/resource/validation), and a refused write stores nothing.

// GCC 12 reports a false -Wrestrict inside std::string assignment at -O3 (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"

#include "tools/kube-apiserver-double/dra_validation.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/unit/apiserver/api_harness.hpp"
#include "tests/unit/apiserver/dra_builders.hpp"
#include "tools/kube-apiserver-double/api_server.hpp"

using namespace kc::apiserver;
using nlohmann::json;
using namespace kc::apiserver::testing;

namespace {

// `base` changed by an RFC 7386 merge patch (nlohmann's own, not the double's).
json patched(json base, const char* patch) {
  base.merge_patch(json::parse(patch));
  return base;
}

// As the store validates: after v1 defaulting.
json defaulted(const std::string& resource, json object) {
  dra::applyDefaults(resource, object);
  return object;
}

// Each message starts with the expected text (long regex explanations are left out).
void checkMessages(const FieldErrors& errs, const std::vector<std::string>& expected) {
  const auto got = errs.messages();
  CAPTURE(got);
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].rfind(expected[i], 0) == 0);
  }
}

const char* kAllocated = R"({"status":{"allocation":{"devices":{"results":[{"request":"gpu",)"
                         R"("driver":"gpu.kubecomp.io","pool":"node-1","device":"gpu-0"}]}}}})";

}  // namespace

TEST_CASE("ResourceSlice validation names the field and the rule", "[dra]") {
  using V = std::vector<std::string>;
  auto [patch, expected] = GENERATE(table<const char*, V>({
      {R"({"spec":{"driver":null}})", V{"spec.driver: Required value"}},
      {R"({"spec":{"driver":"GPU_kubecomp"}})",
       V{"spec.driver: Invalid value: \"GPU_kubecomp\": a lowercase RFC 1123 subdomain"}},
      {R"({"spec":{"pool":{"name":null}}})", V{"spec.pool.name: Required value"}},
      {R"({"spec":{"pool":{"generation":-1}}})",
       V{"spec.pool.generation: Invalid value: -1: must be greater than or equal to zero"}},
      {R"({"spec":{"pool":{"resourceSliceCount":0}}})",
       V{"spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero"}},
      {R"({"spec":{"nodeName":null}})",
       V{"spec: Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
         "`perDeviceNodeSelection` is required"}},
      {R"({"spec":{"allNodes":true}})",
       V{"spec: Invalid value: \"{`nodeName`, `allNodes`}\": exactly one of `nodeName`, "
         "`nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields "
         "are set"}},
      {R"({"spec":{"nodeName":null,"allNodes":false}})",
       V{"spec.allNodes: Invalid value: false: must be either unset or set to true",
         "spec: Required value: exactly one of"}},
      {R"({"spec":{"nodeName":null,"nodeSelector":{"nodeSelectorTerms":[{},{}]}}})",
       V{"spec.nodeSelector.nodeSelectorTerms: Invalid value: [{},{}]: must have exactly one "
         "node selector term"}},
      {R"({"spec":{"devices":[{"name":"GPU0"}]}})",
       V{"spec.devices[0].name: Invalid value: \"GPU0\": a lowercase RFC 1123 label"}},
      {R"({"spec":{"devices":[{"name":"gpu-0"},{"name":"gpu-0"}]}})",
       V{"spec.devices[1]: Duplicate value: \"gpu-0\""}},
      {R"({"spec":{"devices":[{"name":"gpu-0","bindingConditions":["a.io/x"]}]}})",
       V{"spec.devices[0].bindingFailureConditions: Invalid value: null: "
         "bindingFailureConditions are required to use bindingConditions"}},
      {R"({"spec":{"devices":[{"name":"gpu-0","bindingFailureConditions":["a.io/x"]}]}})",
       V{"spec.devices[0].bindingConditions: Invalid value: null: bindingConditions are "
         "required to use bindingFailureConditions"}},
      {R"({"spec":{"devices":[{"name":"gpu-0","bindingConditions":["a.io/x","a.io/x"],)"
       R"("bindingFailureConditions":["a.io/x"]}]}})",
       V{"spec.devices[0].bindingConditions[1]: Duplicate value: \"a.io/x\"",
         "spec.devices[0].bindingFailureConditions[0]: Invalid value: \"a.io/x\": "
         "bindingFailureConditions must not overlap with bindingConditions"}},
      {R"({"spec":{"devices":[{"name":"gpu-0","bindingConditions":["a.io/x","b","c","d","e"],)"
       R"("bindingFailureConditions":["f"]}]}})",
       V{"spec.devices[0].bindingConditions: Too many: 5: must have at most 4 items"}},
      {R"({"spec":{"devices":[{"name":"gpu-0","bindingConditions":["a"],)"
       R"("bindingFailureConditions":["b","c","d","e","f"]}]}})",
       V{"spec.devices[0].bindingFailureConditions: Too many: 5: must have at most 4 items"}},
      {R"({"spec":{"devices":[{"name":"gpu-0","bindingConditions":["not a label"],)"
       R"("bindingFailureConditions":["f"]}]}})",
       V{"spec.devices[0].bindingConditions[0]: Invalid value: \"not a label\": name part must "
         "consist of"}},
      {R"({"spec":{"devices":[{"name":"gpu-0","attributes":{"model":{"int":1,"string":"x"}}}]}})",
       V{"spec.devices[0].attributes[model]: Invalid value: {\"int\":1,\"string\":\"x\"}: exactly "
         "one value must be specified"}},
      {R"({"spec":{"devices":[{"name":"gpu-0","attributes":{"model":{}}}]}})",
       V{"spec.devices[0].attributes[model]: Invalid value: \"\": exactly one value must be "
         "specified"}},
      {R"({"spec":{"devices":[{"name":"gpu-0","attributes":{"bad-name":{"int":1}}}]}})",
       V{"spec.devices[0].attributes[bad-name]: Invalid value: \"bad-name\": a valid C "
         "identifier"}},
      {R"({"spec":{"devices":[{"name":"gpu-0","attributes":{"cuda":{"version":"12.4"}}}]}})",
       V{"spec.devices[0].attributes[cuda].version: Invalid value: \"12.4\": must be a string "
         "compatible with semver.org spec 2.0.0"}},
      {R"({"spec":{"devices":[{"name":"gpu-0","nodeName":"node-1"}]}})",
       V{"spec.devices[0]: Invalid value: null: `nodeName`, `nodeSelector` and `allNodes` can "
         "only be set if `perDeviceNodeSelection` is set to true in the ResourceSlice spec"}},
      {R"({"spec":{"nodeName":null,"perDeviceNodeSelection":true,"devices":[{"name":"gpu-0"}]}})",
       V{"spec.devices[0]: Required value: exactly one of `nodeName`, `nodeSelector`, or "
         "`allNodes` is required when `perDeviceNodeSelection` is set to true"}},
      {R"({"spec":{"devices":[{"name":"gpu-0","taints":[{"key":"gpu.kubecomp.io/unhealthy"}]}]}})",
       V{"spec.devices[0].taints[0].effect: Required value"}},
      {R"({"spec":{"devices":[{"name":"gpu-0","taints":[{"key":"k","effect":"PreferNoSchedule"}]}]}})",
       V{"spec.devices[0].taints[0].effect: Unsupported value: \"PreferNoSchedule\": supported "
         "values: \"NoExecute\", \"NoSchedule\", \"None\""}},
  }));
  CAPTURE(patch);
  checkMessages(dra::validateResourceSlice(patched(makeSlice("s"), patch), nullptr), expected);
}

TEST_CASE("ResourceSlice: binding conditions need no bindsToNode, 4 of each are allowed", "[dra]") {
  json slice = patched(makeSlice("fabric"),
                       R"({"spec":{"nodeName":null,"allNodes":true,"devices":[{"name":"fgpu-0",)"
                       R"("bindingConditions":["gpu.kubecomp.io/attached","b","c","d"],)"
                       R"("bindingFailureConditions":["gpu.kubecomp.io/failed","f","g","h"]}]}})");
  CHECK(dra::validateResourceSlice(slice, nullptr).empty());
}

TEST_CASE("ResourceSlice device limit: 128, or 64 once a device has taints", "[dra]") {
  CHECK(dra::validateResourceSlice(makeSlice("s", "node-1", 128), nullptr).empty());
  checkMessages(dra::validateResourceSlice(makeSlice("s", "node-1", 129), nullptr),
                {"spec.devices: Too many: 129: must have at most 128 items"});
  json tainted = makeSlice("s", "node-1", 65);
  tainted["spec"]["devices"][3]["taints"] = {{{"key", "k"}, {"effect", "NoSchedule"}}};
  checkMessages(dra::validateResourceSlice(tainted, nullptr),
                {"spec.devices: Too many: 65: must have at most 64 items"});
  json crowded = makeSlice("s");
  for (int i = 0; i < 33; ++i) {
    crowded["spec"]["devices"][0]["attributes"]["a" + std::to_string(i)] = {{"int", i}};
  }
  checkMessages(dra::validateResourceSlice(crowded, nullptr),
                {"spec.devices[0]: Invalid value: 33: the total number of attributes and "
                 "capacities must not exceed 32"});
}

TEST_CASE("ResourceSlice update: driver, pool name and node name are immutable", "[dra]") {
  const json old = makeSlice("s");
  CHECK(dra::validateResourceSlice(patched(old, R"({"spec":{"pool":{"generation":3}}})"), &old)
            .empty());
  checkMessages(dra::validateResourceSlice(patched(old, R"({"spec":{"driver":"b.io"}})"), &old),
                {"spec.driver: Invalid value: \"b.io\": field is immutable"});
  checkMessages(
      dra::validateResourceSlice(patched(old, R"({"spec":{"pool":{"name":"other"}}})"), &old),
      {"spec.pool.name: Invalid value: \"other\": field is immutable"});
  checkMessages(dra::validateResourceSlice(patched(old, R"({"spec":{"nodeName":"node-2"}})"), &old),
                {"spec.nodeName: Invalid value: \"node-2\": field is immutable"});
}

TEST_CASE("ResourceClaim spec validation (after v1 defaulting)", "[dra]") {
  using V = std::vector<std::string>;
  auto [requests, expected] = GENERATE(table<const char*, V>({
      {R"([{"name":"gpu","exactly":{"deviceClassName":"a"}},{"name":"gpu","exactly":{"deviceClassName":"a"}}])",
       V{"spec.devices.requests[1]: Duplicate value: \"gpu\""}},
      {R"([{"name":"gpu"}])",
       V{"spec.devices.requests[0]: Required value: exactly one of `exactly` or `firstAvailable` "
         "is required"}},
      {R"([{"name":"gpu","exactly":{"deviceClassName":"a"},"firstAvailable":[{"name":"x","deviceClassName":"a"}]}])",
       V{"spec.devices.requests[0]: Invalid value: null: exactly one of `exactly` or "
         "`firstAvailable` is required, but multiple fields are set"}},
      {R"([{"name":"gpu","exactly":{}}])",
       V{"spec.devices.requests[0].exactly.deviceClassName: Required value"}},
      {R"([{"name":"GPU","exactly":{"deviceClassName":"a"}}])",
       V{"spec.devices.requests[0].name: Invalid value: \"GPU\": a lowercase RFC 1123 label"}},
      {R"([{"name":"gpu","exactly":{"deviceClassName":"a","count":-1}}])",
       V{"spec.devices.requests[0].exactly.count: Invalid value: -1: must be greater than zero"}},
      {R"([{"name":"gpu","exactly":{"deviceClassName":"a","allocationMode":"All","count":2}}])",
       V{"spec.devices.requests[0].exactly.count: Invalid value: 2: must not be specified when "
         "allocationMode is 'All'"}},
      {R"([{"name":"gpu","exactly":{"deviceClassName":"a","allocationMode":"Some"}}])",
       V{"spec.devices.requests[0].exactly.allocationMode: Unsupported value: \"Some\": "
         "supported values: \"All\", \"ExactCount\""}},
      {R"([{"name":"gpu","exactly":{"deviceClassName":"a","selectors":[{}]}}])",
       V{"spec.devices.requests[0].exactly.selectors[0].cel: Required value"}},
      {R"([{"name":"gpu","exactly":{"deviceClassName":"a","tolerations":[{"key":"k","operator":"Near"}]}}])",
       V{"spec.devices.requests[0].exactly.tolerations[0].operator: Unsupported value: \"Near\": "
         "supported values: \"Equal\", \"Exists\""}},
      {R"([{"name":"gpu","firstAvailable":[{"name":"x","deviceClassName":"a"},{"name":"x","deviceClassName":"b"}]}])",
       V{"spec.devices.requests[0].firstAvailable[1]: Duplicate value: \"x\""}},
      {R"([{"name":"gpu","firstAvailable":[{"name":"x"}]}])",
       V{"spec.devices.requests[0].firstAvailable[0].deviceClassName: Required value"}},
  }));
  CAPTURE(requests);
  json claim = makeClaim("c");
  claim["spec"]["devices"]["requests"] = json::parse(requests);
  dra::applyDefaults("resourceclaims", claim);
  checkMessages(dra::validateResourceClaim(claim, nullptr), expected);
}

TEST_CASE("ResourceClaim: request, constraint and config limits and references", "[dra]") {
  std::vector<std::string> many;
  for (int i = 0; i < 33; ++i) {
    many.push_back("r" + std::to_string(i));
  }
  checkMessages(dra::validateResourceClaim(
                    defaulted("resourceclaims", makeClaim("c", makeClaimSpec(many))), nullptr),
                {"spec.devices.requests: Too many: 33: must have at most 32 items"});
  json claim = makeClaim("c");
  claim["spec"]["devices"]["constraints"] = {
      {{"requests", {"nope"}}, {"matchAttribute", "gpu.kubecomp.io/numa"}},
      {{"requests", {"gpu"}}}};
  claim["spec"]["devices"]["config"] = {{{"requests", {"gpu"}}}};
  checkMessages(dra::validateResourceClaim(defaulted("resourceclaims", claim), nullptr),
                {"spec.devices.constraints[0].requests[0]: Invalid value: \"nope\": must be the "
                 "name of a request in the claim or the name of a request and a subrequest "
                 "separated by '/'",
                 "spec.devices.constraints[1].matchAttribute: Required value",
                 "spec.devices.config[0].opaque: Required value"});
}

TEST_CASE("ResourceClaim: the spec is immutable", "[dra]") {
  const json old = makeClaim("c");
  CHECK(dra::validateResourceClaim(old, &old).empty());
  checkMessages(dra::validateResourceClaim(makeClaim("c", makeClaimSpec({"gpu", "nic"})), &old),
                {"spec: Invalid value: {\"devices\":{\"requests\":"});
}

TEST_CASE("ResourceClaim status rules (the status subresource)", "[dra]") {
  using V = std::vector<std::string>;
  auto [status, expected] = GENERATE(table<const char*, V>({
      {R"({"status":{"reservedFor":[{"resource":"pods","name":"p","uid":"u1"}]}})",
       V{"status.reservedFor: Forbidden: may not be specified when `allocated` is not set"}},
      {R"({"status":{"allocation":{"devices":{"results":[{"request":"nope","driver":"gpu.kubecomp.io","pool":"p","device":"d"}]}}}})",
       V{"status.allocation.devices.results[0].request: Invalid value: \"nope\": must be the name "
         "of a request"}},
      {R"({"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.kubecomp.io","pool":"p","device":"D_1"}]}}}})",
       V{"status.allocation.devices.results[0].device: Invalid value: \"D_1\": a lowercase RFC "
         "1123 label"}},
      {R"({"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.kubecomp.io","pool":"p","device":"d","bindingConditions":["a","b","c","d","e"],"bindingFailureConditions":["f"]}]}}}})",
       V{"status.allocation.devices.results[0].bindingConditions: Too many: 5: must have at most 4 "
         "items"}},
      {R"({"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.kubecomp.io","pool":"p","device":"d"}]}},"devices":[{"driver":"gpu.kubecomp.io","pool":"p","device":"other"}]}})",
       V{"status.devices[0]: Invalid value: \"gpu.kubecomp.io/p/other\": must be an allocated "
         "device in the claim"}},
  }));
  CAPTURE(status);
  const json old = makeClaim("c");
  checkMessages(dra::validateResourceClaimStatus(patched(old, status), old), expected);
}

TEST_CASE("ResourceClaim status: reservations, limits, a fixed allocation", "[dra]") {
  const json old = makeClaim("c");
  const json allocated = patched(old, kAllocated);
  json reserved = allocated;
  reserved["status"]["reservedFor"] = {{{"resource", "pods"}, {"name", "p"}, {"uid", "u1"}},
                                       {{"resource", "pods"}, {"name", "q"}, {"uid", "u1"}},
                                       {{"resource", "pods"}, {"name", "r"}}};
  checkMessages(dra::validateResourceClaimStatus(reserved, old),
                {"status.reservedFor[2].uid: Required value",
                 "status.reservedFor[1]: Duplicate value: \"u1\""});

  json full = reserved;
  full["status"]["reservedFor"] = json::array();
  for (int i = 0; i < 257; ++i) {
    full["status"]["reservedFor"].push_back(
        {{"resource", "pods"}, {"name", "p"}, {"uid", "u" + std::to_string(i)}});
  }
  checkMessages(dra::validateResourceClaimStatus(full, old),
                {"status.reservedFor: Too many: 257: must have at most 256 items"});

  json results = allocated;
  json& list = results["status"]["allocation"]["devices"]["results"];
  for (int i = 1; i < 33; ++i) {
    list.push_back(list[0]);
  }
  checkMessages(dra::validateResourceClaimStatus(results, old),
                {"status.allocation.devices.results: Too many: 33: must have at most 32 items"});

  json moved = allocated;
  moved["status"]["allocation"]["devices"]["results"][0]["device"] = "gpu-1";
  checkMessages(
      dra::validateResourceClaimStatus(moved, allocated),
      {"status.allocation: Invalid value: {\"devices\":{\"results\":[{\"device\":\"gpu-1\""});
  CHECK(dra::validateResourceClaimStatus(allocated, allocated).empty());

  // Being deleted: consumers may go, not come.
  json deleting = allocated;
  deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  json more = deleting;
  more["status"]["reservedFor"] = {{{"resource", "pods"}, {"name", "p"}, {"uid", "u1"}}};
  checkMessages(dra::validateResourceClaimStatus(more, deleting),
                {"status.reservedFor: Forbidden: new entries may not be added while "
                 "`deallocationRequested` or `deletionTimestamp` are set"});
  CHECK(dra::validateResourceClaimStatus(deleting, more).empty());
}

TEST_CASE("ResourceClaimTemplate: spec.spec validated like a claim, then immutable", "[dra]") {
  json bad = makeClaimTemplate("t", json::parse(R"({"devices":{"requests":[{"name":"gpu"}]}})"));
  checkMessages(dra::validateResourceClaimTemplate(bad, nullptr),
                {"spec.spec.devices.requests[0]: Required value: exactly one of `exactly` or "
                 "`firstAvailable` is required"});
  const json old = defaulted("resourceclaimtemplates", makeClaimTemplate("t"));
  CHECK(dra::validateResourceClaimTemplate(old, nullptr).empty());
  checkMessages(
      dra::validateResourceClaimTemplate(makeClaimTemplate("t", makeClaimSpec({"x"})), &old),
      {"spec: Invalid value: "});
}

TEST_CASE("DeviceClass: selectors and opaque configuration", "[dra]") {
  CHECK(dra::validateDeviceClass(makeDeviceClass("gpu.kubecomp.io")).empty());
  json cls = makeDeviceClass("c");
  cls["spec"]["selectors"].push_back({{"cel", {{"expression", ""}}}});
  cls["spec"]["config"] = {{{"opaque", {{"driver", "gpu.kubecomp.io"}, {"parameters", "x"}}}},
                           {{"opaque", {{"parameters", json::object()}}}}};
  checkMessages(dra::validateDeviceClass(cls),
                {"spec.selectors[1].cel.expression: Required value",
                 "spec.config[0].opaque.parameters: Invalid value: \"<value omitted>\": must be a "
                 "valid JSON object",
                 "spec.config[1].opaque.driver: Required value"});
  json many = makeDeviceClass("c");
  for (int i = 0; i < 32; ++i) {
    many["spec"]["selectors"].push_back(many["spec"]["selectors"][0]);
  }
  checkMessages(dra::validateDeviceClass(many),
                {"spec.selectors: Too many: 33: must have at most 32 items"});
}

TEST_CASE("a refused DRA write is a 422 Invalid Status with every cause, nothing stored",
          "[dra][api]") {
  ObjectStore store;
  ApiServer api(store, {});
  json slice = patched(makeSlice("bad"), R"({"spec":{"driver":null,"pool":{"generation":-1}}})");
  auto status = apiCall(
      api, apiRequest("POST", "/apis/resource.k8s.io/v1/resourceslices", slice.dump()), 422);
  CHECK(status["kind"] == "Status");
  CHECK(status["reason"] == "Invalid");
  CHECK(status["code"] == 422);
  CHECK(status["message"] ==
        "ResourceSlice.resource.k8s.io \"bad\" is invalid: [spec.driver: Required value, "
        "spec.pool.generation: Invalid value: -1: must be greater than or equal to zero]");
  CHECK(status["details"]["group"] == "resource.k8s.io");
  CHECK(status["details"]["kind"] == "ResourceSlice");
  REQUIRE(status["details"]["causes"].size() == 2);
  CHECK(status["details"]["causes"][0] == json{{"reason", "FieldValueRequired"},
                                               {"message", "Required value"},
                                               {"field", "spec.driver"}});
  apiCall(api, apiRequest("GET", "/apis/resource.k8s.io/v1/resourceslices/bad"), 404);

  // An update refused: the stored object (and its resourceVersion) stays.
  auto created = apiCall(
      api, apiRequest("POST", "/apis/resource.k8s.io/v1/resourceslices", makeSlice("s").dump()),
      201);
  apiCall(api,
          apiRequest("PATCH", "/apis/resource.k8s.io/v1/resourceslices/s",
                     R"({"spec":{"devices":[{"name":"gpu-0"},{"name":"gpu-0"}]}})"),
          422);
  auto after = apiCall(api, apiRequest("GET", "/apis/resource.k8s.io/v1/resourceslices/s"), 200);
  CHECK(after["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]);
  CHECK(after["spec"]["devices"].size() == 1);

  auto template422 = apiCall(
      api,
      apiRequest("POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates",
                 makeClaimTemplate("t", json::parse(R"({"devices":{"requests":[{"name":"gpu"}]}})"))
                     .dump()),
      422);
  CHECK(template422["details"]["kind"] == "ResourceClaimTemplate");
  CHECK(store.objectCount(*store.findResource("resource.k8s.io", "v1", "resourceclaimtemplates")) ==
        0);
}
