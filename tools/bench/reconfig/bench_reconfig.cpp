// bench_reconfig: the software overhead of one 1-GPU reconfiguration at zero fabric latency,
// end to end on real processes (the measurement and its anchor: reconfig_overhead.hpp, shared
// with bench_sched).
//
// The LAST stdout line is one JSON object with reconfig_overhead_ms (the p50 of created ->
// bound) and the other figures.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "tools/bench/reconfig/reconfig_overhead.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "bench_reconfig: overhead of a 1-GPU reconfiguration at zero fabric latency, end to end"};
  bool quick = false;
  int pods = 0;
  std::string sync = kc::bench::kReconfigStatusSync;
  app.add_flag("--quick", quick, "5 pods (the default is 20)");
  app.add_option("--pods", pods, "pods, one move each (overrides --quick)")
      ->check(CLI::Range(1, 60));
  app.add_option("--status-sync-period", sync, "the kubelet stand-ins' node status sync")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (pods == 0) {
    pods = quick ? kc::bench::kReconfigPodsQuick : kc::bench::kReconfigPodsFull;
  }
  try {
    const auto r = kc::bench::measureReconfigOverhead(pods, sync);
    std::cout << fmt::format(
        "bench_reconfig: {} pods, one 1-GPU move each, fabric latency 0, stand-in status sync {}\n",
        pods, sync);
    r.print(std::cout);
    std::cout << r.toJson().dump() << std::endl;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_reconfig: %s\n", e.what());
    return 1;
  }
  return 0;
}
