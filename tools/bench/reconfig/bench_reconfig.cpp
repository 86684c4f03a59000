// bench_reconfig: two measurements end to end on real processes.
//  1. The software overhead of one 1-GPU reconfiguration at zero fabric latency (the
//     measurement and its anchor: reconfig_overhead.hpp, shared with bench_sched).
//  2. The move speed against the fabric's own time (move_speed.hpp): one safe 1-GPU move over
//     the chassis' unassign + assign + one inventory read at fixed, scaled H3 latencies, and a
//     4-GPU demand over two chassis against one move.
//
// The LAST stdout line is one JSON object with reconfig_overhead_ms (the p50 of created ->
// bound), move_vs_fabric_ratio, demand4_vs_one_ratio and the figures they come from.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "tools/bench/reconfig/move_speed.hpp"
#include "tools/bench/reconfig/reconfig_overhead.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "bench_reconfig: overhead of a 1-GPU reconfiguration at zero fabric latency, and the "
      "speed of safe moves against the chassis' own time, end to end"};
  bool quick = false;
  int pods = 0;
  int moves = 0;
  double scale = kc::bench::kMoveLatencyScale;
  std::string sync = kc::bench::kReconfigStatusSync;
  app.add_flag("--quick", quick, "5 pods and 3 timed moves (the defaults are 20 and 10)");
  app.add_option("--pods", pods, "pods, one move each, at zero latency (overrides --quick)")
      ->check(CLI::Range(1, 60));
  app.add_option("--status-sync-period", sync, "the kubelet stand-ins' node status sync")
      ->capture_default_str();
  app.add_option("--moves", moves,
                 "1-GPU moves timed against the fabric at fixed latencies (overrides --quick)")
      ->check(CLI::Range(2, 40));
  app.add_option("--fabric-latency-scale", scale,
                 "chassis-sim --latency-scale of the move-speed part (wall s per chassis s; "
                 "at most 0.2: the harness gives reconfig-mgr a 3 s fabric move timeout)")
      ->check(CLI::Range(0.001, 0.2))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (pods == 0) {
    pods = quick ? kc::bench::kReconfigPodsQuick : kc::bench::kReconfigPodsFull;
  }
  if (moves == 0) {
    moves = quick ? kc::bench::kMovesQuick : kc::bench::kMovesFull;
  }
  nlohmann::json last;
  try {
    const auto r = kc::bench::measureReconfigOverhead(pods, sync);
    std::cout << fmt::format(
        "bench_reconfig: {} pods, one 1-GPU move each, fabric latency 0, stand-in status sync {}\n",
        pods, sync);
    r.print(std::cout);
    last = r.toJson();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_reconfig: reconfig overhead: %s\n", e.what());
    return 1;
  }
  try {
    const auto m = kc::bench::measureMoveSpeed(moves, scale);
    std::cout << fmt::format(
        "bench_reconfig: move speed, {} 1-GPU moves one at a time, then one 4-GPU demand\n", moves);
    m.print(std::cout);
    last.update(m.toJson());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_reconfig: move speed: %s\n", e.what());
    return 1;
  }
  std::cout << last.dump() << std::endl;
  return 0;
}
