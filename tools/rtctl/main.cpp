// rtctl: from a periodic task set, the real-time reservation to ask for (the pod annotations
// rt.kubecomp.io/runtime-us, period-us, cpus) and the core each task is pinned to. Analysis and
// formulas: tools/rtctl/rt_design.hpp and docs/rt.md.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "libcore/api/names.hpp"
#include "libcore/cli/flags.hpp"
#include "tools/rtctl/rt_design.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "rtctl: container parameters for a periodic task set. Each task is C,T[,D] in microseconds\n"
      "(WCET, period, deadline <= period); tasks run SCHED_FIFO with deadline-monotonic "
      "priorities,\n"
      "each pinned to one core of the container. Prints the runtime, period and cpus to put in "
      "the\n"
      "pod's rt.kubecomp.io/ annotations (a sufficient test: periodic resource model, linear "
      "supply\n"
      "bound, fixed-priority response-bound test per core; see docs/rt.md)."};
  std::vector<std::string> taskArgs;
  std::string file;
  std::uint64_t period = 0;
  double bound = 0.95;
  bool json = false;
  app.add_option("--task", taskArgs, "a task C,T[,D] (repeatable)");
  app.add_option("--tasks-file", file, "a file with one task per line: C T [D] (# comments)");
  app.add_option("--period-us", period,
                 "the reservation period P (default: half the shortest deadline)");
  app.add_option("--bound", bound, "per-core bound (sched_rt_runtime_us/sched_rt_period_us)")
      ->check(CLI::Range(0.001, 1.0))
      ->capture_default_str();
  app.add_flag("--json", json, "print JSON instead of text");
  kc::cli::addVersionFlag(app, "rtctl");
  if (auto exit = kc::cli::parse(app, argc, argv)) {
    return *exit;
  }
  std::vector<kc::rtctl::Task> tasks;
  for (const auto& a : taskArgs) {
    auto t = kc::rtctl::parseTask(a);
    if (!t) {
      std::fprintf(stderr, "error: %s\n", t.error().message.c_str());
      return 2;
    }
    tasks.push_back(*t);
  }
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) {
      std::fprintf(stderr, "error: cannot read %s\n", file.c_str());
      return 2;
    }
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      if (const auto h = line.find('#'); h != std::string::npos) {
        line.resize(h);
      }
      std::istringstream ss(line);
      std::string c, t, d;
      if (!(ss >> c)) {
        continue;
      }
      ss >> t >> d;
      auto task = kc::rtctl::parseTask(c + "," + t + (d.empty() ? "" : "," + d));
      if (!task) {
        std::fprintf(stderr, "error: %s line %d: %s\n", file.c_str(), n,
                     task.error().message.c_str());
        return 2;
      }
      tasks.push_back(*task);
    }
  }
  if (tasks.empty()) {
    std::fprintf(stderr, "error: no tasks (use --task C,T[,D] or --tasks-file)\n");
    return 2;
  }
  if (period == 0) {
    std::uint64_t minD = UINT64_MAX;
    for (const auto& t : tasks) {
      minD = std::min(minD, t.d == 0 ? t.t : t.d);
    }
    period = std::max<std::uint64_t>(1, minD / 2);
  }
  auto d = kc::rtctl::design(tasks, period, bound);
  if (!d) {
    std::fprintf(stderr, "error: %s\n", d.error().message.c_str());
    return 1;
  }
  double u = 0;
  for (const auto& t : tasks) {
    u += static_cast<double>(t.c) / static_cast<double>(t.t);
  }
  if (json) {
    nlohmann::json out = {{"runtime_us", d->runtimeUs},
                          {"period_us", d->periodUs},
                          {"cpus", d->cpus},
                          {"task_utilization", u},
                          {"reserved_bandwidth", static_cast<double>(d->cpus * d->runtimeUs) /
                                                     static_cast<double>(d->periodUs)},
                          {"core_of_task", d->coreOfTask},
                          {"core_runtime_us", d->coreRuntimeUs}};
    std::cout << out.dump() << "\n";
    return 0;
  }
  std::cout << "tasks: " << tasks.size() << ", utilization " << u << "\n";
  std::cout << "reservation: runtime " << d->runtimeUs << " us every " << d->periodUs << " us on "
            << d->cpus << " core(s) (bandwidth "
            << static_cast<double>(d->cpus * d->runtimeUs) / static_cast<double>(d->periodUs)
            << ")\n";
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    std::cout << "  task " << i << " (C=" << tasks[i].c << " T=" << tasks[i].t << "): pin to core "
              << d->coreOfTask[i] << " of the container\n";
  }
  const auto key = [](std::string_view field) {
    return std::string(kc::api::kRtAnnotationPrefix) + std::string(field);
  };
  std::cout << "annotations:\n"
            << "  " << key(kc::api::kRtRuntimeField) << ": \"" << d->runtimeUs << "\"\n"
            << "  " << key(kc::api::kRtPeriodField) << ": \"" << d->periodUs << "\"\n"
            << "  " << key(kc::api::kRtCpusField) << ": \"" << d->cpus << "\"\n";
  return 0;
}
