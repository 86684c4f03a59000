#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <utility>

#include "tools/kubecomp-sim/trace_reader.hpp"

using namespace kc::sim;

// The published trace: 8,152 tasks on 1,213 GPU nodes (6,212 GPUs). The counts below were taken
// from the CSV with awk, independently of the reader:
//   1,088 CPU-only (num_gpu 0); 897 without scheduled_time, 861 of them GPU tasks; none without
//   deletion_time once scheduled; 6,203 GPU tasks kept: 6,129 x 1 GPU, 15 x 2, 15 x 4, 44 x 8
//   (6,571 GPUs), 2,573 of them sharing a GPU (gpu_milli < 1000), 4,149 still Running at the
//   trace's end (censored); 191,369,677 task-seconds; last arrival at 12,901,761 s; no gpu_spec.
TEST_CASE("the real Alibaba v2023 trace is read with every row accounted for") {
  const std::string dir = KC_ALIBABA_TRACE_DIR;
  auto r = readAlibabaPodsFile(dir + "/openb_pod_list_default.csv");
  REQUIRE(r.ok());
  const TraceStats& s = r->stats;
  CHECK(s.rows == 8152);
  CHECK(s.skippedCpuOnly == 1088);
  CHECK(s.skippedNoStartTime == 861);
  CHECK(s.skippedNoEndTime == 0);
  CHECK(s.skippedGpuSharing == 0);
  CHECK(s.skippedCensored == 0);
  CHECK(s.jobs == 6203);
  CHECK(s.gpuSharingAsWhole == 2573);
  CHECK(s.censoredRunning == 4149);
  CHECK(s.zeroDuration == 0);
  CHECK(s.gpuSpecConstrained == 0);
  REQUIRE(r->trace.jobs.size() == 6203);
  std::map<std::uint32_t, std::uint64_t> bySize;
  std::uint64_t gpuTotal = 0;
  SimMs durationTotal = 0;
  for (std::size_t i = 0; i < r->trace.jobs.size(); ++i) {
    const Job& j = r->trace.jobs[i];
    if (i > 0) {
      REQUIRE(r->trace.jobs[i - 1].arrival <= j.arrival);
    }
    ++bySize[j.gpus];
    gpuTotal += j.gpus;
    durationTotal += j.duration;
  }
  CHECK(bySize == std::map<std::uint32_t, std::uint64_t>{{1, 6129}, {2, 15}, {4, 15}, {8, 44}});
  CHECK(gpuTotal == 6571);
  CHECK(durationTotal == SimMs{191'369'677} * kMsPerSecond);
  CHECK(r->trace.jobs.front().arrival == 0);
  CHECK(r->trace.jobs.back().arrival == SimMs{12'901'761} * kMsPerSecond);

  AlibabaOptions skipSharing;
  skipSharing.sharing = GpuSharing::Skip;
  auto k = readAlibabaPodsFile(dir + "/openb_pod_list_default.csv", skipSharing);
  REQUIRE(k.ok());
  CHECK(k->stats.skippedGpuSharing == 2573);
  CHECK(k->stats.gpuSharingAsWhole == 0);
  CHECK(k->stats.jobs == 3630);

  AlibabaOptions completedOnly;
  completedOnly.skipCensored = true;
  auto c = readAlibabaPodsFile(dir + "/openb_pod_list_default.csv", completedOnly);
  REQUIRE(c.ok());
  CHECK(c->stats.skippedCensored == 4149);
  CHECK(c->stats.censoredRunning == 0);
  CHECK(c->stats.jobs == 2054);

  AlibabaOptions withCpu;
  withCpu.includeCpuOnly = true;
  auto w = readAlibabaPodsFile(dir + "/openb_pod_list_default.csv", withCpu);
  REQUIRE(w.ok());
  CHECK(w->stats.skippedCpuOnly == 0);
  CHECK(w->stats.skippedNoStartTime == 897);
  CHECK(w->stats.jobs == 8152 - 897);

  auto nodes = readAlibabaNodesFile(dir + "/openb_node_list_gpu_node.csv");
  REQUIRE(nodes.ok());
  CHECK(nodes->size() == 1213);
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> byModel;  // nodes, GPUs
  for (const auto& n : *nodes) {
    ++byModel[n.model].first;
    byModel[n.model].second += n.gpus;
  }
  const std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> expected{
      {"A10", {2, 2}},    {"G2", {549, 4392}},    {"G3", {39, 312}},     {"P100", {134, 265}},
      {"T4", {404, 842}}, {"V100M16", {55, 195}}, {"V100M32", {30, 204}}};
  CHECK(byModel == expected);
}
