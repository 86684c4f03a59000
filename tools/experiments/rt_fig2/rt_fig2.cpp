// The paper's Fig. 2 on a real containerd with rt-kubelet-shim in front: a periodic real-time
// task set in a container with a reservation (its parameters computed by rtctl's analysis)
// against the same task set in a standard container, each sharing its core with CPU hogs in
// another container. Writes every job's normalised response time (response / period) as CSV;
// rt_fig2_plot.py draws the CDFs and counts deadline misses. Needs root and cgroup v1 RT group
// scheduling (as the real-peer tests).
//
// Task set (us): (C, T) = (2000, 10000), (4000, 20000), (6000, 40000), U = 0.55, implicit
// deadlines, deadline-monotonic FIFO priorities 30, 20, 10 in the reservation case and
// SCHED_OTHER in the standard one. Hogs: 2 busy-looping SCHED_OTHER processes on the same core.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "libcore/api/names.hpp"
#include "libcore/cli/flags.hpp"
#include "tests/services/rt-kubelet-shim/containerd_env.hpp"
#include "tools/rtctl/rt_design.hpp"

using namespace std::chrono_literals;
using kc::testing::ChildProcess;
using kc::testing::ContainerdEnv;
using kc::testing::CriClient;

namespace {

void check(const grpc::Status& s, const std::string& what) {
  if (!s.ok()) {
    throw std::runtime_error(what + ": " + s.error_message());
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "rt_fig2: periodic tasks with an RT reservation vs a standard container, CPU hogs on the "
      "same core"};
  std::string out = "docs/results/rt_fig2.csv";
  double seconds = 6.0;
  std::uint64_t period = 5000;
  app.add_option("--out", out, "CSV of every job")->capture_default_str();
  app.add_option("--seconds", seconds, "length of each case")->capture_default_str();
  app.add_option("--period-us", period, "reservation period given to rtctl's analysis")
      ->capture_default_str();
  kc::cli::addVersionFlag(app, "rt_fig2");
  if (auto exit = kc::cli::parse(app, argc, argv)) {
    return *exit;
  }
  if (const std::string why = kc::testing::rtSkipReason(); !why.empty()) {
    std::cerr << "rt_fig2: cannot run here: " << why << "\n";
    return 1;
  }
  const std::vector<kc::rtctl::Task> tasks{{2000, 10000, 0}, {4000, 20000, 0}, {6000, 40000, 0}};
  const std::vector<int> prios{30, 20, 10};
  auto design = kc::rtctl::design(tasks, period);
  if (!design || design->cpus != 1) {
    std::cerr << "rt_fig2: rtctl analysis gave no single-core reservation\n";
    return 1;
  }
  std::cout << fmt::format("rtctl: runtime {} us every {} us on {} core\n", design->runtimeUs,
                           design->periodUs, design->cpus);
  kc::testing::TempDir work;
  const std::string top = "/kcfig2-rt-" + std::to_string(::getpid());
  const std::string img = work.file("img.tar");
  if (kc::testing::run({"/usr/bin/python3", KC_MKIMAGE, img, kc::testing::kTestImage,
                        "/usr/bin/busybox", KC_RTPROBE}) != 0) {
    return 1;
  }
  std::ofstream csv(out);
  csv << "case,period_us,job,response_us,normalized\n";
  try {
    ContainerdEnv env(img, top);
    const std::string sock = work.file("shim.sock"), portFile = work.file("shim.port");
    ChildProcess shim({KC_SHIM_EXE, "--socket", sock, "--runtime-endpoint", env.socket(),
                       "--no-api", "--port", "0", "--port-file", portFile, "--log-level", "error"});
    shim.waitUntil([&] { return kc::testing::readPortFile(portFile).has_value(); }, 20s, "shim");
    CriClient via(kc::grpcx::dialUnix(sock));
    const std::string logDir = work.file("logs");
    std::filesystem::create_directories(logDir);
    for (const std::string which : {"reservation", "standard"}) {
      const bool rt = which == "reservation";
      std::map<std::string, std::string> ann;
      if (rt) {
        const std::string prefix(kc::api::kRtAnnotationPrefix);
        ann = {{prefix + std::string(kc::api::kRtRuntimeField), std::to_string(design->runtimeUs)},
               {prefix + std::string(kc::api::kRtPeriodField), std::to_string(design->periodUs)},
               {prefix + std::string(kc::api::kRtCpusField), "1"}};
      }
      const auto pod =
          CriClient::podConfig("tasks-" + which, top + "/pod-tasks-" + which, ann, logDir);
      const auto hogPod =
          CriClient::podConfig("hog-" + which, top + "/pod-hog-" + which, {}, logDir);
      std::string sb, hsb, ctr, hog;
      check(via.runPod(pod, sb), "RunPodSandbox");
      check(via.runPod(hogPod, hsb), "RunPodSandbox hog");
      // The RT container gets core 0 from the shim (first-fit on an empty node); the standard
      // one is pinned to core 0 as kubelet's CPU manager would.
      check(via.createContainer(sb, pod, "tasks", ctr, 0, {}, rt ? "" : "0"), "CreateContainer");
      check(via.start(ctr), "StartContainer");
      const int hogSeconds = static_cast<int>(seconds) + 3;
      check(via.createContainer(
                hsb, hogPod, "hog", hog, 0,
                {"/bin/sh", "-c",
                 fmt::format("for i in 1 2; do /rtprobe hog {} & done; wait", hogSeconds)},
                "0"),
            "CreateContainer hog");
      check(via.start(hog), "StartContainer hog");
      std::this_thread::sleep_for(300ms);
      std::string script;
      for (std::size_t i = 0; i < tasks.size(); ++i) {
        const auto n = static_cast<std::uint64_t>(seconds * 1e6 / static_cast<double>(tasks[i].t));
        script += fmt::format("/rtprobe periodic {} {} {} {} & ", tasks[i].c, tasks[i].t, n,
                              rt ? prios[i] : 0);
      }
      script += "wait";
      const auto [rc, text] =
          via.exec(ctr, {"/bin/sh", "-c", script}, static_cast<int>(seconds) + 30);
      if (rc != 0) {
        throw std::runtime_error("task set exited " + std::to_string(rc) + ": " + text);
      }
      std::istringstream in(text);
      std::string word;
      std::map<std::uint64_t, int> misses;
      std::size_t jobs = 0;
      while (in >> word) {
        if (word == "job") {
          std::uint64_t t = 0, resp = 0;
          int idx = 0;
          in >> t >> idx >> resp;
          csv << which << "," << t * 1000 / 1000 << "," << idx << "," << resp << ","
              << static_cast<double>(resp) / static_cast<double>(t) << "\n";
          ++jobs;
        } else if (word == "misses") {
          std::uint64_t t = 0;
          int m = 0;
          in >> t >> m;
          misses[t] = m;
        }
      }
      int total = 0;
      for (const auto& [t, m] : misses) {
        total += m;
      }
      std::cout << fmt::format("{:<12} {} jobs, deadline misses {} (per period:", which, jobs,
                               total);
      for (const auto& [t, m] : misses) {
        std::cout << fmt::format(" {} us: {}", t, m);
      }
      std::cout << ")\n";
      check(via.stopRemovePod(hsb), "remove hog");
      check(via.stopRemovePod(sb), "remove pod");
    }
    shim.terminate(5s);
    env.teardown();
  } catch (const std::exception& e) {
    std::cerr << "rt_fig2: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
