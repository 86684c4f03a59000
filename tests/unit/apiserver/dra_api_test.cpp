// resource.k8s.io/v1 through the double's REST surface: discovery, CRUD, watch, the field
// selectors kube-apiserver offers, the status subresource of claims, v1 defaulting and the
// server-side Table columns kubectl prints. Expected values are written out by hand.

// GCC 12 reports a false -Wrestrict inside std::string assignment at -O3 (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"

#include <algorithm>
#include <catch2/catch.hpp>
#include <memory>

#include "tests/unit/apiserver/api_harness.hpp"
#include "tests/unit/apiserver/dra_builders.hpp"
#include "tests/unit/apiserver/fake_stream.hpp"
#include "tools/kube-apiserver-double/api_server.hpp"
#include "tools/kube-apiserver-double/dra_printers.hpp"

using namespace kc::apiserver;
using nlohmann::json;
using namespace kc::apiserver::testing;
using namespace std::chrono_literals;

namespace {

const char* kTable = "application/json;as=Table;v=v1;g=meta.k8s.io";
const std::string kV1 = "/apis/resource.k8s.io/v1";
const std::string kClaims = kV1 + "/namespaces/default/resourceclaims";

struct Clock {
  std::chrono::system_clock::time_point now =
      std::chrono::sys_days{std::chrono::year{2026} / 1 / 1};
};

struct DraApi {
  DraApi() : clock(std::make_shared<Clock>()), store(options(clock)), api(store, {}) {}
  static StoreOptions options(std::shared_ptr<Clock> c) {
    StoreOptions o;
    o.clock = [c] { return c->now; };
    return o;
  }
  json call(std::string method, const std::string& path, const json& body, unsigned status,
            std::vector<std::pair<std::string, std::string>> query = {}, std::string accept = "") {
    return apiCall(api,
                   apiRequest(std::move(method), path, body.is_null() ? "" : body.dump(),
                              std::move(query), std::move(accept)),
                   status);
  }
  json get(const std::string& path, unsigned status = 200) {
    return call("GET", path, nullptr, status);
  }
  std::vector<std::string> names(const std::string& path, const std::string& fieldSelector) {
    std::vector<std::string> out;
    const json list = call("GET", path, nullptr, 200, {{"fieldSelector", fieldSelector}});
    for (const auto& item : list["items"]) {
      out.push_back(item["metadata"]["name"].get<std::string>());
    }
    return out;
  }
  std::shared_ptr<Clock> clock;
  ObjectStore store;
  ApiServer api;
};

}  // namespace

TEST_CASE_METHOD(DraApi, "discovery: resource.k8s.io/v1 serves the four DRA resources",
                 "[dra][api]") {
  auto groups = get("/apis")["groups"];
  auto group = std::find_if(groups.begin(), groups.end(),
                            [](const json& g) { return g["name"] == "resource.k8s.io"; });
  REQUIRE(group != groups.end());
  CHECK((*group)["preferredVersion"]["groupVersion"] == "resource.k8s.io/v1");
  std::map<std::string, json> byName;
  const json resources = get(kV1)["resources"];
  for (const auto& r : resources) {
    byName[r["name"].get<std::string>()] = r;
  }
  using Row = std::tuple<std::string, std::string, bool>;
  for (const auto& [name, kind, namespaced] :
       {Row{"deviceclasses", "DeviceClass", false}, Row{"resourceslices", "ResourceSlice", false},
        Row{"resourceclaims", "ResourceClaim", true},
        Row{"resourceclaimtemplates", "ResourceClaimTemplate", true}}) {
    CAPTURE(name);
    REQUIRE(byName.count(name));
    CHECK(byName[name]["kind"] == kind);
    CHECK(byName[name]["namespaced"] == namespaced);
    CHECK_FALSE(byName[name].contains("shortNames"));  // none upstream
    const auto verbs = byName[name]["verbs"];
    CHECK(std::find(verbs.begin(), verbs.end(), "watch") != verbs.end());
  }
  CHECK(byName.count("resourceclaims/status"));
  CHECK_FALSE(byName.count("resourceslices/status"));
  CHECK(byName.size() == 5);
}

TEST_CASE_METHOD(DraApi, "DeviceClass CRUD: generation follows the spec, DELETE answers the object",
                 "[dra][api]") {
  auto created = call("POST", kV1 + "/deviceclasses", makeDeviceClass("gpu.kubecomp.io"), 201);
  CHECK(created["kind"] == "DeviceClass");
  CHECK(created["apiVersion"] == "resource.k8s.io/v1");
  CHECK(created["metadata"]["generation"] == 1);
  call("POST", kV1 + "/deviceclasses", makeDeviceClass("gpu.kubecomp.io"), 409);
  call("GET", kV1 + "/namespaces/default/deviceclasses/gpu.kubecomp.io", nullptr, 404);
  auto labelled = call("PATCH", kV1 + "/deviceclasses/gpu.kubecomp.io",
                       json{{"metadata", {{"labels", {{"tier", "a"}}}}}}, 200);
  CHECK(labelled["metadata"]["generation"] == 1);
  auto changed = call("PATCH", kV1 + "/deviceclasses/gpu.kubecomp.io",
                      json{{"spec", {{"selectors", json::array()}}}}, 200);
  CHECK(changed["metadata"]["generation"] == 2);
  CHECK(get(kV1 + "/deviceclasses")["items"].size() == 1);
  auto deleted = call("DELETE", kV1 + "/deviceclasses/gpu.kubecomp.io", nullptr, 200);
  CHECK(deleted["kind"] == "DeviceClass");
  get(kV1 + "/deviceclasses/gpu.kubecomp.io", 404);
}

TEST_CASE_METHOD(DraApi, "ResourceSlice field selectors: spec.nodeName and spec.driver only",
                 "[dra][api]") {
  call("POST", kV1 + "/resourceslices", makeSlice("n1-gpu", "node-1"), 201);
  call("POST", kV1 + "/resourceslices", makeSlice("n2-gpu", "node-2"), 201);
  json fabric = makeSlice("fabric", "node-1");
  fabric["spec"].erase("nodeName");
  fabric["spec"]["allNodes"] = true;
  fabric["spec"]["driver"] = "fabric.kubecomp.io";
  call("POST", kV1 + "/resourceslices", fabric, 201);
  CHECK(names(kV1 + "/resourceslices", "spec.nodeName=node-1") ==
        std::vector<std::string>{"n1-gpu"});
  CHECK(names(kV1 + "/resourceslices", "spec.nodeName=") == std::vector<std::string>{"fabric"});
  CHECK(names(kV1 + "/resourceslices", "spec.driver=gpu.kubecomp.io") ==
        std::vector<std::string>{"n1-gpu", "n2-gpu"});
  CHECK(names(kV1 + "/resourceslices", "spec.driver!=gpu.kubecomp.io,metadata.name=fabric") ==
        std::vector<std::string>{"fabric"});
  auto refused = call("GET", kV1 + "/resourceslices", nullptr, 400,
                      {{"fieldSelector", "spec.pool.name=node-1"}});
  CHECK(refused["message"] == "field label not supported: spec.pool.name");
  call("GET", kClaims, nullptr, 400, {{"fieldSelector", "spec.nodeName=node-1"}});
}

TEST_CASE_METHOD(DraApi, "watch on resourceslices with a field selector sees only its node",
                 "[dra][api][watch]") {
  auto stream = std::make_shared<FakeStream>();
  api.serve(apiRequest("GET", kV1 + "/resourceslices", "",
                       {{"watch", "true"}, {"fieldSelector", "spec.nodeName=node-2"}}),
            stream);
  REQUIRE(stream->begunStatus == 200);
  call("POST", kV1 + "/resourceslices", makeSlice("n1-gpu", "node-1"), 201);
  call("POST", kV1 + "/resourceslices", makeSlice("n2-gpu", "node-2"), 201);
  call("PATCH", kV1 + "/resourceslices/n2-gpu", json{{"spec", {{"pool", {{"generation", 1}}}}}},
       200);
  call("DELETE", kV1 + "/resourceslices/n2-gpu", nullptr, 200);
  auto events = watchEvents(stream->body);
  REQUIRE(events.size() == 3);
  CHECK(events[0]["type"] == "ADDED");
  CHECK(events[0]["object"]["kind"] == "ResourceSlice");
  CHECK(events[0]["object"]["metadata"]["name"] == "n2-gpu");
  CHECK(events[1]["type"] == "MODIFIED");
  CHECK(events[1]["object"]["metadata"]["generation"] == 2);
  CHECK(events[2]["type"] == "DELETED");
}

TEST_CASE_METHOD(DraApi, "ResourceClaim status: only through the status subresource",
                 "[dra][api]") {
  json claim = makeClaim("shared");
  claim["status"] = {{"reservedFor", {{{"resource", "pods"}, {"name", "p"}, {"uid", "u"}}}}};
  auto created = call("POST", kClaims, claim, 201);
  CHECK_FALSE(created.contains("status"));  // status is not the creator's to set
  const json allocation = {{"devices",
                            {{"results",
                              {{{"request", "gpu"},
                                {"driver", kGpuDriver},
                                {"pool", "node-1"},
                                {"device", "gpu-0"}}}}}}};
  // The main resource ignores status changes, as for pods...
  auto viaMain =
      call("PATCH", kClaims + "/shared", json{{"status", {{"allocation", allocation}}}}, 200);
  CHECK_FALSE(viaMain.contains("status"));
  CHECK(viaMain["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]);
  // ... the status subresource writes them, and ignores spec changes.
  auto viaStatus = call("PATCH", kClaims + "/shared/status",
                        json{{"status", {{"allocation", allocation}}}, {"spec", nullptr}}, 200);
  CHECK(viaStatus["status"]["allocation"] == allocation);
  CHECK(viaStatus["spec"] == created["spec"]);
  auto put = viaStatus;
  put["spec"]["devices"]["requests"][0]["name"] = "other";
  auto refused = call("PUT", kClaims + "/shared", put, 422);
  CHECK(refused["message"].get<std::string>().find("spec: Invalid value: ") != std::string::npos);
  CHECK(refused["message"].get<std::string>().find(": field is immutable") != std::string::npos);
  CHECK(get(kClaims + "/shared")["spec"]["devices"]["requests"][0]["name"] == "gpu");
  // DELETE answers the object, as for every resource.k8s.io resource.
  CHECK(call("DELETE", kClaims + "/shared", nullptr, 200)["kind"] == "ResourceClaim");
}

TEST_CASE_METHOD(DraApi,
                 "v1 defaults: ExactCount and count 1, re-sending the undefaulted spec is a no-op",
                 "[dra][api]") {
  json spec = makeClaimSpec();
  spec["devices"]["requests"][0]["exactly"]["tolerations"] = {
      {{"key", "k"}, {"effect", "NoSchedule"}}};
  auto created = call("POST", kClaims, makeClaim("c", spec), 201);
  const json& exactly = created["spec"]["devices"]["requests"][0]["exactly"];
  CHECK(exactly["allocationMode"] == "ExactCount");
  CHECK(exactly["count"] == 1);
  CHECK(exactly["tolerations"][0]["operator"] == "Equal");
  json again = makeClaim("c", spec);
  again["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"];
  auto put = call("PUT", kClaims + "/c", again, 200);
  CHECK(put["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]);
  json all = makeClaimSpec();
  all["devices"]["requests"][0]["exactly"]["allocationMode"] = "All";
  auto allMode = call("POST", kClaims, makeClaim("all", all), 201);
  CHECK_FALSE(allMode["spec"]["devices"]["requests"][0]["exactly"].contains("count"));
}

TEST_CASE("resourceClaimState: deleted, pending, allocated, reserved", "[dra][table]") {
  auto [status, deleting, state] = GENERATE(table<const char*, bool, const char*>({
      {R"({})", false, "pending"},
      {R"({})", true, "deleted"},
      {R"({"allocation":{}})", false, "allocated"},
      {R"({"allocation":{},"reservedFor":[{"uid":"u"}]})", false, "allocated,reserved"},
      {R"({"allocation":{},"reservedFor":[]})", false, "allocated"},
      {R"({"allocation":{},"reservedFor":[{"uid":"u"}]})", true, "deleted,allocated,reserved"},
  }));
  CAPTURE(status, deleting);
  json claim = {{"metadata", {{"name", "c"}}}, {"status", json::parse(status)}};
  if (deleting) {
    claim["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  }
  CHECK(dra::resourceClaimState(claim) == state);
}

TEST_CASE_METHOD(DraApi, "kubectl get columns: slices, claims, classes, templates",
                 "[dra][table]") {
  call("POST", kV1 + "/deviceclasses", makeDeviceClass("gpu.kubecomp.io"), 201);
  call("POST", kV1 + "/resourceslices", makeSlice("n1-gpu", "node-1"), 201);
  json fabric = makeSlice("fabric", "x");
  fabric["spec"].erase("nodeName");
  fabric["spec"]["allNodes"] = true;
  fabric["spec"]["pool"]["name"] = "fabric-pool";
  call("POST", kV1 + "/resourceslices", fabric, 201);
  call("POST", kClaims, makeClaim("c1"), 201);
  call("POST", kV1 + "/namespaces/default/resourceclaimtemplates", makeClaimTemplate("t1"), 201);
  clock->now += 90s;
  auto columns = [](const json& table) {
    std::vector<std::string> out;
    for (const auto& c : table["columnDefinitions"]) {
      out.push_back(c["name"].get<std::string>());
    }
    return out;
  };
  auto slices = call("GET", kV1 + "/resourceslices", nullptr, 200, {}, kTable);
  CHECK(columns(slices) == std::vector<std::string>{"Name", "Node", "Driver", "Pool", "Age"});
  CHECK(slices["rows"][0]["cells"] ==
        json{"fabric", nullptr, "gpu.kubecomp.io", "fabric-pool", "90s"});
  CHECK(slices["rows"][1]["cells"] == json{"n1-gpu", "node-1", "gpu.kubecomp.io", "node-1", "90s"});
  auto claims = call("GET", kClaims, nullptr, 200, {}, kTable);
  CHECK(columns(claims) == std::vector<std::string>{"Name", "State", "Age"});
  CHECK(claims["rows"][0]["cells"] == json{"c1", "pending", "90s"});
  auto classes = call("GET", kV1 + "/deviceclasses/gpu.kubecomp.io", nullptr, 200, {}, kTable);
  CHECK(columns(classes) == std::vector<std::string>{"Name", "Age"});
  CHECK(classes["rows"][0]["cells"] == json{"gpu.kubecomp.io", "90s"});
  auto templates =
      call("GET", kV1 + "/namespaces/default/resourceclaimtemplates", nullptr, 200, {}, kTable);
  CHECK(columns(templates) == std::vector<std::string>{"Name", "Age"});
  CHECK(templates["rows"][0]["cells"] == json{"t1", "90s"});
}
