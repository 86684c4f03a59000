// GCC 12 reports a false -Wrestrict inside std::string assignment at -O3 (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"

#include "tools/kube-apiserver-double/api_server.hpp"

#include <catch2/catch.hpp>

#include "tests/unit/apiserver/fake_stream.hpp"

using namespace kc::apiserver;
using kc::apiserver::testing::FakeStream;
using nlohmann::json;

namespace {

kc::net::Request req(std::string method, std::string path, std::string body = "",
                     std::vector<std::pair<std::string, std::string>> query = {},
                     std::string contentType = "application/json") {
  kc::net::Request r;
  r.method = std::move(method);
  r.path = std::move(path);
  r.target = r.path;
  r.query = std::move(query);
  r.body = std::move(body);
  r.headers.push_back({"Authorization", "Bearer s3cret"});
  if (!contentType.empty()) {
    r.headers.push_back({"Content-Type", contentType});
  }
  return r;
}

struct Api {
  Api() : store(options()), api(store, apiOptions()) {}
  static StoreOptions options() {
    StoreOptions o;
    o.historyWindow = 50;
    return o;
  }
  static ApiServerOptions apiOptions() {
    ApiServerOptions o;
    o.bearerToken = "s3cret";
    return o;
  }
  json call(const kc::net::Request& r, unsigned expectedStatus) {
    auto resp = api.handle(r);
    CAPTURE(r.method, r.path, resp.body);
    CHECK(resp.status == expectedStatus);
    return json::parse(resp.body, nullptr, false);
  }
  ObjectStore store;
  ApiServer api;
};

const char* kPod =
    R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1","labels":{"app":"web"}},
  "spec":{"containers":[{"name":"c","image":"busybox:1"}]}})";

const char* kCrd = R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
  "metadata":{"name":"widgets.example.com"},"spec":{"group":"example.com","scope":"Namespaced",
  "names":{"plural":"widgets","singular":"widget","kind":"Widget","shortNames":["wd"]},
  "versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},
  "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}})";

}  // namespace

TEST_CASE_METHOD(Api, "requests without the bearer token get a 401 Status", "[api]") {
  auto r = req("GET", "/api/v1/pods");
  r.headers.clear();
  auto body = call(r, 401);
  CHECK(body["kind"] == "Status");
  CHECK(body["reason"] == "Unauthorized");
  CHECK(call(req("GET", "/livez"), 200).is_discarded());  // health needs no token, answers text
}

TEST_CASE_METHOD(Api, "discovery documents list built-ins with verbs and short names", "[api]") {
  CHECK(call(req("GET", "/api"), 200)["versions"] == json({"v1"}));
  auto groups = call(req("GET", "/apis"), 200);
  bool apps = false;
  for (const auto& g : groups["groups"]) {
    apps = apps || g["name"] == "apps";
  }
  CHECK(apps);
  auto core = call(req("GET", "/api/v1"), 200);
  bool pods = false;
  bool binding = false;
  for (const auto& r : core["resources"]) {
    if (r["name"] == "pods") {
      pods = r["shortNames"] == json({"po"}) && r["namespaced"] == true && r["kind"] == "Pod";
    }
    binding = binding || r["name"] == "pods/binding";
  }
  CHECK(pods);
  CHECK(binding);
  auto appsV1 = call(req("GET", "/apis/apps/v1"), 200);
  CHECK(appsV1["groupVersion"] == "apps/v1");
  call(req("GET", "/apis/nope.io/v1"), 404);
  CHECK(call(req("GET", "/version"), 200)["major"] == "1");
}

TEST_CASE_METHOD(Api, "CRUD through the REST surface", "[api]") {
  auto created = call(req("POST", "/api/v1/namespaces/default/pods", kPod), 201);
  CHECK(created["kind"] == "Pod");
  CHECK(created["metadata"]["namespace"] == "default");
  auto got = call(req("GET", "/api/v1/namespaces/default/pods/p1"), 200);
  CHECK(got["apiVersion"] == "v1");
  auto list = call(req("GET", "/api/v1/pods"), 200);
  CHECK(list["kind"] == "PodList");
  REQUIRE(list["items"].size() == 1);
  CHECK_FALSE(list["items"][0].contains("kind"));  // as the real server
  CHECK_FALSE(list["items"][0].contains("apiVersion"));
  CHECK(list["metadata"]["resourceVersion"].is_string());
  call(req("POST", "/api/v1/namespaces/default/pods", kPod), 409);
  call(req("POST", "/api/v1/namespaces/default/pods", "{not json"), 400);
  call(req("POST", "/api/v1/namespaces/default/pods", kPod, {}, "application/yaml"), 415);
  auto stale = created;
  stale["metadata"]["labels"]["x"] = "1";
  call(req("PUT", "/api/v1/namespaces/default/pods/p1", stale.dump()), 200);
  auto conflict = call(req("PUT", "/api/v1/namespaces/default/pods/p1", stale.dump()), 409);
  CHECK(conflict["reason"] == "Conflict");
  CHECK(conflict["details"]["kind"] == "pods");
  auto del = call(req("DELETE", "/api/v1/namespaces/default/pods/p1"), 200);
  CHECK(del["kind"] == "Pod");  // pods return the deleted object
  call(req("GET", "/api/v1/namespaces/default/pods/p1"), 404);
  call(req("GET", "/api/v1/namespaces/default/pods", "", {{"fieldSelector", "spec.bogus=1"}}), 400);
}

TEST_CASE_METHOD(Api, "PATCH content types", "[api]") {
  call(req("POST", "/api/v1/namespaces/default/pods", kPod), 201);
  auto merged =
      call(req("PATCH", "/api/v1/namespaces/default/pods/p1",
               R"({"metadata":{"labels":{"a":"b"}}})", {}, "application/merge-patch+json"),
           200);
  CHECK(merged["metadata"]["labels"]["a"] == "b");
  auto json6902 = call(req("PATCH", "/api/v1/namespaces/default/pods/p1",
                           R"([{"op":"replace","path":"/metadata/labels/a","value":"c"}])", {},
                           "application/json-patch+json"),
                       200);
  CHECK(json6902["metadata"]["labels"]["a"] == "c");
  call(req("PATCH", "/api/v1/namespaces/default/pods/p1",
           R"([{"op":"test","path":"/metadata/labels/a","value":"z"}])", {},
           "application/json-patch+json"),
       422);
  auto smp = call(req("PATCH", "/api/v1/namespaces/default/pods/p1/status",
                      R"({"status":{"conditions":[{"type":"Ready","status":"True"}]}})", {},
                      "application/strategic-merge-patch+json"),
                  200);
  CHECK(smp["status"]["conditions"][0]["type"] == "Ready");
  // A patch carrying a stale resourceVersion is conditional.
  call(req("PATCH", "/api/v1/namespaces/default/pods/p1",
           R"({"metadata":{"resourceVersion":"1","labels":{"q":"r"}}})", {},
           "application/merge-patch+json"),
       409);
  call(req("PATCH", "/api/v1/namespaces/default/pods/p1", "{}", {}, "text/plain"), 415);

  call(req("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", kCrd), 201);
  call(
      req("POST", "/apis/example.com/v1/namespaces/default/widgets",
          R"({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}})"),
      201);
  auto unsupported =
      call(req("PATCH", "/apis/example.com/v1/namespaces/default/widgets/w",
               R"({"spec":{"size":2}})", {}, "application/strategic-merge-patch+json"),
           415);
  CHECK(unsupported["message"] ==
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml");
  auto w = call(req("PATCH", "/apis/example.com/v1/namespaces/default/widgets/w",
                    R"({"spec":{"size":2}})", {}, "application/merge-patch+json"),
                200);
  CHECK(w["spec"]["size"] == 2);
  CHECK(w["metadata"]["generation"] == 2);
  auto ssa = call(req("PATCH", "/apis/example.com/v1/namespaces/default/widgets/w2",
                      R"({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w2"}})",
                      {{"fieldManager", "test"}}, "application/apply-patch+yaml"),
                  201);
  CHECK(ssa["metadata"]["name"] == "w2");
  auto wd = call(req("GET", "/apis/example.com/v1"), 200);
  CHECK(wd["resources"][0]["shortNames"] == json({"wd"}));
}

TEST_CASE_METHOD(Api, "pods/binding answers 201 Status and 409 when bound", "[api]") {
  call(req("POST", "/api/v1/namespaces/default/pods", kPod), 201);
  const std::string binding =
      R"({"apiVersion":"v1","kind":"Binding","metadata":{"name":"p1"},"target":{"kind":"Node","name":"n1"}})";
  auto ok = call(req("POST", "/api/v1/namespaces/default/pods/p1/binding", binding), 201);
  CHECK(ok ==
        json::parse(
            R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201})"));
  auto again = call(req("POST", "/api/v1/namespaces/default/bindings", binding), 409);
  CHECK(again["message"] ==
        "Operation cannot be fulfilled on pods/binding \"p1\": pod p1 is already assigned to node "
        "\"n1\"");
}

TEST_CASE_METHOD(Api, "watch streams newline-delimited events, expired RV per fault mode",
                 "[api][watch]") {
  call(req("POST", "/api/v1/namespaces/default/pods", kPod), 201);
  auto stream = std::make_shared<FakeStream>();
  api.serve(req("GET", "/api/v1/namespaces/default/pods", "", {{"watch", "true"}}), stream);
  CHECK(stream->begunStatus == 200);
  CHECK(stream->body.find(
            "{\"type\":\"ADDED\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\"") == 0);
  CHECK(stream->body.back() == '\n');

  for (int i = 0; i < 60; ++i) {  // push RV 1 out of the 50-event window
    call(req("PATCH", "/api/v1/namespaces/default/pods/p1",
             R"({"metadata":{"labels":{"i":")" + std::to_string(i) + "\"}}}", {},
             "application/merge-patch+json"),
         200);
  }
  auto asEvent = std::make_shared<FakeStream>();
  api.serve(req("GET", "/api/v1/pods", "", {{"watch", "1"}, {"resourceVersion", "1"}}), asEvent);
  CHECK(asEvent->begunStatus == 200);
  auto line = json::parse(asEvent->body);
  CHECK(line["type"] == "ERROR");
  CHECK(line["object"]["code"] == 410);
  CHECK(asEvent->ended);

  Faults f;
  f.expiredAsEvent = false;
  api.setFaults(f);
  auto asHttp = std::make_shared<FakeStream>();
  api.serve(req("GET", "/api/v1/pods", "", {{"watch", "true"}, {"resourceVersion", "1"}}), asHttp);
  REQUIRE(asHttp->sent.has_value());
  CHECK(asHttp->sent->status == 410);
  CHECK(json::parse(asHttp->sent->body)["reason"] == "Expired");
}

TEST_CASE_METHOD(Api, "fault injection answers 500 and is controlled over HTTP", "[api][faults]") {
  auto set = call(req("POST", "/_double/faults", R"({"errorFraction":1.0})"), 200);
  CHECK(set["errorFraction"] == 1.0);
  auto failed = call(req("GET", "/api/v1/pods"), 500);
  CHECK(failed["reason"] == "InternalError");
  call(req("POST", "/_double/faults", R"({"errorFraction":2})"), 400);
  call(req("POST", "/_double/faults", R"({"errorFraction":0})"), 200);
  call(req("GET", "/api/v1/pods"), 200);
}

TEST_CASE_METHOD(Api, "watch=True (python-kubernetes spelling) starts a watch", "[api][watch]") {
  auto stream = std::make_shared<FakeStream>();
  api.serve(req("GET", "/api/v1/namespaces/default/pods", "", {{"watch", "True"}}), stream);
  CHECK(stream->begunStatus == 200);
  CHECK_FALSE(stream->sent.has_value());
}

TEST_CASE_METHOD(Api, "OpenAPI: v3 index and per-group PATCH operations, empty v2", "[api]") {
  auto root = call(req("GET", "/openapi/v3"), 200);
  REQUIRE(root["paths"].contains("api/v1"));
  REQUIRE(root["paths"].contains("apis/apps/v1"));
  std::string url = root["paths"]["apis/apps/v1"]["serverRelativeURL"];
  CHECK(url.rfind("/openapi/v3/apis/apps/v1?hash=", 0) == 0);
  auto apps = call(req("GET", "/openapi/v3/apis/apps/v1"), 200);
  const json& patch =
      apps["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
  CHECK(patch["x-kubernetes-group-version-kind"]["kind"] == "Deployment");
  CHECK(patch["parameters"][0]["name"] == "fieldValidation");
  call(req("GET", "/openapi/v3/apis/nope/v1"), 404);
  auto proto = req("GET", "/openapi/v2");
  proto.headers.push_back({"Accept", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"});
  auto r = api.handle(proto);
  CHECK(r.status == 200);
  CHECK(r.body.empty());
  // kubectl 1.20 parses it with Go's mime package, which rejects the "@" of the Accept form.
  CHECK(r.header("Content-Type") == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf");
  // A CRD adds its group to the index.
  call(req("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", kCrd), 201);
  CHECK(call(req("GET", "/openapi/v3"), 200)["paths"].contains("apis/example.com/v1"));
}

TEST_CASE_METHOD(Api, "custom-resource LIST items carry kind and apiVersion, built-in items do not",
                 "[api]") {
  call(req("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", kCrd), 201);
  call(
      req("POST", "/apis/example.com/v1/namespaces/default/widgets",
          R"({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}})"),
      201);
  call(req("POST", "/api/v1/namespaces/default/pods", kPod), 201);
  auto widgets = call(req("GET", "/apis/example.com/v1/namespaces/default/widgets"), 200);
  CHECK(widgets["kind"] == "WidgetList");
  REQUIRE(widgets["items"].size() == 1);
  CHECK(widgets["items"][0]["kind"] == "Widget");
  CHECK(widgets["items"][0]["apiVersion"] == "example.com/v1");
  CHECK(widgets["items"][0]["spec"]["size"] == 1);
  auto all = call(req("GET", "/apis/example.com/v1/widgets"), 200);
  REQUIRE(all["items"].size() == 1);
  CHECK(all["items"][0]["kind"] == "Widget");
  auto pods = call(req("GET", "/api/v1/namespaces/default/pods"), 200);
  REQUIRE(pods["items"].size() == 1);
  CHECK_FALSE(pods["items"][0].contains("kind"));
  // DELETE on the collection answers the deleted items the same way.
  auto deleted = call(req("DELETE", "/apis/example.com/v1/namespaces/default/widgets"), 200);
  REQUIRE(deleted["items"].size() == 1);
  CHECK(deleted["items"][0]["kind"] == "Widget");
  CHECK(deleted["items"][0]["apiVersion"] == "example.com/v1");
}

TEST_CASE_METHOD(Api, "DELETE precondition failures are 409 Conflict with the real wording",
                 "[api]") {
  auto pod = call(req("POST", "/api/v1/namespaces/default/pods", kPod), 201);
  const std::string uid = pod["metadata"]["uid"];
  const std::string rv = pod["metadata"]["resourceVersion"];
  auto byUid =
      call(req("DELETE", "/api/v1/namespaces/default/pods/p1",
               R"({"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"other"}})"),
           409);
  CHECK(byUid["kind"] == "Status");
  CHECK(byUid["reason"] == "Conflict");
  CHECK(byUid["message"] ==
        "Operation cannot be fulfilled on pods \"p1\": Precondition failed: UID in precondition: "
        "other, UID in object meta: " +
            uid);
  CHECK(byUid["details"] == json({{"name", "p1"}, {"kind", "pods"}}));
  auto byRv = call(req("DELETE", "/api/v1/namespaces/default/pods/p1",
                       R"({"preconditions":{"resourceVersion":"999"}})"),
                   409);
  CHECK(byRv["message"] ==
        "Operation cannot be fulfilled on pods \"p1\": Precondition failed: ResourceVersion in "
        "precondition: 999, ResourceVersion in object meta: " +
            rv);
  call(req("GET", "/api/v1/namespaces/default/pods/p1"), 200);  // nothing changed

  call(req("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", kCrd), 201);
  call(req("POST", "/apis/example.com/v1/namespaces/default/widgets",
           R"({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"}})"),
       201);
  auto grouped = call(req("DELETE", "/apis/example.com/v1/namespaces/default/widgets/w",
                          R"({"preconditions":{"uid":"x"}})"),
                      409);
  CHECK(grouped["message"].get<std::string>().rfind(
            "Operation cannot be fulfilled on widgets.example.com \"w\": Precondition failed: UID "
            "in precondition: x, "
            "UID in object meta: ",
            0) == 0);
  CHECK(grouped["details"]["group"] == "example.com");
  call(req("DELETE", "/api/v1/namespaces/default/pods/p1",
           R"({"preconditions":{"uid":")" + uid + "\"}}"),
       200);
}

TEST_CASE_METHOD(Api, "watch timeoutSeconds=0 means the server default, not an endless watch",
                 "[api][watch]") {
  auto value = GENERATE(as<std::string>{}, "0", "", "-5");
  CAPTURE(value);
  auto stream = std::make_shared<FakeStream>();
  std::vector<std::pair<std::string, std::string>> q = {{"watch", "true"}};
  if (!value.empty()) {
    q.push_back({"timeoutSeconds", value});
  }
  const auto start = std::chrono::steady_clock::now();
  api.serve(req("GET", "/api/v1/namespaces/default/pods", "", q), stream);
  REQUIRE(stream->begunStatus == 200);
  store.tick(start + std::chrono::seconds(1790));
  CHECK_FALSE(stream->ended);
  store.tick(std::chrono::steady_clock::now() +
             std::chrono::seconds(1801));  // past the 1800 s default
  CHECK(stream->ended);

  auto explicitTimeout = std::make_shared<FakeStream>();
  api.serve(req("GET", "/api/v1/namespaces/default/pods", "",
                {{"watch", "true"}, {"timeoutSeconds", "10"}}),
            explicitTimeout);
  store.tick(std::chrono::steady_clock::now() + std::chrono::seconds(11));
  CHECK(explicitTimeout->ended);
}

namespace {
// A ResponseStream answered from another thread (the delay worker).
class SyncStream : public kc::net::ResponseStream {
 public:
  bool begin(unsigned code, kc::net::Headers) override {  // a watch starts streaming
    std::lock_guard lock(mu);
    status = code;
    cv.notify_all();
    return true;
  }
  bool write(std::string_view) override { return true; }
  void end() override {}
  bool send(kc::net::Response r) override {
    std::lock_guard lock(mu);
    status = r.status;
    cv.notify_all();
    return true;
  }
  bool closed() const override { return false; }
  std::size_t pendingBytes() const override { return 0; }
  void onClose(std::function<void()>) override {}
  unsigned answered() {
    std::lock_guard lock(mu);
    return status;
  }
  bool waitAnswered(std::chrono::seconds limit) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, limit, [&] { return status != 0; });
  }
  std::mutex mu;
  std::condition_variable cv;
  unsigned status = 0;
};
}  // namespace

TEST_CASE_METHOD(
    Api, "the delay fault does not hold the caller: other requests answer while delayed ones wait",
    "[api][faults]") {
  call(req("POST", "/_double/faults", R"({"delayMs":400})"), 200);
  std::vector<std::shared_ptr<SyncStream>> delayed;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 8; ++i) {  // more than any io-thread count
    delayed.push_back(std::make_shared<SyncStream>());
    api.serve(req("GET", "/api/v1/namespaces/default/pods"), delayed.back());
  }
  // serve() returned at once for every delayed request (no thread slept in it) ...
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(300));
  // ... and the faults endpoint and health answer immediately, on the caller's thread.
  auto faults = std::make_shared<SyncStream>();
  api.serve(req("GET", "/_double/faults"), faults);
  CHECK(faults->answered() == 200);
  auto health = std::make_shared<SyncStream>();
  api.serve(req("GET", "/readyz"), health);
  CHECK(health->answered() == 200);
  for (const auto& s : delayed) {
    CHECK(s->answered() == 0);  // still waiting for the delay
  }
  for (const auto& s : delayed) {
    REQUIRE(s->waitAnswered(std::chrono::seconds(10)));
    CHECK(s->answered() == 200);
  }
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(400));
  call(req("POST", "/_double/faults", R"({"delayMs":0})"), 200);
  auto prompt = std::make_shared<SyncStream>();
  api.serve(req("GET", "/api/v1/namespaces/default/pods"), prompt);
  CHECK(prompt->answered() == 200);
}

TEST_CASE_METHOD(Api,
                 "delayWatchesOnly holds back watch requests while other requests answer at once",
                 "[api][faults]") {
  auto shown =
      call(req("POST", "/_double/faults", R"({"delayMs":300,"delayWatchesOnly":true})"), 200);
  CHECK(shown["delayWatchesOnly"] == true);
  const auto start = std::chrono::steady_clock::now();
  auto watch = std::make_shared<SyncStream>();
  api.serve(req("GET", "/api/v1/namespaces/default/pods", "", {{"watch", "true"}}), watch);
  auto list = std::make_shared<SyncStream>();
  api.serve(req("GET", "/api/v1/namespaces/default/pods"), list);
  CHECK(list->answered() == 200);  // not delayed
  CHECK(watch->answered() == 0);   // waiting
  REQUIRE(watch->waitAnswered(std::chrono::seconds(10)));
  CHECK(watch->answered() == 200);
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(300));
  call(req("POST", "/_double/faults", R"({"delayWatchesOnly":"yes"})"),
       400);  // bad value, unchanged
  CHECK(call(req("GET", "/_double/faults"), 200)["delayWatchesOnly"] == true);
  call(req("POST", "/_double/faults", R"({"delayMs":0,"delayWatchesOnly":false})"), 200);
}
