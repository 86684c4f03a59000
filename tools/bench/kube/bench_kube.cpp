// bench_kube: the Kubernetes client against kube-apiserver-double (started here, TLS + token).
//  1. LIST of 50,000 pods: time and peak memory (getrusage of a child process per variant):
//     paged limit=500 with streaming item parsing (what the informer does), one unpaged
//     streamed LIST, and the naive way (whole body buffered, then one JSON document).
//  2. Informer throughput: events/s applied to the cache while writers change objects, and
//     the watch-path ceiling (replaying the same events from the history window into a Store).
// The LAST stdout line is one JSON object:
//   {"informer_events_per_s":..,"list_50k_pods_s":..,"list_50k_pods_peak_mib":..}

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "libcore/kube/client.hpp"
#include "libcore/kube/informer.hpp"
#include "tests/support/child_process.hpp"
#include "tests/unit/kube/double_process.hpp"
#include "tests/support/temp_dir.hpp"

using namespace kc::kube;
using Clock = std::chrono::steady_clock;

namespace {

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::unique_ptr<KubeClient> makeClient(const ClusterConfig& cfg) {
  KubeClientOptions o;
  o.qps = 0;  // measure the client and server, not the rate limiter
  auto c = KubeClient::create(cfg, o);
  if (!c) {
    throw std::runtime_error("client: " + c.error().message);
  }
  return std::move(c).value();
}

// A pod about the size of a real one (~1.3 KB of JSON).
nlohmann::json benchPod(const std::string& ns, int i) {
  const std::string name = fmt::format("pod-{:06d}", i);
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name},
            {"namespace", ns},
            {"labels",
             {{"app", "trainer"}, {"tier", i % 2 ? "batch" : "online"}, {"pool", fmt::format("pool-{}", i % 16)}}},
            {"annotations", {{"kubecomp.io/demand", "4"}, {"kubecomp.io/owner", fmt::format("team-{}", i % 40)}}}}},
          {"spec",
           {{"schedulerName", "kubecomp-sched"},
            {"nodeName", fmt::format("node-{:04d}", i % 1000)},
            {"restartPolicy", "Never"},
            {"containers",
             {{{"name", "main"},
               {"image", "registry.example.org/ml/trainer:2026.11"},
               {"args", {"--epochs=10", "--batch=256", fmt::format("--data=/data/set-{}", i % 100)}},
               {"env", {{{"name", "RANK"}, {"value", std::to_string(i % 8)}}, {{"name", "WORLD"}, {"value", "8"}}}},
               {"resources",
                {{"requests", {{"cpu", "4"}, {"memory", "16Gi"}, {"kubecomp.io/gpu", "4"}}},
                 {"limits", {{"cpu", "8"}, {"memory", "32Gi"}, {"kubecomp.io/gpu", "4"}}}}},
               {"volumeMounts", {{{"name", "data"}, {"mountPath", "/data"}}}}}}},
            {"volumes", {{{"name", "data"}, {"emptyDir", nlohmann::json::object()}}}}}}};
}

void seedPods(const ClusterConfig& cfg, const std::string& ns, int count, int threads) {
  std::atomic<int> next{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&] {
      auto c = makeClient(cfg);
      for (int i = next++; i < count; i = next++) {
        auto r = c->create(gvr::pods(), ns, benchPod(ns, i));
        if (!r && !r.error().isAlreadyExists()) {
          ++failed;
        }
      }
    });
  }
  for (auto& t : ts) {
    t.join();
  }
  if (failed > 0) {
    throw std::runtime_error(fmt::format("seeding: {} pod creates failed", failed.load()));
  }
}

// Child-process side of a LIST variant: prints "<seconds> <items>".
int listChild(const std::string& kubeconfig, const std::string& mode, const std::string& ns) {
  auto cfg = loadKubeconfig({kubeconfig});
  if (!cfg) {
    std::fprintf(stderr, "%s\n", cfg.error().message.c_str());
    return 2;
  }
  auto client = makeClient(*cfg);
  std::vector<ObjectPtr> kept;  // hold the result like an informer cache would
  const auto t0 = Clock::now();
  if (mode == "baseline") {
    (void)client->get(gvr::namespaces(), "", ns);
  } else if (mode == "paged" || mode == "single") {
    ListOptions lo;
    lo.limit = mode == "paged" ? 500 : 0;
    for (;;) {
      auto meta = client->listEach(gvr::pods(), ns, lo, [&kept](nlohmann::json&& item) {
        kept.push_back(std::make_shared<const nlohmann::json>(std::move(item)));
      });
      if (!meta) {
        std::fprintf(stderr, "list: %s\n", meta.error().describe().c_str());
        return 3;
      }
      if (meta->continueToken.empty()) {
        break;
      }
      lo.continueToken = meta->continueToken;
    }
  } else if (mode == "naive") {
    auto r = client->call("GET", "/api/v1/namespaces/" + ns + "/pods");
    if (!r) {
      std::fprintf(stderr, "list: %s\n", r.error().describe().c_str());
      return 3;
    }
    for (auto& item : (*r)["items"]) {
      kept.push_back(std::make_shared<const nlohmann::json>(std::move(item)));
    }
  } else {
    return 4;
  }
  std::printf("%.6f %zu\n", std::chrono::duration<double>(Clock::now() - t0).count(), kept.size());
  return 0;
}

struct ListResult {
  double seconds = 0;
  std::size_t items = 0;
  double peakMib = 0;
};

ListResult runListChild(const std::string& self, const std::string& kubeconfig, const std::string& mode,
                        const std::string& ns) {
  kc::testing::ChildProcess child({self, "--list-child", mode, "--kubeconfig", kubeconfig, "--namespace", ns},
                                 kc::testing::ChildOutput::kCapture);
  const std::string out = child.readAll();
  if (child.wait() != 0) {
    throw std::runtime_error("list child '" + mode + "' failed");
  }
  const rusage ru = *child.usage();
  ListResult r;
  if (std::sscanf(out.c_str(), "%lf %zu", &r.seconds, &r.items) != 2) {
    throw std::runtime_error("list child '" + mode + "' printed nothing");
  }
  r.peakMib = static_cast<double>(ru.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
  return r;
}

nlohmann::json smallObject(const std::string& ns, const std::string& name, int v) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"labels", {{"bench", "informer"}}}}},
          {"data", {{"v", std::to_string(v)}}}};
}

struct InformerResult {
  double eventsPerS = 0;
  double writesPerS = 0;
  double replayPerS = 0;
  std::uint64_t events = 0;
};

InformerResult runInformer(const ClusterConfig& cfg, int events, int writers) {
  const std::string ns = "bench-informer";
  auto admin = makeClient(cfg);
  (void)admin->create(gvr::namespaces(), "",
                      {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}});
  auto readerClient = makeClient(cfg);
  InformerOptions io;
  io.resource = gvr::configMaps();
  io.ns = ns;
  Informer informer(*readerClient, io);
  std::atomic<std::uint64_t> handled{0};
  informer.addHandler({[&](const ObjectPtr&) { ++handled; }, [&](const ObjectPtr&, const ObjectPtr&) { ++handled; },
                       [&](const ObjectPtr&) { ++handled; }});
  informer.start();
  if (!informer.waitForSync(std::chrono::seconds(30))) {
    throw std::runtime_error("informer did not sync");
  }
  const std::string startRv = informer.lastResourceVersion();
  // Each writer: create, update, update, delete per object (4 events).
  const int perWriter = events / writers / 4;
  const auto t0 = Clock::now();
  std::vector<std::thread> ts;
  std::atomic<int> failed{0};
  for (int w = 0; w < writers; ++w) {
    ts.emplace_back([&, w] {
      auto c = makeClient(cfg);
      for (int i = 0; i < perWriter; ++i) {
        const std::string name = fmt::format("cm-{}-{}", w, i);
        auto obj = c->create(gvr::configMaps(), ns, smallObject(ns, name, 0));
        if (!obj) {
          ++failed;
          continue;
        }
        for (int u = 1; u <= 2; ++u) {
          (*obj)["data"]["v"] = std::to_string(u);
          auto next = c->update(gvr::configMaps(), ns, *obj);
          if (!next) {
            ++failed;
            break;
          }
          obj = std::move(next);
        }
        if (!c->remove(gvr::configMaps(), ns, name)) {
          ++failed;
        }
      }
    });
  }
  for (auto& t : ts) {
    t.join();
  }
  const double writeSeconds = secondsSince(t0);
  const auto expected = static_cast<std::uint64_t>(perWriter) * static_cast<std::uint64_t>(writers) * 4;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (informer.stats().eventsApplied < expected && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const double applySeconds = secondsSince(t0);
  InformerResult r;
  r.events = informer.stats().eventsApplied;
  informer.stop();
  if (failed > 0 || r.events < expected || handled.load() < expected) {
    throw std::runtime_error(fmt::format("informer run: {} write failures, {} of {} events applied", failed.load(),
                                         r.events, expected));
  }
  r.eventsPerS = static_cast<double>(r.events) / applySeconds;
  r.writesPerS = static_cast<double>(expected) / writeSeconds;

  // Ceiling of the client side: replay the same events from the history window through the
  // watch path (framing, JSON parse, store apply) without waiting for writers.
  Store replay;
  std::uint64_t applied = 0;
  ListOptions wo;
  wo.resourceVersion = startRv;
  wo.timeoutSeconds = 30;
  const auto t1 = Clock::now();
  auto st = readerClient->watch(gvr::configMaps(), ns, wo, [&](WatchEvent&& ev) {
    auto obj = std::make_shared<const nlohmann::json>(std::move(ev.object));
    if (ev.type == "DELETED") {
      replay.remove(std::move(obj));
    } else if (ev.type == "ADDED" || ev.type == "MODIFIED") {
      replay.add(std::move(obj));
    } else {
      return ev.type != "ERROR";
    }
    return ++applied < expected;
  });
  if (applied == expected) {
    r.replayPerS = static_cast<double>(applied) / secondsSince(t1);
  } else {
    std::cout << "  (replay from the history window incomplete: " << applied << " events, "
              << (st ? std::string("stream ended") : st.error().describe()) << ")\n";
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_kube: Kubernetes client LIST and informer throughput against kube-apiserver-double"};
  bool quick = false;
  std::string doubleExe = KC_APISERVER_DOUBLE_EXE;
  int pods = 50'000;
  int events = 0;
  std::string childMode;
  std::string childKubeconfig;
  std::string childNs = "bench";
  app.add_flag("--quick", quick, "fewer informer events (finishes well under a minute)");
  app.add_option("--double", doubleExe, "path of kube-apiserver-double");
  app.add_option("--pods", pods, "pods to LIST (default 50000)");
  app.add_option("--events", events, "informer events (default 8000 quick, 40000 full)");
  app.add_option("--list-child", childMode, "internal: run one LIST variant and exit")->group("");
  app.add_option("--kubeconfig", childKubeconfig, "internal")->group("");
  app.add_option("--namespace", childNs, "internal")->group("");
  CLI11_PARSE(app, argc, argv);
  if (!childMode.empty()) {
    return listChild(childKubeconfig, childMode, childNs);
  }
  if (events <= 0) {
    events = quick ? 8'000 : 40'000;
  }
  try {
    const std::string self = std::filesystem::canonical("/proc/self/exe").string();
    kc::testing::TempDir dir;
    kc::kube::testing::DoubleProcess api(doubleExe, dir.path().string(),
                                         {"--history-window", std::to_string(std::max(events * 2, 20'000))});
    const auto& cfg = api.config();
    std::cout << "bench_kube: kube-apiserver-double at " << cfg.server << " (TLS, bearer token)"
              << (quick ? ", quick mode" : "") << "\n";

    auto admin = makeClient(cfg);
    (void)admin->create(gvr::namespaces(), "",
                        {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "bench"}}}});
    auto t0 = Clock::now();
    seedPods(cfg, "bench", pods, 6);
    const double seedS = secondsSince(t0);
    std::cout << fmt::format("seeded {} pods in {:.1f} s ({:.0f} creates/s, 6 writers)\n", pods, seedS,
                             pods / seedS);

    std::cout << fmt::format("\nLIST of {} pods (each variant in its own process; peak = max RSS of that process)\n",
                             pods);
    const auto base = runListChild(self, api.kubeconfigPath(), "baseline", "bench");
    std::cout << fmt::format("  {:<46} {:>8} {:>8} {:>10}\n", "variant", "items", "time s", "peak MiB");
    std::cout << fmt::format("  {:<46} {:>8} {:>8} {:>10.1f}\n", "baseline (client only, one GET)", "-", "-",
                             base.peakMib);
    ListResult paged;
    for (const auto& [mode, label] : std::vector<std::pair<std::string, std::string>>{
             {"paged", "paged limit=500, items parsed as they stream"},
             {"single", "one LIST, items parsed as they stream"},
             {"naive", "one LIST, whole body buffered then parsed"}}) {
      auto r = runListChild(self, api.kubeconfigPath(), mode, "bench");
      if (r.items != static_cast<std::size_t>(pods)) {
        throw std::runtime_error(fmt::format("{} LIST returned {} of {} pods", mode, r.items, pods));
      }
      std::cout << fmt::format("  {:<46} {:>8} {:>8.2f} {:>10.1f}\n", label, r.items, r.seconds, r.peakMib);
      if (mode == "paged") {
        paged = r;
      }
    }

    std::cout << fmt::format("\nInformer on configmaps, {} events (create, update, update, delete per object)\n",
                             events);
    auto inf = runInformer(cfg, events, 4);
    std::cout << fmt::format("  {:<42} {:>10.0f} events/s written\n", "writers (4 clients)", inf.writesPerS);
    std::cout << fmt::format("  {:<42} {:>10.0f} events/s applied to the cache\n", "informer, live while writers run",
                             inf.eventsPerS);
    if (inf.replayPerS > 0) {
      std::cout << fmt::format("  {:<42} {:>10.0f} events/s applied to a store\n",
                               "watch replay from history (client cap)", inf.replayPerS);
    }
    std::cout << "  (the live figure is bounded by how fast the double accepts writes)\n";
    nlohmann::json out = {{"informer_events_per_s", std::round(inf.eventsPerS)},
                          {"list_50k_pods_s", std::round(paged.seconds * 1000) / 1000},
                          {"list_50k_pods_peak_mib", std::round(paged.peakMib * 10) / 10}};
    std::cout << out.dump() << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_kube: " << e.what() << "\n";
    return 1;
  }
}
