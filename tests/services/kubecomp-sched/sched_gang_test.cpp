// Gangs end to end (issue 27): the real kubecomp-sched with reconfig-mgr, chassis-sim, kubelet
// stand-ins and device plugins (tests/services/reconfig-mgr/cluster.hpp), PodGroups served from
// the CRD fixture, Kueue pod groups by their labels.
//
// The oracle for "bound together" is the chassis: a watch on the pods records, at the first
// sight of each member bound, how many GPUs chassis-sim shows attached. A scheduler that binds
// member by member binds the first one while the others' GPUs are still moving (the moves take
// about a second each here); one that binds the gang binds after the last has landed.

#include <catch2/catch.hpp>
#include <mutex>

#include "libcore/kube/informer.hpp"
#include "libcore/net/http_client.hpp"
#include "tests/services/reconfig-mgr/cluster.hpp"
#include "tests/support/wait.hpp"

using kc::reconfig::testing::ClusterSpec;
using kc::reconfig::testing::SimCluster;
using kc::reconfig::testing::SimGpu;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

const kc::kube::GroupVersionResource kPodGroups{"scheduling.x-k8s.io", "v1alpha1", "podgroups",
                                                true};

struct Member {
  std::string name;
  std::map<std::string, std::string> labels{};
  std::map<std::string, std::string> annotations{};
  std::map<std::string, std::string> nodeSelector{};
  std::string scheduler = "kubecomp-sched";
  int gpus = 1;
};

void createMember(SimCluster& c, const Member& m) {
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", m.name},
                {"namespace", "default"},
                {"labels", json(m.labels)},
                {"annotations", json(m.annotations)}}},
              {"spec",
               {{"schedulerName", m.scheduler},
                {"containers",
                 {{{"name", "main"},
                   {"image", "cuda"},
                   {"resources",
                    {{"requests", {{kc::api::kGpuResource, std::to_string(m.gpus)}}},
                     {"limits", {{kc::api::kGpuResource, std::to_string(m.gpus)}}}}}}}}}}};
  if (!m.nodeSelector.empty()) {
    pod["spec"]["nodeSelector"] = m.nodeSelector;
  }
  REQUIRE(c.client().create(kc::kube::gvr::pods(), "default", pod));
}

void createPodGroup(SimCluster& c, const std::string& name, int minMember, int timeoutSeconds = 0) {
  json spec = {{"minMember", minMember}};
  if (timeoutSeconds > 0) {
    spec["scheduleTimeoutSeconds"] = timeoutSeconds;
  }
  json pg = {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
             {"kind", "PodGroup"},
             {"metadata", {{"name", name}, {"namespace", "default"}}},
             {"spec", spec}};
  REQUIRE(c.client().create(kPodGroups, "default", pg));
}

void installPodGroupCrd(SimCluster& c) {
  kc::testing::installCrd(c.client(),
                          kc::testing::loadYamlFile(std::string(KC_SOURCE_DIR) +
                                                    "/tests/services/kubecomp-sched/fixtures/"
                                                    "scheduling.x-k8s.io_podgroups.yaml"));
}

json podOf(SimCluster& c, const std::string& name) {
  auto p = c.pods().get("default", name);
  return p ? *p : json::object();  // not in the store yet: an empty object
}

std::string nodeOf(SimCluster& c, const std::string& name) {
  return podOf(c, name).value("spec", json::object()).value("nodeName", "");
}

std::string annotation(SimCluster& c, const std::string& pod, const std::string& key) {
  const json a =
      podOf(c, pod).value("metadata", json::object()).value("annotations", json::object());
  return a.value(key, "<none>");
}

// The Events of one pod with `reason`, their messages.
std::vector<std::string> events(SimCluster& c, const std::string& pod, const std::string& reason) {
  kc::kube::ListOptions o;
  o.fieldSelector = "involvedObject.name=" + pod;
  auto list = c.client().list(kc::kube::gvr::events(), "default", o);
  REQUIRE(list);
  std::vector<std::string> out;
  for (const auto& e : list->items) {
    if (e.value("reason", "") == reason) {
      out.push_back(e.value("message", ""));
    }
  }
  return out;
}

int attachedGpus(SimCluster& c) {
  int n = 0;
  for (const auto& [id, node] : c.simGpus()) {
    n += node.empty() ? 0 : 1;
  }
  return n;
}

// The same from chassis-sim's state, without Catch (called on an informer's thread); -1 when
// the state could not be read.
int attachedGpusNow(int simPort) {
  kc::net::ClientOptions o;
  o.baseUrl = "http://127.0.0.1:" + std::to_string(simPort);
  auto client = kc::net::HttpClient::create(o);
  if (!client) {
    return -1;
  }
  auto r = (*client)->request("GET", "/sim/v1/state");
  if (!r) {
    return -1;
  }
  const json st = json::parse(r->body, nullptr, false);
  if (!st.is_object()) {
    return -1;
  }
  int n = 0;
  for (const auto& ch : st.value("chassis", json::array())) {
    for (const auto& g : ch.value("gpus", json::array())) {
      n += g.contains("host") && !g["host"].is_null() ? 1 : 0;
    }
  }
  return n;
}

// At the first sight of each watched pod bound: the GPUs chassis-sim showed attached then.
class BindLog {
 public:
  BindLog(SimCluster& c, std::set<std::string> pods)
      : c_(c), pods_(std::move(pods)), informer_(c.client(), options()) {
    informer_.addHandler(
        {[this](const kc::kube::ObjectPtr& o) { see(*o); },
         [this](const kc::kube::ObjectPtr&, const kc::kube::ObjectPtr& o) { see(*o); },
         [](const kc::kube::ObjectPtr&) {}});
    informer_.start();
    REQUIRE(informer_.waitForSync(10s));
  }
  ~BindLog() { informer_.stop(); }
  BindLog(const BindLog&) = delete;
  BindLog& operator=(const BindLog&) = delete;

  std::map<std::string, int> attachedAtBind() {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  static kc::kube::InformerOptions options() {
    kc::kube::InformerOptions o;
    o.resource = kc::kube::gvr::pods();
    return o;
  }
  void see(const json& pod) {
    const std::string name = pod["metadata"].value("name", "");
    if (!pods_.count(name) || pod.value("spec", json::object()).value("nodeName", "").empty()) {
      return;
    }
    {
      std::lock_guard lock(mu_);
      if (seen_.count(name)) {
        return;
      }
    }
    const int attached = attachedGpusNow(c_.simPort());
    std::lock_guard lock(mu_);
    seen_.emplace(name, attached);
  }

  SimCluster& c_;
  std::set<std::string> pods_;
  kc::kube::Informer informer_;
  std::mutex mu_;  // guards seen_
  std::map<std::string, int> seen_;
};

ClusterSpec twoChassis(double latencyScale) {
  ClusterSpec spec;
  spec.nodes = {"n1", "n2"};
  spec.chassis["c0"] = {SimGpu{"0", ""}, SimGpu{"1", ""}};
  spec.chassis["c1"] = {SimGpu{"0", ""}, SimGpu{"1", ""}};
  spec.latencyScale = latencyScale;
  return spec;
}

std::vector<std::string> schedFlags() {
  return {"--reservation-timeout-seconds", "60"};
}

}  // namespace

TEST_CASE("a gang of four needing GPU moves binds all four together, after the last move",
          "[sched][e2e][gang]") {
  SimCluster c(twoChassis(0.05));
  installPodGroupCrd(c);
  c.startManager({"--moves-per-chassis", "1", "--moves-per-pool", "0"});
  c.startScheduler(schedFlags());
  createPodGroup(c, "train", 4);
  const std::set<std::string> members = {"train-0", "train-1", "train-2", "train-3"};
  BindLog log(c, members);
  // The default scheduler's pod naming the same PodGroup: never ours to touch.
  createMember(c, {.name = "other",
                   .labels = {{"scheduling.x-k8s.io/pod-group", "train"}},
                   .scheduler = "default-scheduler"});
  for (const auto& m : members) {
    createMember(c, {.name = m, .labels = {{"scheduling.x-k8s.io/pod-group", "train"}}});
  }
  REQUIRE(c.pods().until(
      [&](const kc::kube::Store&) {
        for (const auto& m : members) {
          if (nodeOf(c, m).empty()) {
            return false;
          }
        }
        return true;
      },
      90s));
  REQUIRE(kc::testing::eventually([&] { return log.attachedAtBind().size() == 4; }, 10s));
  const auto atBind = log.attachedAtBind();
  for (const auto& [pod, attached] : atBind) {
    CAPTURE(pod);
    CHECK(attached == 4);  // every member's GPU had landed before any member was bound
  }
  // The moves of the gang ran side by side on the two chassis (the reservations were made in
  // one pass, so reconfig-mgr saw all four requests at once).
  CHECK(attachedGpus(c) == 4);
  // The default scheduler's pod: no node, no request, no Event from us.
  CHECK(nodeOf(c, "other").empty());
  CHECK(annotation(c, "other", "kubecomp.io/dst-node") == "<none>");
  CHECK(events(c, "other", "FailedScheduling").empty());
  CHECK(events(c, "other", "Scheduled").empty());
  c.invariants();
}

TEST_CASE("two gangs that would deadlock pod by pod: the earlier gets all, the later waits whole",
          "[sched][e2e][gang]") {
  // Four GPUs, two gangs of four 1-GPU pods created interleaved (a-0 b-0 a-1 b-1 ...): placed pod
  // by pod each gang would hold two GPUs and wait for ever. Gang a is a PodGroup, gang b a Kueue
  // pod group whose pods Kueue has admitted (no gate).
  SimCluster c(twoChassis(0));
  installPodGroupCrd(c);
  c.startManager();
  c.startScheduler(schedFlags());
  createPodGroup(c, "a", 4);
  for (int i = 0; i < 4; ++i) {
    createMember(
        c, {.name = "a-" + std::to_string(i), .labels = {{"scheduling.x-k8s.io/pod-group", "a"}}});
    createMember(c, {.name = "b-" + std::to_string(i),
                     .labels = {{"kueue.x-k8s.io/pod-group-name", "b"}},
                     .annotations = {{"kueue.x-k8s.io/pod-group-total-count", "4"}}});
  }
  auto allBound = [&](const std::string& prefix) {
    for (int i = 0; i < 4; ++i) {
      if (nodeOf(c, prefix + std::to_string(i)).empty()) {
        return false;
      }
    }
    return true;
  };
  REQUIRE(c.pods().until([&](const kc::kube::Store&) { return allBound("a-"); }, 60s));
  // Gang b holds nothing: no member bound, none asked reconfig-mgr for GPUs.
  for (int i = 0; i < 4; ++i) {
    const std::string b = "b-" + std::to_string(i);
    CAPTURE(b);
    CHECK(nodeOf(c, b).empty());
    CHECK(annotation(c, b, "kubecomp.io/dst-node") == "<none>");
  }
  // Gang a finishes (its pods deleted): gang b gets the four GPUs, all together.
  for (int i = 0; i < 4; ++i) {
    REQUIRE(c.client().remove(kc::kube::gvr::pods(), "default", "a-" + std::to_string(i)));
  }
  REQUIRE(c.pods().until([&](const kc::kube::Store&) { return allBound("b-"); }, 60s));
  c.invariants();
}

TEST_CASE("a gang whose timeout passes releases every reservation and says so",
          "[sched][e2e][gang]") {
  // Two members pinned to n1 and n2; n2's device plugin is stopped, so n2 never shows the GPU
  // moved to it. n1's member must not be bound alone; after scheduleTimeoutSeconds both
  // reservations are released, with a FailedScheduling Event on each pod.
  SimCluster c(twoChassis(0));
  installPodGroupCrd(c);
  c.stopPlugin("n2");
  c.startManager();
  c.startScheduler(schedFlags());
  createPodGroup(c, "short", 2, 4);
  createMember(c, {.name = "s-1",
                   .labels = {{"scheduling.x-k8s.io/pod-group", "short"}},
                   .nodeSelector = {{"kubernetes.io/hostname", "n1"}}});
  createMember(c, {.name = "s-2",
                   .labels = {{"scheduling.x-k8s.io/pod-group", "short"}},
                   .nodeSelector = {{"kubernetes.io/hostname", "n2"}}});
  // Both reserved, with their requests to reconfig-mgr.
  REQUIRE(c.pods().until(
      [&](const kc::kube::Store&) {
        return annotation(c, "s-1", "kubecomp.io/dst-node") == "n1" &&
               annotation(c, "s-2", "kubecomp.io/dst-node") == "n2";
      },
      30s));
  // n1 shows its GPU; n2 never does.
  REQUIRE(c.waitAllocatable("n1", 1));
  // The timeout: both pods told, both requests removed.
  REQUIRE(kc::testing::eventually(
      [&] {
        for (const std::string p : {"s-1", "s-2"}) {
          bool said = false;
          for (const auto& m : events(c, p, "FailedScheduling")) {
            said = said || m.find("scheduleTimeoutSeconds (4 s)") != std::string::npos;
          }
          if (!said) {
            return false;
          }
        }
        return true;
      },
      30s));
  const auto msgs = events(c, "s-1", "FailedScheduling");
  CHECK(std::any_of(msgs.begin(), msgs.end(), [](const std::string& m) {
    return m.find("all 2 reservations of the gang are released") != std::string::npos;
  }));
  // n1's member was never bound alone (a binding is never undone: it would show now).
  CHECK(nodeOf(c, "s-1").empty());
  CHECK(nodeOf(c, "s-2").empty());
}
