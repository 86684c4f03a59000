// kubelet-standin's DRA side as a real process against the API server double, with a fake DRA
// plugin in the test process (fake_dra_plugin.hpp): the plugin watcher's registration and its
// refusals, NodePrepareResources before a pod with ResourceClaims starts (and the waits when it
// cannot), PodResources dynamic_resources, NodeUnprepareResources after the pod ends, a claim
// shared by two pods, a real restart of the stand-in, v1beta1-only plugins and claims made from
// templates. Every wait is on an event (an informer change, a call the plugin recorded) or, for
// the stand-in's own debug state, a condition polled until a deadline.

#include <grpcpp/client_context.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "libcore/api/dra_claim.hpp"
#include "libcore/api/names.hpp"
#include "libcore/grpc/channel.hpp"
#include "libcore/kube/client.hpp"
#include "podresources/v1/api.grpc.pb.h"
#include "tests/services/kubelet-standin/fake_dra_plugin.hpp"
#include "tests/services/kubelet-standin/standin_process.hpp"
#include "tests/services/kubelet-standin/watch.hpp"
#include "tests/support/dra_objects.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/kube/double_process.hpp"

using kc::kubelet::testing::FakeDraPlugin;
using kc::kubelet::testing::StandinProcess;
using kc::kubelet::testing::Watcher;
using kc::testing::eventually;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::string kDriver(kc::api::kDraDriverName);

struct Cluster {
  kc::testing::TempDir dir;
  kc::kube::testing::DoubleProcess api{KC_APISERVER_DOUBLE_EXE, dir.path().string()};
  std::unique_ptr<kc::kube::KubeClient> client =
      std::move(kc::kube::KubeClient::create(api.config()).value());
  Watcher pods{*client, kc::kube::gvr::pods()};
  Watcher events{*client, kc::kube::gvr::events()};
  std::unique_ptr<StandinProcess> s;

  explicit Cluster(std::vector<std::string> extra = {}) {
    std::filesystem::create_directories(dir.path() / "n1");
    std::vector<std::string> args = {"--dra-retry-period", "200ms", "--dra-call-timeout", "5s"};
    args.insert(args.end(), extra.begin(), extra.end());
    s = std::make_unique<StandinProcess>(KUBELET_STANDIN_EXE, api.kubeconfigPath(),
                                         (dir.path() / "n1").string(), "n1", args);
  }

  // A fake plugin of the driver, its DRA socket under <dir>/plugins/<name>.
  FakeDraPlugin::Options plugin(const std::string& name = "gpu") const {
    FakeDraPlugin::Options o;
    o.registryDir = s->pluginsRegistryDir();
    o.pluginDir = (dir.path() / "plugins" / name).string();
    o.driver = kDriver;
    return o;
  }

  json dra() { return s->debugPods()["dra"]; }
  bool driverRegistered(const std::string& driver = kDriver) {
    const json drivers = dra()["drivers"];  // a copy: the range must outlive the loop
    for (const auto& d : drivers) {
      if (d["driver"] == driver) {
        return true;
      }
    }
    return false;
  }
  // Claims in the stand-in's claim cache.
  std::size_t cachedClaims() { return dra()["claims"].size(); }

  std::string createClaim(const std::string& name) {
    auto created = client->create(kc::api::gvr::resourceClaims(), "default",
                                  kc::testing::oneGpuClaim(name, "default"));
    REQUIRE(created);
    return (*created)["metadata"]["uid"].get<std::string>();
  }
  // status.allocation as the scheduler writes it (one device of our driver, for n1), and
  // status.reservedFor when given (otherwise the double reserves it for bound pods).
  void allocate(const std::string& claim, const json& reservedFor = json()) {
    kc::api::ClaimDevice d;
    d.request = "gpu";
    d.driver = kDriver;
    d.pool = "pool-a";
    d.device = "gpu-0";
    kc::api::ClaimAllocation a;
    a.results = {d};
    a.nodeName = "n1";
    a.allocationTimestamp = "2026-01-01T00:00:00Z";
    json status = {{"allocation", kc::api::toJson(a)}};
    if (!reservedFor.is_null()) {
      status["reservedFor"] = reservedFor;
    }
    REQUIRE(client->patch(kc::api::gvr::resourceClaims(), "default", claim,
                          kc::kube::PatchType::kMerge, {{"status", status}}, "status"));
  }

  // A pod on n1 whose container "c" uses the claim through entry "gpu".
  std::string createPod(const std::string& name, const json& claimEntry,
                        const std::string& runSeconds = {}) {
    json entry = claimEntry;
    entry["name"] = "gpu";
    json pod = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata", {{"name", name}, {"namespace", "default"}}},
                {"spec",
                 {{"nodeName", "n1"},
                  {"resourceClaims", json::array({entry})},
                  {"containers",
                   {{{"name", "c"},
                     {"image", "busybox"},
                     {"resources", {{"claims", json::array({{{"name", "gpu"}}})}}}},
                    {{"name", "helper"}, {"image", "busybox"}}}}}}};
    if (!runSeconds.empty()) {
      pod["metadata"]["annotations"] = {{"kubecomp.io/run-seconds", runSeconds}};
    }
    auto created = client->create(kc::kube::gvr::pods(), "default", pod);
    REQUIRE(created);
    return (*created)["metadata"]["uid"].get<std::string>();
  }
  std::string createPodWithClaim(const std::string& name, const std::string& claim,
                                 const std::string& runSeconds = {}) {
    return createPod(name, {{"resourceClaimName", claim}}, runSeconds);
  }
  void deletePod(const std::string& name) {
    REQUIRE(client->remove(kc::kube::gvr::pods(), "default", name, {}));
  }

  std::string phase(const std::string& name) {
    auto p = pods.get("default", name);
    return p && p->contains("status") ? (*p)["status"].value("phase", "") : "";
  }
  bool waitPhase(const std::string& name, const std::string& want,
                 std::chrono::milliseconds timeout = 15s) {
    return pods.until(
        [&](const kc::kube::Store& st) {
          auto p = st.get("default", name);
          return p && p->contains("status") && (*p)["status"].value("phase", "") == want;
        },
        timeout);
  }
  // A Warning Event from kubelet on the pod with this reason and message.
  bool waitEvent(const std::string& pod, const std::string& reason, const std::string& message) {
    return events.until([&](const kc::kube::Store& st) {
      for (const auto& e : st.list()) {
        if ((*e)["involvedObject"].value("name", "") == pod && (*e).value("reason", "") == reason &&
            (*e).value("type", "") == "Warning" && (*e).value("message", "") == message &&
            (*e)["source"].value("component", "") == "kubelet") {
          return true;
        }
      }
      return false;
    });
  }
};

std::string condition(const kc::kube::ObjectPtr& pod, const std::string& type) {
  if (!pod || !pod->contains("status")) {
    return {};
  }
  for (const auto& c : (*pod)["status"].value("conditions", json::array())) {
    if (c.value("type", "") == type) {
      return c.value("status", "");
    }
  }
  return {};
}

// container name -> [(claim namespace/name, CDI ids)] of one pod, from PodResources List.
using DynamicView =
    std::map<std::string, std::vector<std::pair<std::string, std::vector<std::string>>>>;
std::optional<DynamicView> dynamicResources(const std::string& socket, const std::string& pod) {
  auto stub = v1::PodResourcesLister::NewStub(kc::grpcx::dialUnix(socket));
  grpc::ClientContext ctx;
  kc::grpcx::setTimeout(ctx, 5s);
  v1::ListPodResourcesResponse resp;
  REQUIRE(stub->List(&ctx, v1::ListPodResourcesRequest(), &resp).ok());
  for (const auto& p : resp.pod_resources()) {
    if (p.name() != pod) {
      continue;
    }
    DynamicView out;
    for (const auto& c : p.containers()) {
      auto& list = out[c.name()];
      for (const auto& dr : c.dynamic_resources()) {
        std::vector<std::string> ids;
        for (const auto& cr : dr.claim_resources()) {
          for (const auto& cdi : cr.cdi_devices()) {
            ids.push_back(cdi.name());
          }
        }
        list.emplace_back(dr.claim_namespace() + "/" + dr.claim_name(), ids);
      }
    }
    return out;
  }
  return std::nullopt;
}

const std::string kFailed = "FailedPrepareDynamicResources";
const std::string kPrefix = "Failed to prepare dynamic resources: prepare dynamic resources: ";

}  // namespace

TEST_CASE(
    "DRA plugin watcher: a valid plugin is registered and told so, a bad GetInfo is refused "
    "with kubelet's words",
    "[dra][e2e]") {
  Cluster c;
  FakeDraPlugin good(c.plugin());
  REQUIRE(good.start());
  REQUIRE(good.waitFor([](const FakeDraPlugin& p) { return !p.notificationsLocked().empty(); }));
  CHECK(good.notifications()[0].registered);
  CHECK(good.notifications()[0].error.empty());
  const json drivers = c.dra()["drivers"];
  REQUIRE(drivers.size() == 1);
  CHECK(drivers[0]["driver"] == kDriver);
  CHECK(drivers[0]["endpoint"] == good.draPath());
  CHECK(drivers[0]["service"] == "v1.DRAPlugin");  // the plugin lists v1 first

  struct Row {
    const char* what;
    std::string type;
    std::string driver;
    std::vector<std::string> versions;
    std::optional<std::string> endpoint;
    std::string error;  // after the socket or endpoint, which the row cannot know
  };
  const std::string validation = "RegisterPlugin error -- plugin validation failed with err: ";
  const std::vector<Row> rows = {
      {"another plugin type", "CSIPlugin", "csi.example.com", {"v1.DRAPlugin"}, {}, ""},
      {"no versions", "DRAPlugin", "empty.example.com", {}, {}, ""},
      {"versions kubelet does not speak",
       "DRAPlugin",
       "old.example.com",
       {"v1alpha4.Node"},
       {},
       ""},
      {"a driver name that is not a DNS subdomain",
       "DRAPlugin",
       "Bad_Name",
       {"v1.DRAPlugin"},
       {},
       validation + "invalid DRA driver name \"Bad_Name\": a DRA driver name must be a DNS "
                    "subdomain"},
      {"an endpoint that is no socket",
       "DRAPlugin",
       "gone.example.com",
       {"v1.DRAPlugin"},
       std::string("/nonexistent/dra.sock"),
       validation + "endpoint /nonexistent/dra.sock of DRA driver plugin gone.example.com is not a "
                    "socket"},
  };
  for (const auto& row : rows) {
    CAPTURE(row.what);
    FakeDraPlugin::Options o = c.plugin(row.driver);
    o.type = row.type;
    o.driver = row.driver;
    o.versions = row.versions;
    o.endpoint = row.endpoint;
    FakeDraPlugin bad(o);
    REQUIRE(bad.start());
    // Refused, and asked again after kubelet's backoff (500 ms): two refusals.
    REQUIRE(
        bad.waitFor([](const FakeDraPlugin& p) { return p.notificationsLocked().size() >= 2; }));
    const auto n = bad.notifications();
    CHECK_FALSE(n[0].registered);
    std::string want = row.error;
    if (row.type != "DRAPlugin") {
      want = "RegisterPlugin error -- no handler registered for plugin type: CSIPlugin at socket " +
             bad.registrationPath();
    } else if (row.versions.empty()) {
      want = validation +
             "invalid supported gRPC versions of DRA driver plugin empty.example.com "
             "at endpoint " +
             bad.draPath() + ": empty list of supported gRPC services (aka supported versions)";
    } else if (row.versions[0] == "v1alpha4.Node") {
      want = validation +
             "invalid supported gRPC versions of DRA driver plugin old.example.com at "
             "endpoint " +
             bad.draPath() +
             ": none of services supported by the plugin ([\"v1alpha4.Node\"]) are supported by "
             "the kubelet ([\"v1.DRAPlugin\" \"v1beta1.DRAPlugin\"])";
    }
    CHECK(n[0].error == want);
    CHECK_FALSE(c.driverRegistered(row.driver));
    bad.stop();
  }
  CHECK(c.dra()["drivers"].size() == 1);

  // The socket goes: the driver is deregistered. A new socket of the same driver (a new plugin
  // instance, its own endpoint) is registered in its place.
  good.stop();
  REQUIRE(eventually([&] { return !c.driverRegistered(); }));
  FakeDraPlugin::Options next = c.plugin("gpu-2");
  next.registrationSocket = kDriver + "-reg-2.sock";
  FakeDraPlugin replacement(next);
  REQUIRE(replacement.start());
  REQUIRE(replacement.waitFor([](const FakeDraPlugin& p) {
    return !p.notificationsLocked().empty() && p.notificationsLocked()[0].registered;
  }));
  REQUIRE(eventually([&] { return c.driverRegistered(); }));
  CHECK(c.dra()["drivers"][0]["endpoint"] == replacement.draPath());
}

TEST_CASE(
    "a pod with an allocated, reserved claim: prepared before it starts, PodResources shows "
    "the CDI ids, unprepared exactly once after it completes",
    "[dra][e2e]") {
  Cluster c;
  FakeDraPlugin plugin(c.plugin());
  REQUIRE(plugin.start());
  REQUIRE(eventually([&] { return c.driverRegistered(); }));

  const std::string claimUid = c.createClaim("gpu-claim");
  c.allocate("gpu-claim");  // the double reserves it for the pod bound to n1
  plugin.holdPrepare(true);
  c.createPodWithClaim("job", "gpu-claim", "4");

  // While the plugin prepares, the pod waits: Pending, no sandbox, not in PodResources.
  REQUIRE(plugin.waitFor([](const FakeDraPlugin& p) { return p.preparedLocked() == 1; }));
  REQUIRE(c.pods.until([&](const kc::kube::Store&) { return c.phase("job") == "Pending"; }));
  CHECK(condition(c.pods.get("default", "job"), "PodReadyToStartContainers") == "False");
  CHECK_FALSE(dynamicResources(c.s->podResourcesSocket(), "job").has_value());
  const auto calls = plugin.prepareCalls();
  CHECK(calls[0].service == "v1");
  CHECK(calls[0].claims == std::vector<FakeDraPlugin::Claim>{{"default", claimUid, "gpu-claim"}});
  plugin.holdPrepare(false);

  REQUIRE(c.waitPhase("job", "Running"));
  CHECK(condition(c.pods.get("default", "job"), "PodReadyToStartContainers") == "True");
  auto dyn = dynamicResources(c.s->podResourcesSocket(), "job");
  REQUIRE(dyn.has_value());
  // The container naming the claim gets it; the other container gets nothing.
  using Entry = std::pair<std::string, std::vector<std::string>>;
  CHECK((*dyn)["c"] == std::vector<Entry>{{"default/gpu-claim", {"kubecomp.io/gpu=gpu-claim"}}});
  CHECK((*dyn)["helper"].empty());
  CHECK(std::filesystem::exists(c.s->rootDir() + "/dra_manager_state"));

  REQUIRE(c.waitPhase("job", "Succeeded"));
  REQUIRE(eventually([&] { return c.cachedClaims() == 0; }));  // nothing left to unprepare
  const auto un = plugin.unprepareCalls();
  REQUIRE(un.size() == 1);
  CHECK(un[0].service == "v1");
  CHECK(un[0].claims == std::vector<FakeDraPlugin::Claim>{{"default", claimUid, "gpu-claim"}});
  CHECK(plugin.prepareCalls().size() == 1);
}

TEST_CASE(
    "a failed preparation: the pod does not start, an Event says why, and it starts once the "
    "plugin succeeds",
    "[dra][e2e]") {
  struct Row {
    const char* what;
    bool skip;
    std::string message;
  };
  const Row row = GENERATE(
      Row{"the claim's result carries an error", false,
          kPrefix + "NodePrepareResources failed for ResourceClaim gpu-claim: injected failure"},
      Row{"the answer leaves the claim out", true,
          kPrefix + "NodePrepareResources skipped 1 ResourceClaims"});
  CAPTURE(row.what);
  Cluster c;
  FakeDraPlugin plugin(c.plugin());
  if (row.skip) {
    plugin.skipClaims(true);
  } else {
    plugin.failPrepare("injected failure");
  }
  REQUIRE(plugin.start());
  REQUIRE(eventually([&] { return c.driverRegistered(); }));
  c.createClaim("gpu-claim");
  c.allocate("gpu-claim");
  c.createPodWithClaim("job", "gpu-claim");

  REQUIRE(c.waitEvent("job", kFailed, row.message));
  // Tried again (every --dra-retry-period), still not started.
  REQUIRE(plugin.waitFor([](const FakeDraPlugin& p) { return p.preparedLocked() >= 2; }));
  CHECK(c.phase("job") == "Pending");
  CHECK(condition(c.pods.get("default", "job"), "PodReadyToStartContainers") == "False");

  plugin.failPrepare("");
  plugin.skipClaims(false);
  REQUIRE(c.waitPhase("job", "Running"));
  REQUIRE(dynamicResources(c.s->podResourcesSocket(), "job").has_value());
}

TEST_CASE(
    "driver not registered: the pod waits with kubelet's message and starts once the plugin "
    "registers, and a claim whose driver went away is unprepared when it is back",
    "[dra][e2e]") {
  Cluster c;
  c.createClaim("gpu-claim");
  c.allocate("gpu-claim");
  c.createPodWithClaim("job", "gpu-claim");
  REQUIRE(c.waitEvent("job", kFailed, kPrefix + "DRA driver " + kDriver + " is not registered"));
  CHECK(c.phase("job") == "Pending");
  CHECK(c.cachedClaims() == 0);  // checked before the cache changes: nothing to unprepare

  FakeDraPlugin plugin(c.plugin());
  REQUIRE(plugin.start());
  REQUIRE(c.waitPhase("job", "Running"));
  CHECK(plugin.prepareCalls().size() == 1);

  // The plugin goes; the pod is deleted: unpreparing fails until the driver is back.
  plugin.stop();
  REQUIRE(eventually([&] { return !c.driverRegistered(); }));
  c.deletePod("job");
  REQUIRE(eventually([&] { return c.dra()["unprepareFailures"].get<int>() >= 1; }));
  CHECK(c.cachedClaims() == 1);
  CHECK(plugin.unprepareCalls().empty());

  REQUIRE(plugin.start());
  REQUIRE(plugin.waitFor([](const FakeDraPlugin& p) { return p.unpreparedLocked() == 1; }));
  REQUIRE(eventually([&] { return c.cachedClaims() == 0; }));
}

TEST_CASE("a claim not reserved for the pod: the pod waits with kubelet's message, then starts",
          "[dra][e2e]") {
  Cluster c;
  FakeDraPlugin plugin(c.plugin());
  REQUIRE(plugin.start());
  REQUIRE(eventually([&] { return c.driverRegistered(); }));
  const std::string claimUid = c.createClaim("gpu-claim");  // not allocated yet
  const std::string podUid = c.createPodWithClaim("job", "gpu-claim");

  REQUIRE(c.waitEvent("job", kFailed,
                      kPrefix + "pod job (" + podUid + ") is not allowed to use ResourceClaim " +
                          "gpu-claim (" + claimUid + ")"));
  CHECK(c.phase("job") == "Pending");
  CHECK(plugin.prepareCalls().empty());

  c.allocate("gpu-claim", json::array({{{"resource", "pods"}, {"name", "job"}, {"uid", podUid}}}));
  REQUIRE(c.waitPhase("job", "Running"));
  CHECK(plugin.prepareCalls().size() == 1);
}

TEST_CASE("two pods sharing a claim: prepared once, unprepared after the last one ends",
          "[dra][e2e]") {
  Cluster c;
  FakeDraPlugin plugin(c.plugin());
  REQUIRE(plugin.start());
  REQUIRE(eventually([&] { return c.driverRegistered(); }));
  c.createClaim("shared");
  c.allocate("shared");
  const std::string first = c.createPodWithClaim("server", "shared");  // runs until deleted
  REQUIRE(c.waitPhase("server", "Running"));
  const std::string second = c.createPodWithClaim("client", "shared", "1");
  REQUIRE(c.waitPhase("client", "Running"));
  CHECK(plugin.prepareCalls().size() == 1);  // the claim was prepared already

  REQUIRE(c.waitPhase("client", "Succeeded"));
  // The claim loses "client" only.
  REQUIRE(eventually([&] {
    const json claims = c.dra()["claims"];
    return claims.size() == 1 && claims[0]["pods"] == json::array({first});
  }));
  CHECK(plugin.unprepareCalls().empty());

  c.deletePod("server");
  REQUIRE(plugin.waitFor([](const FakeDraPlugin& p) { return p.unpreparedLocked() == 1; }));
  REQUIRE(eventually([&] { return c.cachedClaims() == 0; }));
  CHECK(plugin.unprepareCalls().size() == 1);
}

TEST_CASE(
    "a real restart of the stand-in: no second NodePrepareResources, and the claim is still "
    "unprepared after the pod ends",
    "[dra][e2e]") {
  Cluster c;
  FakeDraPlugin plugin(c.plugin());
  REQUIRE(plugin.start());
  REQUIRE(eventually([&] { return c.driverRegistered(); }));
  const std::string claimUid = c.createClaim("gpu-claim");
  c.allocate("gpu-claim");
  c.createPodWithClaim("job", "gpu-claim");
  REQUIRE(c.waitPhase("job", "Running"));
  REQUIRE(plugin.prepareCalls().size() == 1);

  REQUIRE(c.s->stop() == 0);
  c.s->start();
  // The plugin's socket is still there: the new process registers it again.
  REQUIRE(plugin.waitFor([](const FakeDraPlugin& p) {
    return p.notificationsLocked().size() == 2 && p.notificationsLocked()[1].registered;
  }));
  // The running pod kept its claim (checkpoint): PodResources shows it, nothing prepared again.
  using Entry = std::pair<std::string, std::vector<std::string>>;
  REQUIRE(eventually([&] {
    auto dyn = dynamicResources(c.s->podResourcesSocket(), "job");
    return dyn &&
           (*dyn)["c"] == std::vector<Entry>{{"default/gpu-claim", {"kubecomp.io/gpu=gpu-claim"}}};
  }));
  CHECK(plugin.prepareCalls().size() == 1);

  // A simulated restart asks the plugin again; the claim cache stays.
  REQUIRE(c.s->post("/debug/simulate-restart") == 200);
  REQUIRE(plugin.waitFor([](const FakeDraPlugin& p) {
    return p.notificationsLocked().size() == 3 && p.notificationsLocked()[2].registered;
  }));
  CHECK(c.cachedClaims() == 1);

  c.deletePod("job");
  REQUIRE(plugin.waitFor([](const FakeDraPlugin& p) { return p.unpreparedLocked() == 1; }));
  CHECK(plugin.unprepareCalls()[0].claims ==
        std::vector<FakeDraPlugin::Claim>{{"default", claimUid, "gpu-claim"}});
  CHECK(plugin.prepareCalls().size() == 1);
}

TEST_CASE("a plugin offering only v1beta1 is spoken to in v1beta1", "[dra][e2e]") {
  Cluster c;
  FakeDraPlugin::Options o = c.plugin();
  o.versions = {"v1beta1.DRAPlugin"};
  o.serveV1 = false;
  FakeDraPlugin plugin(o);
  REQUIRE(plugin.start());
  REQUIRE(eventually([&] { return c.driverRegistered(); }));
  CHECK(c.dra()["drivers"][0]["service"] == "v1beta1.DRAPlugin");
  c.createClaim("gpu-claim");
  c.allocate("gpu-claim");
  c.createPodWithClaim("job", "gpu-claim", "1");
  REQUIRE(c.waitPhase("job", "Running"));
  REQUIRE(c.waitPhase("job", "Succeeded"));
  REQUIRE(plugin.waitFor([](const FakeDraPlugin& p) { return p.unpreparedLocked() == 1; }));
  CHECK(plugin.prepareCalls().size() == 1);
  CHECK(plugin.prepareCalls()[0].service == "v1beta1");
  CHECK(plugin.unprepareCalls()[0].service == "v1beta1");
}

TEST_CASE("a claim made from a template: prepared under the name the pod status gives it",
          "[dra][e2e]") {
  Cluster c;
  FakeDraPlugin plugin(c.plugin());
  REQUIRE(plugin.start());
  REQUIRE(eventually([&] { return c.driverRegistered(); }));
  const kc::kube::GroupVersionResource templates{"resource.k8s.io", "v1", "resourceclaimtemplates",
                                                 true};
  json tmpl = {{"apiVersion", "resource.k8s.io/v1"},
               {"kind", "ResourceClaimTemplate"},
               {"metadata", {{"name", "one-gpu"}, {"namespace", "default"}}},
               {"spec", {{"spec", kc::testing::oneGpuClaim("x", "default")["spec"]}}}};
  REQUIRE(c.client->create(templates, "default", tmpl));
  c.createPod("job", {{"resourceClaimTemplateName", "one-gpu"}});

  // The double's claim controller names the claim in the pod's status.
  std::string claim;
  REQUIRE(c.pods.until([&](const kc::kube::Store& st) {
    auto p = st.get("default", "job");
    if (!p || !p->contains("status")) {
      return false;
    }
    for (const auto& s : (*p)["status"].value("resourceClaimStatuses", json::array())) {
      if (s.value("name", "") == "gpu" && s.contains("resourceClaimName")) {
        claim = s["resourceClaimName"].get<std::string>();
        return true;
      }
    }
    return false;
  }));
  c.allocate(claim);  // the double then reserves it for its owner
  REQUIRE(c.waitPhase("job", "Running"));
  REQUIRE(plugin.prepareCalls().size() == 1);
  CHECK(plugin.prepareCalls()[0].claims[0].name == claim);
  auto dyn = dynamicResources(c.s->podResourcesSocket(), "job");
  REQUIRE(dyn.has_value());
  using Entry = std::pair<std::string, std::vector<std::string>>;
  CHECK((*dyn)["c"] == std::vector<Entry>{{"default/" + claim, {"kubecomp.io/gpu=" + claim}}});
}
