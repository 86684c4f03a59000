#include "libcore/api/dra_claim.hpp"

#include <catch2/catch.hpp>
#include <random>
#include <string>

#include "tests/support/text_mutator.hpp"

namespace {

using kc::api::ClaimCondition;
using kc::api::ClaimDevice;
using kc::api::parseClaim;
using nlohmann::json;

// A claim as kube-scheduler 1.36 leaves it after allocating a device with binding conditions
// (KEP-5007): results with the copied conditions, a one-node selector, the pod in reservedFor.
const char* kAllocatedClaim = R"json({
  "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
  "metadata": {"name": "train-gpu-x7k2p", "namespace": "ml", "uid": "u-1", "generation": 1},
  "spec": {"devices": {"requests": [{"name": "gpu",
           "exactly": {"deviceClassName": "gpu.kubecomp.io", "count": 1}}]}},
  "status": {
    "allocation": {
      "devices": {"results": [{"request": "gpu", "driver": "gpu.kubecomp.io", "pool": "pool-a",
                               "device": "c0-7-1a2b3c4d",
                               "bindingConditions": ["gpu.kubecomp.io/attached"],
                               "bindingFailureConditions": ["gpu.kubecomp.io/attach-failed"]}]},
      "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
          {"key": "metadata.name", "operator": "In", "values": ["node-2"]}]}]},
      "allocationTimestamp": "2026-11-28T09:00:00Z"},
    "reservedFor": [{"resource": "pods", "name": "train", "uid": "p-1"}]}})json";

ClaimDevice fabricDevice() {
  return ClaimDevice{"gpu",
                     "gpu.kubecomp.io",
                     "pool-a",
                     "c0-7-1a2b3c4d",
                     {"gpu.kubecomp.io/attached"},
                     {"gpu.kubecomp.io/attach-failed"}};
}

ClaimCondition attached(std::string status, std::string time) {
  return ClaimCondition{
      "gpu.kubecomp.io/attached", std::move(status), "Attached", "on node-2", 1, std::move(time)};
}

}  // namespace

TEST_CASE("DRA claims: an allocation as kube-scheduler writes it reads back whole", "[api][dra]") {
  auto c = parseClaim(json::parse(kAllocatedClaim));
  REQUIRE(c);
  CHECK(c->ns == "ml");
  CHECK(c->name == "train-gpu-x7k2p");
  CHECK(c->generation == 1);
  REQUIRE(c->allocation);
  CHECK(c->allocation->nodeName == "node-2");
  CHECK(c->allocation->allocationTimestamp == "2026-11-28T09:00:00Z");
  REQUIRE(c->allocation->results.size() == 1);
  CHECK(c->allocation->results[0] == fabricDevice());
  REQUIRE(c->reservedFor.size() == 1);
  CHECK(c->reservedFor[0].uid == "p-1");
  CHECK(c->devices.empty());
  // Our writer (kubecomp-sched allocating) writes the same status.allocation.
  CHECK(kc::api::toJson(*c->allocation) == json::parse(kAllocatedClaim)["status"]["allocation"]);
}

TEST_CASE("DRA claims: a one-node hostname selector names the node too, others name none",
          "[api][dra]") {
  json c = json::parse(kAllocatedClaim);
  auto& selector = c["status"]["allocation"]["nodeSelector"];
  selector = json::parse(R"({"nodeSelectorTerms": [{"matchExpressions": [
      {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-3"]}]}]})");
  CHECK(parseClaim(c)->allocation->nodeName == "node-3");
  selector["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] = {"a", "b"};
  CHECK(parseClaim(c)->allocation->nodeName.empty());
  c["status"]["allocation"].erase("nodeSelector");
  CHECK(parseClaim(c)->allocation->nodeName.empty());
}

TEST_CASE("DRA claims: device conditions follow metav1.Condition's transition rule", "[api][dra]") {
  auto c = parseClaim(json::parse(kAllocatedClaim));
  REQUIRE(c);
  const ClaimDevice d = fabricDevice();
  CHECK(c->condition(d, "gpu.kubecomp.io/attached") == nullptr);
  auto devices = kc::api::withDeviceCondition(c->devices, d, attached("False", "T1"));
  devices = kc::api::withDeviceCondition(devices, d, attached("False", "T2"));
  REQUIRE(devices.size() == 1);
  REQUIRE(devices[0].conditions.size() == 1);
  CHECK(devices[0].conditions[0].lastTransitionTime == "T1");  // no transition
  devices = kc::api::withDeviceCondition(devices, d, attached("True", "T3"));
  CHECK(devices[0].conditions[0].status == "True");
  CHECK(devices[0].conditions[0].lastTransitionTime == "T3");
  ClaimDevice other = d;
  other.device = "c0-8-00000000";
  devices = kc::api::withDeviceCondition(devices, other, attached("True", "T4"));
  REQUIRE(devices.size() == 2);
  CHECK(devices[0].conditions[0].lastTransitionTime == "T3");
  // Written and read back through the claim's status.
  json obj = json::parse(kAllocatedClaim);
  for (const auto& s : devices) {
    obj["status"]["devices"].push_back(kc::api::toJson(s));
  }
  auto back = parseClaim(obj);
  REQUIRE(back);
  CHECK(back->devices == devices);
  const ClaimCondition* cond = back->condition(d, "gpu.kubecomp.io/attached");
  REQUIRE(cond != nullptr);
  CHECK(cond->observedGeneration == 1);
  CHECK(cond->reason == "Attached");
}

TEST_CASE("DRA claims: malformed parts are refused naming them", "[api][dra]") {
  auto refused = [](auto edit) {
    json c = json::parse(kAllocatedClaim);
    edit(c);
    auto r = parseClaim(c);
    return r ? std::string() : r.error().message;
  };
  CHECK_THAT(
      refused([](json& c) { c["status"]["allocation"]["devices"]["results"][0].erase("device"); }),
      Catch::Contains("without driver, pool or device"));
  CHECK_THAT(refused([](json& c) {
               auto& r = c["status"]["allocation"]["devices"]["results"];
               for (int i = 0; i < 32; ++i) {
                 r.push_back(r[0]);
               }
             }),
             Catch::Contains("more than 32"));
  CHECK_THAT(refused([](json& c) {
               c["status"]["devices"] = json::parse(
                   R"([{"driver":"d","pool":"p","device":"x","conditions":[{"status":"True"}]}])");
             }),
             Catch::Contains("without type or status"));
  CHECK_THAT(refused([](json& c) { c.erase("metadata"); }), Catch::Contains("no metadata"));
  // A claim not allocated yet is fine.
  json pending = json::parse(kAllocatedClaim);
  pending.erase("status");
  auto p = parseClaim(pending);
  REQUIRE(p);
  CHECK_FALSE(p->allocation);
}

TEST_CASE("DRA claims: corrupted claims never crash the reader", "[api][dra][fuzz]") {
  const std::string seed = json::parse(kAllocatedClaim).dump();
  std::mt19937 rng(5007);
  for (int i = 0; i < 20000; ++i) {
    const json j =
        json::parse(kc::testing::mutateText(seed, rng, "{}[]\":,0123456789aeln-"), nullptr, false);
    if (!j.is_discarded()) {
      (void)parseClaim(j);  // must not throw
    }
  }
}
