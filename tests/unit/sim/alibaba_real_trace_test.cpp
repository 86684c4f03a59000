#include <catch2/catch.hpp>
#include <string>

#include "tools/kubecomp-sim/trace_reader.hpp"

using namespace kc::sim;

// The published trace: 8,152 tasks (1,088 CPU-only, 897 pending without scheduled_time, 3,078
// GPU tasks sharing a GPU) on 1,213 GPU nodes. Every row must be accounted for.
TEST_CASE("the real Alibaba v2023 trace is read with every row accounted for") {
  const std::string dir = KC_ALIBABA_TRACE_DIR;
  auto r = readAlibabaPodsFile(dir + "/openb_pod_list_default.csv");
  REQUIRE(r.ok());
  const TraceStats& s = r->stats;
  CHECK(s.rows == 8152);
  CHECK(s.rows == s.jobs + s.skippedNoStartTime + s.skippedNoEndTime + s.skippedCpuOnly +
                      s.skippedGpuSharing);
  CHECK(s.skippedCpuOnly == 1088);
  CHECK(s.skippedNoEndTime == 0);
  CHECK(s.jobs == r->trace.jobs.size());
  CHECK(s.jobs == 8152 - 1088 - s.skippedNoStartTime);
  CHECK(s.gpuSharingAsWhole > 0);
  for (std::size_t i = 1; i < r->trace.jobs.size(); ++i) {
    REQUIRE(r->trace.jobs[i - 1].arrival <= r->trace.jobs[i].arrival);
  }

  AlibabaOptions skipSharing;
  skipSharing.sharing = GpuSharing::Skip;
  auto k = readAlibabaPodsFile(dir + "/openb_pod_list_default.csv", skipSharing);
  REQUIRE(k.ok());
  CHECK(k->stats.skippedGpuSharing == s.gpuSharingAsWhole);
  CHECK(k->stats.jobs + k->stats.skippedGpuSharing == s.jobs);

  AlibabaOptions completedOnly;
  completedOnly.skipCensored = true;
  auto c = readAlibabaPodsFile(dir + "/openb_pod_list_default.csv", completedOnly);
  REQUIRE(c.ok());
  CHECK(c->stats.skippedCensored == s.censoredRunning);
  CHECK(c->stats.jobs + c->stats.skippedCensored == s.jobs);
  CHECK(c->stats.rows == c->stats.jobs + c->stats.skippedNoStartTime + c->stats.skippedNoEndTime +
                             c->stats.skippedCpuOnly + c->stats.skippedGpuSharing +
                             c->stats.skippedCensored);

  auto nodes = readAlibabaNodesFile(dir + "/openb_node_list_gpu_node.csv");
  REQUIRE(nodes.ok());
  CHECK(nodes->size() == 1213);
  std::uint64_t gpus = 0;
  for (const auto& n : *nodes) {
    gpus += n.gpus;
  }
  CHECK(gpus == 6212);
}
