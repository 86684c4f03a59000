// bench_rt: what rt-kubelet-shim adds to a CRI call (issue 14). A private containerd 1.6 (the
// real-peer tests' recipe) with the shim in front; the same calls are made alternately straight
// to containerd and through the shim, in the same run, on the same container: Version (no
// work in the runtime), ContainerStatus and ListContainers (passed through untouched), and
// the RT container lifecycle Create+Start+Stop+Remove (the calls the shim acts on, with its
// cgroup writes) against the same lifecycle of a non-RT container straight to containerd.
// Added latency = percentile through the shim minus the same percentile direct. Goal < 1 ms.
// Needs root and cgroup v1 RT group scheduling (as the real-peer tests).

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "libcore/api/names.hpp"
#include "tests/services/rt-kubelet-shim/containerd_env.hpp"

using namespace std::chrono_literals;
using kc::testing::ChildProcess;
using kc::testing::ContainerdEnv;
using kc::testing::CriClient;
namespace cri = runtime::v1;

namespace {

// rt.kubecomp.io/<field>
std::string rtKey(std::string_view field) {
  return std::string(kc::api::kRtAnnotationPrefix) + std::string(field);
}

double pct(std::vector<double> v, double p) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

template <typename F>
double timeMs(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void check(const grpc::Status& s, const char* what) {
  if (!s.ok()) {
    throw std::runtime_error(std::string(what) + ": " + s.error_message());
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_rt: rt-kubelet-shim added latency per CRI call (through the shim vs direct)"};
  bool quick = false;
  int calls = 0;
  app.add_flag("--quick", quick,
               "1,000 calls per kind and path, 20 lifecycles (default 5,000 and 100)");
  app.add_option("--calls", calls, "calls per kind and path (overrides --quick)");
  CLI11_PARSE(app, argc, argv);
  if (calls <= 0) {
    calls = quick ? 1000 : 5000;
  }
  const int lifecycles = quick ? 20 : 100;
  if (const std::string why = kc::testing::rtSkipReason(); !why.empty()) {
    std::cerr << "bench_rt: cannot run here: " << why << "\n";
    return 1;
  }
  kc::testing::TempDir work;
  const std::string top = "/kcbench-rt-" + std::to_string(::getpid());
  const std::string img = work.file("img.tar");
  if (kc::testing::run({"/usr/bin/python3", KC_MKIMAGE, img, kc::testing::kTestImage,
                        "/usr/bin/busybox", KC_RTPROBE}) != 0) {
    return 1;
  }
  nlohmann::json out;
  try {
    ContainerdEnv env(img, top);
    const std::string sock = work.file("shim.sock"), portFile = work.file("shim.port");
    ChildProcess shim({KC_SHIM_EXE, "--socket", sock, "--runtime-endpoint", env.socket(),
                       "--no-api", "--port", "0", "--port-file", portFile, "--log-level", "error"});
    shim.waitUntil([&] { return kc::testing::readPortFile(portFile).has_value(); }, 20s, "shim");
    CriClient direct(env.channel());
    CriClient via(kc::grpcx::dialUnix(sock));
    const std::string logDir = work.file("logs");
    std::filesystem::create_directories(logDir);
    const auto pod = CriClient::podConfig(
        "bench", top + "/besteffort/pod-bench",
        {{rtKey(kc::api::kRtRuntimeField), "10000"}, {rtKey(kc::api::kRtPeriodField), "100000"}},
        logDir);
    const auto plainPod = CriClient::podConfig("plain", top + "/besteffort/pod-plain", {}, logDir);
    std::string sandbox, plainSandbox, ctr;
    check(via.runPod(pod, sandbox), "RunPodSandbox");
    check(direct.runPod(plainPod, plainSandbox), "RunPodSandbox");
    check(via.createContainer(sandbox, pod, "app", ctr), "CreateContainer");
    check(via.start(ctr), "StartContainer");

    struct Kind {
      std::string name;
      std::function<void(CriClient&)> call;
    };
    const std::vector<Kind> kinds{
        {"Version",
         [](CriClient& c) {
           grpc::ClientContext ctx;
           cri::VersionResponse r;
           check(c.stub().Version(&ctx, {}, &r), "Version");
         }},
        {"ContainerStatus",
         [&](CriClient& c) {
           grpc::ClientContext ctx;
           cri::ContainerStatusRequest q;
           q.set_container_id(ctr);
           cri::ContainerStatusResponse r;
           check(c.stub().ContainerStatus(&ctx, q, &r), "ContainerStatus");
         }},
        {"ListContainers",
         [](CriClient& c) {
           grpc::ClientContext ctx;
           cri::ListContainersResponse r;
           check(c.stub().ListContainers(&ctx, {}, &r), "ListContainers");
         }},
    };
    std::cout << fmt::format(
        "bench_rt: {} calls per kind and path, alternating direct / through the shim\n", calls);
    std::vector<double> addedAllDirect, addedAllShim;
    for (const auto& k : kinds) {
      std::vector<double> d, s;
      for (int i = 0; i < 50; ++i) {  // warm both connections
        k.call(direct);
        k.call(via);
      }
      for (int i = 0; i < calls; ++i) {
        d.push_back(timeMs([&] { k.call(direct); }));
        s.push_back(timeMs([&] { k.call(via); }));
      }
      addedAllDirect.insert(addedAllDirect.end(), d.begin(), d.end());
      addedAllShim.insert(addedAllShim.end(), s.begin(), s.end());
      std::cout << fmt::format(
          "  {:<16} direct p50 {:>7.3f} p99 {:>7.3f} ms   shim p50 {:>7.3f} p99 {:>7.3f} ms   "
          "added p50 {:>6.3f} p99 {:>6.3f} ms\n",
          k.name, pct(d, 0.5), pct(d, 0.99), pct(s, 0.5), pct(s, 0.99), pct(s, 0.5) - pct(d, 0.5),
          pct(s, 0.99) - pct(d, 0.99));
    }
    // The calls the shim acts on: an RT container's lifecycle through the shim (placement,
    // cpuset, pre-created cgroup with its budget, release) vs a plain one straight to containerd.
    std::vector<double> ld, ls;
    for (int i = 0; i < lifecycles; ++i) {
      ld.push_back(timeMs([&] {
        std::string id;
        check(direct.createContainer(plainSandbox, plainPod, "c", id, static_cast<unsigned>(i + 1)),
              "create");
        check(direct.start(id), "start");
        check(direct.stopRemoveContainer(id), "stop/remove");
      }));
      ls.push_back(timeMs([&] {
        std::string id;
        check(via.createContainer(sandbox, pod, "c", id, static_cast<unsigned>(i + 1)), "create");
        check(via.start(id), "start");
        check(via.stopRemoveContainer(id), "stop/remove");
      }));
    }
    std::cout << fmt::format(
        "  {:<16} direct p50 {:>7.2f} ms (plain)   shim p50 {:>7.2f} ms (RT: placement, cgroup "
        "budget, release)   added p50 {:>6.2f} ms  ({} each)\n",
        "4-call lifecycle", pct(ld, 0.5), pct(ls, 0.5), pct(ls, 0.5) - pct(ld, 0.5), lifecycles);
    const double a50 = pct(addedAllShim, 0.5) - pct(addedAllDirect, 0.5);
    const double a99 = pct(addedAllShim, 0.99) - pct(addedAllDirect, 0.99);
    std::cout << fmt::format(
        "  all pass-through calls: added p50 {:.3f} ms, p99 {:.3f} ms; goal < 1 ms: {}\n", a50, a99,
        a99 < 1.0 ? "met" : "NOT met");
    out = {{"shim_added_p50_ms", a50},
           {"shim_added_p99_ms", a99},
           {"calls_per_kind", calls},
           {"rt_lifecycle_added_p50_ms", pct(ls, 0.5) - pct(ld, 0.5)},
           {"direct_p50_ms", pct(addedAllDirect, 0.5)}};
    check(via.stopRemovePod(sandbox), "remove pod");
    check(direct.stopRemovePod(plainSandbox), "remove pod");
    shim.terminate(5s);
    env.teardown();
  } catch (const std::exception& e) {
    std::cerr << "bench_rt: " << e.what() << "\n";
    return 1;
  }
  std::cout << out.dump() << std::endl;
  return 0;
}
