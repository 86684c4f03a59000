// kubecomp-sim against hostile input (an independent review's findings): a trace path that is
// not a regular file, lines past the limit, huge fields quoted back in full, pandas' "nan" in
// gpu_spec, seeds outside uint64, rejected jobs reported, and the queue policies that plan ahead
// refused above the job count they can simulate.

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "libcore/alloc/policy_registry.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/sim/sim_jobs.hpp"
#include "tools/kubecomp-sim/cli.hpp"
#include "tools/kubecomp-sim/cluster.hpp"
#include "tools/kubecomp-sim/engine.hpp"
#include "tools/kubecomp-sim/sim_input.hpp"
#include "tools/kubecomp-sim/trace_reader.hpp"

using namespace kc::sim;
namespace fs = std::filesystem;

namespace {

const std::string kPodHeader =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n";

// The error message of a failed read, or "" when the read succeeded.
template <typename R>
std::string errorOf(const R& r) {
  return r.ok() ? std::string() : r.error().message;
}

// kc::sim::runCli in-process; `err` gets what it wrote to std::cerr.
int runSimCli(std::vector<std::string> args, std::string* err = nullptr) {
  args.insert(args.begin(), "kubecomp-sim");
  std::vector<char*> argv;
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  std::ostringstream captured;
  std::streambuf* old = std::cerr.rdbuf(captured.rdbuf());
  const int rc = kc::sim::runCli(static_cast<int>(argv.size()), argv.data());
  std::cerr.rdbuf(old);
  if (err != nullptr) {
    *err = captured.str();
  }
  return rc;
}

}  // namespace

TEST_CASE("a trace path that is not a regular file is refused by name, before any read") {
  kc::testing::TempDir dir;
  // A directory used to read as "empty file (no header)"; /dev/zero used to grow one line
  // to about 1 GB before failing the same way.
  const std::string path = GENERATE(std::string("/dev/zero"), std::string("DIR"));
  const std::string target = path == "DIR" ? dir.path().string() : path;
  CAPTURE(target);
  for (const std::string& message :
       {errorOf(readJobCsvFile(target)), errorOf(readAlibabaPodsFile(target)),
        errorOf(readAlibabaNodesFile(target))}) {
    CHECK_THAT(message, Catch::StartsWith(target + ": not a regular file ("));
  }
  // A FIFO would block the open for ever waiting for a writer.
  const std::string fifo = dir.file("trace.fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THAT(errorOf(readJobCsvFile(fifo)), Catch::Contains("not a regular file"));
  // A symbolic link to a regular file is still read.
  const std::string real = dir.write("real.csv", "arrival_s,duration_s,gpus\n0,1,1\n");
  fs::create_symlink(real, dir.path() / "link.csv");
  auto linked = readJobCsvFile(dir.file("link.csv"));
  REQUIRE(linked.ok());
  CHECK(linked->trace.jobs.size() == 1);
}

TEST_CASE("a trace line longer than 1 MiB is refused with its line number") {
  // An id that makes the line exactly kMaxLineBytes long is read; one byte more is refused.
  const std::string tail = ",0,1,1";
  const std::string atLimit(kMaxLineBytes - tail.size(), 'a');
  auto ok = [&](const std::string& id) {
    std::istringstream in("id,arrival_s,duration_s,gpus\nx,0,1,1\n" + id + tail + "\n");
    return readJobCsv(in, "jobs.csv");
  };
  auto r = ok(atLimit);
  REQUIRE(r.ok());
  CHECK(r->trace.jobs[1].id.size() == atLimit.size());
  CHECK(errorOf(ok(atLimit + "a")) == "jobs.csv:3: line longer than 1048576 bytes (the limit)");
  // The same without a final newline, and in the other readers' headers.
  std::istringstream noNewline("arrival_s,duration_s,gpus\n" + std::string(kMaxLineBytes + 1, '1'));
  CHECK_THAT(errorOf(readJobCsv(noNewline, "jobs.csv")),
             Catch::StartsWith("jobs.csv:2: line longer"));
  std::istringstream header(std::string(3 * kMaxLineBytes, 'n') + "\n");
  CHECK_THAT(errorOf(readAlibabaNodes(header, "nodes.csv")),
             Catch::StartsWith("nodes.csv:1: line longer"));
}

TEST_CASE("an error quotes at most 64 bytes of a field, then its length") {
  const std::string big(500'000, 'x');
  const std::string quoted = "'" + std::string(64, 'x') + "...' (500000 bytes)";
  using Read = std::function<std::string(const std::string&)>;
  const Read csv = [](const std::string& text) {
    std::istringstream in(text);
    return errorOf(readJobCsv(in, "jobs.csv"));
  };
  const Read podList = [](const std::string& text) {
    std::istringstream in(kPodHeader + text);
    return errorOf(readAlibabaPods(in, "pods.csv"));
  };
  const Read nodeList = [](const std::string& text) {
    std::istringstream in("sn,cpu_milli,memory_mib,gpu,model\n" + text);
    return errorOf(readAlibabaNodes(in, "nodes.csv"));
  };
  auto [read, text, what] = GENERATE_COPY(table<Read, std::string, std::string>({
      {csv, "arrival_s,duration_s,gpus\n0," + big + ",1\n", "duration_s is not a number"},
      {csv, "arrival_s,duration_s,gpus\n-" + big + ",1,1\n", "arrival_s is negative"},
      {csv, "arrival_s,duration_s,gpus\n" + std::string(500'000, '9') + ",1,1\n", "arrival_s "},
      {csv, "arrival_s,duration_s,gpus\n0,1," + big + "\n", "gpus is not an integer"},
      {csv, "arrival_s,duration_s,gpus,cpu\n0,1,1," + big + "\n", "cpu is not"},
      {csv, "arrival_s,duration_s,gpus,memory_mib\n0,1,1," + big + "\n", "memory_mib is not"},
      {csv, "arrival_s,duration_s,gpus,gpu_spec\n0,1,1," + big + "\n", "gpu_spec is not"},
      {csv, "arrival_s,duration_s,gpus," + big + "\n", "unknown column"},
      {podList, "p," + big + ",1,1,1000,,LS,Succeeded,1,2,1\n", "cpu_milli is not an integer"},
      {podList, "p,1,1,1,1000," + big + ",LS,Succeeded,1,2,1\n", "gpu_spec is not"},
      {nodeList, "n1,1,1,1," + big + "\n", "model is not a GPU model name"},
  }));
  CAPTURE(what);
  const std::string message = read(text);
  CHECK_THAT(message, Catch::Contains(what));
  CHECK(message.size() < 200);
  if (what != "arrival_s is negative" && what != "arrival_s ") {
    CHECK_THAT(message, Catch::Contains(quoted));
  } else {
    CHECK_THAT(message,
               Catch::Contains("...' (500001 bytes)") || Catch::Contains("...' (500000 bytes)"));
  }
  // Control bytes are escaped, so no terminal escape sequence is echoed.
  std::istringstream in("arrival_s,duration_s,gpus\n0,\x1b[2J,1\n");
  CHECK_THAT(errorOf(readJobCsv(in, "jobs.csv")), Catch::EndsWith("'\\x1b[2J'"));
}

TEST_CASE("'nan' in gpu_spec means no model constraint, as the Alibaba trace's README says") {
  // The pandas export of the trace writes nan for an empty gpu_spec; it used to become a
  // model named "nan" that no GPU has, so those jobs were all rejected.
  for (const char* nan : {"nan", "NaN", "NAN", ""}) {
    CAPTURE(nan);
    std::istringstream pods(kPodHeader + "p1,1000,10,1,1000," + nan + ",LS,Succeeded,0,10,0\n" +
                            "p2,1000,10,2,1000,V100M16|T4,LS,Succeeded,0,10,0\n");
    auto r = readAlibabaPods(pods, "pods.csv");
    REQUIRE(r.ok());
    CHECK(r->stats.gpuSpecConstrained == 1);
    CHECK(r->trace.specOf(r->trace.jobs[0]).empty());
    CHECK(r->trace.specOf(r->trace.jobs[1]) == "V100M16|T4");
    std::istringstream csv(std::string("arrival_s,duration_s,gpus,gpu_spec\n0,1,1,") + nan + "\n");
    auto c = readJobCsv(csv, "jobs.csv");
    REQUIRE(c.ok());
    CHECK(c->trace.jobs[0].gpuSpec == 0);
    std::istringstream nodes(std::string("sn,cpu_milli,memory_mib,gpu,model\nn1,1000,10,0,") + nan +
                             "\n");
    auto n = readAlibabaNodes(nodes, "nodes.csv");
    REQUIRE(n.ok());
    CHECK(n->at(0).model.empty());
  }
  // Only the whole field: a model whose name merely starts with nan is a model.
  std::istringstream pods(kPodHeader + "p1,1000,10,1,1000,nano,LS,Succeeded,0,10,0\n");
  auto r = readAlibabaPods(pods, "pods.csv");
  REQUIRE(r.ok());
  CHECK(r->stats.gpuSpecConstrained == 1);
}

TEST_CASE("kubecomp-sim CLI: --seed and --policy-seed outside 0..2^64-1 are usage errors") {
  auto [flag, value, rc] = GENERATE(table<std::string, std::string, int>({
      // -1 used to be taken as 2^64 - 1, and 2^64 and above clamped to it, silently.
      {"--seed", "-1", 2},
      {"--seed", "18446744073709551616", 2},
      {"--seed", "99999999999999999999999", 2},
      {"--seed", "+1", 2},
      {"--seed", "0x10", 2},
      {"--policy-seed", "-1", 2},
      {"--policy-seed", "18446744073709551616", 2},
      {"--seed", "18446744073709551615", 0},
      {"--seed", "0", 0},
      {"--policy-seed", "18446744073709551615", 0},
  }));
  CAPTURE(flag, value);
  std::string err;
  CHECK(runSimCli({"--workload", "w1", "--jobs", "3", "--quiet", "--summary-out", "/dev/null", flag,
                   value},
                  &err) == rc);
  if (rc != 0) {
    CHECK_THAT(err,
               Catch::Contains(flag + ": must be an integer in 0..18446744073709551615 (got '" +
                               value + "')"));
  }
}

TEST_CASE("kubecomp-sim CLI: a run that rejects jobs says how many on stderr") {
  kc::testing::TempDir dir;
  // b asks for a model the cluster lacks, c for more GPUs than any node can hold.
  const std::string trace = dir.write(
      "t.csv", "id,arrival_s,duration_s,gpus,gpu_spec\na,0,10,1,\nb,0,10,1,A100\nc,0,10,9,\n");
  const std::string summary = dir.file("sum.json");
  std::string err;
  CHECK(runSimCli({"--trace-csv", trace, "--layout", "4+4", "--summary-out", summary}, &err) == 0);
  CHECK_THAT(err, Catch::Contains("kubecomp-sim: warning: 2 of 3 jobs rejected: they cannot run "
                                  "even on the empty cluster (1 only for their gpu_spec"));
  CHECK(fs::exists(summary));
  fs::remove(summary);
  // --fail-on-rejected makes it a failure: exit 1, no output file.
  CHECK(runSimCli({"--trace-csv", trace, "--layout", "4+4", "--summary-out", summary,
                   "--fail-on-rejected"},
                  &err) == 1);
  CHECK_THAT(err,
             Catch::Contains("2 of 3 jobs rejected") && Catch::Contains("(--fail-on-rejected)"));
  CHECK_FALSE(fs::exists(summary));
  // Nothing rejected: nothing said.
  const std::string fine = dir.write("f.csv", "arrival_s,duration_s,gpus\n0,10,1\n");
  CHECK(runSimCli({"--trace-csv", fine, "--summary-out", summary, "--fail-on-rejected"}, &err) ==
        0);
  CHECK(err.empty());
}

TEST_CASE("easy-backfill and slack-backfill take at most kMaxPlanningJobs jobs") {
  // They plan for every waiting job at each event (quadratic in the jobs waiting at once);
  // 200,000 jobs used to run for hours with no output. The limit is refused up front.
  const char* queue = GENERATE("easy-backfill", "slack-backfill");
  CAPTURE(queue);
  std::string err;
  CHECK(runSimCli({"--workload", "w1", "--jobs", std::to_string(kMaxPlanningJobs + 1), "--queue",
                   queue, "--summary-out", "/dev/null"},
                  &err) == 1);
  CHECK_THAT(err, Catch::Contains(std::string("the ") + queue +
                                  " queue takes at most 20000 jobs "
                                  "(got 20001)"));
  // The library refuses it too, whatever the trace's origin; fcfs and backfill do not.
  Trace trace;
  for (std::size_t i = 0; i <= kMaxPlanningJobs; ++i) {
    trace.jobs.push_back(test::job(i, static_cast<double>(i) * 100, 1, 1));
  }
  LayoutSpec spec;
  spec.pools = 1;
  spec.perNodeGpus = {2};
  spec.nodeCpuMilli = 8'000;
  spec.nodeMemoryMib = 1024;
  auto cluster = buildCluster(spec);
  REQUIRE(cluster.ok());
  SimConfig config = defaultSimConfig();
  config.queue = kc::alloc::findQueuePolicy(queue)->discipline;
  auto refused = simulate(*cluster, trace, config);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == kc::errc::kInvalid);
  CHECK_THAT(refused.error().message, Catch::Contains("at most 20000 jobs (got 20001)"));
  // At the limit it runs (a light load: each job alone), and fcfs takes more.
  trace.jobs.pop_back();
  auto atLimit = simulate(*cluster, trace, config);
  REQUIRE(atLimit.ok());
  CHECK(atLimit->jobs.size() == kMaxPlanningJobs);
  CHECK(checkPlanningJobs(QueueDiscipline::Fcfs, kMaxJobs).ok());
  CHECK(checkPlanningJobs(QueueDiscipline::Backfill, kMaxJobs).ok());
}
