#include "tools/kubecomp-sim/trace_reader.hpp"

#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <tuple>

using namespace kc::sim;

namespace {

const std::string kPodHeader =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n";

kc::Result<LoadedTrace> pods(const std::string& body, AlibabaOptions options = {}) {
  std::istringstream in(kPodHeader + body);
  return readAlibabaPods(in, "pods.csv", options);
}

kc::Result<LoadedTrace> jobsCsv(const std::string& text) {
  std::istringstream in(text);
  return readJobCsv(in, "jobs.csv");
}

}  // namespace

TEST_CASE("Alibaba pod rows become jobs: arrival = creation, duration = deletion - scheduled") {
  auto r = pods(
      "p1,12000,16384,1,1000,,LS,Succeeded,100,500,160\n"
      "p0,6000,0,8,1000,,LS,Failed,50,70,50\n");
  REQUIRE(r.ok());
  REQUIRE(r->trace.jobs.size() == 2);
  const Job& first = r->trace.jobs[0];  // sorted by arrival
  CHECK(first.id == "p0");
  CHECK(first.arrival == 50'000);
  CHECK(first.duration == 20'000);
  CHECK(first.gpus == 8);
  const Job& second = r->trace.jobs[1];
  CHECK(second.id == "p1");
  CHECK(second.arrival == 100'000);
  CHECK(second.duration == 340'000);
  CHECK(second.cpuMilli == 12000);
  CHECK(second.memoryMib == 16384);
  CHECK(r->stats.rows == 2);
  CHECK(r->stats.jobs == 2);
}

TEST_CASE("Alibaba rows without times, CPU-only and GPU-sharing rows are counted, never lost") {
  const std::string body =
      "a,1000,10,1,1000,,LS,Pending,10,20,\n"       // no scheduled_time
      "b,1000,10,1,1000,,LS,Running,10,,10\n"       // no deletion_time
      "c,1000,10,0,0,,LS,Succeeded,10,20,10\n"      // CPU only
      "d,1000,10,1,460,,LS,Running,10,30,10\n"      // shares a GPU, censored
      "e,1000,10,2,1000,,LS,Succeeded,10,10,10\n";  // zero duration
  SECTION("default: sharing rows take one whole GPU") {
    auto r = pods(body);
    REQUIRE(r.ok());
    CHECK(r->stats.rows == 5);
    CHECK(r->stats.skippedNoStartTime == 1);
    CHECK(r->stats.skippedNoEndTime == 1);
    CHECK(r->stats.skippedCpuOnly == 1);
    CHECK(r->stats.gpuSharingAsWhole == 1);
    CHECK(r->stats.censoredRunning == 1);
    CHECK(r->stats.zeroDuration == 1);
    CHECK(r->stats.jobs == 2);
    CHECK(r->stats.rows == r->stats.jobs + r->stats.skippedNoStartTime + r->stats.skippedNoEndTime +
                               r->stats.skippedCpuOnly + r->stats.skippedGpuSharing);
    CHECK(r->trace.jobs[0].id == "d");
    CHECK(r->trace.jobs[0].gpus == 1);
  }
  SECTION("censored Running rows skipped on request") {
    AlibabaOptions o;
    o.skipCensored = true;
    auto r = pods(body, o);
    REQUIRE(r.ok());
    CHECK(r->stats.skippedCensored == 1);
    CHECK(r->stats.censoredRunning == 0);
    CHECK(r->stats.jobs == 1);  // e
  }
  SECTION("sharing rows skipped on request, CPU-only kept on request") {
    auto r = pods(body, AlibabaOptions{GpuSharing::Skip, true});
    REQUIRE(r.ok());
    CHECK(r->stats.skippedGpuSharing == 1);
    CHECK(r->stats.skippedCpuOnly == 0);
    CHECK(r->stats.jobs == 2);  // c and e
    CHECK(r->trace.jobs[0].gpus == 0);
  }
}

TEST_CASE("bad Alibaba rows give an error naming the line") {
  auto [body, fragment] = GENERATE(table<std::string, std::string>({
      {"ok,1,1,1,1000,,LS,Running,1,2,1\nx,1,1,1,1000,,LS,Succeeded,10,5,12\n",
       "pods.csv:3: negative duration"},
      {"x,abc,1,1,1000,,LS,Succeeded,1,2,1\n", "pods.csv:2: cpu_milli is not an integer"},
      {"x,1,1,1,1000,,LS,Succeeded,1,2\n", "pods.csv:2: expected 11 fields, got 10"},
      {"x,1,1,-1,1000,,LS,Succeeded,1,2,1\n", "pods.csv:2: num_gpu is negative"},
      {"x,1,1,1,1000,,LS,Succeeded,9,20,5\n", "pods.csv:2: scheduled_time before creation_time"},
      {"x,1,1,1,1500,,LS,Succeeded,1,2,1\n", "pods.csv:2: gpu_milli above 1000"},
      {"\n\nx,1,1,1,1000,,LS,Succeeded,1.5,2,1\n", "pods.csv:4: creation_time is not an integer"},
      // A bad row is an error even when the row would be skipped anyway (no scheduled_time).
      {"x,1,1,1,zz,,LS,Pending,1,2,\n", "pods.csv:2: gpu_milli is not an integer"},
      // Seconds that would overflow once converted to milliseconds.
      {"x,1,1,1,1000,,LS,Succeeded,1,9300000000000000,1\n",
       "pods.csv:2: time 9300000000000000 s is above the limit of 1000000000000 s"},
  }));
  CAPTURE(body);
  auto r = pods(body);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == "invalid");
  CHECK_THAT(r.error().message, Catch::Contains(fragment));
}

TEST_CASE("an Alibaba header lacking a required column is rejected") {
  std::istringstream in(
      "name,cpu_milli,memory_mib,num_gpu,creation_time,deletion_time,scheduled_time\n");
  auto r = readAlibabaPods(in, "pods.csv");
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("pods.csv:1: missing required column 'gpu_milli'"));
}

TEST_CASE("Alibaba gpu_spec becomes the job's accepted GPU models and is counted") {
  auto r = pods(
      "a,1000,10,2,1000,V100M16|V100M32,LS,Succeeded,1,5,2\n"
      "b,1000,10,1,1000,,LS,Succeeded,1,5,2\n"
      "c,1000,10,0,0,G2,LS,Succeeded,1,5,2\n",  // CPU-only: needs no GPU model
      AlibabaOptions{.includeCpuOnly = true});
  REQUIRE(r.ok());
  REQUIRE(r->trace.jobs.size() == 3);
  CHECK(r->trace.specOf(r->trace.jobs[0]) == "V100M16|V100M32");
  CHECK(r->trace.jobs[1].gpuSpec == 0);
  CHECK(r->trace.jobs[2].gpuSpec == 0);
  CHECK(r->stats.gpuSpecConstrained == 1);

  auto bad = pods("a,1000,10,2,1000,V100M16||G2,LS,Succeeded,1,5,2\n");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message,
             Catch::Contains("pods.csv:2: gpu_spec is not GPU model names joined by '|'"));
  std::istringstream badNode("sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,1,G;2\n");
  auto e = readAlibabaNodes(badNode, "nodes.csv");
  REQUIRE_FALSE(e.ok());
  CHECK_THAT(e.error().message, Catch::Contains("nodes.csv:2: model is not a GPU model name"));
}

TEST_CASE("generic job CSV: gpu_spec round-trips through writeJobCsv") {
  auto r = jobsCsv("arrival_s,duration_s,gpus,gpu_spec\n0,5,1,T4|A10\n1,5,2,\n");
  REQUIRE(r.ok());
  CHECK(r->trace.specOf(r->trace.jobs[0]) == "T4|A10");
  CHECK(r->stats.gpuSpecConstrained == 1);
  std::ostringstream out;
  writeJobCsv(out, r->trace);
  CHECK_THAT(out.str(),
             Catch::StartsWith("id,arrival_s,duration_s,gpus,cpu,memory_mib,gpu_spec\n"));
  auto back = jobsCsv(out.str());
  REQUIRE(back.ok());
  CHECK(back->trace.specOf(back->trace.jobs[0]) == "T4|A10");
  CHECK(back->trace.jobs[1].gpuSpec == 0);
}

TEST_CASE("Alibaba node list rows become nodes") {
  std::istringstream in(
      "sn,cpu_milli,memory_mib,gpu,model\nn0,96000,786432,8,G2\nn1,64000,262144,2,P100\n");
  auto r = readAlibabaNodes(in, "nodes.csv");
  REQUIRE(r.ok());
  REQUIRE(r->size() == 2);
  CHECK((*r)[0].name == "n0");
  CHECK((*r)[0].gpus == 8);
  CHECK((*r)[1].cpuMilli == 64000);
  CHECK((*r)[0].model == "G2");
  CHECK((*r)[1].model == "P100");
  std::istringstream bad("sn,cpu_milli,memory_mib,gpu,model\nn0,96000,x,8,G2\n");
  auto e = readAlibabaNodes(bad, "nodes.csv");
  REQUIRE_FALSE(e.ok());
  CHECK_THAT(e.error().message, Catch::Contains("nodes.csv:2: memory_mib"));
}

TEST_CASE("generic job CSV: columns in any order, decimal seconds and cores") {
  auto r = jobsCsv("gpus,duration_s,arrival_s,cpu,id\n2,300,0.5,40,j1\n1,10.25,0,0.5,j0\n");
  REQUIRE(r.ok());
  REQUIRE(r->trace.jobs.size() == 2);
  CHECK(r->trace.jobs[0].id == "j0");
  CHECK(r->trace.jobs[0].duration == 10'250);
  CHECK(r->trace.jobs[0].cpuMilli == 500);
  CHECK(r->trace.jobs[1].arrival == 500);
  CHECK(r->trace.jobs[1].gpus == 2);
}

TEST_CASE("generic job CSV round-trips through writeJobCsv") {
  Trace t;
  t.jobs.push_back(Job{.id = "a",
                       .arrival = 1'500,
                       .duration = 300'000,
                       .gpus = 2,
                       .cpuMilli = 40'000,
                       .memoryMib = 64});
  t.jobs.push_back(Job{.id = "b", .arrival = 2'001, .duration = 7, .gpus = 0, .cpuMilli = 250});
  std::ostringstream out;
  writeJobCsv(out, t);
  auto r = jobsCsv(out.str());
  REQUIRE(r.ok());
  REQUIRE(r->trace.jobs.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(r->trace.jobs[i].id == t.jobs[i].id);
    CHECK(r->trace.jobs[i].arrival == t.jobs[i].arrival);
    CHECK(r->trace.jobs[i].duration == t.jobs[i].duration);
    CHECK(r->trace.jobs[i].gpus == t.jobs[i].gpus);
    CHECK(r->trace.jobs[i].cpuMilli == t.jobs[i].cpuMilli);
    CHECK(r->trace.jobs[i].memoryMib == t.jobs[i].memoryMib);
  }
}

TEST_CASE("bad generic CSV rows give an error naming the line") {
  auto [text, fragment] = GENERATE(table<std::string, std::string>({
      {"arrival_s,duration_s,gpus\n0,-5,1\n", "jobs.csv:2: duration_s is negative"},
      {"arrival_s,duration_s,gpus\n0,5,1\n3,x,1\n", "jobs.csv:3: duration_s is not a number"},
      {"arrival_s,duration_s,gpus\n0,5\n", "jobs.csv:2: expected 3 fields, got 2"},
      {"arrival_s,gpus\n0,5\n", "jobs.csv:1: missing required column 'duration_s'"},
      {"arrival_s,duration_s,gpus,gpu\n0,5,1,1\n", "jobs.csv:1: unknown column 'gpu'"},
      {"arrival_s,duration_s,gpus\n0,5,1.5\n", "jobs.csv:2: gpus is not an integer"},
      {"arrival_s,duration_s,gpus\n0,5.0001,1\n", "jobs.csv:2: duration_s is not a number"},
      {"arrival_s,duration_s,gpus,cpu\n0,5,1,-2\n", "jobs.csv:2: cpu is not a non-negative"},
      {"", "jobs.csv: empty file"},
      // Times are bounded where they enter (10^12 s), with the limit in the message.
      {"arrival_s,duration_s,gpus\n4611686018427387904,1,1\n",
       "jobs.csv:2: arrival_s 4611686018427387904 is above the limit of 1000000000000 s"},
      {"arrival_s,duration_s,gpus\n0,1000000000000.001,1\n",
       "jobs.csv:2: duration_s 1000000000000.001 is above the limit of 1000000000000 s"},
      {"arrival_s,duration_s,gpus\n99999999999999999999999,1,1\n",
       "jobs.csv:2: arrival_s 99999999999999999999999 is above the limit"},
      {"arrival_s,duration_s,gpus,gpu_spec\n0,5,1,V100|\n",
       "jobs.csv:2: gpu_spec is not GPU model names joined by '|': 'V100|'"},
      {"arrival_s,duration_s,gpus,gpu_spec\n0,5,1,V;100\n", "jobs.csv:2: gpu_spec is not"},
  }));
  CAPTURE(text);
  auto r = jobsCsv(text);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains(fragment));
}

TEST_CASE("generic job CSV: the time limit itself, a UTF-8 BOM, a header without rows") {
  auto atLimit = jobsCsv("arrival_s,duration_s,gpus\n1000000000000,1000000000000.000,1\n");
  REQUIRE(atLimit.ok());
  CHECK(atLimit->trace.jobs[0].arrival == 1'000'000'000'000'000);
  CHECK(atLimit->trace.jobs[0].duration == 1'000'000'000'000'000);

  // Spreadsheet exports start the file with EF BB BF; the header is still recognised.
  auto bom = jobsCsv("\xEF\xBB\xBFid,arrival_s,duration_s,gpus\nx,1,2,3\n");
  REQUIRE(bom.ok());
  REQUIRE(bom->trace.jobs.size() == 1);
  CHECK(bom->trace.jobs[0].id == "x");
  CHECK(bom->trace.jobs[0].gpus == 3);
  // Only at the start of the file: elsewhere the bytes are data (and not a number).
  CHECK_FALSE(jobsCsv("arrival_s,duration_s,gpus\n\xEF\xBB\xBF"
                      "1,2,3\n")
                  .ok());

  auto empty = jobsCsv("arrival_s,duration_s,gpus\n");
  REQUIRE(empty.ok());
  CHECK(empty->stats.rows == 0);
  CHECK(empty->trace.jobs.empty());
}

TEST_CASE("an Alibaba pod list with a BOM before its header is read") {
  std::istringstream in(std::string("\xEF\xBB\xBF") + kPodHeader +
                        "p,1000,10,1,1000,,LS,Succeeded,1,5,2\n");
  auto r = readAlibabaPods(in, "pods.csv");
  REQUIRE(r.ok());
  REQUIRE(r->trace.jobs.size() == 1);
  CHECK(r->trace.jobs[0].duration == 3'000);
}

TEST_CASE("a missing file is an 'unavailable' error") {
  auto r = readJobCsvFile("/nonexistent/jobs.csv");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == "unavailable");
}
