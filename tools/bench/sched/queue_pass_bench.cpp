#include "tools/bench/sched/queue_pass_bench.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "libcore/alloc/backfill.hpp"
#include "libcore/alloc/policy_registry.hpp"
#include "libcore/alloc/queue_pass.hpp"

namespace kc::bench {
namespace {

using Clock = std::chrono::steady_clock;
namespace alloc = kc::alloc;

constexpr std::uint32_t kNodesPerPool = 100;
constexpr std::uint32_t kGpusPerNode = 4;
constexpr std::int64_t kNow = 1'000'000'000;  // ms
constexpr std::int64_t kMoveMs = 19'500;      // the simulator's default move time

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error("queue pass bench: " + what);
}

template <typename T>
T check(Result<T> r, const char* what) {
  if (!r) {
    fail(std::string(what) + ": " + r.error().message);
  }
  return std::move(*r);
}

void check(const Status& s, const char* what) {
  if (!s) {
    fail(std::string(what) + ": " + s.error().message);
  }
}

// The scheduler's side of the pass: a pool model, its running pods and the waiting queue; a
// start places the pod as the pass's test does (alloc::placeNow) and adds it to the running.
class BenchHost : public alloc::QueueHost {
 public:
  alloc::ClusterState state;
  std::vector<alloc::RunningPod> running;
  alloc::FabricClock fabric;
  std::vector<alloc::QueuedPod> queue;
  alloc::SplitMix64 rng{7};
  alloc::PlacementRules rules;
  std::uint64_t started = 0;

  std::size_t waiting() const override { return queue.size(); }
  alloc::QueuedPod queued(std::size_t i) const override { return queue[i]; }
  alloc::QueueView view() const override { return alloc::QueueView{&state, running, fabric, {}}; }
  alloc::SplitMix64 placementRng() const override { return rng; }
  Result<bool> start(std::size_t i, bool tested) override {
    static const alloc::GpuModelFilter kAny{};
    auto placed = alloc::placeNow(state, fabric, queue[i].pod, kAny, rules, &rng, kNow);
    if (!placed) {
      if (placed.error().code == kc::errc::kUnschedulable && !tested) {
        return false;
      }
      return placed.error();
    }
    running.push_back(alloc::RunningPod{placed->node, queue[i].pod, placed->gpus,
                                        placed->start + queue[i].duration});
    ++started;
    return true;
  }
};

std::string gpuUuid(std::uint64_t i) {
  alloc::SplitMix64 h(i);
  const std::uint64_t a = h.next();
  const std::uint64_t b = h.next();
  return fmt::format("GPU-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", a >> 32, (a >> 16) & 0xffff,
                     a & 0xffff, b >> 48, b & 0xffffffffffffULL);
}

// Every node full but for at most one free GPU; 2-6 free GPUs a pool, so the head (8 GPUs)
// fits nowhere now and gets a reservation from the running pods' ends (1 min to 4 h ahead).
BenchHost buildScenario(const QueuePassScenario& sc, std::uint64_t& freeGpus) {
  if (sc.nodes == 0 || sc.nodes % kNodesPerPool != 0) {
    fail("nodes must be a positive multiple of 100");
  }
  BenchHost host;
  alloc::SplitMix64 rng(sc.seed);
  auto below = [&](std::uint64_t n) { return rng.next() % n; };
  host.rules = alloc::PlacementRules{
      alloc::Composability::Composable, check(alloc::findNodePolicy("eq1"), "policy"),
      check(alloc::findGpuPolicy("unattached-first"), "policy"), kMoveMs};
  const std::uint32_t pools = sc.nodes / kNodesPerPool;
  for (std::uint32_t p = 0; p < pools; ++p) {
    check(host.state.addPool(fmt::format("pool-{:02d}", p)), "pool");
  }
  for (std::uint32_t n = 0; n < sc.nodes; ++n) {
    const alloc::PoolIndex p = n / kNodesPerPool;
    check(host.state.addNode(alloc::NodeSpec{fmt::format("node-{:04d}", n), p, 64'000, 262'144}),
          "node");
    for (std::uint32_t g = 0; g < kGpusPerNode; ++g) {
      const std::uint64_t k = std::uint64_t{n} * kGpusPerNode + g;
      check(host.state.addGpu(
                alloc::GpuSpec{fmt::format("c{}.{}", p, k % (kNodesPerPool * kGpusPerNode)),
                               gpuUuid(k), "", p, n, false, true, false}),
            "gpu");
    }
  }
  host.fabric.busyUntil.assign(pools, kNow);
  std::vector<std::uint32_t> freeOn(sc.nodes, 0);
  for (std::uint32_t p = 0; p < pools; ++p) {
    for (std::uint64_t f = 2 + below(5), placed = 0; placed < f;) {
      const std::uint32_t n = p * kNodesPerPool + static_cast<std::uint32_t>(below(kNodesPerPool));
      if (freeOn[n] == 0) {
        freeOn[n] = 1;
        ++placed;
      }
    }
  }
  for (std::uint32_t n = 0; n < sc.nodes; ++n) {
    std::uint32_t left = kGpusPerNode - freeOn[n];
    while (left > 0) {
      const std::uint64_t r = below(100);
      std::uint32_t size = r < 25 ? 1 : r < 60 ? 2 : 4;
      while (size > left) {
        size /= 2;
      }
      alloc::PodRequest pod{size * (4'000 + below(4'001)), size * (16'384 + below(16'385)), size};
      alloc::RunningPod run{
          n, pod, {}, kNow + 60'000 + static_cast<std::int64_t>(below(4 * 3'600'000))};
      for (alloc::GpuIndex g : host.state.nodeGpus(n)) {
        if (run.gpus.size() < size && host.state.gpu(g).free()) {
          run.gpus.push_back(g);
        }
      }
      for (alloc::GpuIndex g : run.gpus) {
        check(host.state.allocateGpu(g), "allocate");
      }
      check(host.state.reserve(n, pod.cpuMilli, pod.memoryMiB), "reserve");
      host.running.push_back(std::move(run));
      left -= size;
    }
  }
  freeGpus = host.state.freeGpus();
  // The head, then the queue behind it: 1, 2, 4 and 8 GPUs (40/30/20/10 %), 5 min to 6 h.
  host.queue.push_back(
      alloc::QueuedPod{0, alloc::PodRequest{32'000, 131'072, 8}, nullptr, 0, 3'600'000});
  for (std::uint32_t i = 1; i <= sc.waiting; ++i) {
    const std::uint64_t r = below(100);
    const std::uint32_t size = r < 40 ? 1 : r < 70 ? 2 : r < 90 ? 4 : 8;
    host.queue.push_back(alloc::QueuedPod{
        i, alloc::PodRequest{size * (2'000 + below(6'001)), size * (8'192 + below(24'577)), size},
        nullptr, 0, 300'000 + static_cast<std::int64_t>(below(6 * 3'600'000 - 300'000))});
  }
  return host;
}

// The default policy's pass over the same queue: every waiting pod that fits starts, oldest
// first, a pod at least as large as one that did not fit is not tried (kubecomp-sched's and the
// simulator's backfill).
std::uint64_t greedyPass(BenchHost& host) {
  std::vector<alloc::PodRequest> failed;
  std::uint64_t tried = 0;
  for (std::size_t i = 0; i < host.queue.size(); ++i) {
    const alloc::PodRequest& pod = host.queue[i].pod;
    if (std::any_of(failed.begin(), failed.end(), [&](const alloc::PodRequest& f) {
          return pod.cpuMilli >= f.cpuMilli && pod.memoryMiB >= f.memoryMiB && pod.gpus >= f.gpus;
        })) {
      continue;
    }
    ++tried;
    if (!check(host.start(i, false), "backfill start")) {
      failed.push_back(pod);
    }
  }
  return tried;
}

template <typename Pass>
QueuePassFigures measure(const BenchHost& base, int passes, Pass pass) {
  std::vector<double> ms;
  QueuePassFigures out;
  out.waiting = base.queue.size();
  for (int k = 0; k < passes; ++k) {
    BenchHost host = base;  // every pass starts from the same cluster and queue
    const auto t0 = Clock::now();
    const std::uint64_t tested = pass(host);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    if (k > 0 && (tested != out.tested || host.started != out.started)) {
      fail("a pass decided differently from the same start");
    }
    out.tested = tested;
    out.started = host.started;
  }
  std::sort(ms.begin(), ms.end());
  out.passMs = ms[ms.size() / 2];
  out.minPassMs = ms.front();
  return out;
}

QueuePassFigures measurePlanning(const BenchHost& base, int passes,
                                 alloc::QueueDiscipline discipline) {
  return measure(base, passes, [&](BenchHost& host) {
    alloc::QueuePass pass(discipline);
    auto r = check(pass.run(host, host.rules, kNow), "queue pass");
    if (!r.head || r.tested == 0) {
      fail("the head fits now or nothing was tested: not the scenario measured");
    }
    return r.tested;
  });
}

}  // namespace

QueuePassResults measureQueuePasses(const QueuePassScenario& scenario) {
  QueuePassResults out;
  out.scenario = scenario;
  const BenchHost base = buildScenario(scenario, out.freeGpus);
  out.running = base.running.size();
  const int passes = std::max(1, scenario.passes);
  out.backfill = measure(base, passes, [](BenchHost& host) { return greedyPass(host); });
  out.easy = measurePlanning(base, passes, alloc::QueueDiscipline::EasyBackfill);
  out.slack = measurePlanning(base, passes, alloc::QueueDiscipline::SlackBackfill);
  return out;
}

void QueuePassResults::print(std::ostream& out) const {
  out << fmt::format(
      "queue pass at {} nodes ({} GPUs free, {} running pods with expected ends, head 8 GPUs "
      "not fitting now, {} pods behind it; median of {} passes, decision only):\n",
      scenario.nodes, freeGpus, running, scenario.waiting, scenario.passes);
  auto line = [&](const char* name, const QueuePassFigures& f, const char* what) {
    out << fmt::format(
        "  {:14} {:9.2f} ms a pass (min {:.2f}), {:4} {} ({:.3f} ms each), {:3} started, "
        "{:8.0f} pods decided/s\n",
        name, f.passMs, f.minPassMs, f.tested, what, f.msPerTested(), f.started, f.decisionsPerS());
  };
  line("backfill", backfill, "placements tried");
  line("easy-backfill", easy, "pods tested     ");
  line("slack-backfill", slack, "pods tested     ");
}

void QueuePassResults::addTo(nlohmann::json& out) const {
  const std::string n = fmt::format("_{}_nodes", scenario.nodes);
  auto r3 = [](double v) { return std::round(v * 1000) / 1000; };
  for (const auto& [prefix, f] :
       {std::pair{"backfill", &backfill}, std::pair{"easy", &easy}, std::pair{"slack", &slack}}) {
    const std::string p = prefix;
    out[p + "_pass_ms" + n] = r3(f->passMs);
    out[p + "_ms_per_tested" + n] = r3(f->msPerTested());
    out[p + "_decisions_per_s" + n] = std::round(f->decisionsPerS());
    out[p + "_tested_per_pass"] = f->tested;
    out[p + "_started_per_pass"] = f->started;
  }
  out["queue_pass_waiting"] = scenario.waiting + 1;
  out["queue_pass_running"] = running;
}

}  // namespace kc::bench
