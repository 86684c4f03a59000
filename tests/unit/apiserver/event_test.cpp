// Events through core/v1 and events.k8s.io/v1 are one storage in the API test double, as
// on the real server: written through either group, read, listed, selected and watched
// through both with the fields renamed.

// GCC 12 reports a false -Wrestrict inside std::string assignment at -O3 (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"

#include <catch2/catch.hpp>

#include "tests/unit/apiserver/api_harness.hpp"
#include "tests/unit/apiserver/fake_stream.hpp"
#include "tools/kube-apiserver-double/api_server.hpp"
#include "tools/kube-apiserver-double/event_conversion.hpp"

using namespace kc::apiserver;
using nlohmann::json;
using namespace kc::apiserver::testing;

namespace {

const char* kCore = "/api/v1/namespaces/default/events";
const char* kV1 = "/apis/events.k8s.io/v1/namespaces/default/events";

// Written through events.k8s.io/v1, as a controller's recorder does.
const char* kV1Event =
    R"({"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"gpu.1"},
  "eventTime":"2026-01-01T00:00:00.000000Z","reportingController":"kubecomp.io/reconfig-mgr",
  "reportingInstance":"reconfig-mgr-0","action":"Attach","reason":"GpuAttached","type":"Normal",
  "note":"attached falcon-0.3","regarding":{"kind":"Pod","namespace":"default","name":"p1","uid":"u-1"},
  "deprecatedCount":2,"deprecatedSource":{"component":"reconfig-mgr"}})";

// Written through core/v1, as kubelet and older recorders do.
const char* kCoreEvent = R"({"apiVersion":"v1","kind":"Event","metadata":{"name":"p2.1"},
  "involvedObject":{"kind":"Pod","namespace":"default","name":"p2","uid":"u-2"},"reason":"Scheduled",
  "message":"assigned to n1","source":{"component":"default-scheduler"},"count":1,"type":"Normal",
  "firstTimestamp":"2026-01-01T00:00:00Z","lastTimestamp":"2026-01-01T00:00:05Z"})";

// The store's clock: 2026-01-01T01:00:00Z, an hour after the sample events.
StoreOptions oneAm() {
  StoreOptions o;
  o.clock = [] {
    return std::chrono::sys_days{std::chrono::year{2026} / 1 / 1} + std::chrono::hours(1);
  };
  return o;
}

struct Api {
  Api() : store(oneAm()), api(store, {}) {}
  kc::net::Request req(std::string method, std::string path, std::string body = "",
                       std::vector<std::pair<std::string, std::string>> query = {},
                       std::string accept = "") {
    return apiRequest(std::move(method), std::move(path), std::move(body), std::move(query),
                      std::move(accept));
  }
  json call(const kc::net::Request& r, unsigned status) { return apiCall(api, r, status); }
  std::vector<std::string> names(const json& list) {
    std::vector<std::string> out;
    for (const auto& i : list["items"]) {
      out.push_back(i["metadata"]["name"].get<std::string>());
    }
    return out;
  }
  ObjectStore store;
  ApiServer api;
};

}  // namespace

TEST_CASE("event conversion renames each field pair both ways", "[events]") {
  auto [v1Field, coreField] = GENERATE(table<const char*, const char*>({
      {"regarding", "involvedObject"},
      {"note", "message"},
      {"reportingController", "reportingComponent"},
      {"deprecatedSource", "source"},
      {"deprecatedFirstTimestamp", "firstTimestamp"},
      {"deprecatedLastTimestamp", "lastTimestamp"},
      {"deprecatedCount", "count"},
  }));
  CAPTURE(v1Field);
  const json value = {{"x", 1}};
  json core = coreEventFromEventsV1({{v1Field, value}, {"reason", "R"}});
  CHECK(core ==
        json({{"apiVersion", "v1"}, {"kind", "Event"}, {coreField, value}, {"reason", "R"}}));
  json back = eventsV1FromCoreEvent(core);
  CHECK(back == json({{"apiVersion", "events.k8s.io/v1"},
                      {"kind", "Event"},
                      {v1Field, value},
                      {"reason", "R"},
                      {"eventTime", nullptr}}));  // no omitempty on eventTime in events.k8s.io/v1
}

TEST_CASE("events.k8s.io field selectors in core terms", "[events]") {
  auto [in, out] = GENERATE(table<const char*, const char*>({
      {"regarding.name=p1", "involvedObject.name=p1"},
      {"regarding.kind==Pod,reason!=Killing", "involvedObject.kind==Pod,reason!=Killing"},
      {"reportingController=kubecomp.io/x,type=Warning",
       "reportingComponent=kubecomp.io/x,type=Warning"},
      {"metadata.name=regarding.name", "metadata.name=regarding.name"},  // values stay
      {"", ""},
  }));
  CHECK(coreEventFieldSelector(in) == out);
}

TEST_CASE_METHOD(Api, "an event written through events.k8s.io/v1 is a core/v1 event, and back",
                 "[events]") {
  auto created = call(req("POST", kV1, kV1Event), 201);
  CHECK(created["apiVersion"] == "events.k8s.io/v1");
  CHECK(created["note"] == "attached falcon-0.3");
  CHECK_FALSE(created.contains("message"));
  call(req("POST", kCore, kCoreEvent), 201);

  auto core = call(req("GET", std::string(kCore) + "/gpu.1"), 200);
  CHECK(core["apiVersion"] == "v1");
  CHECK(core["involvedObject"]["name"] == "p1");
  CHECK(core["message"] == "attached falcon-0.3");
  CHECK(core["reportingComponent"] == "kubecomp.io/reconfig-mgr");
  CHECK(core["reportingInstance"] == "reconfig-mgr-0");
  CHECK(core["source"]["component"] == "reconfig-mgr");
  CHECK(core["count"] == 2);
  CHECK(core["eventTime"] == "2026-01-01T00:00:00.000000Z");
  CHECK_FALSE(core.contains("regarding"));
  CHECK_FALSE(core.contains("note"));

  auto v1 = call(req("GET", std::string(kV1) + "/p2.1"), 200);
  CHECK(v1["apiVersion"] == "events.k8s.io/v1");
  CHECK(v1["regarding"]["uid"] == "u-2");
  CHECK(v1["note"] == "assigned to n1");
  CHECK(v1["deprecatedSource"]["component"] == "default-scheduler");
  CHECK(v1["deprecatedCount"] == 1);
  CHECK(v1["deprecatedFirstTimestamp"] == "2026-01-01T00:00:00Z");
  CHECK(v1["deprecatedLastTimestamp"] == "2026-01-01T00:00:05Z");
  CHECK(v1["eventTime"].is_null());

  // Both lists hold both events, each in its group's form.
  auto coreList = call(req("GET", kCore), 200);
  auto v1List = call(req("GET", kV1), 200);
  CHECK(names(coreList) == std::vector<std::string>{"gpu.1", "p2.1"});
  CHECK(names(v1List) == std::vector<std::string>{"gpu.1", "p2.1"});
  CHECK(v1List["apiVersion"] == "events.k8s.io/v1");
  CHECK(v1List["items"][1]["note"] == "assigned to n1");
  CHECK_FALSE(v1List["items"][1].contains("kind"));  // built-in list items carry no kind
  CHECK(coreList["items"][0]["message"] == "attached falcon-0.3");
}

TEST_CASE_METHOD(Api, "field selectors of either group find events written through the other",
                 "[events]") {
  call(req("POST", kV1, kV1Event), 201);
  call(req("POST", kCore, kCoreEvent), 201);
  CHECK(names(call(req("GET", kCore, "", {{"fieldSelector", "involvedObject.name=p1"}}), 200)) ==
        std::vector<std::string>{"gpu.1"});
  CHECK(names(call(req("GET", kCore, "",
                       {{"fieldSelector", "reportingComponent=kubecomp.io/reconfig-mgr"}}),
                   200)) == std::vector<std::string>{"gpu.1"});
  CHECK(names(call(req("GET", kV1, "", {{"fieldSelector", "regarding.name=p2"}}), 200)) ==
        std::vector<std::string>{"p2.1"});
  CHECK(names(call(
            req("GET", kV1, "",
                {{"fieldSelector", "reportingController=kubecomp.io/reconfig-mgr,type=Normal"}}),
            200)) == std::vector<std::string>{"gpu.1"});
  // Each group accepts its own labels only.
  auto bad = call(req("GET", kV1, "", {{"fieldSelector", "involvedObject.name=p1"}}), 400);
  CHECK(bad["message"] == "field label not supported: involvedObject.name");
}

TEST_CASE_METHOD(Api, "watches of both groups see writes through either", "[events]") {
  auto coreStream = std::make_shared<FakeStream>();
  auto v1Stream = std::make_shared<FakeStream>();
  auto w = req("GET", kCore, "", {{"watch", "true"}});
  api.serve(w, coreStream);
  w = req("GET", kV1, "", {{"watch", "true"}, {"fieldSelector", "regarding.kind=Pod"}});
  api.serve(w, v1Stream);
  call(req("POST", kV1, kV1Event), 201);
  call(req("POST", kCore, kCoreEvent), 201);
  auto core = watchEvents(coreStream->body);
  auto v1 = watchEvents(v1Stream->body);
  REQUIRE(core.size() == 2);
  REQUIRE(v1.size() == 2);
  CHECK(core[0]["object"]["apiVersion"] == "v1");
  CHECK(core[0]["object"]["message"] == "attached falcon-0.3");
  CHECK(v1[1]["object"]["apiVersion"] == "events.k8s.io/v1");
  CHECK(v1[1]["object"]["note"] == "assigned to n1");
  CHECK(v1[1]["object"]["regarding"]["name"] == "p2");
  store.stopWatch(1);
  store.stopWatch(2);
}

TEST_CASE_METHOD(Api, "updates, patches, deletes and errors through events.k8s.io/v1", "[events]") {
  call(req("POST", kCore, kCoreEvent), 201);
  // A merge patch in the group's own field names.
  auto patched = call(
      req("PATCH", std::string(kV1) + "/p2.1", R"({"note":"assigned to n2","deprecatedCount":3})"),
      200);
  CHECK(patched["note"] == "assigned to n2");
  auto core = call(req("GET", std::string(kCore) + "/p2.1"), 200);
  CHECK(core["message"] == "assigned to n2");
  CHECK(core["count"] == 3);
  // PUT of the events.k8s.io form.
  auto v1 = call(req("GET", std::string(kV1) + "/p2.1"), 200);
  v1["note"] = "assigned to n3";
  call(req("PUT", std::string(kV1) + "/p2.1", v1.dump()), 200);
  CHECK(call(req("GET", std::string(kCore) + "/p2.1"), 200)["message"] == "assigned to n3");
  // Errors name the events.k8s.io resource.
  auto missing = call(req("GET", std::string(kV1) + "/nope"), 404);
  CHECK(missing["message"] == "events.events.k8s.io \"nope\" not found");
  CHECK(missing["details"]["group"] == "events.k8s.io");
  CHECK(call(req("GET", std::string(kCore) + "/nope"), 404)["message"] ==
        "events \"nope\" not found");
  json incomplete = json::parse(kV1Event);
  incomplete["metadata"]["name"] = "x";
  incomplete.erase("reportingController");
  auto invalidEvent = call(req("POST", kV1, incomplete.dump()), 422);
  CHECK(invalidEvent["details"]["causes"][0]["field"] == "reportingController");
  CHECK(call(req("GET", std::string(kCore) + "/x"), 404)["reason"] ==
        "NotFound");  // nothing stored
  // Deleted through one group, gone from both.
  call(req("DELETE", std::string(kV1) + "/p2.1"), 200);
  call(req("GET", std::string(kCore) + "/p2.1"), 404);
}

TEST_CASE_METHOD(Api, "kubectl get events columns, the same through both groups", "[events]") {
  call(req("POST", kV1, kV1Event), 201);
  call(req("POST", kCore, kCoreEvent), 201);
  // A series event of the new API about a node, with no count of its own.
  call(req("POST", kCore,
           R"({"metadata":{"name":"s.1"},"involvedObject":{"kind":"Node"},"reason":"Pressure",
    "message":"  memory low\n","type":"Warning","eventTime":"2026-01-01T00:50:00.000000Z","reportingComponent":"kubelet",
    "series":{"count":5,"lastObservedTime":"2026-01-01T00:59:30.000000Z"}})"),
       201);
  for (const char* path : {kCore, kV1}) {
    CAPTURE(path);
    auto t = call(req("GET", path, "", {{"includeObject", "None"}},
                      "application/json;as=Table;v=v1;g=meta.k8s.io"),
                  200);
    std::vector<std::string> names;
    for (const auto& c : t["columnDefinitions"]) {
      names.push_back(c["name"].get<std::string>() + (c["priority"] == 1 ? "*" : ""));
    }
    CHECK(names == std::vector<std::string>{"Last Seen", "Type", "Reason", "Object", "Subobject*",
                                            "Source*", "Message", "First Seen*", "Count*",
                                            "Name*"});
    REQUIRE(t["rows"].size() == 3);
    CHECK(t["rows"][0]["cells"] ==
          json({"60m", "Normal", "GpuAttached", "pod/p1", "", "reconfig-mgr, reconfig-mgr-0",
                "attached falcon-0.3", "60m", 2, "gpu.1"}));
    CHECK(t["rows"][1]["cells"] == json({"59m", "Normal", "Scheduled", "pod/p2", "",
                                         "default-scheduler", "assigned to n1", "60m", 1, "p2.1"}));
    CHECK(t["rows"][2]["cells"] == json({"30s", "Warning", "Pressure", "node", "", "kubelet",
                                         "memory low", "10m", 5, "s.1"}));
  }
}
