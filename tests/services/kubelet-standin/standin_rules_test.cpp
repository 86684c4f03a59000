// The stand-in's pure rules, table-driven, expected values worked out by hand from kubelet's
// and apimachinery's documented behaviour (not from the code under test): quantities, resource
// names, the admission fit check and its wording, pod requests, flag values, the run-seconds
// annotation and the status builders.

#include <catch2/catch.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tools/kubelet-standin/admission.hpp"
#include "tools/kubelet-standin/flags.hpp"
#include "tools/kubelet-standin/status_builders.hpp"

using namespace kc::kubelet;
using nlohmann::json;

namespace {
constexpr std::int64_t kBad = -1;  // "an error is expected" in the tables below
}

TEST_CASE("extended resource names (device plugins may only register these)", "[devplugin]") {
  auto [name, extended] = GENERATE(table<std::string, bool>({
      {"kubecomp.io/gpu", true},
      {"nvidia.com/gpu", true},
      {"cpu", false},
      {"kubernetes.io/gpu", false},
      {"foo.kubernetes.io/gpu", false},
      {"requests.kubecomp.io/gpu", false},
      {"kubecomp.io/Bad Name", false},
      {"Kubecomp.io/gpu", false},
      {"kubecomp.io/", false},
      {"a/b/c", false},
  }));
  CAPTURE(name);
  CHECK(isExtendedResourceName(name) == extended);
}

TEST_CASE("admission fit: first shortage in kubelet's order, with kubelet's message",
          "[devplugin]") {
  const ResourceList allocatable = {
      {"cpu", 4000}, {"memory", 8LL << 30}, {"pods", 2}, {"kubecomp.io/gpu", 0}};
  const ResourceList used = {{"cpu", 3000}, {"memory", 1LL << 30}};
  struct Row {
    ResourceList request;
    std::int64_t active;
    std::string reason;  // "" = fits
    std::string message;
  };
  auto row = GENERATE(values<Row>({
      {{{"cpu", 1000}}, 1, "", ""},  // exactly what is left
      {{{"cpu", 1001}},
       1,
       "OutOfcpu",
       "Node didn't have enough resource: cpu, requested: 1001, used: 3000, capacity: 4000"},
      {{{"cpu", 10}},
       2,
       "OutOfpods",
       "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2"},
      // cpu is reported before memory even though both are short
      {{{"memory", 8LL << 30}, {"cpu", 2000}},
       1,
       "OutOfcpu",
       "Node didn't have enough resource: cpu, requested: 2000, used: 3000, capacity: 4000"},
      {{{"memory", 8LL << 30}},
       1,
       "OutOfmemory",
       "Node didn't have enough resource: memory, requested: 8589934592, used: 1073741824, "
       "capacity: 8589934592"},
      // advertised as 0: checked and short
      {{{"kubecomp.io/gpu", 1}},
       1,
       "OutOfkubecomp.io/gpu",
       "Node didn't have enough resource: kubecomp.io/gpu, requested: 1, used: 0, capacity: 0"},
      // not advertised at all: kubelet drops it from the check (a cluster-level resource)
      {{{"example.com/dongle", 5}}, 1, "", ""},
  }));
  CAPTURE(row.reason);
  const auto rejection = checkFit(row.request, allocatable, used, row.active);
  if (row.reason.empty()) {
    CHECK_FALSE(rejection);
  } else {
    REQUIRE(rejection);
    CHECK(rejection->reason == row.reason);
    CHECK(rejection->message == row.message);
  }
}

TEST_CASE(
    "pod requests: containers summed, the largest init container, sidecars, overhead, limits fill "
    "requests",
    "[devplugin]") {
  const json pod = {
      {"metadata", {{"name", "p"}, {"namespace", "default"}}},
      {"spec",
       {{"containers",
         {{{"name", "a"},
           {"resources", {{"requests", {{"cpu", "1"}}}, {"limits", {{"kubecomp.io/gpu", "1"}}}}}},
          {{"name", "b"}, {"resources", {{"requests", {{"cpu", "500m"}, {"memory", "1Gi"}}}}}}}},
        {"initContainers", {{{"name", "i"}, {"resources", {{"requests", {{"cpu", "2"}}}}}}}},
        {"overhead", {{"cpu", "250m"}}}}}};
  auto r = podRequests(pod);
  REQUIRE(r);
  // cpu: max(1000 + 500, 2000) + 250
  CHECK(*r == ResourceList{{"cpu", 2250}, {"memory", 1LL << 30}, {"kubecomp.io/gpu", 1}});

  // A sidecar (init container with restartPolicy Always) runs beside the containers: it adds
  // to their sum (v1.29), where a plain init container only competes with it.
  json sidecar = pod;
  sidecar["spec"]["initContainers"] =
      json::array({{{"name", "proxy"},
                    {"restartPolicy", "Always"},
                    {"resources", {{"requests", {{"cpu", "300m"}}}}}}});
  auto s = podRequests(sidecar);
  REQUIRE(s);
  CHECK(s->at("cpu") == 1000 + 500 + 300 + 250);

  json bad = pod;
  bad["spec"]["containers"][1]["resources"]["requests"]["memory"] = "lots";
  auto e = podRequests(bad);
  REQUIRE_FALSE(e);
  CHECK(e.error().code == "invalid");
  CHECK(e.error().message.find("spec.containers[1].resources.requests.memory") !=
        std::string::npos);
}

TEST_CASE("flag values: Go durations, labels, taints", "[devplugin]") {
  auto [text, ms] = GENERATE(table<std::string, std::int64_t>({
      {"10s", 10000},
      {"200ms", 200},
      {"1m30s", 90000},
      {"1.5h", 5400000},
      {"0", 0},
      {"10", kBad},
      {"", kBad},
      {"s", kBad},
      {"5d", kBad},
      {"-1s", kBad},
  }));
  CAPTURE(text);
  auto d = parseGoDuration(text);
  if (ms == kBad) {
    CHECK_FALSE(d);
  } else {
    REQUIRE(d);
    CHECK(d->count() == ms);
  }

  auto labels = parseLabels("pool=gpu,kubecomp.io/chassis=c1,empty=");
  REQUIRE(labels);
  CHECK(*labels == std::map<std::string, std::string>{
                       {"pool", "gpu"}, {"kubecomp.io/chassis", "c1"}, {"empty", ""}});
  CHECK_FALSE(parseLabels("novalue"));
  CHECK_FALSE(parseLabels("a=b c"));
  CHECK_FALSE(parseLabels("Bad Key=x"));

  auto taints = parseTaints("k=v:NoSchedule,k2:NoExecute");
  REQUIRE(taints);
  CHECK(*taints == json::array({{{"key", "k"}, {"value", "v"}, {"effect", "NoSchedule"}},
                                {{"key", "k2"}, {"effect", "NoExecute"}}}));
  CHECK_FALSE(parseTaints("k=v"));
  CHECK_FALSE(parseTaints("k=v:Sometimes"));
}

TEST_CASE("the kubecomp.io/run-seconds annotation", "[devplugin]") {
  auto pod = [](const json& value) {
    return json{{"metadata", {{"annotations", {{"kubecomp.io/run-seconds", value}}}}}};
  };
  auto absent = runSeconds(json{{"metadata", json::object()}});
  REQUIRE(absent);
  CHECK_FALSE(absent->has_value());
  auto [value, seconds] = GENERATE(table<json, double>({
      {"300", 300},
      {"2.5", 2.5},
      {"0", 0},
      {"-1", kBad},
      {"soon", kBad},
      {"1e3", kBad},
      {"", kBad},
      {5, kBad},  // must be a string, as every annotation
  }));
  CAPTURE(value.dump());
  auto r = runSeconds(pod(value));
  if (seconds == kBad) {
    REQUIRE_FALSE(r);
    CHECK(r.error().code == "invalid");
  } else {
    REQUIRE(r);
    REQUIRE(r->has_value());
    CHECK(**r == seconds);
  }
}

TEST_CASE("status builders: phases, exit codes, transition times kept while a condition holds",
          "[devplugin]") {
  const json pod = {{"metadata", {{"uid", "u1"}}},
                    {"spec", {{"containers", {{{"name", "c"}, {"image", "i"}}}}}}};
  PodRunTimes t{"2026-01-01T00:00:10Z", "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z",
                "2026-01-01T00:00:10Z"};
  CHECK(terminatedStatus(pod, "10.0.0.1", "10.88.0.2", t, 0, "Completed")["phase"] == "Succeeded");
  const json killed = terminatedStatus(pod, "10.0.0.1", "10.88.0.2", t, 143, "Error");
  CHECK(killed["phase"] == "Failed");
  CHECK(killed["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 143);
  CHECK(rejectedStatus({"OutOfcpu", "x"}) ==
        json{{"phase", "Failed"}, {"reason", "OutOfcpu"}, {"message", "Pod was rejected: x"}});

  const json first = nodeConditions(json::array(), "2026-01-01T00:00:00Z");
  const json second = nodeConditions(first, "2026-01-01T00:00:10Z");
  for (const auto& c : second) {
    CAPTURE(c.dump());
    CHECK(c["lastHeartbeatTime"] == "2026-01-01T00:00:10Z");
    CHECK(c["lastTransitionTime"] == "2026-01-01T00:00:00Z");
  }
  // A Node whose Ready was False (written by someone else): the transition is now.
  json notReady = first;
  for (auto& c : notReady) {
    if (c["type"] == "Ready") {
      c["status"] = "False";
    }
  }
  for (const auto& c : nodeConditions(notReady, "2026-01-01T00:00:20Z")) {
    CAPTURE(c.dump());
    CHECK(c["lastTransitionTime"] ==
          (c["type"] == "Ready" ? "2026-01-01T00:00:20Z" : "2026-01-01T00:00:00Z"));
  }
}
