// Server-side Table output of the API test double: what `kubectl get` prints. Expected cells
// are written out by hand from the objects (no call into the convertor computes them).

// GCC 12 reports a false -Wrestrict inside std::string assignment at -O3 (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"

#include <catch2/catch.hpp>
#include <memory>

#include "tests/unit/apiserver/api_harness.hpp"
#include "tests/unit/apiserver/fake_stream.hpp"
#include "tools/kube-apiserver-double/api_server.hpp"
#include "tools/kube-apiserver-double/table_convertor.hpp"

using namespace kc::apiserver;
using nlohmann::json;
using namespace kc::apiserver::testing;
using namespace std::chrono_literals;

namespace {

const char* kTableV1 = "application/json;as=Table;v=v1;g=meta.k8s.io";
// What kubectl get sends for human-readable output.
const char* kKubectlAccept =
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/"
    "json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

// 2026-01-01T00:00:00Z, moved forward by tests to age objects.
struct Clock {
  std::chrono::system_clock::time_point now =
      std::chrono::sys_days{std::chrono::year{2026} / 1 / 1};
};

struct TableApi {
  TableApi() : clock(std::make_shared<Clock>()), store(options(clock)), api(store, {}) {}
  static StoreOptions options(std::shared_ptr<Clock> c) {
    StoreOptions o;
    o.clock = [c] { return c->now; };
    return o;
  }
  kc::net::Request req(std::string method, std::string path, std::string body = "",
                       std::string accept = "",
                       std::vector<std::pair<std::string, std::string>> query = {}) {
    return apiRequest(std::move(method), std::move(path), std::move(body), std::move(query),
                      std::move(accept));
  }
  json call(const kc::net::Request& r, unsigned status) { return apiCall(api, r, status); }
  static std::vector<std::string> names(const json& table) {
    std::vector<std::string> out;
    for (const auto& c : table["columnDefinitions"]) {
      out.push_back(c["name"].get<std::string>());
    }
    return out;
  }
  std::shared_ptr<Clock> clock;
  ObjectStore store;
  ApiServer api;
};

const char* kGpuPoolCrd =
    R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
  "metadata":{"name":"gpupools.kubecomp.io"},"spec":{"group":"kubecomp.io","scope":"Cluster",
  "names":{"plural":"gpupools","singular":"gpupool","kind":"GPUPool"},
  "versions":[{"name":"v1alpha1","served":true,"storage":true,"subresources":{"status":{}},
    "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}},
    "additionalPrinterColumns":[
      {"name":"Driver","type":"string","jsonPath":".spec.driver"},
      {"name":"GPUs","type":"integer","jsonPath":".status.total","description":"GPUs in the pool"},
      {"name":"Free","type":"integer","jsonPath":".status.free","priority":1},
      {"name":"Ready","type":"boolean","jsonPath":".status.ready"},
      {"name":"Load","type":"number","jsonPath":".status.load"},
      {"name":"First","type":"string","jsonPath":".status.gpus[0].id"},
      {"name":"Host","type":"string","jsonPath":".metadata.labels.kubecomp\\.io/host"},
      {"name":"Nodes","type":"string","jsonPath":".spec.nodes"},
      {"name":"Synced","type":"date","jsonPath":".status.lastSync"},
      {"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}]},
   {"name":"v1beta1","served":true,"storage":false}]}})";

}  // namespace

TEST_CASE("humanDuration formats ages as kubectl prints them", "[table]") {
  auto [d, text] = GENERATE(table<std::chrono::seconds, const char*>({
      {0s, "0s"},        {-1s, "0s"},          {-5s, "<invalid>"},
      {59s, "59s"},      {119s, "119s"},       {120s, "2m"},
      {150s, "2m30s"},   {599s, "9m59s"},      {600s, "10m"},
      {179min, "179m"},  {180min, "3h"},       {200min, "3h20m"},
      {8h, "8h"},        {47h, "47h"},         {48h, "2d"},
      {52h, "2d4h"},     {8 * 24h, "8d"},      {400 * 24h, "400d"},
      {730 * 24h, "2y"}, {750 * 24h, "2y20d"}, {8 * 365 * 24h, "8y"},
  }));
  CAPTURE(d.count());
  CHECK(humanDuration(d) == text);
}

TEST_CASE_METHOD(
    TableApi, "string printer columns print any JSON value as the server's JSONPath printer does",
    "[table]") {
  auto [value, text] = GENERATE(table<const char*, const char*>({
      {R"("x y")", "x y"},
      {"7", "7"},
      {"-3", "-3"},
      {"0.25", "0.25"},
      {"3.0", "3"},
      {"100000.0", "100000"},
      {"1234567.5", "1.2345675e+06"},
      {"0.00001", "1e-05"},
      {"true", "true"},
      {R"(["n1",2,[true]])", "[n1 2 [true]]"},
      {R"({"b":1,"a":{"c":"d"}})", "map[a:map[c:d] b:1]"},
      {"[]", "[]"},
  }));
  CAPTURE(value);
  call(req("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", kGpuPoolCrd), 201);
  call(req("POST", "/apis/kubecomp.io/v1alpha1/gpupools",
           std::string(R"({"metadata":{"name":"p"},"spec":{"driver":)") + value + "}}"),
       201);
  auto t = call(req("GET", "/apis/kubecomp.io/v1alpha1/gpupools/p", "", kTableV1), 200);
  CHECK(t["rows"][0]["cells"][1] == text);
}

TEST_CASE("simple JSONPath: keys, indexes, escaped dots, bracket keys, anything else is refused",
          "[table]") {
  auto ok = [](const std::string& p) {
    auto r = parseSimpleJsonPath(p);
    REQUIRE(r.ok());
    return *r;
  };
  CHECK(ok(".spec.replicas") == std::vector<std::string>{"spec", "replicas"});
  CHECK(ok(".status.conditions[1].type") ==
        std::vector<std::string>{"status", "conditions", "#1", "type"});
  CHECK(ok(".metadata.labels.app\\.kubernetes\\.io/name") ==
        std::vector<std::string>{"metadata", "labels", "app.kubernetes.io/name"});
  CHECK(ok(".metadata.annotations['a.b/c']") ==
        std::vector<std::string>{"metadata", "annotations", "a.b/c"});
  for (const char* bad :
       {"", "spec.x", ".", ".a..b", ".a[*]", ".a[?(@.x)]", "{.a}", ".a[", ".a[]", ".a[x]"}) {
    CAPTURE(bad);
    CHECK_FALSE(parseSimpleJsonPath(bad).ok());
  }
}

TEST_CASE_METHOD(TableApi, "pods as a Table: the built-in columns, wide columns at priority 1",
                 "[table]") {
  call(req("POST", "/api/v1/namespaces/default/pods",
           R"({"metadata":{"name":"web","labels":{"app":"web"}},
    "spec":{"containers":[{"name":"a","image":"x"},{"name":"b","image":"y"}]}})"),
       201);
  call(req("POST", "/api/v1/namespaces/default/pods", R"({"metadata":{"name":"job"},
    "spec":{"containers":[{"name":"a","image":"x"}]}})"),
       201);
  // web: bound, one of two containers running and ready, 3 + 1 restarts.
  call(req("PATCH", "/api/v1/namespaces/default/pods/web/status",
           R"({"status":{"phase":"Running","podIP":"10.1.0.7",
    "containerStatuses":[{"name":"a","ready":true,"restartCount":3,"state":{"running":{}},
                          "lastState":{"terminated":{"exitCode":1,"finishedAt":"2026-01-01T00:01:00Z"}}},
                         {"name":"b","ready":false,"restartCount":1,"state":{"waiting":{"reason":"CrashLoopBackOff"}},
                          "lastState":{"terminated":{"exitCode":1,"finishedAt":"2026-01-01T00:00:30Z"}}}]}})"),
       200);
  call(req("POST", "/api/v1/namespaces/default/pods/web/binding",
           R"({"target":{"kind":"Node","name":"n1"}})"),
       201);
  call(req("PATCH", "/api/v1/namespaces/default/pods/job/status", R"({"status":{"phase":"Succeeded",
    "containerStatuses":[{"name":"a","ready":false,"restartCount":0,"state":{"terminated":{"exitCode":0,"reason":"Completed"}}}]}})"),
       200);
  // side: one container completed, the other still running: NotReady until the pod's Ready
  // condition is True, then Running.
  call(req("POST", "/api/v1/namespaces/default/pods", R"({"metadata":{"name":"side"},
    "spec":{"containers":[{"name":"x","image":"x"},{"name":"y","image":"y"}]}})"),
       201);
  call(req("PATCH", "/api/v1/namespaces/default/pods/side/status", R"({"status":{"phase":"Running",
    "containerStatuses":[{"name":"x","ready":false,"restartCount":0,"state":{"terminated":{"exitCode":0,"reason":"Completed"}}},
                         {"name":"y","ready":true,"restartCount":0,"state":{"running":{}}}]}})"),
       200);
  clock->now += 150s;

  auto table = call(req("GET", "/api/v1/namespaces/default/pods", "", kKubectlAccept), 200);
  CHECK(table["kind"] == "Table");
  CHECK(table["apiVersion"] == "meta.k8s.io/v1");
  CHECK(table["metadata"]["resourceVersion"] == std::to_string(store.currentResourceVersion()));
  CHECK(names(table) == std::vector<std::string>{"Name", "Ready", "Status", "Restarts", "Age", "IP",
                                                 "Node", "Nominated Node", "Readiness Gates"});
  const auto& cols = table["columnDefinitions"];
  CHECK(cols[0]["format"] == "name");
  for (int i = 0; i < 5; ++i) {
    CHECK(cols[i]["priority"] == 0);
  }
  for (int i = 5; i < 9; ++i) {
    CHECK(cols[i]["priority"] == 1);
  }
  REQUIRE(table["rows"].size() == 3);
  CHECK(table["rows"][0]["cells"] ==
        json({"job", "0/1", "Completed", "0", "2m30s", "<none>", "<none>", "<none>", "<none>"}));
  CHECK(table["rows"][0]["conditions"][0]["type"] == "Completed");
  CHECK(table["rows"][1]["cells"] ==
        json({"side", "1/2", "NotReady", "0", "2m30s", "<none>", "<none>", "<none>", "<none>"}));
  // Restarts: 3 + 1, the latest termination 90 s before now.
  CHECK(table["rows"][2]["cells"] == json({"web", "1/2", "CrashLoopBackOff", "4 (90s ago)", "2m30s",
                                           "10.1.0.7", "n1", "<none>", "<none>"}));
  CHECK_FALSE(table["rows"][2].contains("conditions"));
  // includeObject defaults to Metadata: a PartialObjectMetadata (kubectl reads the namespace
  // and labels from it).
  const auto& obj = table["rows"][2]["object"];
  CHECK(obj["kind"] == "PartialObjectMetadata");
  CHECK(obj["apiVersion"] == "meta.k8s.io/v1");
  CHECK(obj["metadata"]["namespace"] == "default");
  CHECK(obj["metadata"]["labels"]["app"] == "web");
  CHECK_FALSE(obj.contains("spec"));

  call(req("PATCH", "/api/v1/namespaces/default/pods/side/status",
           R"({"status":{"conditions":[{"type":"Ready","status":"True"}]}})"),
       200);
  CHECK(call(req("GET", "/api/v1/namespaces/default/pods/side", "", kTableV1),
             200)["rows"][0]["cells"][2] == "Running");

  // Deletion in progress (a finalizer holds it): Terminating.
  call(req("PATCH", "/api/v1/namespaces/default/pods/web", R"({"metadata":{"finalizers":["x/y"]}})",
           "", {}),
       200);
  call(req("DELETE", "/api/v1/namespaces/default/pods/web"), 200);
  auto one = call(req("GET", "/api/v1/namespaces/default/pods/web", "", kTableV1), 200);
  REQUIRE(one["rows"].size() == 1);
  CHECK(one["rows"][0]["cells"][2] == "Terminating");
}

TEST_CASE_METHOD(TableApi, "includeObject=None|Object|Metadata, meta.k8s.io/v1beta1, and 406 / 400",
                 "[table]") {
  call(req("POST", "/api/v1/namespaces", R"({"metadata":{"name":"team-a"}})"), 201);
  auto none =
      call(req("GET", "/api/v1/namespaces/team-a", "", kTableV1, {{"includeObject", "None"}}), 200);
  CHECK_FALSE(none["rows"][0].contains("object"));
  CHECK(none["rows"][0]["cells"] == json({"team-a", "Active", "0s"}));
  CHECK(names(none) == std::vector<std::string>{"Name", "Status", "Age"});
  auto full = call(
      req("GET", "/api/v1/namespaces/team-a", "", kTableV1, {{"includeObject", "Object"}}), 200);
  CHECK(full["rows"][0]["object"]["kind"] == "Namespace");
  CHECK(full["rows"][0]["object"]["apiVersion"] == "v1");
  CHECK(full["rows"][0]["object"]["spec"]["finalizers"] == json({"kubernetes"}));
  auto beta = call(req("GET", "/api/v1/namespaces/team-a", "",
                       "application/json;as=Table;v=v1beta1;g=meta.k8s.io"),
                   200);
  CHECK(beta["apiVersion"] == "meta.k8s.io/v1beta1");
  CHECK(beta["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1");
  // Plain JSON first wins over a Table later in the list.
  CHECK(
      call(req("GET", "/api/v1/namespaces/team-a", "", std::string("application/json,") + kTableV1),
           200)["kind"] == "Namespace");
  auto refused = call(
      req("GET", "/api/v1/namespaces/team-a", "", "application/json;as=Table;v=v2;g=meta.k8s.io"),
      406);
  CHECK(refused["reason"] == "NotAcceptable");
  auto bad =
      call(req("GET", "/api/v1/namespaces", "", kTableV1, {{"includeObject", "Everything"}}), 400);
  CHECK(bad["message"].get<std::string>().find("includeObject") != std::string::npos);
  // Other kinds: Name and Created At (the timestamp itself, type date).
  call(req("POST", "/api/v1/namespaces/team-a/configmaps", R"({"metadata":{"name":"cm"}})"), 201);
  auto cm = call(req("GET", "/api/v1/namespaces/team-a/configmaps", "", kTableV1), 200);
  CHECK(names(cm) == std::vector<std::string>{"Name", "Created At"});
  CHECK(cm["columnDefinitions"][1]["type"] == "date");
  CHECK(cm["rows"][0]["cells"] == json({"cm", "2026-01-01T00:00:00Z"}));
}

TEST_CASE_METHOD(TableApi,
                 "nodes as a Table: Ready condition, cordon, roles, kubelet version, wide info",
                 "[table]") {
  call(req("POST", "/api/v1/nodes",
           R"({"metadata":{"name":"n1","labels":{"node-role.kubernetes.io/worker":"",
      "node-role.kubernetes.io/control-plane":"","kubernetes.io/role":"gpu"}},
    "status":{"conditions":[{"type":"MemoryPressure","status":"False"},{"type":"Ready","status":"True"}],
      "addresses":[{"type":"Hostname","address":"n1"},{"type":"InternalIP","address":"10.0.0.1"}],
      "nodeInfo":{"kubeletVersion":"v1.30.2","osImage":"Debian GNU/Linux 12","kernelVersion":"6.1.0",
                  "containerRuntimeVersion":"containerd://1.7.2"}}})"),
       201);
  call(req("POST", "/api/v1/nodes", R"({"metadata":{"name":"n2"},"spec":{"unschedulable":true},
    "status":{"conditions":[{"type":"Ready","status":"Unknown"}]}})"),
       201);
  call(req("POST", "/api/v1/nodes", R"({"metadata":{"name":"n3"}})"), 201);
  clock->now += 3h;
  auto t = call(req("GET", "/api/v1/nodes", "", kKubectlAccept), 200);
  CHECK(names(t) == std::vector<std::string>{"Name", "Status", "Roles", "Age", "Version",
                                             "Internal-IP", "External-IP", "OS-Image",
                                             "Kernel-Version", "Container-Runtime"});
  REQUIRE(t["rows"].size() == 3);
  CHECK(t["rows"][0]["cells"] ==
        json({"n1", "Ready", "control-plane,gpu,worker", "3h", "v1.30.2", "10.0.0.1", "<none>",
              "Debian GNU/Linux 12", "6.1.0", "containerd://1.7.2"}));
  CHECK(t["rows"][1]["cells"] == json({"n2", "NotReady,SchedulingDisabled", "<none>", "3h", "",
                                       "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"}));
  CHECK(t["rows"][2]["cells"][1] == "Unknown");
}

TEST_CASE_METHOD(TableApi,
                 "a CRD's additionalPrinterColumns: typed cells, missing values null, per version",
                 "[table]") {
  call(req("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", kGpuPoolCrd), 201);
  call(req("POST", "/apis/kubecomp.io/v1alpha1/gpupools", R"({"metadata":{"name":"pool-a",
      "labels":{"kubecomp.io/host":"chassis-1"}},"spec":{"driver":"redfish","nodes":["n1","n2"]}})"),
       201);
  call(req("POST", "/apis/kubecomp.io/v1alpha1/gpupools",
           R"({"metadata":{"name":"pool-b"},"spec":{"driver":7}})"),
       201);
  call(req("PATCH", "/apis/kubecomp.io/v1alpha1/gpupools/pool-a/status",
           R"({"status":{"total":8,"free":3,
      "ready":true,"load":0.25,"gpus":[{"id":"gpu-0"}],"lastSync":"2026-01-01T00:20:00Z"}})",
           "", {}),
       200);
  call(req("PATCH", "/apis/kubecomp.io/v1alpha1/gpupools/pool-b/status",
           R"({"status":{"total":"eight",
      "ready":"yes","lastSync":"yesterday"}})",
           "", {}),
       200);
  clock->now += 1h;

  auto t = call(req("GET", "/apis/kubecomp.io/v1alpha1/gpupools", "", kKubectlAccept), 200);
  CHECK(names(t) == std::vector<std::string>{"Name", "Driver", "GPUs", "Free", "Ready", "Load",
                                             "First", "Host", "Nodes", "Synced", "Age"});
  const auto& cols = t["columnDefinitions"];
  CHECK(cols[1] ==
        json({{"name", "Driver"},
              {"type", "string"},
              {"format", ""},
              {"priority", 0},
              {"description",
               "Custom resource definition column (in JSONPath format): .spec.driver"}}));
  CHECK(cols[2]["description"] == "GPUs in the pool");
  CHECK(cols[2]["type"] == "integer");
  CHECK(cols[3]["priority"] == 1);
  REQUIRE(t["rows"].size() == 2);
  CHECK(t["rows"][0]["cells"] == json({"pool-a", "redfish", 8, 3, true, 0.25, "gpu-0", "chassis-1",
                                       "[n1 n2]", "40m", "60m"}));
  // Values of the wrong JSON type are null (printed empty); a bad date is "<invalid>"; a
  // string column prints a number as text.
  CHECK(t["rows"][1]["cells"] == json({"pool-b", "7", nullptr, nullptr, nullptr, nullptr, nullptr,
                                       nullptr, nullptr, "<invalid>", "60m"}));
  CHECK(t["rows"][0]["object"]["kind"] == "PartialObjectMetadata");

  // A version without columns: NAME and AGE (the date column every CRD gets by default).
  auto beta = call(req("GET", "/apis/kubecomp.io/v1beta1/gpupools/pool-a", "", kTableV1), 200);
  CHECK(names(beta) == std::vector<std::string>{"Name", "Age"});
  CHECK(beta["rows"][0]["cells"] == json({"pool-a", "60m"}));

  // Without a Table Accept header the object itself comes back.
  CHECK(call(req("GET", "/apis/kubecomp.io/v1alpha1/gpupools/pool-a"), 200)["kind"] == "GPUPool");
}

TEST_CASE_METHOD(TableApi, "malformed additionalPrinterColumns are a 422 on create and update",
                 "[table]") {
  auto crd = json::parse(kGpuPoolCrd);
  auto withColumn = [&](json column) {
    json c = crd;
    c["spec"]["versions"][0]["additionalPrinterColumns"] = json::array({column});
    return c;
  };
  auto r1 =
      call(req("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
               withColumn({{"name", "X"}, {"type", "float"}, {"jsonPath", ".spec.x"}}).dump()),
           422);
  CHECK(r1["details"]["causes"][0]["field"] == "spec.versions[0].additionalPrinterColumns[0].type");
  auto r2 =
      call(req("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
               withColumn({{"name", "X"}, {"type", "string"}, {"jsonPath", "spec.x"}}).dump()),
           422);
  CHECK(r2["details"]["causes"][0]["field"] ==
        "spec.versions[0].additionalPrinterColumns[0].jsonPath");
  call(req("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
           withColumn({{"type", "string"}, {"jsonPath", ".spec.x"}}).dump()),
       422);
  CHECK(store.findResource("kubecomp.io", "v1alpha1", "gpupools") ==
        std::nullopt);  // nothing changed

  auto created = call(
      req("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", kGpuPoolCrd), 201);
  json bad = created;
  bad["spec"]["versions"][0]["additionalPrinterColumns"][0]["jsonPath"] = ".spec[*]";
  call(req("PUT", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gpupools.kubecomp.io",
           bad.dump()),
       422);
  // An accepted change of the columns is served at once.
  json good = created;
  good["spec"]["versions"][0]["additionalPrinterColumns"] =
      json::array({{{"name", "Pool Driver"}, {"type", "string"}, {"jsonPath", ".spec.driver"}}});
  call(req("PUT", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gpupools.kubecomp.io",
           good.dump()),
       200);
  auto t = call(req("GET", "/apis/kubecomp.io/v1alpha1/gpupools", "", kTableV1), 200);
  CHECK(names(t) == std::vector<std::string>{"Name", "Pool Driver"});
}

TEST_CASE_METHOD(TableApi,
                 "watch with a Table Accept header: one row per event, columns with the first only",
                 "[table]") {
  call(req("POST", "/api/v1/namespaces/default/pods", R"({"metadata":{"name":"p1"},
    "spec":{"containers":[{"name":"a","image":"x"}]}})"),
       201);
  auto stream = std::make_shared<FakeStream>();
  auto r = req("GET", "/api/v1/namespaces/default/pods", "", kKubectlAccept, {{"watch", "true"}});
  api.serve(r, stream);
  call(req("PATCH", "/api/v1/namespaces/default/pods/p1", R"({"metadata":{"labels":{"a":"b"}}})"),
       200);
  std::vector<json> events = watchEvents(stream->body);
  REQUIRE(events.size() == 2);
  CHECK(events[0]["type"] == "ADDED");
  CHECK(events[0]["object"]["kind"] == "Table");
  CHECK(events[0]["object"]["columnDefinitions"].size() == 9);
  CHECK(events[0]["object"]["rows"][0]["cells"][0] == "p1");
  CHECK(events[1]["type"] == "MODIFIED");
  CHECK(events[1]["object"]["columnDefinitions"].empty());
  CHECK(events[1]["object"]["rows"][0]["object"]["metadata"]["labels"]["a"] == "b");
  store.stopWatch(1);
}
