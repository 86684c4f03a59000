// A BridgeJob's life against the API server double and the real bridge-operator binary.
// This file plays Metacontroller between hook calls (MetacontrollerStandIn: add the
// finalizer, list the children, send the v2 hook body over HTTP, create missing children,
// update the ConfigMap in place - desired keys set, every other key kept, as Metacontroller's
// three-way merge keeps keys it never applied - delete undesired children, write the status,
// drop the finalizer on finalized: true) and the bridge pod (writing id and status.* into the
// ConfigMap, its phase set as kubelet would).

#include <catch2/catch.hpp>
#include <map>

#include "libcore/kube/client.hpp"
#include "libcore/net/http_client.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/manifests.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/kube/double_process.hpp"

using kc::kube::GroupVersionResource;
using kc::kube::KubeClient;
using kc::kube::PatchType;
using nlohmann::json;

namespace {

const GroupVersionResource kCrds{"apiextensions.k8s.io", "v1", "customresourcedefinitions", false};
const GroupVersionResource kJobs{"bridge.kubecomp.io", "v1alpha1", "bridgejobs", true};
const GroupVersionResource kNamespaces{"", "v1", "namespaces", false};
const GroupVersionResource kConfigMaps{"", "v1", "configmaps", true};
const GroupVersionResource kPods{"", "v1", "pods", true};
const GroupVersionResource kServiceAccounts{"", "v1", "serviceaccounts", true};
constexpr const char* kFinalizer = "metacontroller.io/compositecontroller-bridge-operator";
constexpr const char* kNs = "hpc";

class MetacontrollerStandIn {
 public:
  MetacontrollerStandIn(KubeClient& kube, kc::net::HttpClient& hook) : kube_(kube), hook_(hook) {}

  // One reconcile of BridgeJob `name`; the hook's response (null when the job is gone).
  json reconcile(const std::string& name) {
    auto parent = kube_.get(kJobs, kNs, name);
    if (!parent.ok() && parent.error().isNotFound()) {
      return nullptr;
    }
    REQUIRE(parent.ok());
    json job = *parent;
    const bool deleting = job["metadata"].contains("deletionTimestamp");
    if (!deleting && !hasFinalizer(job)) {
      job["metadata"]["finalizers"].push_back(kFinalizer);
      auto updated = kube_.update(kJobs, kNs, job);
      REQUIRE(updated.ok());
      job = *updated;
    }
    const std::string uid = job["metadata"]["uid"];
    std::map<std::string, std::vector<json>> observed;
    json children{{"Role.rbac.authorization.k8s.io/v1", json::object()},
                  {"RoleBinding.rbac.authorization.k8s.io/v1", json::object()}};
    for (const auto& [group, gvr] :
         {std::pair{"ConfigMap.v1", kConfigMaps}, std::pair{"Pod.v1", kPods},
          std::pair{"ServiceAccount.v1", kServiceAccounts}}) {
      kc::kube::ListOptions opts;
      opts.labelSelector = "bridge.kubecomp.io/job-uid=" + uid;
      auto list = kube_.list(gvr, kNs, opts);
      REQUIRE(list.ok());
      children[group] = json::object();
      for (json& item : list->items) {
        children[group][std::string(kNs) + "/" + item["metadata"]["name"].get<std::string>()] =
            item;
        observed[group].push_back(item);
      }
    }
    const json controller{
        {"apiVersion", "metacontroller.k8s.io/v1alpha1"},
        {"kind", "CompositeController"},
        {"metadata", {{"name", "bridge-operator"}}},
        {"spec", {{"hooks", {{"sync", {{"version", "v2"}}}, {"finalize", {{"version", "v2"}}}}}}}};
    const json body{{"controller", controller},
                    {"parent", job},
                    {"children", children},
                    {"related", json::object()},
                    {"finalizing", deleting}};
    auto reply = hook_.request("POST", deleting ? "/finalize" : "/sync", body.dump(),
                               {{"Content-Type", "application/json"}});
    REQUIRE(reply.ok());
    REQUIRE(reply->status == 200);
    json response = json::parse(reply->body);

    // Children: create, update the ConfigMap in place, delete what is no longer desired.
    std::map<std::string, json> desired;  // "Kind/name"
    for (const json& c : response["children"]) {
      desired[c["kind"].get<std::string>() + "/" + c["metadata"]["name"].get<std::string>()] = c;
    }
    for (auto [key, child] : desired) {
      const std::string kind = child["kind"];
      const GroupVersionResource gvr = kind == "ConfigMap"        ? kConfigMaps
                                       : kind == "Pod"            ? kPods
                                       : kind == "ServiceAccount" ? kServiceAccounts
                                                                  : GroupVersionResource{};
      if (gvr.resource.empty()) {
        continue;  // Role, RoleBinding: the double serves no rbac.authorization.k8s.io
      }
      const json* existing = nullptr;
      for (const json& o : observed[kind + ".v1"]) {
        if (o["metadata"]["name"] == child["metadata"]["name"]) {
          existing = &o;
        }
      }
      if (existing == nullptr) {
        child["metadata"]["ownerReferences"] =
            json::array({{{"apiVersion", "bridge.kubecomp.io/v1alpha1"},
                          {"kind", "BridgeJob"},
                          {"name", name},
                          {"uid", uid},
                          {"controller", true},
                          {"blockOwnerDeletion", true}}});
        REQUIRE(kube_.create(gvr, kNs, child).ok());
      } else if (kind == "ConfigMap") {
        json merged = *existing;
        for (const auto& [k, v] : child["data"].items()) {
          merged["data"][k] = v;
        }
        if (merged != *existing) {
          REQUIRE(kube_.update(gvr, kNs, merged).ok());
        }
      }
    }
    for (const auto& [group, objects] : observed) {
      const std::string kind = group.substr(0, group.find('.'));
      const GroupVersionResource gvr = kind == "ConfigMap" ? kConfigMaps
                                       : kind == "Pod"     ? kPods
                                                           : kServiceAccounts;
      for (const json& o : objects) {
        if (desired.count(kind + "/" + o["metadata"]["name"].get<std::string>()) == 0) {
          auto removed = kube_.remove(gvr, kNs, o["metadata"]["name"]);
          REQUIRE((removed.ok() || removed.error().isNotFound()));
        }
      }
    }
    if (response.value("finalized", false)) {
      auto latest = kube_.get(kJobs, kNs, name);
      REQUIRE(latest.ok());
      json without = *latest;
      json kept = json::array();
      for (const json& f : without["metadata"]["finalizers"]) {
        if (f != kFinalizer) {
          kept.push_back(f);
        }
      }
      without["metadata"]["finalizers"] = kept;
      REQUIRE(kube_.update(kJobs, kNs, without).ok());
      return response;
    }
    auto latest = kube_.get(kJobs, kNs, name);
    REQUIRE(latest.ok());
    json withStatus = *latest;
    withStatus["status"] = response["status"];
    withStatus["status"]["observedGeneration"] = (*latest)["metadata"]["generation"];
    REQUIRE(kube_.updateStatus(kJobs, kNs, withStatus).ok());
    return response;
  }

 private:
  static bool hasFinalizer(const json& job) {
    const json& f = job["metadata"]["finalizers"];
    return f.is_array() && std::find(f.begin(), f.end(), json(kFinalizer)) != f.end();
  }
  KubeClient& kube_;
  kc::net::HttpClient& hook_;
};

// What a bridge pod does: write its keys into its ConfigMap.
void podWrites(KubeClient& kube, const std::string& job,
               const std::map<std::string, std::string>& keys) {
  auto cm = kube.get(kConfigMaps, kNs, job + "-bridge");
  REQUIRE(cm.ok());
  json updated = *cm;
  for (const auto& [k, v] : keys) {
    updated["data"][k] = v;
  }
  REQUIRE(kube.update(kConfigMaps, kNs, updated).ok());
}

// What kubelet does: the pod's phase.
void podPhase(KubeClient& kube, const std::string& pod, const std::string& phase) {
  REQUIRE(kube.patch(kPods, kNs, pod, PatchType::kMerge, {{"status", {{"phase", phase}}}}, "status")
              .ok());
}

std::vector<std::string> podNames(KubeClient& kube, const std::string& job) {
  kc::kube::ListOptions opts;
  opts.labelSelector = "bridge.kubecomp.io/job=" + job;
  auto list = kube.list(kPods, kNs, opts);
  REQUIRE(list.ok());
  std::vector<std::string> names;
  for (const json& p : list->items) {
    names.push_back(p["metadata"]["name"]);
  }
  std::sort(names.begin(), names.end());
  return names;
}

json jobStatus(KubeClient& kube, const std::string& job) {
  auto j = kube.get(kJobs, kNs, job);
  REQUIRE(j.ok());
  return (*j)["status"];
}

std::string configMapValue(KubeClient& kube, const std::string& job, const std::string& key) {
  auto cm = kube.get(kConfigMaps, kNs, job + "-bridge");
  REQUIRE(cm.ok());
  return (*cm)["data"].value(key, "<absent>");
}

struct Cluster {
  kc::testing::TempDir dir;
  kc::kube::testing::DoubleProcess apiserver{KC_APISERVER_DOUBLE_EXE, dir.path().string()};
  std::unique_ptr<KubeClient> kube;
  std::unique_ptr<kc::testing::ChildProcess> operatorProcess;
  std::unique_ptr<kc::net::HttpClient> hook;

  Cluster() {
    kc::kube::KubeClientOptions o;
    o.qps = 0;
    auto c = KubeClient::create(apiserver.config(), o);
    REQUIRE(c.ok());
    kube = std::move(c).value();
    REQUIRE(kube->create(kCrds, "",
                         kc::testing::loadYamlFile(
                             std::string(KC_SOURCE_DIR) +
                             "/charts/kubecomp/crds/bridgejobs.bridge.kubecomp.io.yaml"))
                .ok());
    REQUIRE(
        kube->create(kNamespaces, "",
                     {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", kNs}}}})
            .ok());
    const std::string portFile = dir.file("port");
    operatorProcess = std::make_unique<kc::testing::ChildProcess>(std::vector<std::string>{
        BRIDGE_OPERATOR_BIN, "--bind-address", "127.0.0.1", "--port", "0", "--port-file", portFile,
        "--log-level", "warn", "--max-pod-restarts", "2"});
    std::uint16_t port = 0;
    operatorProcess->waitUntil(
        [&] {
          port = kc::testing::readPortFile(portFile).value_or(0);
          return port != 0;
        },
        std::chrono::seconds(20), "bridge-operator port file");
    kc::net::ClientOptions ho;
    ho.baseUrl = "http://127.0.0.1:" + std::to_string(port);
    auto h = kc::net::HttpClient::create(ho);
    REQUIRE(h.ok());
    hook = std::move(h).value();
  }

  void createJob(const std::string& name) {
    json job = kc::testing::loadYamlFile(std::string(KC_SOURCE_DIR) +
                                         "/charts/kubecomp/examples/bridgejob-slurm.yaml");
    job["metadata"]["name"] = name;
    REQUIRE(kube->create(kJobs, kNs, job).ok());
  }
};

}  // namespace

TEST_CASE("a BridgeJob's life: start, crash and adoption, kill, deletion", "[bridge]") {
  Cluster cluster;
  KubeClient& kube = *cluster.kube;
  MetacontrollerStandIn mc(kube, *cluster.hook);
  cluster.createJob("life");

  mc.reconcile("life");
  CHECK(podNames(kube, "life") == std::vector<std::string>{"life-bridge-0"});
  CHECK(configMapValue(kube, "life", "kill") == "false");
  CHECK(jobStatus(kube, "life")["attempts"] == 1);

  // The bridge pod submits and records the remote id first.
  podPhase(kube, "life-bridge-0", "Running");
  podWrites(kube, "life",
            {{"id", "4711"},
             {"status.jobStatus", "SUBMITTED"},
             {"status.submitTime", "2026-11-24T10:00:00Z"}});
  mc.reconcile("life");
  CHECK(jobStatus(kube, "life")["jobStatus"] == "SUBMITTED");
  CHECK(jobStatus(kube, "life")["remoteJobId"] == "4711");

  // The pod crashes before the job finished: a replacement, the id survives the operator's
  // ConfigMap updates, so the replacement adopts job 4711.
  podPhase(kube, "life-bridge-0", "Failed");
  mc.reconcile("life");
  CHECK(podNames(kube, "life") == std::vector<std::string>{"life-bridge-0", "life-bridge-1"});
  CHECK(configMapValue(kube, "life", "id") == "4711");
  CHECK(jobStatus(kube, "life")["attempts"] == 2);
  podPhase(kube, "life-bridge-1", "Running");
  podWrites(kube, "life",
            {{"status.jobStatus", "RUNNING"}, {"status.startTime", "2026-11-24T10:01:00Z"}});
  mc.reconcile("life");
  CHECK(jobStatus(kube, "life")["jobStatus"] == "RUNNING");

  // kill: true reaches the pod through the ConfigMap; the pod cancels and reports KILLED.
  REQUIRE(kube.patch(kJobs, kNs, "life", PatchType::kMerge, {{"spec", {{"kill", true}}}}).ok());
  mc.reconcile("life");
  CHECK(configMapValue(kube, "life", "kill") == "true");
  CHECK(configMapValue(kube, "life", "status.jobStatus") == "RUNNING");  // pod-owned, kept
  podWrites(kube, "life",
            {{"status.jobStatus", "KILLED"},
             {"status.completionTime", "2026-11-24T10:02:00Z"},
             {"status.message", "cancelled"}});
  podPhase(kube, "life-bridge-1", "Failed");
  mc.reconcile("life");
  json status = jobStatus(kube, "life");
  CHECK(status["jobStatus"] == "KILLED");
  CHECK(status["completionTime"] == "2026-11-24T10:02:00Z");
  CHECK(status["message"] == "cancelled");
  CHECK(podNames(kube, "life").size() == 2);  // no third pod for a finished job
  mc.reconcile("life");
  CHECK(jobStatus(kube, "life") == status);  // a settled job's status no longer changes

  // Deletion of a finished job: finalized at once, children collected with their owner.
  auto removed = kube.remove(kJobs, kNs, "life");
  REQUIRE(removed.ok());
  CHECK(mc.reconcile("life")["finalized"] == true);
  CHECK(mc.reconcile("life").is_null());
  CHECK(podNames(kube, "life").empty());
  CHECK_FALSE(kube.get(kConfigMaps, kNs, "life-bridge").ok());
}

TEST_CASE("deleting a BridgeJob whose remote job runs cancels it before it goes", "[bridge]") {
  Cluster cluster;
  KubeClient& kube = *cluster.kube;
  MetacontrollerStandIn mc(kube, *cluster.hook);
  cluster.createJob("doomed");
  mc.reconcile("doomed");
  podPhase(kube, "doomed-bridge-0", "Running");
  podWrites(kube, "doomed", {{"id", "99"}, {"status.jobStatus", "RUNNING"}});
  mc.reconcile("doomed");

  REQUIRE(kube.remove(kJobs, kNs, "doomed").ok());
  json answer = mc.reconcile("doomed");
  CHECK(answer["finalized"] == false);
  CHECK(configMapValue(kube, "doomed", "kill") == "true");
  CHECK(kube.get(kJobs, kNs, "doomed").ok());  // held by the finalizer
  // Still running on the next resync: still held.
  CHECK(mc.reconcile("doomed")["finalized"] == false);

  // The pod cancels the remote job, reports it and exits.
  podWrites(kube, "doomed", {{"status.jobStatus", "KILLED"}});
  podPhase(kube, "doomed-bridge-0", "Failed");
  CHECK(mc.reconcile("doomed")["finalized"] == true);
  CHECK(mc.reconcile("doomed").is_null());
  CHECK(podNames(kube, "doomed").empty());
}
