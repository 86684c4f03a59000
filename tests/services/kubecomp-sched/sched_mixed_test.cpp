// Random clusters and random bursts of pods mixing every kube-scheduler feature at once (issue
// 27), through SchedCache's real decision path: objects handed in as the informers would, time
// passed in, actions read back over three queue passes. Nodes carry zone, hostname and custom
// labels, taints of the three effects, CPU, memory and pod counts, GPUs of GPU pools; pods carry
// several containers, init containers (a restartable sidecar among them), overhead, a
// nodeSelector, required node affinity, tolerations, host ports, required pod (anti-)affinity,
// DoNotSchedule spread, a few priority levels (some pods equal in priority and creation
// second), preemptionPolicy Never, scheduling gates and GPUs. Checked against the oracles of
// tests/unit/alloc (mixed_oracle.hpp with ports, affinity and spread), written from the
// documentation and not from the code:
//   1. every pass decides the pods waiting in kube-scheduler's queue order: spec.priority
//      highest first, then creationTimestamp, then namespace and name (ties of a burst), also
//      when the pass is split over several next() calls of a few actions each (reservations
//      served first in each call); a gated pod is not decided;
//   2. a bind or a reservation goes to a node the oracles allow given the pods placed before
//      it (a bind only where the node's own GPUs suffice, a reservation moves at most the
//      pod's GPUs and at least what the node lacks);
//   3. a pod left Pending has no node the oracles allow, and no preemption they allow;
//   4. a pod that preempts evicts the victims on one of the nodes the preemption oracle ranks
//      first, exactly the victims it names;
//   in 2-4 the pods nominated by the preemptions seen so far count on their node for every pod
//   of no higher priority (mixed_oracle.hpp: kube-scheduler's nominated pods), until placed,
//   refused without a preemption, or displaced by a higher-priority preemption there.
// Between passes the test plays the API: binds confirmed and shown bound with a start time,
// reservations written (a reservation served later binds only where its GPUs are), victims
// evicted, a few running pods ending, a new burst arriving. 300 seeds; a failing one is
// reported with what it broke (KC_MIXED_DUMP=1 also prints the cluster of a failed preemption
// check). PodDisruptionBudgets are handed in and counted by preemption (the test's Eviction API
// lets every eviction through). Not covered: DRA claims, volumes, gangs and the queue policies
// other than backfill.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "libcore/alloc/rng.hpp"
#include "services/kubecomp-sched/sched_cache.hpp"
#include "tests/unit/alloc/mixed_oracle.hpp"

using namespace std::chrono_literals;
using kc::sched::Action;
using kc::sched::SchedCache;
using nlohmann::json;
using Kind = Action::Kind;
namespace mx = kc::alloc::test::mixed;

namespace {

const std::vector<std::string> kApps{"web", "db", "batch"};
const std::vector<std::string> kZones{"z0", "z1", "z2"};
const char* const kZoneKey = "topology.kubernetes.io/zone";
const char* const kHostKey = "kubernetes.io/hostname";
constexpr std::int64_t kBoundNow = 1'000'000;

struct Gen {
  kc::alloc::SplitMix64 rng;
  int below(int n) { return static_cast<int>(rng.below(static_cast<std::uint64_t>(n))); }
  bool chance(int percent) { return below(100) < percent; }
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[rng.below(v.size())];
  }
};

std::string stamp(int hour, int second) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "2026-01-01T%02d:%02d:%02dZ", hour, second / 60, second % 60);
  return buf;
}

// One pod as the oracle and the order check read it.
struct Known {
  json obj;
  int priority = 0;
  int created = 0;  // seconds
  std::string ns;
  std::string name;
};

// The queue order, written out from kube-scheduler's PrioritySort and our tie rule.
bool queuedBefore(const Known& a, const Known& b) {
  if (a.priority != b.priority) {
    return a.priority > b.priority;
  }
  return std::tie(a.created, a.ns, a.name) < std::tie(b.created, b.ns, b.name);
}

json container(Gen& g, const std::string& name, int gpus) {
  json req = {{"cpu", std::to_string(100 * (1 + g.below(8))) + "m"},
              {"memory", std::to_string(128 * (1 + g.below(10))) + "Mi"}};
  if (gpus > 0) {
    req["kubecomp.io/gpu"] = std::to_string(gpus);
  }
  return {{"name", name}, {"resources", {{"requests", req}}}};
}

json podObject(const std::string& name, const std::string& ns, const std::string& created,
               int priority, const json& labels, const json& spec) {
  json s = spec;
  s["priority"] = priority;
  return {{"metadata",
           {{"name", name},
            {"namespace", ns},
            {"uid", "uid-" + ns + "-" + name},
            {"resourceVersion", "1"},
            {"labels", labels},
            {"creationTimestamp", created}}},
          {"spec", s},
          {"status", {{"phase", "Pending"}}}};
}

json podTerm(Gen& g, const std::string& app) {
  return {{"labelSelector", {{"matchLabels", {{"app", app}}}}},
          {"topologyKey", g.chance(50) ? kHostKey : kZoneKey}};
}

// Affinity, tolerations, node selection and spread of a pod of ours.
void placementRules(Gen& g, json& spec, const std::string& app) {
  const bool spread = g.chance(20);
  if (g.chance(25)) {
    spec["nodeSelector"] = g.chance(50) ? json{{"disk", "ssd"}} : json{{kZoneKey, g.pick(kZones)}};
  }
  json affinity = json::object();
  if (!spread && g.chance(20)) {
    json terms =
        json::array({{{"matchExpressions",
                       {{{"key", kZoneKey}, {"operator", "In"}, {"values", {g.pick(kZones)}}}}}}});
    if (g.chance(50)) {
      terms.push_back({{"matchExpressions", {{{"key", "disk"}, {"operator", "DoesNotExist"}}}}});
    }
    affinity["nodeAffinity"] = {
        {"requiredDuringSchedulingIgnoredDuringExecution", {{"nodeSelectorTerms", terms}}}};
  }
  if (g.chance(20)) {
    affinity["podAntiAffinity"] = {
        {"requiredDuringSchedulingIgnoredDuringExecution", {podTerm(g, g.pick(kApps))}}};
  }
  if (g.chance(10)) {
    affinity["podAffinity"] = {
        {"requiredDuringSchedulingIgnoredDuringExecution", {podTerm(g, g.pick(kApps))}}};
  }
  if (!affinity.empty()) {
    spec["affinity"] = affinity;
  }
  if (g.chance(35)) {
    const std::vector<json> all{
        {{"key", "dedicated"}, {"operator", "Equal"}, {"value", "gpu"}, {"effect", "NoSchedule"}},
        {{"key", "maint"}, {"operator", "Exists"}},
        {{"operator", "Exists"}},
        {{"key", "dedicated"}, {"operator", "Equal"}, {"value", "cpu"}}};
    spec["tolerations"] = json::array({g.pick(all)});
  }
  if (spread) {
    spec["topologySpreadConstraints"] =
        json::array({{{"maxSkew", 1 + g.below(2)},
                      {"topologyKey", g.chance(50) ? kHostKey : kZoneKey},
                      {"whenUnsatisfiable", "DoNotSchedule"},
                      {"labelSelector", {{"matchLabels", {{"app", app}}}}}}});
  }
}

// A pending pod of ours.
Known pendingPod(Gen& g, const std::string& name, int firstSecond) {
  Known k;
  k.name = name;
  k.ns = g.chance(25) ? "other" : "team";
  k.priority = g.pick(std::vector<int>{0, 5, 5, 10, 100});
  k.created = firstSecond + g.below(3);
  const std::string app = g.pick(kApps);
  json spec = {{"schedulerName", "kubecomp-sched"}, {"containers", json::array()}};
  const int containers = 1 + g.below(3);
  const int gpus = g.chance(35) ? 1 + g.below(3) : 0;
  for (int c = 0; c < containers; ++c) {
    spec["containers"].push_back(container(g, "c" + std::to_string(c), c == 0 ? gpus : 0));
  }
  if (g.chance(25)) {
    spec["containers"][0]["ports"] =
        json::array({{{"containerPort", 80}, {"hostPort", g.chance(50) ? 8080 : 9090}}});
  }
  if (g.chance(40)) {
    json init = json::array({container(g, "setup", 0)});
    init[0]["resources"]["requests"]["cpu"] = std::to_string(500 * (1 + g.below(6))) + "m";
    if (g.chance(60)) {
      json side = container(g, "proxy", 0);
      side["restartPolicy"] = "Always";
      init.insert(g.chance(50) ? init.begin() : init.end(), side);
    }
    spec["initContainers"] = init;
  }
  if (g.chance(20)) {
    spec["overhead"] = {{"cpu", "250m"}, {"memory", "64Mi"}};
  }
  if (g.chance(10)) {
    spec["preemptionPolicy"] = "Never";
  }
  if (g.chance(6)) {
    spec["schedulingGates"] = json::array({{{"name", "example.com/wait"}}});
  }
  placementRules(g, spec, app);
  json labels = {{"app", app}};
  k.obj = podObject(name, k.ns, stamp(0, k.created), k.priority, labels, spec);
  return k;
}

struct World {
  mx::Cluster cluster;
  std::vector<json> pools;
  std::vector<mx::Placed> placed;               // what holds the nodes, as the oracle sees it
  std::map<std::string, Known> pods;            // every pod of ours by key
  std::map<std::string, std::string> reserved;  // key -> node: waiting for GPU moves
  std::set<std::string> pending;                // ours, holding nothing, not gated
  std::set<std::string> gated;
  std::map<std::string, mx::Nomination> nominated;  // key -> preemptor waiting, its node
  int startSecond = 0;  // status.startTime of the next pod shown running
  int nextPod = 0;
};

int nodeIndex(const World& w, const std::string& name) {
  for (std::size_t i = 0; i < w.cluster.nodes.size(); ++i) {
    if (w.cluster.nodes[i].name == name) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

void makeNodes(Gen& g, World& w) {
  const int nodes = 3 + g.below(4);
  const int pools = 1 + g.below(2);
  std::vector<json> poolNodes(pools, json::array());
  std::vector<json> poolGpus(pools, json::array());
  w.cluster.poolUsable.assign(pools, 0);
  const std::vector<json> taints{
      {{"key", "dedicated"}, {"value", "gpu"}, {"effect", "NoSchedule"}},
      {{"key", "maint"}, {"effect", "NoExecute"}},
      {{"key", "soft"}, {"effect", "PreferNoSchedule"}},
      {{"key", "dedicated"}, {"value", "cpu"}, {"effect", "NoSchedule"}}};
  for (int i = 0; i < nodes; ++i) {
    mx::Node n;
    n.name = "n" + std::to_string(i);
    n.labels = {{kHostKey, n.name}, {kZoneKey, kZones[g.below(i < 2 ? 2 : 3)]}};
    if (g.chance(60)) {
      n.labels["disk"] = g.chance(60) ? "ssd" : "hdd";
    }
    if (g.chance(75)) {
      n.pool = g.below(pools);
      n.attached = g.below(4);
    }
    n.obj = {{"metadata", {{"name", n.name}, {"resourceVersion", "1"}, {"labels", n.labels}}},
             {"status",
              {{"allocatable",
                {{"cpu", std::to_string(2 + g.below(5))},
                 {"memory", std::to_string(4 + g.below(9)) + "Gi"},
                 {"pods", std::to_string(3 + g.below(6))},
                 {"kubecomp.io/gpu", std::to_string(n.attached)}}}}}};
    if (g.chance(35)) {
      n.obj["spec"] = {{"taints", json::array({g.pick(taints)})}};
    }
    if (n.pool >= 0) {
      poolNodes[n.pool].push_back({{"name", n.name}, {"hostPort", "1"}});
      for (int k = 0; k < n.attached; ++k) {
        poolGpus[n.pool].push_back({{"id", n.name + "-g" + std::to_string(k)},
                                    {"health", "Healthy"},
                                    {"draining", false},
                                    {"node", n.name}});
      }
      w.cluster.poolUsable[n.pool] += n.attached;
    }
    w.cluster.nodes.push_back(std::move(n));
  }
  for (int p = 0; p < pools; ++p) {
    const int unattached = g.below(4);
    for (int k = 0; k < unattached; ++k) {
      poolGpus[p].push_back({{"id", "p" + std::to_string(p) + "-u" + std::to_string(k)},
                             {"health", "Healthy"},
                             {"draining", false}});
    }
    w.cluster.poolUsable[p] += unattached;
    w.pools.push_back(
        {{"metadata", {{"name", "pool" + std::to_string(p)}, {"resourceVersion", "1"}}},
         {"spec", {{"nodes", poolNodes[p]}}},
         {"status", {{"gpus", poolGpus[p]}}}});
  }
}

// Pods another scheduler placed, running, each with its own start time.
std::vector<json> makeRunning(Gen& g, World& w) {
  std::vector<json> out;
  const int count = g.below(2 * static_cast<int>(w.cluster.nodes.size()) + 1);
  for (int i = 0; i < count; ++i) {
    const int n = g.below(static_cast<int>(w.cluster.nodes.size()));
    const std::string name = "r" + std::to_string(i);
    const std::string app = g.pick(kApps);
    const int free = static_cast<int>(mx::nodeFreeGpus(w.cluster, n, w.placed));
    const int gpus = free > 0 && g.chance(50) ? 1 + g.below(free) : 0;
    json spec = {{"schedulerName", "default-scheduler"},
                 {"nodeName", w.cluster.nodes[n].name},
                 {"containers", json::array({container(g, "c", gpus)})}};
    if (g.chance(20)) {
      spec["containers"][0]["ports"] =
          json::array({{{"containerPort", 80}, {"hostPort", g.chance(50) ? 8080 : 9090}}});
    }
    if (g.chance(15)) {
      spec["affinity"] = {
          {"podAntiAffinity",
           {{"requiredDuringSchedulingIgnoredDuringExecution", {podTerm(g, g.pick(kApps))}}}}};
    }
    const int priority = g.pick(std::vector<int>{0, 5, 10, 50});
    const std::string ns = g.chance(25) ? "other" : "team";
    json obj = podObject(name, ns, stamp(0, 0), priority, {{"app", app}}, spec);
    obj["status"] = {{"phase", "Running"}, {"startTime", stamp(1, w.startSecond)}};
    w.placed.push_back({obj, ns + "/" + name, n, true, priority, w.startSecond++});
    out.push_back(std::move(obj));
  }
  return out;
}

// What one pass saw, for the counts at the end.
struct Tally {
  int binds = 0;
  int reserves = 0;
  int unschedulable = 0;
  int preempts = 0;
  int victims = 0;
  int violations = 0;    // preemptions the oracle ranks with a PDB violation
  int orderedPairs = 0;  // consecutive decisions of different priorities
  int tiedPairs = 0;     // consecutive decisions of one priority and creation second
  int reservationBinds = 0;
  std::map<std::string, int> reasons;  // refusals naming each filter (kube-scheduler's words)
};

// Parts of kube-scheduler's FitError reasons, one per filter the mix should reach.
const std::vector<std::string> kReasons{"Insufficient cpu",       "Insufficient memory",
                                        "Too many pods",          "untolerated taint",
                                        "node affinity/selector", "free ports",
                                        "anti-affinity",          "pod affinity rules",
                                        "topology spread",        "GPU pool"};

struct Pass {
  std::vector<std::string> problems;
  std::vector<Action> preempted;                   // kPreempt actions, for the next transition
  std::vector<std::pair<std::string, int>> bound;  // key, node: bound this pass
  void fail(const std::string& s) { problems.push_back(s); }
};

std::string describe(const Action& a) {
  std::string s = a.key + " kind=" + std::to_string(static_cast<int>(a.kind)) + " node=" + a.node +
                  " deficit=" + std::to_string(a.deficit);
  for (const auto& v : a.victims) {
    s += " victim=" + v.key;
  }
  return s + " msg=" + a.message;
}

// A reservation made in an earlier pass, served at the start of this one.
void checkReservationAction(World& w, const Action& a, Pass& pass, Tally& t) {
  const std::string node = w.reserved.at(a.key);
  auto it = std::find_if(w.placed.begin(), w.placed.end(),
                         [&](const mx::Placed& p) { return p.key == a.key; });
  if (it == w.placed.end()) {
    pass.fail("reservation of " + a.key + " not held: " + describe(a));
  } else if (a.kind == Kind::kBind && a.node == node) {
    // The GPUs are on the node now: its own, less what the others there hold (reservations
    // made after this one do not count against it, they are served in order).
    std::int64_t held = 0;
    for (auto o = w.placed.begin(); o != w.placed.end(); ++o) {
      if (o != it && o->node == it->node && (o < it || o->runs)) {
        held += mx::of(mx::effectiveRequest(o->pod), "gpu");
      }
    }
    const std::int64_t gpus = mx::of(mx::effectiveRequest(it->pod), "gpu");
    if (w.cluster.nodes[it->node].attached - held < gpus) {
      pass.fail("reservation of " + a.key + " bound on " + node + " without its GPUs there");
    }
    it->runs = true;
    it->start = kBoundNow;  // the cache takes the bind as its start: after every running pod
    pass.bound.emplace_back(a.key, it->node);
    ++t.reservationBinds;
  } else if (a.kind == Kind::kCancel) {
    w.placed.erase(it);
    w.pending.insert(a.key);  // decided again once its backoff ends
  } else {
    pass.fail("reservation of " + a.key + " on " + node + ": " + describe(a));
  }
  w.reserved.erase(a.key);
}

// KC_MIXED_DUMP=1: a failed preemption check prints the pod and the cluster to stderr.
void dumpWorld(const World& w, const Known& k, const std::vector<mx::Placed>& placed) {
  if (std::getenv("KC_MIXED_DUMP") == nullptr) {
    return;
  }
  std::string d = "pod " + k.obj.dump() + "\n";
  for (const auto& n : w.cluster.nodes) {
    d += "node pool=" + std::to_string(n.pool) + " " + n.obj.dump() + "\n";
  }
  for (std::size_t p = 0; p < w.cluster.poolUsable.size(); ++p) {
    d += "pool " + std::to_string(p) + " usable=" + std::to_string(w.cluster.poolUsable[p]) + "\n";
  }
  for (const auto& p : placed) {
    d += (p.nominee ? "nominated " : "placed ") + w.cluster.nodes[p.node].name +
         " runs=" + std::to_string(p.runs) + " start=" + std::to_string(p.start) + " " +
         p.pod.dump() + "\n";
  }
  std::fputs(d.c_str(), stderr);
}

std::string rankText(const mx::Preemption& p) {
  const auto& [violations, highest, sum, count, start] = p.rank;
  std::string s = " (violations " + std::to_string(violations) + ", highest " +
                  std::to_string(highest) + ", sum " +
                  std::to_string(sum - static_cast<std::int64_t>(count) * (std::int64_t{1} << 31)) +
                  ", count " + std::to_string(count) + ", start " + std::to_string(-start);
  for (const auto& v : p.victims) {
    s += " " + v;
  }
  return s + ")";
}

// A decision that found no node: the oracle must allow none, and the preemption it made (or
// its absence) must be one the preemption oracle allows.
void checkRefusal(World& w, const Known& k, const Action& a, Pass& pass, Tally& t) {
  const auto placed = mx::withNominated(w.placed, w.nominated, a.key, k.priority);
  for (std::size_t n = 0; n < w.cluster.nodes.size(); ++n) {
    if (mx::allowed(k.obj, w.cluster, static_cast<int>(n), placed)) {
      pass.fail(describe(a) + ": the oracles allow " + w.cluster.nodes[n].name);
    }
  }
  for (const auto& r : kReasons) {
    t.reasons[r] += a.message.find(r) != std::string::npos ? 1 : 0;
  }
  const auto choices = mx::preemptions(k.obj, k.priority, w.cluster, placed);
  if (a.kind == Kind::kUnschedulable) {
    ++t.unschedulable;
    w.nominated.erase(a.key);  // no preemption anywhere: kube clears nominatedNodeName
    if (!choices.empty()) {
      pass.fail(describe(a) + ": the preemption oracle would preempt on " +
                w.cluster.nodes[choices.front().node].name);
    }
    return;
  }
  ++t.preempts;
  std::set<std::string> victims;
  for (const auto& v : a.victims) {
    victims.insert(v.key);
  }
  t.victims += static_cast<int>(victims.size());
  const int n = nodeIndex(w, a.node);
  auto match = std::find_if(choices.begin(), choices.end(),
                            [&](const mx::Preemption& c) { return c.node == n; });
  if (match == choices.end()) {
    std::string allowed;
    for (const auto& c : choices) {
      allowed += " " + w.cluster.nodes[c.node].name + rankText(c);
    }
    const auto here =
        n < 0 ? std::nullopt : mx::preemptOnNode(k.obj, k.priority, w.cluster, n, placed);
    dumpWorld(w, k, placed);
    pass.fail(describe(a) + ": the preemption oracle allows only" + allowed + "; on " + a.node +
              (here ? rankText(*here) : std::string(" no candidate")));
  } else if (std::get<0>(match->rank) > 0) {
    ++t.violations;
  }
  if (match != choices.end() && match->victims != victims) {
    std::string want;
    for (const auto& v : match->victims) {
      want += " " + v;
    }
    pass.fail(describe(a) + ": the preemption oracle's victims are" + want);
  }
  pass.preempted.push_back(a);
  // Nominated to the node; pods of lower priority nominated there lose their nomination.
  std::erase_if(w.nominated, [&](const auto& e) {
    return e.second.node == n && e.second.priority < k.priority;
  });
  w.nominated[a.key] = {k.obj, std::max(n, 0), k.priority};
}

// A decision from the queue: bind, reserve, refuse or preempt, as the oracles allow.
void checkDecision(World& w, const Known& k, const Action& a, Pass& pass, Tally& t) {
  const std::string key = a.key;
  if (a.kind == Kind::kUnschedulable || a.kind == Kind::kPreempt) {
    checkRefusal(w, k, a, pass, t);
    return;
  }
  if (a.kind != Kind::kBind && a.kind != Kind::kReserve) {
    pass.fail("unexpected action " + describe(a));
    return;
  }
  const int n = nodeIndex(w, a.node);
  const auto placed = mx::withNominated(w.placed, w.nominated, key, k.priority);
  if (n < 0 || !mx::allowed(k.obj, w.cluster, n, placed)) {
    pass.fail(describe(a) + ": a node the oracles do not allow");
  }
  const std::int64_t gpus = mx::of(mx::effectiveRequest(k.obj), "gpu");
  // The node's own free GPUs: a reservation there holds its whole request, so the node's GPUs
  // may all be promised (never fewer than none).
  const std::int64_t nodeFree =
      n < 0 ? 0 : std::max<std::int64_t>(0, mx::nodeFreeGpus(w.cluster, n, placed));
  w.pending.erase(key);
  w.nominated.erase(key);  // placed: its nomination ends
  if (a.kind == Kind::kBind) {
    ++t.binds;
    if (gpus > nodeFree) {
      pass.fail(describe(a) + ": bound where the node has " + std::to_string(nodeFree) +
                " free GPUs for " + std::to_string(gpus));
    }
    w.placed.push_back({k.obj, key, std::max(n, 0), true, k.priority, 0});
    pass.bound.emplace_back(key, std::max(n, 0));
    return;
  }
  ++t.reserves;
  if (a.deficit == 0 || a.deficit > gpus ||
      static_cast<std::int64_t>(a.deficit) < gpus - nodeFree) {
    pass.fail(describe(a) + ": deficit for " + std::to_string(gpus) + " GPUs, node free " +
              std::to_string(nodeFree));
  }
  w.placed.push_back({k.obj, key, std::max(n, 0), false, k.priority, 0});
  w.reserved[key] = a.node;
}

// One pass, in batches (next() calls at one instant, nothing arriving between them): each
// batch serves reservations first, then pods from the queue; every waiting pod is decided once,
// in queue order across the batches.
Pass checkPass(World& w, const std::vector<std::vector<Action>>& batches, Tally& t) {
  Pass pass;
  const std::set<std::string> due = w.pending;
  std::set<std::string> decided;
  const Known* previous = nullptr;
  for (const auto& batch : batches) {
    bool queueSeen = false;
    for (const Action& a : batch) {
      if (w.reserved.count(a.key) && (a.kind == Kind::kBind || a.kind == Kind::kCancel)) {
        if (queueSeen) {
          pass.fail("reservation action after the queue's: " + describe(a));
        }
        checkReservationAction(w, a, pass, t);
        continue;
      }
      queueSeen = true;
      if (!due.count(a.key) || decided.count(a.key)) {
        pass.fail("not due, or decided twice: " + describe(a));
        continue;
      }
      decided.insert(a.key);
      const Known& k = w.pods.at(a.key);
      if (previous != nullptr) {
        if (queuedBefore(k, *previous)) {
          pass.fail(a.key + " decided after " + previous->ns + "/" + previous->name);
        }
        if (previous->priority != k.priority) {
          ++t.orderedPairs;
        } else if (previous->created == k.created) {
          ++t.tiedPairs;
        }
      }
      previous = &k;
      checkDecision(w, k, a, pass, t);
    }
  }
  for (const auto& key : due) {
    if (!decided.count(key)) {
      pass.fail("waiting but not decided: " + key);
    }
  }
  return pass;
}

kc::sched::CacheOptions options() {
  kc::sched::CacheOptions o;
  o.reservationTimeout = 60s;
  o.initialBackoff = 1s;
  o.maxBackoff = 4s;
  // December 2026: after every status.startTime the test writes (a start time ahead of the
  // wall clock would be taken as "now", and the preemption's start-time rule would see ties).
  o.wallClock = [] {
    return std::chrono::system_clock::time_point{} + std::chrono::hours(24 * 365 * 57);
  };
  return o;
}

void arrive(Gen& g, World& w, SchedCache& cache, int count, int firstSecond,
            kc::sched::Clock::time_point now) {
  std::vector<std::string> keys;
  for (int i = 0; i < count; ++i) {
    Known k = pendingPod(g, "p" + std::to_string(w.nextPod++), firstSecond);
    const std::string key = k.ns + "/" + k.name;
    (k.obj["spec"].contains("schedulingGates") ? w.gated : w.pending).insert(key);
    w.pods[key] = std::move(k);
    keys.push_back(key);
  }
  // Handed in out of order: the queue's order must not depend on the informer's.
  for (std::size_t i = keys.size(); i > 1; --i) {
    std::swap(keys[i - 1], keys[g.below(static_cast<int>(i))]);
  }
  for (const auto& key : keys) {
    cache.ingestPod(w.pods[key].obj, now);
  }
}

// Between passes, as the API would answer: binds confirmed and shown bound, reservations
// written, victims evicted, a few running pods ending.
void settle(Gen& g, World& w, SchedCache& cache, const Pass& pass,
            kc::sched::Clock::time_point now) {
  for (const auto& [key, n] : pass.bound) {
    cache.bindDone(key, true, now);
    Known& k = w.pods.at(key);
    k.obj["spec"]["nodeName"] = w.cluster.nodes[n].name;
    k.obj["status"] = {{"phase", "Running"}, {"startTime", stamp(1, w.startSecond)}};
    for (auto& p : w.placed) {
      if (p.key == key) {
        p.pod = k.obj;
        p.start = w.startSecond;
      }
    }
    ++w.startSecond;
    cache.ingestPod(k.obj, now);
  }
  for (const auto& [key, node] : w.reserved) {
    cache.reserveDone(key, true, now);
  }
  std::set<std::string> gone;
  for (const Action& a : pass.preempted) {
    cache.preemptDone(a.key, true);
    for (const auto& v : a.victims) {
      gone.insert(v.key);
    }
  }
  for (const auto& p : w.placed) {
    if (p.runs && g.chance(10)) {
      gone.insert(p.key);
    }
  }
  for (const auto& key : gone) {
    cache.removePod(key);
    std::erase_if(w.placed, [&](const mx::Placed& p) { return p.key == key; });
  }
}

std::vector<std::string> runSeed(std::uint64_t seed, Tally& t) {
  Gen g{kc::alloc::SplitMix64(seed)};
  World w;
  makeNodes(g, w);
  SchedCache cache(options());
  const auto t0 = kc::sched::Clock::time_point{} + 1h;
  for (const auto& n : w.cluster.nodes) {
    cache.ingestNode(n.obj);
  }
  for (const auto& p : w.pools) {
    cache.ingestPool(p);
  }
  for (const auto& p : makeRunning(g, w)) {
    cache.ingestPod(p, t0);
  }
  // PodDisruptionBudgets over some of the apps: preemption counts their violations.
  for (int b = g.below(3); b > 0; --b) {
    mx::Budget budget{g.chance(25) ? "other" : "team", {{"app", g.pick(kApps)}}, g.below(2)};
    cache.ingestBudget({{"metadata",
                         {{"name", "pdb" + std::to_string(b)},
                          {"namespace", budget.ns},
                          {"resourceVersion", "1"}}},
                        {"spec", {{"selector", {{"matchLabels", budget.matchLabels}}}}},
                        {"status", {{"disruptionsAllowed", budget.allowed}}}});
    w.cluster.budgets.push_back(std::move(budget));
  }
  cache.resetQueue(t0);
  std::vector<std::string> problems;
  for (int round = 0; round < 3; ++round) {
    const auto now = t0 + round * 10s;
    arrive(g, w, cache, round == 0 ? 6 + g.below(10) : g.below(6), 10 * round, now);
    // The daemon takes up to 256 actions a call; small batches split the pass.
    const std::size_t max = g.chance(30) ? 1 + static_cast<std::size_t>(g.below(4)) : 1000;
    std::vector<std::vector<Action>> batches;
    for (int call = 0; call < 100; ++call) {
      batches.push_back(cache.next(now, max));
      if (batches.back().empty()) {
        break;
      }
    }
    Pass pass = checkPass(w, batches, t);
    for (const auto& p : pass.problems) {
      problems.push_back("round " + std::to_string(round) + ": " + p);
    }
    settle(g, w, cache, pass, now + 1s);
  }
  return problems;
}

}  // namespace

TEST_CASE("sched mixed: random clusters and bursts, every decision one the oracles allow",
          "[sched]") {
  Tally t;
  int failedSeeds = 0;
  for (std::uint64_t seed = 1; seed <= 300 && failedSeeds < 3; ++seed) {
    const auto problems = runSeed(seed, t);
    std::string all;
    for (const auto& p : problems) {
      all += "\n  " + p;
    }
    INFO("seed " << seed << all);
    CHECK(problems.empty());
    failedSeeds += problems.empty() ? 0 : 1;
  }
  INFO("binds " << t.binds << " reserves " << t.reserves << " unschedulable " << t.unschedulable
                << " preempts " << t.preempts << " victims " << t.victims << " ordered pairs "
                << t.orderedPairs << " tied pairs " << t.tiedPairs << " reservation binds "
                << t.reservationBinds << " PDB violations " << t.violations);
  CHECK(t.binds > 500);
  CHECK(t.reserves > 50);
  CHECK(t.unschedulable > 100);
  CHECK(t.preempts > 20);
  CHECK(t.orderedPairs > 500);
  CHECK(t.tiedPairs > 50);
  CHECK(t.reservationBinds > 0);
  CHECK(t.violations > 0);
  for (const auto& r : kReasons) {
    INFO(r);
    CHECK(t.reasons[r] > 10);
  }
}

// Seed 2586 (found over 20,000 seeds): two victims of priorities 10 and 5 on one node against
// three of 10, 0 and 0 on another. kube-scheduler sums priorities shifted by 2^31, so the node
// with fewer victims wins though its plain sum is larger; an oracle summing the plain
// priorities picked the other node.
TEST_CASE("sched mixed: seed 2586, fewer victims before a smaller sum of priorities", "[sched]") {
  Tally t;
  const auto problems = runSeed(2586, t);
  std::string all;
  for (const auto& p : problems) {
    all += "\n  " + p;
  }
  INFO(all);
  CHECK(problems.empty());
  CHECK(t.preempts > 0);
}
