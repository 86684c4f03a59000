// bench_kube: the Kubernetes client against kube-apiserver-double (started here, TLS + token).
//  1. LIST of 50,000 pods, each variant in its own child process (time, peak RSS from
//     getrusage): an Informer's initial paged LIST (limit=500, items parsed as they stream)
//     with the scheduler transform (kube/transform.hpp schedulerPodFields) and without any,
//     then the bare client's paged, unpaged and naive (whole body buffered) LISTs. The
//     informer variants also report the cache's resident size per pod (RSS after sync minus
//     RSS before the informer started, after malloc_trim).
//  2. The informer's apply rate on its own: events already queued in a FakeListerWatcher
//     (tests/support/fakes) are released at once; the informer thread (one core) applies them
//     (transform, store, handlers). Separately, the double's write rate (4 clients writing
//     configmaps) with a live informer following it, and the watch path's replay rate from the
//     double's history window (HTTP framing and JSON parsing included).
// The LAST stdout line is one JSON object: {"informer_apply_events_per_s":..,
//   "double_write_events_per_s":..,"list_50k_pods_s":..,"list_50k_pods_peak_mib":..,
//   "cache_kib_per_pod":..}; the list and cache keys are of the scheduler-transform variant.

#include <fmt/core.h>
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>
#include <vector>

#include "libcore/api/names.hpp"
#include "libcore/kube/client.hpp"
#include "libcore/kube/informer.hpp"
#include "libcore/kube/transform.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/fakes/fake_lister_watcher.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/kube/double_process.hpp"

using namespace kc::kube;
using Clock = std::chrono::steady_clock;

namespace {

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

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
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name},
        {"namespace", ns},
        {"labels",
         {{"app", "trainer"},
          {"tier", i % 2 ? "batch" : "online"},
          {"pool", fmt::format("pool-{}", i % 16)}}},
        {"annotations",
         {{kc::api::kDemandAnnotation, "4"},
          {"example.com/owner", fmt::format("team-{}", i % 40)}}}}},
      {"spec",
       {{"schedulerName", "kubecomp-sched"},
        {"nodeName", fmt::format("node-{:04d}", i % 1000)},
        {"restartPolicy", "Never"},
        {"containers",
         {{{"name", "main"},
           {"image", "registry.example.org/ml/trainer:2026.11"},
           {"args", {"--epochs=10", "--batch=256", fmt::format("--data=/data/set-{}", i % 100)}},
           {"env",
            {{{"name", "RANK"}, {"value", std::to_string(i % 8)}},
             {{"name", "WORLD"}, {"value", "8"}}}},
           {"resources",
            {{"requests", {{"cpu", "4"}, {"memory", "16Gi"}, {kc::api::kGpuResource, "4"}}},
             {"limits", {{"cpu", "8"}, {"memory", "32Gi"}, {kc::api::kGpuResource, "4"}}}}},
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

// Resident set size of this process in KiB, after returning freed heap to the system.
double residentKib() {
  ::malloc_trim(0);
  std::ifstream statm("/proc/self/statm");
  std::uint64_t size = 0;
  std::uint64_t resident = 0;
  statm >> size >> resident;
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / 1024.0;
}

// An informer's initial LIST into its cache: prints "<seconds> <items> <cache KiB>".
int informerListChild(KubeClient& client, const std::string& ns, bool schedulerTransform) {
  InformerOptions io;
  io.resource = gvr::pods();
  io.ns = ns;
  io.pageSize = 500;
  if (schedulerTransform) {
    io.transform = keepFieldsPacked(schedulerPodFields()).value();
  }
  const double before = residentKib();
  Informer informer(client, io);
  const auto t0 = Clock::now();
  informer.start();
  if (!informer.waitForSync(std::chrono::seconds(300))) {
    std::fprintf(stderr, "informer did not sync\n");
    return 3;
  }
  const double seconds = secondsSince(t0);
  const double cacheKib = residentKib() - before;
  if (schedulerTransform) {
    // What a scheduler reads back: every cached pod unpacks to its requests and node.
    std::size_t bad = 0;
    for (const ObjectPtr& p : informer.store().list()) {
      auto full = unpackFields(*p);
      if (!full || !full->contains("spec") || !(*full)["spec"].contains("containers")) {
        ++bad;
      }
    }
    if (bad > 0) {
      std::fprintf(stderr, "%zu cached pods did not unpack\n", bad);
      return 4;
    }
  }
  std::printf("%.6f %zu %.1f\n", seconds, informer.store().size(), cacheKib);
  informer.stop();
  return 0;
}

// Child-process side of a LIST variant: prints "<seconds> <items>" (informer variants add the
// cache size).
int listChild(const std::string& kubeconfig, const std::string& mode, const std::string& ns) {
  auto cfg = loadKubeconfig({kubeconfig});
  if (!cfg) {
    std::fprintf(stderr, "%s\n", cfg.error().message.c_str());
    return 2;
  }
  auto client = makeClient(*cfg);
  if (mode == "informer-scheduler" || mode == "informer-full") {
    return informerListChild(*client, ns, mode == "informer-scheduler");
  }
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
  double cacheKib = -1;  // informer variants only
};

ListResult runListChild(const std::string& self, const std::string& kubeconfig,
                        const std::string& mode, const std::string& ns) {
  kc::testing::ChildProcess child(
      {self, "--list-child", mode, "--kubeconfig", kubeconfig, "--namespace", ns},
      kc::testing::ChildOutput::kCapture);
  const std::string out = child.readAll();
  if (child.wait() != 0) {
    throw std::runtime_error("list child '" + mode + "' failed");
  }
  const rusage ru = *child.usage();
  ListResult r;
  if (std::sscanf(out.c_str(), "%lf %zu %lf", &r.seconds, &r.items, &r.cacheKib) < 2) {
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

// The informer's own apply rate: `objects` pods, each added, modified twice and deleted
// (4 events), queued in a FakeListerWatcher while its watch is paused, then released at once.
// The clock runs from the release until the handlers have seen every event.
double informerApplyRate(int objects, bool schedulerTransform) {
  kc::testing::FakeListerWatcher source;
  InformerOptions io;
  io.ns = "bench";
  if (schedulerTransform) {
    io.transform = keepFieldsPacked(schedulerPodFields()).value();
  }
  Informer informer(source, io);
  const std::uint64_t expected = static_cast<std::uint64_t>(objects) * 4;
  std::mutex mu;
  std::condition_variable done;
  std::uint64_t handled = 0;  // guarded by mu
  auto count = [&] {
    std::lock_guard<std::mutex> lock(mu);
    if (++handled == expected) {
      done.notify_all();
    }
  };
  informer.addHandler({[&](const ObjectPtr&) { count(); },
                       [&](const ObjectPtr&, const ObjectPtr&) { count(); },
                       [&](const ObjectPtr&) { count(); }});
  informer.start();
  if (!informer.waitForSync(std::chrono::seconds(30)) || !source.awaitWatches(1)) {
    throw std::runtime_error("informer on the fake source did not start watching");
  }
  source.pause();
  for (int i = 0; i < objects; ++i) {
    nlohmann::json pod = benchPod("bench", i);
    source.upsert(pod);
    for (int u = 1; u <= 2; ++u) {
      pod["metadata"]["labels"]["generation"] = std::to_string(u);
      pod["status"]["phase"] = u == 1 ? "Pending" : "Running";
      source.upsert(pod);
    }
    source.erase("bench", pod["metadata"]["name"].get<std::string>());
  }
  const auto t0 = Clock::now();
  source.resume();
  {
    std::unique_lock<std::mutex> lock(mu);
    if (!done.wait_for(lock, std::chrono::seconds(120), [&] { return handled >= expected; })) {
      throw std::runtime_error(
          fmt::format("informer applied {} of {} queued events", handled, expected));
    }
  }
  const double seconds = secondsSince(t0);
  informer.stop();
  return static_cast<double>(expected) / seconds;
}

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
  informer.addHandler({[&](const ObjectPtr&) { ++handled; },
                       [&](const ObjectPtr&, const ObjectPtr&) { ++handled; },
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
  const auto expected =
      static_cast<std::uint64_t>(perWriter) * static_cast<std::uint64_t>(writers) * 4;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (informer.stats().eventsApplied < expected && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const double applySeconds = secondsSince(t0);
  InformerResult r;
  r.events = informer.stats().eventsApplied;
  informer.stop();
  if (failed > 0 || r.events < expected || handled.load() < expected) {
    throw std::runtime_error(fmt::format("informer run: {} write failures, {} of {} events applied",
                                         failed.load(), r.events, expected));
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
  CLI::App app{
      "bench_kube: Kubernetes client LIST, informer cache and apply rate, and the API double's "
      "write rate"};
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
    kc::kube::testing::DoubleProcess api(
        doubleExe, dir.path().string(),
        {"--history-window", std::to_string(std::max(events * 2, 20'000))});
    const auto& cfg = api.config();
    std::cout << "bench_kube: kube-apiserver-double at " << cfg.server << " (TLS, bearer token)"
              << (quick ? ", quick mode" : "") << "\n";

    auto admin = makeClient(cfg);
    (void)admin->create(
        gvr::namespaces(), "",
        {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "bench"}}}});
    auto t0 = Clock::now();
    seedPods(cfg, "bench", pods, 6);
    const double seedS = secondsSince(t0);
    std::cout << fmt::format("seeded {} pods in {:.1f} s ({:.0f} creates/s, 6 writers)\n", pods,
                             seedS, pods / seedS);

    std::cout << fmt::format(
        "\nLIST of {} pods (each variant in its own process; peak = max RSS of that process)\n",
        pods);
    const auto base = runListChild(self, api.kubeconfigPath(), "baseline", "bench");
    std::cout << fmt::format("  {:<52} {:>7} {:>7} {:>9} {:>10}\n", "variant", "items", "time s",
                             "peak MiB", "cache/pod");
    std::cout << fmt::format("  {:<52} {:>7} {:>7} {:>9.1f} {:>10}\n",
                             "baseline (client only, one GET)", "-", "-", base.peakMib, "-");
    ListResult scheduler;
    for (const auto& [mode, label] : std::vector<std::pair<std::string, std::string>>{
             {"informer-scheduler", "informer, paged 500, schedulerPodFields packed"},
             {"informer-full", "informer, paged 500, no transform (whole pods)"},
             {"paged", "client paged limit=500, items parsed as they stream"},
             {"single", "client one LIST, items parsed as they stream"},
             {"naive", "client one LIST, whole body buffered then parsed"}}) {
      auto r = runListChild(self, api.kubeconfigPath(), mode, "bench");
      if (r.items != static_cast<std::size_t>(pods)) {
        throw std::runtime_error(
            fmt::format("{} LIST returned {} of {} pods", mode, r.items, pods));
      }
      const std::string perPod =
          r.cacheKib >= 0 ? fmt::format("{:.2f} KiB", r.cacheKib / pods) : "-";
      std::cout << fmt::format("  {:<52} {:>7} {:>7.2f} {:>9.1f} {:>10}\n", label, r.items,
                               r.seconds, r.peakMib, perPod);
      if (mode == "informer-scheduler") {
        scheduler = r;
      }
    }
    const double cacheKibPerPod = scheduler.cacheKib / pods;

    const int applyObjects = quick ? 5'000 : 25'000;
    std::cout << fmt::format(
        "\nInformer apply rate on its own: {} pod events queued in a FakeListerWatcher, "
        "released at once (informer thread, one core)\n",
        applyObjects * 4);
    const double applyScheduler = informerApplyRate(applyObjects, true);
    const double applyFull = informerApplyRate(applyObjects, false);
    std::cout << fmt::format("  {:<52} {:>10.0f} events/s\n",
                             "with the schedulerPodFields packed transform", applyScheduler);
    std::cout << fmt::format("  {:<52} {:>10.0f} events/s\n", "without a transform", applyFull);

    std::cout << fmt::format(
        "\nThe double's write rate, configmaps, {} events (create, update, update, delete per "
        "object), 4 writers, a live informer following\n",
        events);
    auto inf = runInformer(cfg, events, 4);
    std::cout << fmt::format("  {:<52} {:>10.0f} events/s written\n", "writers (4 clients, TLS)",
                             inf.writesPerS);
    std::cout << fmt::format("  {:<52} {:>10.0f} events/s (bounded by the writes)\n",
                             "live informer, end to end", inf.eventsPerS);
    if (inf.replayPerS > 0) {
      std::cout << fmt::format("  {:<52} {:>10.0f} events/s into a Store\n",
                               "watch replay from the double's history (HTTP+JSON)",
                               inf.replayPerS);
    }
    std::cout << fmt::format(
        "goals: informer applies >= 20000 events/s on one core: {}; cache <= 2 KiB per pod: {}\n",
        applyScheduler >= 20'000 ? "met" : "NOT met", cacheKibPerPod <= 2.0 ? "met" : "NOT met");
    nlohmann::json out = {{"informer_apply_events_per_s", std::round(applyScheduler)},
                          {"double_write_events_per_s", std::round(inf.writesPerS)},
                          {"list_50k_pods_s", std::round(scheduler.seconds * 1000) / 1000},
                          {"list_50k_pods_peak_mib", std::round(scheduler.peakMib * 10) / 10},
                          {"cache_kib_per_pod", std::round(cacheKibPerPod * 100) / 100}};
    std::cout << out.dump() << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_kube: " << e.what() << "\n";
    return 1;
  }
}
