// bench_sched: kubecomp-sched's throughput at 5,000 nodes (issue 12).
//
// The kubecomp-sched binary (a child process, as deployed) against kube-apiserver-double (another
// process, TLS): 5,000 Nodes with 4 GPUs each in 50 GPUPools of 100 nodes, then pods that fit
// without reconfiguration (1 GPU, 100m CPU each; 10,000, or 3,000 with --quick) created by
// 8 writer threads as fast as the double takes them. Measured in one run:
//   - pods bound per second end to end: pods / (first create sent -> last binding seen on a
//     watch of our own);
//   - scheduling latency per pod: create sent -> binding seen on the watch (p50, p99);
//   - the decision-only rate: decisions / time inside alloc::placePod, from the scheduler's
//     own metrics (kubecomp_sched_decisions_total, kubecomp_sched_decision_seconds_total), so
//     what the double and the HTTP round trips cost is visible beside what is ours;
//   - the double's own pod-create rate (how fast the writers got their pods accepted);
//   - the scheduler's RSS (VmRSS, and VmHWM the peak) with every node and pod cached, and the
//     RSS growth per cached pod.
// Anchor printed beside it: kube-scheduler's scheduler_perf threshold, 680 pods/s at 5,000
// nodes (SchedulingBasic, a different machine). Goals: >= 2,000 pods/s, RSS < 200 MiB.
// The LAST stdout line is one JSON object with pods_per_s_5000_nodes, sched_p99_ms_5000_nodes,
// sched_rss_mib_5000_nodes, reconfig_overhead_ms and the other figures.
//
// In the same run, after the scheduler part: the software overhead of one 1-GPU
// reconfiguration at zero fabric latency (pod created -> kubelet-visible device -> bound, on
// real reconfig-mgr, device plugins, kubelet stand-ins and chassis-sim), the measurement of
// bench_reconfig (tools/bench/reconfig/reconfig_overhead.hpp), printed beside the original
// design's polling intervals. A failed measurement fails the run (exit 1), no figure is left out.
//
// First, with no process running: the decision cost of the queue policies that plan ahead
// (--queue-policy easy-backfill / slack-backfill, issue 17) at 5,000 nodes, side by side with
// the default backfill over the same queue (queue_pass_bench.hpp): per pass, per pod tested and
// pods decided per second (keys easy_pass_ms_5000_nodes, easy_decisions_per_s_5000_nodes, ...),
// and the easy pass again at 1,000 nodes, so a per-pod cost that grows with the cluster shows.
// Then gangs (issue 27, gang_bench.hpp): PodGroups of 8 two-GPU pods decided by the daemon's
// cache at 5,000 nodes, pool policy eq1, gang pods decided per second (gang_pods_per_s_5000_nodes).
// Then preemption (preempt_bench.hpp): a pod that fits nowhere among 10,000 running pods at 5,000
// nodes, the cache's whole decision per preempting pod (preempt_decision_p99_ms).

#include <fmt/core.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "libcore/api/names.hpp"
#include "libcore/kube/client.hpp"
#include "libcore/kube/resource.hpp"
#include "libcore/net/http_client.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/manifests.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/kube/double_process.hpp"
#include "tools/bench/bench_util.hpp"
#include "tools/bench/reconfig/reconfig_overhead.hpp"
#include "tools/bench/sched/bench_cluster.hpp"
#include "tools/bench/sched/gang_bench.hpp"
#include "tools/bench/sched/preempt_bench.hpp"
#include "tools/bench/sched/queue_pass_bench.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

using kc::bench::benchNode;
using kc::bench::benchNodeName;
using kc::bench::benchPool;
using kc::bench::parallel;
using kc::bench::percentile;

namespace {

const kc::kube::GroupVersionResource kPools = kc::api::gvr::gpuPools();
constexpr int kNodes = 5'000;
constexpr int kNodesPerPool = 100;
constexpr int kGpusPerNode = 4;
constexpr double kAnchorPodsPerS = 680;

[[noreturn]] void die(const std::string& what) {
  throw std::runtime_error(what);
}

json pod(int i) {
  json res = {{"cpu", "100m"}, {"memory", "128Mi"}, {kc::api::kGpuResource, "1"}};
  return {{"metadata", {{"name", fmt::format("pod-{:05d}", i)}, {"namespace", "bench"}}},
          {"spec",
           {{"schedulerName", "kubecomp-sched"},
            {"containers",
             {{{"name", "main"},
               {"image", "registry.local/train:1"},
               {"resources", {{"requests", res}, {"limits", res}}}}}}}}};
}

// VmRSS and VmHWM of a process, MiB.
std::pair<double, double> rssMib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  double rss = 0;
  double hwm = 0;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      rss = std::stod(line.substr(6)) / 1024.0;
    } else if (line.rfind("VmHWM:", 0) == 0) {
      hwm = std::stod(line.substr(6)) / 1024.0;
    }
  }
  return {rss, hwm};
}

// CPU time (user + system) of a process, seconds.
double cpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces) start after the last ')'.
  std::istringstream rest(text.substr(text.rfind(')') + 2));
  std::string f;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> f; ++i) {
    if (i == 14 || i == 15) {
      ticks += std::stod(f);
    }
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Busy and total CPU seconds of the whole machine (/proc/stat "cpu" line).
std::pair<double, double> machineCpu() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  in >> cpu;
  double v[8] = {};
  for (double& x : v) {
    in >> x;
  }
  const double idle = v[3] + v[4];
  double total = 0;
  for (double x : v) {
    total += x;
  }
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  return {(total - idle) / hz, total / hz};
}

double metricValue(const std::string& text, const std::string& name) {
  std::size_t at = 0;
  while ((at = text.find(name, at)) != std::string::npos) {
    if ((at == 0 || text[at - 1] == '\n') && at + name.size() < text.size() &&
        (text[at + name.size()] == ' ' || text[at + name.size()] == '{')) {
      const auto sp = text.find(' ', at);
      return std::stod(text.substr(sp + 1, text.find('\n', sp) - sp - 1));
    }
    at += name.size();
  }
  return NAN;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_sched: kubecomp-sched pods bound per second, latency and RSS at 5,000 nodes"};
  bool quick = false;
  int pods = 0;
  int writers = 8;
  int bindWorkers = 8;
  std::string schedExe = KC_SCHED_EXE;
  app.add_flag("--quick", quick, "3,000 pods instead of 10,000 (finishes well under a minute)");
  app.add_option("--pods", pods, "pods to schedule (default 10,000; 3,000 with --quick)");
  app.add_option("--writers", writers, "threads creating pods")->capture_default_str();
  app.add_option("--bind-workers", bindWorkers, "the scheduler's --bind-workers")
      ->capture_default_str();
  app.add_option("--sched", schedExe, "kubecomp-sched binary")->capture_default_str();
  int paced = 0;
  double pacedRate = 1000;
  app.add_option("--paced", paced, "pods created at --paced-rate after the burst (default pods/5)");
  app.add_option("--paced-rate", pacedRate, "pods/s of the paced phase")->capture_default_str();
  int reconfigPods = 0;
  app.add_option("--reconfig-pods", reconfigPods,
                 "1-GPU reconfigurations measured (default 20; 5 with --quick)")
      ->check(CLI::Range(1, 60));
  int queuePasses = 0;
  int queueWaiting = 300;
  app.add_option("--queue-passes", queuePasses,
                 "measured passes per queue policy (default 9; 3 with --quick)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--queue-waiting", queueWaiting, "pods waiting behind the head in the queue pass")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  bool queueOnly = false;
  app.add_flag("--queue-only", queueOnly,
               "measure the queue pass only (no processes; prints its JSON keys)");
  CLI11_PARSE(app, argc, argv);
  if (queuePasses == 0) {
    queuePasses = quick ? 3 : 9;
  }
  if (reconfigPods == 0) {
    reconfigPods = quick ? kc::bench::kReconfigPodsQuick : kc::bench::kReconfigPodsFull;
  }
  if (pods <= 0) {
    pods = quick ? 3'000 : 10'000;
  }
  if (paced <= 0) {
    paced = pods / 5;
  }
  if (pods + paced > kNodes * kGpusPerNode || pacedRate <= 0) {
    std::cerr << "at most " << kNodes * kGpusPerNode << " pods fit without reconfiguration\n";
    return 2;
  }
  try {
    json queueOut;
    {
      kc::bench::QueuePassScenario sc;
      sc.waiting = static_cast<std::uint32_t>(queueWaiting);
      sc.passes = queuePasses;
      const auto big = kc::bench::measureQueuePasses(sc);
      big.print(std::cout);
      big.addTo(queueOut);
      sc.nodes = 1'000;
      const auto small = kc::bench::measureQueuePasses(sc);
      std::cout << fmt::format(
          "  easy-backfill at {} nodes: {:.2f} ms a pass, {:.3f} ms per pod tested ({} tested)\n",
          sc.nodes, small.easy.passMs, small.easy.msPerTested(), small.easy.tested);
      queueOut["easy_pass_ms_1000_nodes"] = std::round(small.easy.passMs * 1000) / 1000;
      queueOut["easy_ms_per_tested_1000_nodes"] =
          std::round(small.easy.msPerTested() * 1000) / 1000;
      // Gangs (issue 27): PodGroups of 8 decided by the daemon's cache at 5,000 nodes.
      kc::bench::GangScenario gangs;
      gangs.gangs = quick ? 800 : 1'200;
      const auto gangFigures = kc::bench::measureGangs(gangs);
      gangFigures.print(std::cout);
      gangFigures.addTo(queueOut);
      // Preemption (issue 27): a pod that fits nowhere at 5,000 nodes, 10,000 running pods.
      kc::bench::PreemptScenario preempt;
      preempt.samples = quick ? 100 : 300;
      const auto preemptFigures = kc::bench::measurePreemption(preempt);
      preemptFigures.print(std::cout);
      preemptFigures.addTo(queueOut);
      std::cout.flush();
    }
    if (queueOnly) {
      std::cout << queueOut.dump() << std::endl;
      return 0;
    }
    json out;
    {
      kc::testing::TempDir dir;
      kc::kube::testing::DoubleProcess api(KC_APISERVER_DOUBLE_EXE, dir.path());
      kc::kube::KubeClientOptions co;
      co.qps = 0;
      auto client = kc::kube::KubeClient::create(api.config(), co);
      if (!client) {
        die(client.error().message);
      }
      auto& c = **client;
      kc::testing::installCrd(
          c, kc::testing::loadYamlFile(KC_SOURCE_DIR
                                       "/charts/kubecomp/crds/gpupools.kubecomp.io.yaml"));
      for (const char* ns : {"bench", "kube-system"}) {
        if (auto r = c.create(kc::kube::gvr::namespaces(), "", {{"metadata", {{"name", ns}}}});
            !r && !r.error().isAlreadyExists()) {
          die(r.error().message);
        }
      }
      const auto setup0 = Clock::now();
      parallel(kNodes, 4, [&](int i) {
        if (auto r = c.create(kc::kube::gvr::nodes(), "", benchNode(i, kGpusPerNode)); !r) {
          die("node: " + r.error().message);
        }
      });
      parallel(kNodes / kNodesPerPool, 4, [&](int p) {
        json obj = benchPool(p, kNodesPerPool, kGpusPerNode);
        json status = obj["status"];
        obj.erase("status");
        if (auto r = c.create(kPools, "", obj); !r) {
          die("pool: " + r.error().message);
        }
        if (auto r = c.patch(kPools, "", obj["metadata"]["name"], kc::kube::PatchType::kMerge,
                             {{"status", status}}, "status");
            !r) {
          die("pool status: " + r.error().message);
        }
      });
      std::cout << fmt::format("setup: {} nodes, {} GPUPools, {} GPUs in {:.1f} s\n", kNodes,
                               kNodes / kNodesPerPool, kNodes * kGpusPerNode,
                               std::chrono::duration<double>(Clock::now() - setup0).count());

      // The scheduler, as deployed (leader election on).
      kc::testing::ChildProcess sched({schedExe, "--kubeconfig", api.kubeconfigPath(), "--port",
                                       "0", "--port-file", dir.file("port"), "--kube-api-qps", "0",
                                       "--bind-workers", std::to_string(bindWorkers), "--log-level",
                                       "warn"});
      sched.waitUntil([&] { return kc::testing::readPortFile(dir.file("port")).has_value(); }, 30s,
                      "port file");
      kc::net::ClientOptions ho;
      ho.baseUrl =
          "http://127.0.0.1:" + std::to_string(*kc::testing::readPortFile(dir.file("port")));
      auto http = kc::net::HttpClient::create(ho);
      if (!http) {
        die(http.error().message);
      }
      auto metrics = [&] {
        auto r = (*http)->request("GET", "/metrics");
        return r ? r->body : std::string();
      };
      sched.waitUntil([&] { return metricValue(metrics(), "kubecomp_sched_leader") == 1.0; }, 60s,
                      "leadership");
      const auto [rssEmpty, hwmEmpty] = rssMib(sched.pid());
      (void)hwmEmpty;

      // Our own watch sees each binding. Phase 1 (burst): `pods` pods created as fast as the
      // writers can; phase 2 (paced): `paced` more at `pacedRate` pods/s, below the scheduler's
      // capacity, so their latency is the scheduling latency without a queue in front.
      const int total = pods + paced;
      std::vector<Clock::time_point> sent(static_cast<std::size_t>(total));
      std::vector<Clock::time_point> bound(static_cast<std::size_t>(total));
      std::atomic<int> boundCount{0};
      kc::net::CancelToken cancel;
      auto list = c.list(kc::kube::gvr::pods(), "bench");
      if (!list) {
        die(list.error().message);
      }
      std::thread watcher([&] {
        kc::kube::ListOptions lo;
        lo.resourceVersion = list->resourceVersion;
        lo.timeoutSeconds = 600;
        auto ended = c.watch(
            kc::kube::gvr::pods(), "bench", lo,
            [&](kc::kube::WatchEvent&& ev) {
              const auto now = Clock::now();
              const auto& spec = ev.object["spec"];
              if (ev.type == "MODIFIED" && spec.contains("nodeName") &&
                  spec["nodeName"].is_string()) {
                const std::string name = ev.object["metadata"]["name"];
                const int i = std::stoi(name.substr(4));
                if (bound[static_cast<std::size_t>(i)] == Clock::time_point{}) {
                  bound[static_cast<std::size_t>(i)] = now;
                  ++boundCount;
                }
              }
              return boundCount.load() < total;
            },
            &cancel);
        if (!ended && !cancel.cancelled()) {
          std::cerr << "watch ended: " << ended.error().message << "\n";
        }
      });
      auto waitBound = [&](int n, const char* phase) {
        const auto limit = Clock::now() + 120s;
        while (boundCount.load() < n && Clock::now() < limit) {
          std::this_thread::sleep_for(2ms);
        }
        if (boundCount.load() < n) {
          cancel.cancel();
          watcher.join();
          die(fmt::format("{}: only {} of {} pods bound within the limit", phase, boundCount.load(),
                          n));
        }
      };
      auto create = [&](int i) {
        sent[static_cast<std::size_t>(i)] = Clock::now();
        if (auto r = c.create(kc::kube::gvr::pods(), "bench", pod(i)); !r) {
          die("pod: " + r.error().message);
        }
      };

      const double schedCpu0 = cpuSeconds(sched.pid());
      const auto [busy0, all0] = machineCpu();
      const auto t0 = Clock::now();
      std::atomic<Clock::time_point::rep> lastCreated{0};
      parallel(pods, writers, [&](int i) {
        create(i);
        const auto now = Clock::now().time_since_epoch().count();
        auto prev = lastCreated.load();
        while (prev < now && !lastCreated.compare_exchange_weak(prev, now)) {
        }
      });
      const double createS =
          std::chrono::duration<double>(Clock::time_point(Clock::duration(lastCreated.load())) - t0)
              .count();
      waitBound(pods, "burst");
      const auto last = *std::max_element(bound.begin(), bound.begin() + pods);
      const double e2eS = std::chrono::duration<double>(last - t0).count();
      const double schedCpu = cpuSeconds(sched.pid()) - schedCpu0;
      const auto [busy1, all1] = machineCpu();
      const double machineCores = (busy1 - busy0) / e2eS;
      const double cores = (all1 - all0) / e2eS;

      // The burst's Events are still being written (one recorder thread; Events are for people and
      // may lag): the paced phase starts once they are, so it measures scheduling alone.
      const auto drain0 = Clock::now();
      sched.waitUntil(
          [&] { return metricValue(metrics(), "kubecomp_sched_events_pending") == 0.0; }, 120s,
          "events written");
      const double eventDrainS = std::chrono::duration<double>(Clock::now() - drain0).count();
      // Paced: 4 threads, each on its own schedule, together pacedRate pods/s.
      {
        const auto p0 = Clock::now() + 50ms;
        std::vector<std::thread> ts;
        for (int t = 0; t < 4; ++t) {
          ts.emplace_back([&, t] {
            for (int k = t; k < paced; k += 4) {
              std::this_thread::sleep_until(
                  p0 + std::chrono::microseconds(static_cast<std::int64_t>(k * 1e6 / pacedRate)));
              create(pods + k);
            }
          });
        }
        for (auto& t : ts) {
          t.join();
        }
      }
      waitBound(total, "paced");
      watcher.join();
      auto latencies = [&](int from, int to) {
        std::vector<double> ms;
        for (int i = from; i < to; ++i) {
          ms.push_back(std::chrono::duration<double, std::milli>(
                           bound[static_cast<std::size_t>(i)] - sent[static_cast<std::size_t>(i)])
                           .count());
        }
        return ms;
      };
      const auto burstMs = latencies(0, pods);
      const auto pacedMs = latencies(pods, total);
      const std::string m = metrics();
      const double decisions = metricValue(m, "kubecomp_sched_decisions_total");
      const double decisionS = metricValue(m, "kubecomp_sched_decision_seconds_total");
      const auto [rss, hwm] = rssMib(sched.pid());
      const double podsPerS = pods / e2eS;
      const double decisionRate = decisions / decisionS;
      const double createRate = pods / createS;
      const double kibPerPod = (rss - rssEmpty) * 1024.0 / total;

      std::cout << fmt::format("kubecomp-sched at {} nodes, {} pods in a burst + {} paced ({}):\n",
                               kNodes, pods, paced, quick ? "quick" : "full");
      std::cout << fmt::format(
          "  bound end to end       {:8.0f} pods/s  (anchor: kube-scheduler scheduler_perf {:.0f} "
          "pods/s at 5,000 nodes, different machine; goal >= 2,000)\n",
          podsPerS, kAnchorPodsPerS);
      std::cout << fmt::format(
          "  decision only          {:8.0f} pods/s  ({:.0f} placePod calls, {:.3f} ms each)\n",
          decisionRate, decisions, decisionS * 1000 / decisions);
      std::cout << fmt::format("  double's pod creates   {:8.0f} pods/s  ({} writers)\n",
                               createRate, writers);
      std::cout << fmt::format(
          "  CPU during the burst   scheduler {:.2f} ms per pod ({:.2f} cores), machine {:.2f} of "
          "{:.0f} cores busy (double, bench and scheduler share them)\n",
          schedCpu * 1000 / pods, schedCpu / e2eS, machineCores, cores);
      std::cout << fmt::format(
          "  latency, paced {:.0f}/s  p50 {:.1f} ms, p99 {:.1f} ms (create sent -> binding seen)\n",
          pacedRate, percentile(pacedMs, 0.50), percentile(pacedMs, 0.99));
      std::cout << fmt::format(
          "  Events after the burst {:.1f} s until every Scheduled event was written\n",
          eventDrainS);
      std::cout << fmt::format(
          "  latency, burst         p50 {:.1f} ms, p99 {:.1f} ms (mostly the queue: pods arrive "
          "{:.1f}x faster than they are bound)\n",
          percentile(burstMs, 0.50), percentile(burstMs, 0.99), createRate / podsPerS);
      std::cout << fmt::format(
          "  scheduler RSS          {:.1f} MiB (peak {:.1f}; {:.1f} MiB with nodes and pools only; "
          "{:.2f} KiB per cached pod; goal < 200 MiB)\n",
          rss, hwm, rssEmpty, kibPerPod);
      sched.terminate(5s);
      auto r1 = [](double v) { return std::round(v * 10) / 10; };
      out = {{"pods_per_s_5000_nodes", std::round(podsPerS)},
             {"sched_p50_ms_5000_nodes", r1(percentile(pacedMs, 0.50))},
             {"sched_p99_ms_5000_nodes", r1(percentile(pacedMs, 0.99))},
             {"sched_burst_p50_ms_5000_nodes", r1(percentile(burstMs, 0.50))},
             {"sched_burst_p99_ms_5000_nodes", r1(percentile(burstMs, 0.99))},
             {"sched_rss_mib_5000_nodes", r1(hwm)},
             {"decision_pods_per_s_5000_nodes", std::round(decisionRate)},
             {"double_creates_per_s", std::round(createRate)},
             {"sched_cpu_ms_per_pod", std::round(schedCpu * 1000 / pods * 1000) / 1000},
             {"cache_kib_per_pod", std::round(kibPerPod * 100) / 100},
             {"event_drain_s", r1(eventDrainS)},
             {"pods", pods},
             {"paced_pods", paced},
             {"anchor_kube_scheduler_pods_per_s", kAnchorPodsPerS}};
    }
    // The same run's second figure, after the 5,000-node double and its scheduler are gone: one
    // 1-GPU reconfiguration end to end (the measurement bench_reconfig runs on its own).
    std::cout << fmt::format(
        "1-GPU reconfiguration at fabric latency 0, {} pods, one move each, stand-in status "
        "sync {}:\n",
        reconfigPods, kc::bench::kReconfigStatusSync);
    std::cout.flush();  // before the cluster's children write to the same stdout
    const auto rc = [&] {
      try {
        return kc::bench::measureReconfigOverhead(reconfigPods, kc::bench::kReconfigStatusSync);
      } catch (const std::exception& e) {
        die(std::string("reconfig_overhead_ms not measured: ") + e.what());
      }
    }();
    rc.print(std::cout);
    out["reconfig_overhead_ms"] = rc.overheadMs();
    out["reconfig_overhead_p99_ms"] = rc.toJson().at("reconfig_overhead_p99_ms");
    out["reconfig_pods"] = reconfigPods;
    out["anchor_original_polling_ms"] = kc::bench::kAnchorOriginalPollingMs;
    for (const auto& [k, v] : queueOut.items()) {
      out[k] = v;
    }
    std::cout << out.dump() << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "bench_sched: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
