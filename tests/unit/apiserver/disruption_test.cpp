// PodDisruptionBudgets and pods/eviction in the API test double: the budget status the
// store keeps (what the disruption controller writes on a real cluster) and the eviction
// decision. Expected numbers are worked out by hand from the pods in each case.

// GCC 12 reports a false -Wrestrict inside std::string assignment at -O3 (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"

#include "tools/kube-apiserver-double/disruption.hpp"

#include <catch2/catch.hpp>

#include "tests/unit/apiserver/api_harness.hpp"
#include "tools/kube-apiserver-double/api_server.hpp"

using namespace kc::apiserver;
using nlohmann::json;
using namespace kc::apiserver::testing;

namespace {

json pod(const std::string& name, const std::string& phase, bool ready,
         json labels = {{"app", "web"}}) {
  json p = {{"metadata", {{"name", name}, {"labels", labels}}}, {"status", {{"phase", phase}}}};
  p["status"]["conditions"] =
      json::array({{{"type", "Ready"}, {"status", ready ? "True" : "False"}}});
  return p;
}

json budget(json spec, json status = json::object()) {
  return {
      {"metadata", {{"name", "web-pdb"}, {"generation", 1}}}, {"spec", spec}, {"status", status}};
}

struct Api {
  Api() : api(store, {}) {}
  kc::net::Request req(std::string method, std::string path, std::string body = "") {
    return apiRequest(std::move(method), std::move(path), std::move(body));
  }
  kc::net::Response raw(const kc::net::Request& r) { return api.handle(r); }
  json call(const kc::net::Request& r, unsigned status) { return apiCall(api, r, status); }
  // A running pod of app=web, Ready or not.
  void runPod(const std::string& name, bool ready, const std::string& app = "web") {
    call(req("POST", "/api/v1/namespaces/default/pods",
             json{{"metadata", {{"name", name}, {"labels", {{"app", app}}}}},
                  {"spec", {{"containers", {{{"name", "c"}, {"image", "x"}}}}}}}
                 .dump()),
         201);
    call(req("PATCH", "/api/v1/namespaces/default/pods/" + name + "/status",
             json{{"status",
                   {{"phase", "Running"},
                    {"conditions", {{{"type", "Ready"}, {"status", ready ? "True" : "False"}}}}}}}
                 .dump()),
         200);
  }
  json pdb(const std::string& name = "web-pdb") {
    return call(req("GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/" + name), 200);
  }
  kc::net::Request evict(const std::string& name, json deleteOptions = nullptr) {
    json e = {{"apiVersion", "policy/v1"},
              {"kind", "Eviction"},
              {"metadata", {{"name", name}, {"namespace", "default"}}}};
    if (!deleteOptions.is_null()) {
      e["deleteOptions"] = deleteOptions;
    }
    return req("POST", "/api/v1/namespaces/default/pods/" + name + "/eviction", e.dump());
  }
  bool exists(const std::string& name) {
    return raw(req("GET", "/api/v1/namespaces/default/pods/" + name)).status == 200;
  }
  ObjectStore store;
  ApiServer api;
};

const char* kMinTwo =
    R"({"metadata":{"name":"web-pdb"},"spec":{"minAvailable":2,"selector":{"matchLabels":{"app":"web"}}}})";

}  // namespace

TEST_CASE("IntOrPercent scales percentages up or down, counts as given", "[pdb]") {
  auto [value, percent, total, up, expected] = GENERATE(table<int, bool, int, bool, int>({
      {2, false, 10, true, 2},
      {50, true, 3, true, 2},
      {50, true, 3, false, 1},
      {30, true, 10, true, 3},
      {1, true, 7, true, 1},
      {1, true, 7, false, 0},
      {100, true, 7, true, 7},
      {0, true, 5, true, 0},
  }));
  CAPTURE(value, percent, total, up);
  CHECK(IntOrPercent{value, percent}.scaled(total, up) == expected);
}

TEST_CASE("PodDisruptionBudget spec validation names the field", "[pdb]") {
  auto [spec, field] = GENERATE(table<const char*, const char*>({
      {R"({"minAvailable":1,"maxUnavailable":1})",
       "spec: Invalid value: minAvailable and maxUnavailable cannot be both set"},
      {R"({"minAvailable":-1})",
       "spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"},
      {R"({"maxUnavailable":"101%"})",
       "spec.maxUnavailable: Invalid value: \"101%\": must not be greater than 100%"},
      {R"({"maxUnavailable":"half"})",
       "spec.maxUnavailable: Invalid value: \"half\": must be an integer or percentage (e.g '5%')"},
      {R"({"selector":{"matchExpressions":[{"key":"app","operator":"Near","values":["x"]}]}})",
       "spec.selector.matchExpressions[0].operator: Invalid value: \"Near\": not a valid selector "
       "operator"},
      {R"({"selector":{"matchExpressions":[{"key":"app","operator":"In"}]}})",
       "spec.selector.matchExpressions[0].values: Required value: must be specified when "
       "`operator` is 'In' or 'NotIn'"},
      {R"({"unhealthyPodEvictionPolicy":"Sometimes"})",
       "spec.unhealthyPodEvictionPolicy: Unsupported value: \"Sometimes\": supported values: "
       "\"AlwaysAllow\", \"IfHealthyBudget\""},
  }));
  CAPTURE(spec);
  auto r = parsePdbSpec(json{{"spec", json::parse(spec)}});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message == field);
}

TEST_CASE("budget status: healthy pods against minAvailable / maxUnavailable", "[pdb]") {
  // Four selected pods: three Ready, one not.
  const std::vector<json> pods = {pod("a", "Running", true), pod("b", "Running", true),
                                  pod("c", "Running", true), pod("d", "Running", false)};
  std::vector<const json*> selected;
  for (const auto& p : pods) {
    selected.push_back(&p);
  }
  auto [spec, desired, allowed] = GENERATE(table<const char*, int, int>({
      {R"({"minAvailable":2,"selector":{}})", 2, 1},  // 3 healthy - 2
      {R"({"minAvailable":3,"selector":{}})", 3, 0},
      {R"({"minAvailable":5,"selector":{}})", 5, 0},        // never negative
      {R"({"minAvailable":"50%","selector":{}})", 2, 1},    // ceil(4 * 0.5)
      {R"({"minAvailable":"60%","selector":{}})", 3, 0},    // ceil(2.4)
      {R"({"maxUnavailable":1,"selector":{}})", 3, 0},      // 4 - 1
      {R"({"maxUnavailable":"50%","selector":{}})", 2, 1},  // 4 - ceil(2)
      {R"({"maxUnavailable":"10%","selector":{}})", 3, 0},  // 4 - ceil(0.4)
      {R"({"selector":{}})", 0, 3},                         // neither set: nothing required
  }));
  CAPTURE(spec);
  json b = budget(json::parse(spec));
  auto parsed = parsePdbSpec(b);
  REQUIRE(parsed.ok());
  json s = pdbStatus(b, *parsed, selected, json::object(), "2026-01-01T00:00:00Z");
  CHECK(s["expectedPods"] == 4);
  CHECK(s["currentHealthy"] == 3);
  CHECK(s["desiredHealthy"] == desired);
  CHECK(s["disruptionsAllowed"] == allowed);
  CHECK(s["observedGeneration"] == 1);
  CHECK(s["conditions"][0]["type"] == "DisruptionAllowed");
  CHECK(s["conditions"][0]["status"] == (allowed > 0 ? "True" : "False"));
  CHECK(s["conditions"][0]["reason"] == (allowed > 0 ? "SufficientPods" : "InsufficientPods"));
}

TEST_CASE("budget status keeps the condition's transition time while it holds", "[pdb]") {
  json b = budget(json::parse(R"({"minAvailable":1,"selector":{}})"));
  auto spec = parsePdbSpec(b);
  REQUIRE(spec.ok());
  json p1 = pod("a", "Running", true);
  json p2 = pod("b", "Running", true);
  json first = pdbStatus(b, *spec, {&p1, &p2}, json::object(), "2026-01-01T00:00:00Z");
  json same = pdbStatus(b, *spec, {&p1, &p2}, first, "2026-01-01T01:00:00Z");
  CHECK(same == first);
  json flipped = pdbStatus(b, *spec, {&p1}, first, "2026-01-01T02:00:00Z");
  CHECK(flipped["conditions"][0]["lastTransitionTime"] == "2026-01-01T02:00:00Z");
}

TEST_CASE("eviction decision", "[pdb]") {
  using V = EvictionDecision::Verdict;
  json exhausted = budget(json::parse(R"({"minAvailable":2})"), {{"observedGeneration", 1},
                                                                 {"disruptionsAllowed", 0},
                                                                 {"currentHealthy", 2},
                                                                 {"desiredHealthy", 2}});
  json open = budget(json::parse(R"({"minAvailable":1})"), {{"observedGeneration", 1},
                                                            {"disruptionsAllowed", 1},
                                                            {"currentHealthy", 2},
                                                            {"desiredHealthy", 1}});
  json stale = open;
  stale["metadata"]["generation"] = 2;
  json short1 = budget(json::parse(R"({"minAvailable":3})"), {{"observedGeneration", 1},
                                                              {"disruptionsAllowed", 0},
                                                              {"currentHealthy", 2},
                                                              {"desiredHealthy", 3}});
  json always = short1;
  always["spec"]["unhealthyPodEvictionPolicy"] = "AlwaysAllow";
  json negative = open;
  negative["status"]["disruptionsAllowed"] = -1;
  json ready = pod("p", "Running", true);
  json unready = pod("p", "Running", false);
  json pending = pod("p", "Pending", false);
  json done = pod("p", "Succeeded", false);
  json terminating = ready;
  terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";

  CHECK(decideEviction(ready, {}).verdict == V::kAllowed);
  CHECK(decideEviction(ready, {&open}).verdict == V::kAllowed);
  auto d = decideEviction(ready, {&exhausted});
  CHECK(d.verdict == V::kBudgetExhausted);
  CHECK(d.message == "The disruption budget web-pdb needs 2 healthy pods and has 2 currently");
  CHECK(decideEviction(ready, {&stale}).verdict == V::kNotObserved);
  CHECK(decideEviction(ready, {&negative}).verdict == V::kNegativeBudget);
  CHECK(decideEviction(ready, {&open, &exhausted}).verdict == V::kSeveralBudgets);
  // Pending, terminal and terminating pods skip the budget.
  CHECK(decideEviction(pending, {&exhausted}).verdict == V::kAllowed);
  CHECK(decideEviction(done, {&exhausted}).verdict == V::kAllowed);
  CHECK(decideEviction(terminating, {&exhausted}).verdict == V::kAllowed);
  // An unready pod: allowed while the budget holds (2 healthy >= 2 desired), not when the
  // application is already short (2 < 3) unless the budget says AlwaysAllow.
  CHECK(decideEviction(unready, {&exhausted}).verdict == V::kAllowed);
  CHECK(decideEviction(unready, {&short1}).verdict == V::kBudgetExhausted);
  CHECK(decideEviction(unready, {&always}).verdict == V::kAllowed);
}

TEST_CASE_METHOD(Api, "discovery: policy/v1 poddisruptionbudgets and the pods/eviction subresource",
                 "[pdb]") {
  auto core = call(req("GET", "/api/v1"), 200);
  json eviction;
  for (const auto& r : core["resources"]) {
    if (r["name"] == "pods/eviction") {
      eviction = r;
    }
  }
  CHECK(eviction == json({{"name", "pods/eviction"},
                          {"singularName", ""},
                          {"namespaced", true},
                          {"group", "policy"},
                          {"version", "v1"},
                          {"kind", "Eviction"},
                          {"verbs", {"create"}}}));
  auto policy = call(req("GET", "/apis/policy/v1"), 200);
  std::vector<std::string> names;
  for (const auto& r : policy["resources"]) {
    names.push_back(r["name"].get<std::string>());
  }
  CHECK(names == std::vector<std::string>{"poddisruptionbudgets", "poddisruptionbudgets/status"});
  CHECK(call(req("GET", "/apis/policy"), 200)["preferredVersion"]["groupVersion"] == "policy/v1");
}

TEST_CASE_METHOD(Api, "the store keeps budget status current as pods change", "[pdb]") {
  runPod("w1", true);
  runPod("w2", true);
  runPod("other", true, "db");
  auto created =
      call(req("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets", kMinTwo), 201);
  CHECK_FALSE(
      created.contains("status"));  // the status follows in its own write, as from the controller
  auto s = pdb()["status"];
  CHECK(s["expectedPods"] == 2);
  CHECK(s["currentHealthy"] == 2);
  CHECK(s["desiredHealthy"] == 2);
  CHECK(s["disruptionsAllowed"] == 0);
  runPod("w3", false);
  CHECK(pdb()["status"]["expectedPods"] == 3);
  CHECK(pdb()["status"]["disruptionsAllowed"] == 0);
  call(req("PATCH", "/api/v1/namespaces/default/pods/w3/status",
           R"({"status":{"conditions":[{"type":"Ready","status":"True"}]}})"),
       200);
  CHECK(pdb()["status"]["currentHealthy"] == 3);
  CHECK(pdb()["status"]["disruptionsAllowed"] == 1);
  // A spec change bumps the generation and is observed at once.
  call(req("PATCH", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/web-pdb",
           R"({"spec":{"minAvailable":1}})"),
       200);
  auto after = pdb();
  CHECK(after["metadata"]["generation"] == 2);
  CHECK(after["status"]["observedGeneration"] == 2);
  CHECK(after["status"]["disruptionsAllowed"] == 2);
  // Bad specs are refused and change nothing.
  auto bad = call(req("PATCH", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/web-pdb",
                      R"({"spec":{"maxUnavailable":1}})"),
                  422);
  CHECK(bad["details"]["causes"][0]["field"] == "spec");
  CHECK(pdb()["spec"]["minAvailable"] == 1);
}

TEST_CASE_METHOD(Api, "eviction: 429 while the budget forbids it, then allowed and the pod deleted",
                 "[pdb]") {
  runPod("w1", true);
  runPod("w2", true);
  call(req("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets", kMinTwo), 201);

  auto refused = raw(evict("w1"));
  CHECK(refused.status == 429);
  auto st = json::parse(refused.body);
  CHECK(st["kind"] == "Status");
  CHECK(st["reason"] == "TooManyRequests");
  CHECK(st["message"] == "Cannot evict pod as it would violate the pod's disruption budget.");
  CHECK(st["details"]["causes"] ==
        json({{{"reason", "DisruptionBudget"},
               {"message",
                "The disruption budget web-pdb needs 2 healthy pods and has 2 currently"}}}));
  CHECK_FALSE(refused.header("Retry-After"));
  CHECK(exists("w1"));

  runPod("w3", true);  // now 3 healthy, 1 disruption allowed
  auto ok = call(evict("w1"), 201);
  CHECK(ok["kind"] == "Status");
  CHECK(ok["status"] == "Success");
  CHECK_FALSE(exists("w1"));
  CHECK(pdb()["status"]["currentHealthy"] == 2);
  CHECK(pdb()["status"]["disruptionsAllowed"] == 0);
  CHECK(raw(evict("w2")).status == 429);
  CHECK(call(evict("gone"), 404)["message"] == "pods \"gone\" not found");
}

TEST_CASE_METHOD(Api, "eviction: the last pod a budget needs stays", "[pdb]") {
  runPod("e1", true);
  runPod("e2", true);
  call(
      req("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
          R"({"metadata":{"name":"web-pdb"},"spec":{"minAvailable":1,"selector":{"matchLabels":{"app":"web"}}}})"),
      201);
  call(evict("e1"), 201);
  CHECK(pdb()["status"]["disruptionsAllowed"] == 0);
  call(evict("e2"), 429);
  CHECK(exists("e2"));
}

TEST_CASE_METHOD(Api, "eviction honours deleteOptions and checks the body", "[pdb]") {
  runPod("w1", true);
  auto uid = call(req("GET", "/api/v1/namespaces/default/pods/w1"), 200)["metadata"]["uid"]
                 .get<std::string>();
  // A wrong uid precondition: 409, the pod stays.
  auto c = call(evict("w1", {{"preconditions", {{"uid", "not-" + uid}}}}), 409);
  CHECK(c["reason"] == "Conflict");
  CHECK(exists("w1"));
  // Name mismatch and wrong kind: 400.
  json e = {{"apiVersion", "policy/v1"}, {"kind", "Eviction"}, {"metadata", {{"name", "other"}}}};
  CHECK(call(req("POST", "/api/v1/namespaces/default/pods/w1/eviction", e.dump()),
             400)["message"] == "name in URL does not match name in Eviction object");
  e = {{"apiVersion", "policy/v1"}, {"kind", "Binding"}, {"metadata", {{"name", "w1"}}}};
  call(req("POST", "/api/v1/namespaces/default/pods/w1/eviction", e.dump()), 400);
  CHECK(call(req("GET", "/api/v1/namespaces/default/pods/w1/eviction"), 405)["reason"] ==
        "MethodNotAllowed");
  // A finalizer holds the pod: eviction starts its deletion (deletionTimestamp), and the
  // budget stops counting it as healthy.
  call(
      req("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
          R"({"metadata":{"name":"web-pdb"},"spec":{"maxUnavailable":1,"selector":{"matchLabels":{"app":"web"}}}})"),
      201);
  call(req("PATCH", "/api/v1/namespaces/default/pods/w1",
           R"({"metadata":{"finalizers":["test/hold"]}})"),
       200);
  call(evict("w1", {{"preconditions", {{"uid", uid}}}}), 201);
  auto held = call(req("GET", "/api/v1/namespaces/default/pods/w1"), 200);
  CHECK(held["metadata"].contains("deletionTimestamp"));
  CHECK(pdb()["status"]["currentHealthy"] == 0);
}

TEST_CASE_METHOD(Api, "eviction: two budgets select the pod -> 500, pending pods ignore budgets",
                 "[pdb]") {
  runPod("w1", true);
  call(req("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets", kMinTwo), 201);
  call(req("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
           R"({"metadata":{"name":"all"},"spec":{"maxUnavailable":0,"selector":{}}})"),
       201);
  auto r = call(evict("w1"), 500);
  CHECK(r["message"] ==
        "Internal error occurred: This pod has more than one PodDisruptionBudget, which the "
        "eviction subresource does not support.");
  call(
      req("POST", "/api/v1/namespaces/default/pods",
          R"({"metadata":{"name":"new","labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"x"}]}})"),
      201);
  call(evict("new"), 201);  // Pending: deleted without asking the budgets
  CHECK_FALSE(exists("new"));
}

TEST_CASE_METHOD(Api, "kubectl get pdb columns", "[pdb]") {
  runPod("w1", true);
  runPod("w2", true);
  call(
      req("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
          R"({"metadata":{"name":"web-pdb"},"spec":{"maxUnavailable":"50%","selector":{"matchLabels":{"app":"web"}}}})"),
      201);
  auto r = req("GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets");
  r.headers.push_back({"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io"});
  auto t = call(r, 200);
  std::vector<std::string> names;
  for (const auto& c : t["columnDefinitions"]) {
    names.push_back(c["name"].get<std::string>());
  }
  CHECK(names == std::vector<std::string>{"Name", "Min Available", "Max Unavailable",
                                          "Allowed Disruptions", "Age"});
  CHECK(t["rows"][0]["cells"] == json({"web-pdb", "N/A", "50%", 1, "0s"}));
}
