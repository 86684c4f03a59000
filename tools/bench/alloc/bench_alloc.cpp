// bench_alloc: the allocation algorithms of libcore/alloc against the originals' approaches,
// side by side in one run.
//
//   1. Node selection (paper Eq. 1 + multi-pool filter) over 100..20,000 nodes and 4..32 pools:
//      ours reads ClusterState's O(1) aggregates; the naive one recomputes the per-node and
//      per-pool free-GPU counts from the GPU inventory on every decision (the original's
//      style). Both must choose the same node on every decision (checked).
//   2. RT admission on a 64-core node holding 1..500 reservations: one admission decision
//      (per-core placement + commit), first-fit and worst-fit, p50/p99.
//   3. VNI allocation at 1k/10k/50k live VNIs in the 64k range: VniRange (next-fit bitmap)
//      against the seed's per-call table rebuild, ops/s and the ratio.
//
// The last stdout line is one JSON object: node_select_p99_us_5000, vni_speedup_vs_seed_50k,
// rt_pack_p99_us (p99 of a first-fit admission decision, worst over the reservation counts).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/alloc/gpu_candidate.hpp"
#include "libcore/alloc/node_score.hpp"
#include "libcore/alloc/policy_registry.hpp"
#include "libcore/alloc/pool_model.hpp"
#include "libcore/alloc/rng.hpp"
#include "libcore/alloc/rt_admission.hpp"
#include "libcore/alloc/vni_range.hpp"
#include "tools/bench/vni/vni_baselines.hpp"

namespace {

using namespace kc::alloc;
using Clock = std::chrono::steady_clock;

double microsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

struct Stats {
  double p50 = 0;
  double p99 = 0;
  double perSecond = 0;
};

Stats summarize(std::vector<double> samples) {
  Stats s;
  if (samples.empty()) {
    return s;
  }
  std::sort(samples.begin(), samples.end());
  double total = 0;
  for (double v : samples) {
    total += v;
  }
  s.p50 = samples[samples.size() / 2];
  s.p99 = samples[std::min(samples.size() - 1, samples.size() * 99 / 100)];
  s.perSecond = total > 0 ? static_cast<double>(samples.size()) * 1e6 / total : 0;
  return s;
}

// prefix + n by appending (GCC 12 reports a false -Wrestrict on "lit" + std::string&& at -O3).
std::string named(std::string_view prefix, std::uint64_t n) {
  std::string out(prefix);
  out += std::to_string(n);
  return out;
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "bench_alloc: %s\n", what.c_str());
  std::exit(1);
}

// ---------------------------------------------------------------- node selection

// The original's way: per decision, count free GPUs per node and per pool from the inventory,
// then filter and score. Same ordering as Eq1NodePolicy (exact, name tie-break), so the two
// must agree.
kc::Result<NodeChoice> naiveSelectNode(const ClusterState& s, const PodRequest& pod) {
  std::vector<std::uint32_t> nodeFree(s.nodeCount(), 0);
  std::vector<std::uint32_t> poolFree(s.poolCount(), 0);
  for (GpuIndex g = 0; g < s.gpuCount(); ++g) {
    const GpuState& gpu = s.gpu(g);
    if (gpu.inUse || !gpu.healthy || gpu.draining) {
      continue;
    }
    ++poolFree[gpu.pool];
    if (gpu.node != kNoNode) {
      ++nodeFree[gpu.node];
    }
  }
  NodeIndex best = kNoNode;
  auto key = [&](NodeIndex n) {
    const std::uint32_t avail = nodeFree[n];
    if (avail >= pod.gpus) {
      const std::int64_t fit = pod.gpus == 0 ? (avail == 0 ? 0 : 1) : avail;
      return std::pair<int, std::int64_t>{0, fit};
    }
    return std::pair<int, std::int64_t>{1, -static_cast<std::int64_t>(avail)};
  };
  for (NodeIndex n = 0; n < s.nodeCount(); ++n) {
    const NodeState& node = s.node(n);
    if (!node.schedulable || pod.cpuMilli > node.cpuMilliCapacity - node.cpuMilliUsed ||
        pod.memoryMiB > node.memoryMiBCapacity - node.memoryMiBUsed) {
      continue;
    }
    if (nodeFree[n] < pod.gpus && (node.pool == kNoPool || poolFree[node.pool] < pod.gpus)) {
      continue;
    }
    if (best == kNoNode || key(n) < key(best) ||
        (key(n) == key(best) && node.name < s.node(best).name)) {
      best = n;
    }
  }
  if (best == kNoNode) {
    return kc::makeError("unschedulable", "no node");
  }
  const std::uint32_t avail = nodeFree[best];
  return NodeChoice{best, pod.gpus > avail ? pod.gpus - avail : 0, eq1Score(pod.gpus, avail)};
}

struct LivePod {
  NodeIndex node;
  PodRequest request;
  std::vector<GpuIndex> gpus;
};

// Builds a cluster: `nodes` nodes (96 cores, 768 GiB) spread over `pools` pools, 6 GPUs per
// node on average (the paper's 24-GPU / 4-node pools), some attached, some unattached.
ClusterState buildCluster(std::uint32_t nodes, std::uint32_t pools, SplitMix64& rng) {
  ClusterState s;
  for (std::uint32_t p = 0; p < pools; ++p) {
    if (!s.addPool(named("pool-", p))) {
      fail("addPool");
    }
  }
  for (std::uint32_t n = 0; n < nodes; ++n) {
    auto node = s.addNode(NodeSpec{.name = named("node-", n),
                                   .pool = n % pools,
                                   .cpuMilliCapacity = 96'000,
                                   .memoryMiBCapacity = 768 * 1024});
    if (!node) {
      fail(node.error().message);
    }
  }
  std::uint32_t id = 0;
  for (std::uint32_t n = 0; n < nodes; ++n) {
    const auto attached = static_cast<std::uint32_t>(rng.below(9));  // 0..8
    const auto loose =
        static_cast<std::uint32_t>(6 - std::min<std::uint32_t>(6, attached) + rng.below(2));
    for (std::uint32_t i = 0; i < attached + loose; ++i) {
      const std::string gid = named("gpu-", id++);
      auto g = s.addGpu(GpuSpec{.id = gid,
                                .uuid = std::string("GPU-").append(gid),
                                .pool = n % pools,
                                .node = i < attached ? n : kNoNode});
      if (!g) {
        fail(g.error().message);
      }
    }
  }
  return s;
}

// Runs the decision, then (untimed) places the pod: moves the deficit with our GPU choice,
// takes the GPUs and the CPU/memory. Keeps the cluster near 70% GPU use by ending pods.
void placePod(ClusterState& s, const PodRequest& pod, const NodeChoice& choice,
              const GpuPolicy& gpuPolicy, std::vector<LivePod>& live) {
  auto moved = chooseGpus(s, choice.node, choice.deficit, gpuPolicy);
  if (!moved) {
    fail("chooseGpus after a feasible decision: " + moved.error().message);
  }
  for (GpuIndex g : *moved) {
    if (!s.detachGpu(g) || !s.attachGpu(g, choice.node)) {
      fail("move failed");
    }
  }
  LivePod p{choice.node, pod, {}};
  for (GpuIndex g : s.nodeGpus(choice.node)) {
    if (p.gpus.size() == pod.gpus) {
      break;
    }
    if (s.gpu(g).free()) {
      p.gpus.push_back(g);
    }
  }
  for (GpuIndex g : p.gpus) {
    if (!s.allocateGpu(g)) {
      fail("allocate failed");
    }
  }
  if (p.gpus.size() != pod.gpus || !s.reserve(choice.node, pod.cpuMilli, pod.memoryMiB)) {
    fail("placement failed");
  }
  live.push_back(std::move(p));
}

void endPod(ClusterState& s, std::vector<LivePod>& live, SplitMix64& rng) {
  const std::size_t i = rng.below(live.size());
  for (GpuIndex g : live[i].gpus) {
    (void)s.releaseGpu(g);
  }
  (void)s.release(live[i].node, live[i].request.cpuMilli, live[i].request.memoryMiB);
  live[i] = std::move(live.back());
  live.pop_back();
}

struct NodeRow {
  std::uint32_t nodes;
  std::uint32_t pools;
  Stats ours;
  Stats naive;
  std::uint64_t decisions;
  std::uint64_t mismatches;
};

NodeRow benchNodeSelection(std::uint32_t nodes, std::uint32_t pools, std::uint32_t decisions,
                           std::uint32_t naiveEvery) {
  SplitMix64 rng(nodes * 131 + pools);
  ClusterState s = buildCluster(nodes, pools, rng);
  const NodePolicy policy = *findNodePolicy(Eq1NodePolicy::kName);
  const GpuPolicy gpuPolicy = *findGpuPolicy(UnattachedFirstGpuPolicy::kName);
  std::vector<LivePod> live;
  std::vector<double> ours;
  std::vector<double> naive;
  ours.reserve(decisions);
  std::uint64_t mismatches = 0;
  for (std::uint32_t d = 0; d < decisions; ++d) {
    // Stay around 70% GPU use: end a pod when the cluster is fuller than that.
    while (!live.empty() && s.freeGpus() * 10 < s.gpuCount() * 3) {
      endPod(s, live, rng);
    }
    const PodRequest pod{.cpuMilli = 1000 * (1 + rng.below(16)),
                         .memoryMiB = 1024 * (1 + rng.below(64)),
                         .gpus = static_cast<std::uint32_t>(1 + rng.below(8))};
    const auto start = Clock::now();
    auto choice = selectNode(s, pod, policy, Composability::Composable);
    ours.push_back(microsSince(start));
    if (d % naiveEvery == 0) {
      const auto naiveStart = Clock::now();
      auto other = naiveSelectNode(s, pod);
      naive.push_back(microsSince(naiveStart));
      if (other.ok() != choice.ok() || (choice.ok() && !(*other == *choice))) {
        ++mismatches;
      }
    }
    if (choice) {
      placePod(s, pod, *choice, gpuPolicy, live);
    } else if (!live.empty()) {
      endPod(s, live, rng);
    }
  }
  return NodeRow{nodes, pools, summarize(ours), summarize(naive), decisions, mismatches};
}

// ---------------------------------------------------------------- RT admission

struct RtRow {
  std::uint32_t held;
  Stats firstFit;
  Stats worstFit;
  Stats sumTest;
  double fillUs;  // time to admit all `held` reservations from empty (first-fit)
};

RtReservation randomReservation(SplitMix64& rng) {
  const std::uint64_t period = 1000 * (1 + rng.below(1000));  // 1..1000 ms
  const std::uint64_t runtime = std::max<std::uint64_t>(1, period * (1 + rng.below(10)) / 100);
  return RtReservation{runtime, period, static_cast<std::uint32_t>(1 + rng.below(2))};
}

RtRow benchRt(std::uint32_t held, std::uint32_t decisions) {
  std::vector<std::uint32_t> cpus(64);
  for (std::uint32_t i = 0; i < 64; ++i) {
    cpus[i] = i;
  }
  auto made = RtCoreState::create(RtBound{950'000, 1'000'000}, cpus);
  if (!made) {
    fail(made.error().message);
  }
  const RtPacking ff = *findRtPacking(FirstFitRtPacking::kName);
  const RtPacking wf = *findRtPacking(WorstFitRtPacking::kName);
  SplitMix64 rng(held);
  RtCoreState node = *made;
  const auto fillStart = Clock::now();
  std::uint32_t admitted = 0;
  for (std::uint32_t i = 0; i < held; ++i) {
    const RtReservation r = randomReservation(rng);
    auto placed = placeReservation(node, r, ff);
    if (placed && node.admit(r, *placed)) {
      ++admitted;
    }
  }
  const double fillUs = microsSince(fillStart);
  if (admitted != held) {
    fail("RT fill admitted " + std::to_string(admitted) + " of " + std::to_string(held));
  }
  std::vector<double> ffSamples;
  std::vector<double> wfSamples;
  std::vector<double> sumSamples;
  for (std::uint32_t d = 0; d < decisions; ++d) {
    const RtReservation r = randomReservation(rng);
    for (const RtPacking* packing : {&ff, &wf}) {
      const auto start = Clock::now();
      auto placed = placeReservation(node, r, *packing);
      const bool ok = placed && node.admit(r, *placed);
      (packing == &ff ? ffSamples : wfSamples).push_back(microsSince(start));
      if (ok && !node.release(r, *placed)) {
        fail("RT release failed");
      }
    }
    const auto start = Clock::now();
    volatile bool admits = utilizationSumAdmits(node, r);
    (void)admits;
    sumSamples.push_back(microsSince(start));
  }
  return RtRow{held, summarize(ffSamples), summarize(wfSamples), summarize(sumSamples), fillUs};
}

// ---------------------------------------------------------------- VNI

struct VniRow {
  std::uint32_t live;
  double oursOps;
  double seedOps;
};

VniRow benchVni(std::uint32_t live, std::uint32_t oursOps, std::uint32_t seedOps) {
  VniRangeOptions options;        // the default range 1024..65535 with 0, 1, 10 reserved
  options.cooldown = VniTime{0};  // the seed has no cooldown: compare allocation alone
  auto made = VniRange::create(options);
  if (!made) {
    fail(made.error().message);
  }
  VniRange range = std::move(*made);
  SplitMix64 rng(live);
  std::vector<Vni> held;
  held.reserve(live + 1);
  for (std::uint32_t i = 0; i < live; ++i) {
    auto v = range.allocate(VniTime{0});
    if (!v) {
      fail(v.error().message);
    }
    held.push_back(*v);
  }
  // One op = release a random live VNI + allocate one (the live count stays constant).
  auto start = Clock::now();
  for (std::uint32_t i = 0; i < oursOps; ++i) {
    const std::size_t k = rng.below(held.size());
    if (!range.release(held[k], VniTime{i})) {
      fail("VniRange release failed");
    }
    auto v = range.allocate(VniTime{i});
    if (!v) {
      fail(v.error().message);
    }
    held[k] = *v;
  }
  const double oursUs = microsSince(start);

  // The seed: the same live set as table rows; every acquire rebuilds the bool table.
  std::vector<Vni> rows;
  rows.reserve(live + 1);
  for (std::uint32_t i = 0; i < live; ++i) {
    rows.push_back(options.min + i);
  }
  start = Clock::now();
  for (std::uint32_t i = 0; i < seedOps; ++i) {
    const std::size_t k = rng.below(rows.size());
    rows[k] = rows.back();
    rows.pop_back();
    auto v = kc::bench::seedFirstFreeVni(rows, options.min, options.max);
    if (!v) {
      fail("seed VNI table exhausted");
    }
    rows.push_back(*v);
  }
  const double seedUs = microsSince(start);
  return VniRow{live, oursOps * 1e6 / oursUs, seedOps * 1e6 / seedUs};
}

void usage() {
  std::puts(
      "usage: bench_alloc [--quick] [--help]\n"
      "  Node selection (Eq. 1) ours vs naive over 100..20,000 nodes, RT admission on a\n"
      "  64-core node with 1..500 reservations, VNI allocation vs the seed at 1k/10k/50k live.\n"
      "  --quick  fewer decisions per case (finishes well under a minute)\n"
      "  The last stdout line is one JSON object: node_select_p99_us_5000,\n"
      "  vni_speedup_vs_seed_50k, rt_pack_p99_us.");
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--help" || arg == "-h") {
      usage();
      return 0;
    } else {
      std::fprintf(stderr, "bench_alloc: unknown argument '%s' (try --help)\n", argv[i]);
      return 2;
    }
  }
  const std::uint32_t scale = quick ? 1 : 5;

  std::printf("bench_alloc (%s mode)\n\n", quick ? "quick" : "full");
  std::printf("Node selection, paper Eq. 1 + multi-pool filter (one decision; 6 GPUs/node avg)\n");
  std::printf(
      "dec/s = decisions / total time; p50 x = naive p50 / ours p50 (robust to preemption)\n");
  std::printf("%7s %6s | %12s %9s %9s | %12s %9s %9s | %7s %s\n", "nodes", "pools", "ours dec/s",
              "p50 us", "p99 us", "naive dec/s", "p50 us", "p99 us", "p50 x", "same choice");
  double p99At5000 = 0;
  bool allSame = true;
  for (std::uint32_t nodes : {100u, 1000u, 5000u, 20000u}) {
    for (std::uint32_t pools : {4u, 32u}) {
      const std::uint32_t decisions = (nodes >= 20000 ? 1000 : 3000) * scale;
      const std::uint32_t naiveEvery = nodes >= 5000 ? 10 : 2;
      const NodeRow row = benchNodeSelection(nodes, pools, decisions, naiveEvery);
      const std::uint64_t compared = (decisions + naiveEvery - 1) / naiveEvery;
      std::printf("%7u %6u | %12.0f %9.2f %9.2f | %12.0f %9.2f %9.2f | %6.1fx %llu/%llu\n",
                  row.nodes, row.pools, row.ours.perSecond, row.ours.p50, row.ours.p99,
                  row.naive.perSecond, row.naive.p50, row.naive.p99,
                  row.ours.p50 > 0 ? row.naive.p50 / row.ours.p50 : 0.0,
                  static_cast<unsigned long long>(compared - row.mismatches),
                  static_cast<unsigned long long>(compared));
      if (nodes == 5000) {
        p99At5000 = std::max(p99At5000, row.ours.p99);
      }
      allSame = allSame && row.mismatches == 0;
    }
  }

  std::printf("\nRT admission on a 64-core node, bound 0.95 (one decision = place + commit)\n");
  std::printf("%5s | %9s %9s | %9s %9s | %9s %9s | %s\n", "held", "FF p50 us", "FF p99 us",
              "WF p50 us", "WF p99 us", "sum p50", "sum p99", "fill from empty (FF)");
  double rtP99 = 0;
  for (std::uint32_t held : {1u, 10u, 100u, 250u, 500u}) {
    const RtRow row = benchRt(held, 4000 * scale);
    std::printf("%5u | %9.3f %9.3f | %9.3f %9.3f | %9.3f %9.3f | %.0f us\n", row.held,
                row.firstFit.p50, row.firstFit.p99, row.worstFit.p50, row.worstFit.p99,
                row.sumTest.p50, row.sumTest.p99, row.fillUs);
    rtP99 = std::max(rtP99, row.firstFit.p99);
  }

  std::printf("\nVNI allocation in [1024, 65535), one op = release + allocate (cooldown off)\n");
  std::printf("%7s | %14s | %14s | %8s\n", "live", "VniRange ops/s", "seed ops/s", "ratio");
  double speedup50k = 0;
  for (std::uint32_t live : {1000u, 10000u, 50000u}) {
    const VniRow row = benchVni(live, 200'000 * scale, 400 * scale);
    const double ratio = row.seedOps > 0 ? row.oursOps / row.seedOps : 0;
    std::printf("%7u | %14.0f | %14.0f | %7.0fx\n", row.live, row.oursOps, row.seedOps, ratio);
    if (live == 50000) {
      speedup50k = ratio;
    }
  }

  std::printf("\nGoals: node selection p99 < 1000 us at 5,000 nodes: %s; VNI >= 20x at 50k: %s\n",
              p99At5000 < 1000 ? "met" : "MISSED", speedup50k >= 20 ? "met" : "MISSED");
  if (!allSame) {
    std::printf("ERROR: ours and the naive implementation chose different nodes\n");
  }
  std::printf(
      "{\"node_select_p99_us_5000\": %.3f, \"vni_speedup_vs_seed_50k\": %.1f, "
      "\"rt_pack_p99_us\": %.3f}\n",
      p99At5000, speedup50k, rtP99);
  return allSame ? 0 : 1;
}
