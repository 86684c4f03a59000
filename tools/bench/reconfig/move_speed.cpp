#include "tools/bench/reconfig/move_speed.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "libcore/api/names.hpp"
#include "libcore/kube/informer.hpp"
#include "tests/services/reconfig-mgr/cluster.hpp"
#include "tools/bench/bench_util.hpp"

namespace kc::bench {

namespace {

using kc::reconfig::testing::ClusterSpec;
using kc::reconfig::testing::SimCluster;
using kc::reconfig::testing::SimGpu;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

double round3(double v) {
  return std::round(v * 1000) / 1000;
}

double round1(double v) {
  return std::round(v * 10) / 10;
}

const std::vector<std::string> kNodes = {"s-dst", "s-src", "d-dst", "d-src"};

// The cluster of move_speed.hpp: pool "single" (s-dst, s-src) with `moves` GPUs on s-src over
// two chassis; pool "demand" (d-dst, d-src) with 2 chassis x 4 GPUs, two of each on either node.
ClusterSpec moveSpeedSpec(int moves) {
  ClusterSpec s;
  s.nodes = kNodes;
  s.pools = {{"single", {"s-dst", "s-src"}}, {"demand", {"d-dst", "d-src"}}};
  for (int i = 0; i < moves; ++i) {
    s.chassis[i % 2 == 0 ? "single-c0" : "single-c1"].push_back(
        {fmt::format("{:02X}", i / 2 + 1), "s-src"});
  }
  for (const char* c : {"demand-c0", "demand-c1"}) {
    for (int g = 1; g <= 4; ++g) {
      s.chassis[c].push_back({fmt::format("{:02X}", g), g <= 2 ? "d-dst" : "d-src"});
    }
  }
  s.statusSyncPeriod = "10ms";
  s.latencyScale = 0;  // the harness' own chassis-sim: left idle, see FixedLatencyChassis
  return s;
}

// chassis-sim serving the chassis of `spec` with FIXED latencies (the H3 means as [v, v]).
// The process harness (tests/services/reconfig-mgr/cluster.hpp) starts its chassis-sim with
// the default latency RANGES and no way to fix them, so its pools are pointed here instead
// before reconfig-mgr starts (reconfig-mgr is the only fabric client: the device plugins run
// with --host-check=false and read the pools' status only).
class FixedLatencyChassis {
 public:
  FixedLatencyChassis(const ClusterSpec& spec, double scale, const std::string& dir) {
    json topo = {{"latency",
                  {{"inventory", {kH3InventoryMs, kH3InventoryMs}},
                   {"unassign", {kH3UnassignMs, kH3UnassignMs}},
                   {"assign", {kH3AssignMs, kH3AssignMs}}}},
                 {"chassis", json::array()}};
    int uuid = 0;
    for (const auto& [name, gpus] : spec.chassis) {
      json c = {{"name", name}, {"hosts", json::array()}, {"gpus", json::array()}};
      for (std::size_t i = 0; i < spec.nodes.size(); ++i) {
        c["hosts"].push_back({{"port", i + 1}, {"system", spec.nodes[i]}});  // as the harness
      }
      for (const SimGpu& g : gpus) {
        json gj = {{"gid", g.gid},
                   {"uuid", fmt::format("GPU-00000000-0000-4000-9000-{:012d}", ++uuid)},
                   {"model", g.model}};
        const auto at = std::find(spec.nodes.begin(), spec.nodes.end(), g.node);
        if (at != spec.nodes.end()) {
          gj["host"] = at - spec.nodes.begin() + 1;
        }
        c["gpus"].push_back(gj);
      }
      topo["chassis"].push_back(c);
    }
    const std::string path = dir + "/fixed-latency-topology.json";
    std::ofstream(path) << topo.dump(2);
    std::ostringstream s;
    s << scale;
    sim_ = std::make_unique<kc::testing::ChildProcess>(
        std::vector<std::string>{CHASSIS_SIM_EXE, "--topology", path, "--port", "0",
                                 "--latency-scale", s.str(), "--dialect", "h3"},
        kc::testing::ChildOutput::kCapture);
    const auto line = sim_->readLine(20s);
    const auto at = line ? line->find("http://127.0.0.1:") : std::string::npos;
    if (at == std::string::npos) {
      throw std::runtime_error("chassis-sim with fixed latencies did not start");
    }
    base_ = "http://127.0.0.1:" + std::to_string(std::stoi(line->substr(at + 17)));
  }

  // Points every chassis of `pool` at this simulator.
  void serve(kube::KubeClient& client, const std::string& pool) const {
    auto obj = client.get(api::gvr::gpuPools(), "", pool);
    if (!obj) {
      throw std::runtime_error("cannot read GPUPool " + pool);
    }
    json chassis = (*obj)["spec"]["chassis"];
    for (auto& c : chassis) {
      c["endpoint"] = base_ + "/chassis/" + c.value("name", "");
    }
    if (!client.patch(api::gvr::gpuPools(), "", pool, kube::PatchType::kMerge,
                      {{"spec", {{"chassis", chassis}}}})) {
      throw std::runtime_error("cannot point GPUPool " + pool + " at the fixed-latency chassis");
    }
  }

 private:
  std::unique_ptr<kc::testing::ChildProcess> sim_;
  std::string base_;
};

// What the pod and GPUPool watches showed, each event stamped when it arrived: per pod its
// dst-node request and its bind, per (pod, GPU) move each journal phase's first sight.
class MoveObserver {
 public:
  explicit MoveObserver(kube::KubeClient& client)
      : pods_(client, options(kube::gvr::pods(), "default")),
        pools_(client, options(api::gvr::gpuPools(), "")) {
    pods_.addHandler(handler([this](const json& p) { onPod(p); }));
    pools_.addHandler(handler([this](const json& p) { onPool(p); }));
    pods_.start();
    pools_.start();
    if (!pods_.waitForSync(10s) || !pools_.waitForSync(10s)) {
      throw std::runtime_error("pod and GPUPool watches never synced");
    }
  }
  ~MoveObserver() {
    pods_.stop();
    pools_.stop();
  }
  MoveObserver(const MoveObserver&) = delete;
  MoveObserver& operator=(const MoveObserver&) = delete;

  struct PodSeen {
    std::optional<Clock::time_point> request;
    std::string dstNode;
    std::optional<Clock::time_point> bound;
  };
  using PhaseSeen = std::vector<std::pair<std::string, Clock::time_point>>;
  struct Seen {
    std::map<std::string, PodSeen> pods;                            // pod name
    std::map<std::string, std::map<std::string, PhaseSeen>> moves;  // "default/<pod>" -> GPU
    std::map<std::string, std::string> failed;                      // "default/<pod>" -> why
  };

  // Waits until `done` holds over what was seen; false after `limit`.
  bool until(const std::function<bool(const Seen&)>& done, Clock::duration limit) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return done(seen_); });
  }
  Seen snapshot() {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  static kube::InformerOptions options(kube::GroupVersionResource r, std::string ns) {
    kube::InformerOptions o;
    o.resource = std::move(r);
    o.ns = std::move(ns);
    return o;
  }
  static kube::ResourceEventHandler handler(std::function<void(const json&)> f) {
    return {[f](const kube::ObjectPtr& o) { f(*o); },
            [f](const kube::ObjectPtr&, const kube::ObjectPtr& o) { f(*o); }, nullptr};
  }

  void onPod(const json& p) {
    const auto now = Clock::now();
    const json meta = p.value("metadata", json::object());
    const json annotations = meta.value("annotations", json::object());
    const std::string node = p.value("spec", json::object()).value("nodeName", "");
    {
      std::lock_guard lock(mu_);
      PodSeen& s = seen_.pods[meta.value("name", "")];
      if (!s.request && annotations.contains(api::kDstNodeAnnotation)) {
        s.request = now;
        s.dstNode = annotations.value(std::string(api::kDstNodeAnnotation), "");
      }
      if (!s.bound && !node.empty()) {
        s.bound = now;
      }
    }
    cv_.notify_all();
  }

  void onPool(const json& pool) {
    const auto now = Clock::now();
    const json moves = pool.value("status", json::object()).value("moves", json::array());
    {
      std::lock_guard lock(mu_);
      for (const auto& m : moves) {
        const std::string pod = m.value("pod", "");
        const std::string phase = m.value("phase", "");
        if (pod.empty() || phase.empty()) {
          continue;  // background moves and claims: none here
        }
        PhaseSeen& phases = seen_.moves[pod][m.value("gpu", "")];
        if (std::none_of(phases.begin(), phases.end(),
                         [&](const auto& ph) { return ph.first == phase; })) {
          phases.emplace_back(phase, now);
        }
        if (phase == "Failed") {
          seen_.failed[pod] = m.value("gpu", "") + ": " + m.value("message", "");
        }
      }
    }
    cv_.notify_all();
  }

  std::mutex mu_;  // guards seen_; the watches' handlers write it, until() reads it
  std::condition_variable cv_;
  Seen seen_;
  kube::Informer pods_;  // last: stopped (in the destructor) before seen_ goes
  kube::Informer pools_;
};

void setUnschedulable(SimCluster& c, const std::string& node, bool off) {
  if (!c.client().patch(kube::gvr::nodes(), "", node, kube::PatchType::kMerge,
                        {{"spec", {{"unschedulable", off}}}})) {
    throw std::runtime_error("cannot " + std::string(off ? "cordon " : "uncordon ") + node);
  }
}

// Creates `pod` asking for `gpus` GPUs, waits for its request (which must name `dstNode`),
// for `gpus` of its moves to succeed and for its bind. Returns its moves, ms after the request.
std::vector<ObservedMove> timePod(SimCluster& c, MoveObserver& seen, const std::string& pod,
                                  int gpus, const std::string& dstNode, Clock::duration limit) {
  c.createPod(pod, gpus);
  if (!seen.until([&](const auto& s) { return s.pods.count(pod) && s.pods.at(pod).request; },
                  limit)) {
    throw std::runtime_error("no dst-node request for " + pod);
  }
  if (const std::string dst = seen.snapshot().pods.at(pod).dstNode; dst != dstNode) {
    throw std::runtime_error(pod + " was sent to " + dst + ", not " + dstNode);
  }
  const std::string key = "default/" + pod;
  const bool done = seen.until(
      [&](const MoveObserver::Seen& s) {
        if (s.failed.count(key)) {
          return true;
        }
        const auto it = s.moves.find(key);
        return it != s.moves.end() &&
               std::count_if(it->second.begin(), it->second.end(), [](const auto& g) {
                 return !g.second.empty() && g.second.back().first == "Succeeded";
               }) >= gpus;
      },
      limit);
  const auto s = seen.snapshot();
  if (s.failed.count(key)) {
    throw std::runtime_error("a move for " + pod + " Failed: " + s.failed.at(key));
  }
  if (!done) {
    throw std::runtime_error(fmt::format("{} of {}'s moves never Succeeded", gpus, pod));
  }
  if (!seen.until([&](const auto& st) { return st.pods.at(pod).bound.has_value(); }, limit)) {
    throw std::runtime_error(pod + " never bound");
  }
  const auto t0 = *s.pods.at(pod).request;
  std::vector<ObservedMove> out;
  for (const auto& [gpu, phases] : s.moves.at(key)) {
    ObservedMove m{gpu, {}};
    for (const auto& [phase, at] : phases) {
      m.phases.emplace_back(phase, ms(at - t0));
    }
    out.push_back(std::move(m));
  }
  return out;
}

double lastEnd(const std::vector<ObservedMove>& moves) {
  double end = 0;
  for (const auto& m : moves) {
    end = std::max(end, m.endMs());
  }
  return end;
}

std::string chassisOf(const std::string& gpu) {
  return gpu.substr(0, gpu.find('.'));
}

}  // namespace

double MoveSpeed::singleMedianMs() const {
  return percentile(singleMs, 0.5);
}

double MoveSpeed::moveMedianMs() const {
  std::vector<double> own;
  for (const auto& m : singles) {
    own.push_back(m.endMs() - m.startMs());
  }
  return percentile(own, 0.5);
}

double MoveSpeed::moveVsFabricRatio() const {
  return round3(moveMedianMs() / fabricMs);
}

double MoveSpeed::demand4VsOneRatio() const {
  return round3(demand4Ms / singleMedianMs());
}

void MoveSpeed::print(std::ostream& out, const std::string& indent) const {
  out << fmt::format(
      "{}fabric: chassis-sim at fixed H3 latencies x {} (inventory {:.0f} ms, unassign {:.0f} "
      "ms, assign {:.0f} ms): one move's own chassis time {:.0f} ms (unassign + assign + one "
      "inventory read)\n",
      indent, latencyScale, kH3InventoryMs * latencyScale, kH3UnassignMs * latencyScale,
      kH3AssignMs * latencyScale, fabricMs);
  // Time in each phase: from its first sight to the next phase's (the first one from the
  // request), medians over the 1-GPU moves, in the order the phases came.
  std::vector<std::string> order;
  std::map<std::string, std::vector<double>> spent;
  for (const auto& m : singles) {
    std::string from = "request";
    double at = 0;
    for (const auto& [phase, t] : m.phases) {
      const std::string step = from + " -> " + phase;
      if (!spent.count(step)) {
        order.push_back(step);
      }
      spent[step].push_back(t - at);
      from = phase;
      at = t;
    }
  }
  out << fmt::format(
      "{}1-GPU move, request seen -> Succeeded seen: median {:.1f} ms (min {:.1f}, max {:.1f}) "
      "over {} moves\n",
      indent, singleMedianMs(), *std::min_element(singleMs.begin(), singleMs.end()),
      *std::max_element(singleMs.begin(), singleMs.end()), singleMs.size());
  for (const auto& step : order) {
    out << fmt::format("{}  {:<26} median {:8.1f} ms  ({} of {} moves seen)\n", indent, step,
                       percentile(spent.at(step), 0.5), spent.at(step).size(), singles.size());
  }
  out << fmt::format(
      "{}4-GPU demand, 2 GPUs from each of 2 chassis, request seen -> last Succeeded seen: "
      "{:.1f} ms\n",
      indent, demand4Ms);
  for (const auto& m : demand4) {
    out << fmt::format("{}  {:<14} ({})  first seen {:+8.1f} ms  Succeeded {:+8.1f} ms\n", indent,
                       m.gpu, chassisOf(m.gpu), m.startMs(), m.endMs());
  }
  out << fmt::format("{}1-GPU move itself (Draining seen -> Succeeded seen): median {:.1f} ms\n",
                     indent, moveMedianMs());
  out << fmt::format("{}move_vs_fabric_ratio  {:.3f}  goal <= {} (the demo: {}, 36.1 s vs 22 s)\n",
                     indent, moveVsFabricRatio(), kMoveVsFabricGoal, kMoveVsFabricDemo);
  out << fmt::format(
      "{}demand4_vs_one_ratio  {:.3f}  goal <= {} (four moves one after another: about 4)\n",
      indent, demand4VsOneRatio(), kDemand4VsOneGoal);
}

json MoveSpeed::toJson() const {
  return {{"move_vs_fabric_ratio", moveVsFabricRatio()},
          {"demand4_vs_one_ratio", demand4VsOneRatio()},
          {"fabric_move_ms", round1(fabricMs)},
          {"safe_move_p50_ms", round1(moveMedianMs())},
          {"request_to_moved_p50_ms", round1(singleMedianMs())},
          {"demand4_ms", round1(demand4Ms)},
          {"fabric_latency_scale", latencyScale},
          {"fabric_moves", singleMs.size()}};
}

MoveSpeed measureMoveSpeed(int moves, double latencyScale) {
  if (moves < 2 || latencyScale <= 0) {
    throw std::runtime_error("move speed: at least 2 moves and a latency scale above 0");
  }
  MoveSpeed r;
  r.latencyScale = latencyScale;
  r.fabricMs = (kH3UnassignMs + kH3AssignMs + kH3InventoryMs) * latencyScale;
  // A step's limit, only a failure timeout: 20 s + 40 fabric times, far above any move.
  const auto limit = std::chrono::duration_cast<Clock::duration>(
      20s + std::chrono::duration<double, std::milli>(40 * r.fabricMs));
  const ClusterSpec spec = moveSpeedSpec(moves);
  SimCluster c(spec);
  for (const char* n : {"s-src", "d-src", "d-dst"}) {
    setUnschedulable(c, n, true);
  }
  FixedLatencyChassis fabric(spec, latencyScale, c.dir());
  fabric.serve(c.client(), "single");
  fabric.serve(c.client(), "demand");
  MoveObserver seen(c.client());
  c.startManager();
  for (const auto& [node, n] :
       std::map<std::string, int>{{"s-src", moves}, {"d-src", 4}, {"d-dst", 4}}) {
    if (!c.waitAllocatable(node, n, 30s)) {
      throw std::runtime_error(fmt::format("{} never showed its {} GPUs", node, n));
    }
  }
  try {
    c.createPod("holder", 4);  // before the scheduler starts: bound here, on d-dst
    c.bindAndWaitRunning("holder", "d-dst");
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("the 4-GPU pod holding d-dst never ran: ") + e.what());
  }
  c.startScheduler();
  for (int i = 1; i <= moves; ++i) {
    auto m = timePod(c, seen, fmt::format("one-{}", i), 1, "s-dst", limit);
    r.singleMs.push_back(lastEnd(m));
    r.singles.push_back(std::move(m.front()));
  }
  setUnschedulable(c, "s-dst", true);
  setUnschedulable(c, "d-dst", false);
  r.demand4 = timePod(c, seen, "four", 4, "d-dst", limit * 4);
  r.demand4Ms = lastEnd(r.demand4);
  return r;
}

}  // namespace kc::bench
