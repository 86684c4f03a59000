#include "tools/kubecomp-sim/cli.hpp"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "libcore/alloc/gpu_model.hpp"
#include "libcore/alloc/policy_registry.hpp"
#include "libcore/cli/flags.hpp"
#include "tools/kubecomp-sim/cluster.hpp"
#include "tools/kubecomp-sim/engine.hpp"
#include "tools/kubecomp-sim/policy_flags.hpp"
#include "tools/kubecomp-sim/report.hpp"
#include "tools/kubecomp-sim/sim_input.hpp"
#include "tools/kubecomp-sim/trace_reader.hpp"
#include "tools/kubecomp-sim/workload.hpp"

namespace kc::sim {
namespace {

struct Options {
  // input
  std::string workload;
  std::int64_t jobs = 50;
  double lambda = 60;
  double intervalUnitMs = 1000;
  double jobDurationS = 300;
  std::uint64_t seed = 1;
  double gangShare = 0;
  std::int64_t gangMembers = 4;
  std::int64_t priorityLevels = 1;
  bool gangsFromMultiGpu = false;
  std::string alibabaPods;
  std::string alibabaSharing = "whole";
  bool alibabaCpuOnly = false;
  bool alibabaCompletedOnly = false;
  std::string traceCsv;
  std::string writeTrace;
  double timeScale = 1.0;
  // cluster
  std::string alibabaNodes;
  std::int64_t nodesPerPool = 0;
  std::int64_t pools = 1;
  std::string layout = "4+4";
  std::int64_t unattached = 0;
  std::int64_t gpusPerChassis = 0;
  std::string gpuModel;
  double nodeCpu = 192;
  std::int64_t nodeMemoryMib = 1 << 20;
  PolicyFlags behaviour;  // policy_flags.hpp
  // output
  std::string jobsOut;
  std::string summaryOut = "-";
  bool progress = false;
  bool quiet = false;
  bool failOnRejected = false;
};

// Every flag that sizes memory or time is bounded, with the limit in the message.
Status inRange(const char* flag, double value, double min, double max) {
  if (!(value >= min && value <= max)) {  // also false for NaN
    std::ostringstream m;
    m << flag << " must be in " << min << ".." << max << " (got " << value << ")";
    return makeError(kc::errc::kInvalid, m.str());
  }
  return okStatus();
}

Status inRange(const char* flag, std::int64_t value, std::int64_t min, std::int64_t max) {
  if (value < min || value > max) {
    return makeError(kc::errc::kInvalid, std::string(flag) + " must be in " + std::to_string(min) +
                                             ".." + std::to_string(max) + " (got " +
                                             std::to_string(value) + ")");
  }
  return okStatus();
}

std::string formatNumber(double v) {
  std::ostringstream m;
  m << v;
  return m.str();
}

constexpr auto kMaxSeconds = static_cast<double>(kMaxTraceSeconds);

Status checkFlags(const Options& o) {
  for (const Status& s : {
           inRange("--jobs", o.jobs, 1, static_cast<std::int64_t>(kMaxJobs)),
           inRange("--lambda", o.lambda, 1e-9, kMaxLambda),
           inRange("--interval-unit-ms", o.intervalUnitMs, 1, 1e9),
           inRange("--job-duration-s", o.jobDurationS, 0, kMaxSeconds),
           inRange("--time-scale", o.timeScale, 1e-6, 1e6),
           inRange("--gang-share", o.gangShare, 0.0, 1.0),
           inRange("--gang-members", o.gangMembers, 2, static_cast<std::int64_t>(kMaxMembers)),
           inRange("--priority-levels", o.priorityLevels, 1, 1000),
           inRange("--pools", o.pools, 1, static_cast<std::int64_t>(kMaxPools)),
           inRange("--unattached", o.unattached, 0, 1024),
           inRange("--gpus-per-chassis", o.gpusPerChassis, 0, 1024),
           inRange("--node-cpu", o.nodeCpu, 0.001, 1e9),
           inRange("--node-memory-mib", o.nodeMemoryMib, 0, std::int64_t{1} << 50),
           inRange("--nodes-per-pool", o.nodesPerPool, 0, static_cast<std::int64_t>(kMaxNodes)),
       }) {
    if (!s) {
      return s;
    }
  }
  return okStatus();
}

// An output file and what goes into it.
struct Output {
  std::string path;
  std::function<void(std::ostream&)> write;
};

// Writes every output to a temporary file next to its target, then renames them into place:
// a failed run or a failed write leaves no file, and no half-written one, under a target name.
// A target that exists and is not a regular file (/dev/null, /dev/stdout, a FIFO) is written
// directly: renaming over it would replace the device or pipe with a plain file.
Status writeOutputs(const std::vector<Output>& outputs) {
  std::vector<std::string> temps;  // "" for a target written directly
  auto removeTemps = [&] {
    for (const auto& t : temps) {
      if (!t.empty()) {
        std::remove(t.c_str());
      }
    }
  };
  for (const Output& o : outputs) {
    std::error_code ec;
    const auto st = std::filesystem::status(o.path, ec);
    const bool special =
        !ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st);
    const std::string temp =
        special ? std::string() : o.path + ".tmp." + std::to_string(::getpid());
    temps.push_back(temp);
    std::ofstream f(special ? o.path : temp, special ? std::ios::out : std::ios::trunc);
    if (f) {
      o.write(f);
      f.close();
    }
    if (!f) {
      removeTemps();
      return makeError(kc::errc::kUnavailable, "cannot write " + o.path);
    }
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (!temps[i].empty() && std::rename(temps[i].c_str(), outputs[i].path.c_str()) != 0) {
      removeTemps();
      return makeError(kc::errc::kUnavailable, "cannot write " + outputs[i].path);
    }
  }
  return okStatus();
}

Result<LoadedTrace> loadTrace(const Options& o) {
  const int sources = !o.workload.empty() + !o.alibabaPods.empty() + !o.traceCsv.empty();
  if (sources != 1) {
    return makeError(kc::errc::kInvalid,
                     "give exactly one of --workload, --alibaba-pods, --trace-csv");
  }
  Result<LoadedTrace> loaded = makeError(kc::errc::kInvalid, "no input");
  if (!o.workload.empty()) {
    auto mix = mixByName(o.workload);
    if (!mix) {
      return mix.error();
    }
    WorkloadSpec spec;
    spec.mix = *mix;
    spec.jobs = static_cast<std::uint64_t>(o.jobs);
    spec.lambda = o.lambda;
    spec.intervalUnit = static_cast<SimMs>(std::llround(o.intervalUnitMs));
    spec.duration = static_cast<SimMs>(std::llround(o.jobDurationS * kMsPerSecond));
    spec.seed = o.seed;
    spec.gangShare = o.gangShare;
    spec.gangMembers = static_cast<std::uint32_t>(o.gangMembers);
    spec.priorityLevels = static_cast<std::uint32_t>(o.priorityLevels);
    auto trace = generateWorkload(spec);
    if (!trace) {
      return trace.error();
    }
    LoadedTrace lt;
    lt.trace = std::move(*trace);
    lt.stats.rows = lt.stats.jobs = lt.trace.jobs.size();
    loaded = std::move(lt);
  } else if (!o.alibabaPods.empty()) {
    AlibabaOptions ao;
    if (o.alibabaSharing == "skip") {
      ao.sharing = GpuSharing::Skip;
    } else if (o.alibabaSharing != "whole") {
      return makeError(kc::errc::kInvalid, "--alibaba-sharing must be 'whole' or 'skip'");
    }
    ao.includeCpuOnly = o.alibabaCpuOnly;
    ao.skipCensored = o.alibabaCompletedOnly;
    loaded = readAlibabaPodsFile(o.alibabaPods, ao);
  } else {
    loaded = readJobCsvFile(o.traceCsv);
  }
  if (!loaded) {
    return loaded;
  }
  if (o.gangsFromMultiGpu) {
    gangsFromMultiGpu(loaded->trace);
  }
  if (o.timeScale != 1.0) {
    for (Job& j : loaded->trace.jobs) {
      const double scaled = static_cast<double>(j.arrival) * o.timeScale;
      if (!(scaled <= static_cast<double>(kMaxTraceMs))) {
        return makeError(kc::errc::kInvalid, "--time-scale " + formatNumber(o.timeScale) +
                                                 " puts job " + quoteInput(j.id) +
                                                 " past the arrival limit of " +
                                                 std::to_string(kMaxTraceSeconds) + " s");
      }
      j.arrival = static_cast<SimMs>(std::llround(scaled));
    }
  }
  return loaded;
}

Result<alloc::ClusterState> loadCluster(const Options& o) {
  if (!o.alibabaNodes.empty()) {
    auto nodes = readAlibabaNodesFile(o.alibabaNodes);
    if (!nodes) {
      return nodes.error();
    }
    return buildClusterFromNodes(*nodes, static_cast<std::uint32_t>(o.nodesPerPool),
                                 static_cast<std::uint32_t>(o.gpusPerChassis));
  }
  auto layout = parseLayout(o.layout);
  if (!layout) {
    return layout.error();
  }
  LayoutSpec spec;
  spec.pools = static_cast<std::uint32_t>(o.pools);
  spec.perNodeGpus = *layout;
  spec.unattachedPerPool = static_cast<std::uint32_t>(o.unattached);
  spec.gpusPerChassis = static_cast<std::uint32_t>(o.gpusPerChassis);
  if (!o.gpuModel.empty() && !alloc::validGpuModelName(o.gpuModel)) {
    return makeError(kc::errc::kInvalid, "--gpu-model " + quoteInput(o.gpuModel) +
                                             " is not a GPU model name (" +
                                             std::string(alloc::kGpuModelNameRule) + ")");
  }
  spec.gpuModel = o.gpuModel;
  spec.nodeCpuMilli = static_cast<std::int64_t>(std::llround(o.nodeCpu * 1000));
  spec.nodeMemoryMib = o.nodeMemoryMib;
  return buildCluster(spec);
}

nlohmann::json statsJson(const TraceStats& s) {
  return {{"rows", s.rows},
          {"jobs", s.jobs},
          {"skipped_no_start_time", s.skippedNoStartTime},
          {"skipped_no_end_time", s.skippedNoEndTime},
          {"skipped_cpu_only", s.skippedCpuOnly},
          {"skipped_gpu_sharing", s.skippedGpuSharing},
          {"skipped_censored_running", s.skippedCensored},
          {"gpu_sharing_as_whole_gpu", s.gpuSharingAsWhole},
          {"censored_running", s.censoredRunning},
          {"zero_duration", s.zeroDuration},
          {"gpu_spec_constrained", s.gpuSpecConstrained}};
}

// Said plainly instead of summarising an empty run (a mean wait of 0.0 over no jobs).
std::string noJobsMessage(const TraceStats& s) {
  if (s.rows == 0) {
    return "no jobs to simulate: the input has no data rows";
  }
  std::string why;
  auto add = [&](std::uint64_t n, const char* what) {
    if (n > 0) {
      why += (why.empty() ? "" : ", ") + std::to_string(n) + " " + what;
    }
  };
  add(s.skippedCpuOnly, "CPU-only (--alibaba-include-cpu-only keeps them)");
  add(s.skippedNoStartTime, "without scheduled_time");
  add(s.skippedNoEndTime, "without deletion_time");
  add(s.skippedGpuSharing, "GPU-sharing");
  add(s.skippedCensored, "still running");
  return "no jobs to simulate: every one of the " + std::to_string(s.rows) +
         " data rows was skipped (" + why + ")";
}

int fail(const std::string& message) {
  std::cerr << "kubecomp-sim: " << message << "\n";
  return 1;
}

// The input flags (--workload and its generator, the trace readers, --time-scale).
void addInputFlags(CLI::App& app, Options& o) {
  auto* in = "Input (exactly one of --workload, --alibaba-pods, --trace-csv)";
  app.add_option(
         "--workload", o.workload,
         "synthetic workload mix: w1..w4 (Table II), fig13 (equal A-E), ae:<percent of Job A> "
         "(rest Job E, Fig. 11), custom:a,b,c,d,e (weights of Table I types)")
      ->group(in);
  app.add_option("--jobs", o.jobs, "synthetic: number of jobs (1..10000000)")
      ->capture_default_str()
      ->group(in);
  app.add_option("--lambda", o.lambda,
                 "synthetic: mean of the Poisson-distributed integer interval between jobs, in "
                 "interval units (1e-9..1e9)")
      ->capture_default_str()
      ->group(in);
  app.add_option("--interval-unit-ms", o.intervalUnitMs,
                 "synthetic: length of one interval unit in ms (1000 = seconds, as the paper; "
                 "1..1e9)")
      ->capture_default_str()
      ->group(in);
  app.add_option("--job-duration-s", o.jobDurationS,
                 "synthetic: run time of every job in seconds (paper: 300; 0..1e12)")
      ->capture_default_str()
      ->group(in);
  app.add_option("--seed", o.seed,
                 "synthetic: seed of the job order and intervals (std::mt19937_64; "
                 "0..18446744073709551615)")
      ->capture_default_str()
      ->check(uint64Check())
      ->group(in);
  app.add_option("--alibaba-pods", o.alibabaPods,
                 "Alibaba cluster-trace-gpu-v2023 pod list (openb_pod_list_*.csv): arrival = "
                 "creation_time, "
                 "duration = deletion_time - scheduled_time; rows lacking times and CPU-only rows "
                 "are skipped and counted; gpu_spec (models joined by '|'; empty or nan = any "
                 "GPU) limits a job to GPUs of those models")
      ->group(in);
  app.add_option("--alibaba-sharing", o.alibabaSharing,
                 "Alibaba GPU-sharing tasks (gpu_milli < 1000): 'whole' = take one whole GPU, "
                 "'skip' = leave out (counted)")
      ->capture_default_str()
      ->group(in);
  app.add_flag("--alibaba-include-cpu-only", o.alibabaCpuOnly,
               "Alibaba: keep num_gpu = 0 tasks (they need CPU and memory only)")
      ->group(in);
  app.add_flag("--alibaba-completed-only", o.alibabaCompletedOnly,
               "Alibaba: skip (and count) pod_phase Running rows, whose duration is censored at "
               "the trace's end")
      ->group(in);
  app.add_option("--trace-csv", o.traceCsv,
                 "generic job CSV with header; columns arrival_s, duration_s, gpus (required), id, "
                 "cpu (cores), memory_mib, gpu_spec (GPU models joined by '|'), members (a gang "
                 "of that many pods with the row's requests, all placed at once; 1..1024, "
                 "default 1), priority (queue order: higher first, then arrival; 32-bit "
                 "integer, default 0)")
      ->group(in);
  app.add_option("--gang-share", o.gangShare,
                 "synthetic: share of the jobs (0..1) that are gangs of --gang-members pods, "
                 "each pod with its job type's request")
      ->capture_default_str()
      ->group(in);
  app.add_option("--gang-members", o.gangMembers, "synthetic: pods per gang (2..1024)")
      ->capture_default_str()
      ->group(in);
  app.add_option("--priority-levels", o.priorityLevels,
                 "synthetic: each job gets a priority drawn uniformly from 0..N-1 (1..1000; 1 = "
                 "all 0)")
      ->capture_default_str()
      ->group(in);
  app.add_flag("--gangs-from-multi-gpu", o.gangsFromMultiGpu,
               "any input: a job of one pod asking g > 1 GPUs becomes a gang of g one-GPU pods "
               "(its CPU and memory split evenly, rounded up)")
      ->group(in);
  app.add_option(
         "--time-scale", o.timeScale,
         "multiply every arrival time by this factor (< 1 compresses a trace to raise load; "
         "1e-6..1e6, and no arrival may end up past 1e12 s)")
      ->capture_default_str()
      ->group(in);
  app.add_option("--write-trace", o.writeTrace,
                 "also write the input jobs as a generic job CSV to this file")
      ->group(in);
}

void addClusterFlags(CLI::App& app, Options& o) {
  auto* cl = "Cluster (synthetic layout, or the Alibaba node list)";
  app.add_option("--pools", o.pools,
                 "number of GPU pools (each with the --layout nodes; 1..100000)")
      ->capture_default_str()
      ->group(cl);
  app.add_option("--layout", o.layout,
                 "GPUs attached to each node of a pool at the start, e.g. 4+4+8+8 (entries = nodes "
                 "per pool)")
      ->capture_default_str()
      ->group(cl);
  app.add_option("--unattached", o.unattached,
                 "GPUs per pool attached to no node at the start (0..1024)")
      ->capture_default_str()
      ->group(cl);
  app.add_option("--gpus-per-chassis", o.gpusPerChassis,
                 "GPUs per chassis (0..1024): each pool's GPUs are dealt round-robin over "
                 "ceil(pool GPUs / N) chassis, ids falcon-<k>.g<index> (the testbed: 4, two "
                 "chassis); 0 = ids g<index>, no chassis part (each GPU moves on its own)")
      ->capture_default_str()
      ->group(cl);
  app.add_option("--gpu-model", o.gpuModel,
                 "model of every GPU of the layout (matched by gpu_spec; default none, so a job "
                 "with a gpu_spec cannot run); the Alibaba node list gives each node's model")
      ->group(cl);
  app.add_option("--node-cpu", o.nodeCpu, "CPU cores per node (testbed: 192)")
      ->capture_default_str()
      ->group(cl);
  app.add_option("--node-memory-mib", o.nodeMemoryMib, "memory per node in MiB")
      ->capture_default_str()
      ->group(cl);
  app.add_option("--alibaba-nodes", o.alibabaNodes,
                 "Alibaba node list (openb_node_list_gpu_node.csv); replaces --pools/--layout")
      ->group(cl);
  app.add_option("--nodes-per-pool", o.nodesPerPool,
                 "Alibaba nodes: consecutive nodes per pool (0 = one pool of all nodes)")
      ->capture_default_str()
      ->group(cl);
}

void addOutputFlags(CLI::App& app, Options& o) {
  auto* out = "Output";
  app.add_option("--jobs-out", o.jobsOut,
                 "per-job CSV: id,arrival,start,end,wait,node,gpus,gpus_moved,status")
      ->group(out);
  app.add_option("--summary-out", o.summaryOut, "summary JSON file ('-' = stdout)")
      ->capture_default_str()
      ->group(out);
  app.add_flag("--progress", o.progress,
               "report progress on stderr from the start (by default once a run has taken 5 s): "
               "a line at every 5% of jobs done and at least every 5 s")
      ->group(out);
  app.add_flag("--quiet", o.quiet, "no progress output")->group(out);
  app.add_flag("--fail-on-rejected", o.failOnRejected,
               "exit 1 (writing no output file) when any job is rejected; by default a run "
               "that rejects jobs says how many on stderr and exits 0")
      ->group(out);
}

// Progress lines on stderr: with --progress from the start, otherwise once the run has taken
// kQuietProgress (short runs stay silent); one at every 5% of jobs done, one whenever
// kProgressEvery passed without one, and the last.
class ProgressLines {
 public:
  static constexpr std::chrono::seconds kQuietProgress{5};
  static constexpr std::chrono::seconds kProgressEvery{5};
  ProgressLines(bool fromStart, std::chrono::steady_clock::time_point started)
      : fromStart_(fromStart), started_(started), last_(started) {}
  void operator()(std::uint64_t done, std::uint64_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (!fromStart_ && now - started_ < kQuietProgress) {
      return;
    }
    const std::uint64_t step = total ? 20 * done / total : 20;  // 5% steps done
    if (step == step_ && done != total && now - last_ < kProgressEvery) {
      return;
    }
    step_ = step;
    last_ = now;
    std::cerr << "kubecomp-sim: " << done << "/" << total << " jobs done ("
              << (total ? 100 * done / total : 100) << "%), "
              << std::chrono::duration<double>(now - started_).count() << " s\n";
  }

 private:
  bool fromStart_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point last_;
  std::uint64_t step_ = 0;
};

// What stderr says of a run that rejected jobs ("" when none was): how many and why.
std::string rejectedMessage(const SimResult& r, std::size_t jobs) {
  if (r.rejected == 0) {
    return "";
  }
  std::string m = std::to_string(r.rejected) + " of " + std::to_string(jobs) +
                  " jobs rejected: they cannot run even on the empty cluster";
  if (r.rejectedGpuModel > 0) {
    m += " (" + std::to_string(r.rejectedGpuModel) +
         " only for their gpu_spec: no pool or node has enough GPUs of an accepted model)";
  }
  return m + "; the summary counts them in 'rejected' and 'rejected_gpu_model'";
}

// Writes the outputs of a finished run (files, then the summary on stdout if asked).
int writeResults(const Options& o, const LoadedTrace& trace, const SimResult& result,
                 const alloc::ClusterState& cluster, const nlohmann::json& summary) {
  // Files only now, after a successful run, each complete or not at all.
  std::vector<Output> outputs;
  if (!o.writeTrace.empty()) {
    outputs.push_back({o.writeTrace, [&](std::ostream& f) { writeJobCsv(f, trace.trace); }});
  }
  if (!o.jobsOut.empty()) {
    outputs.push_back(
        {o.jobsOut, [&](std::ostream& f) { writeJobOutcomes(f, trace.trace, result, cluster); }});
  }
  if (o.summaryOut != "-") {
    outputs.push_back({o.summaryOut, [&](std::ostream& f) { f << summary.dump(1) << "\n"; }});
  }
  if (auto s = writeOutputs(outputs); !s) {
    return fail(s.error().message);
  }
  if (o.summaryOut == "-") {
    std::cout << summary.dump(1) << "\n";
  }
  return 0;
}

int runUnguarded(int argc, char** argv) {
  Options o;
  CLI::App app{
      "kubecomp-sim: trace-driven simulator of a composable GPU cluster (KubeComp, paper 001 "
      "section VI). Jobs (single pods or gangs placed all at once; queued by priority, then "
      "arrival) are placed (FCFS by default) by the same libcore/alloc policies the scheduler "
      "runs. "
      "Prints a summary JSON (wait, JCT, makespan, GPU utilisation, CDF of used GPUs, GPUs "
      "moved). Times are at most 10^12 s, traces at most 10,000,000 jobs (20,000 with "
      "--queue easy-backfill or slack-backfill), trace lines at most 1 MiB, clusters at most "
      "100,000 pools, 1,000,000 nodes and 10,000,000 GPUs (docs/simulator.md, Limits); output "
      "files are written only after a successful run."};
  app.get_formatter()->column_width(40);
  addInputFlags(app, o);
  addClusterFlags(app, o);
  addPolicyFlags(app, o.behaviour);
  addOutputFlags(app, o);
  kc::cli::addVersionFlag(app, "kubecomp-sim");
  if (auto exit = kc::cli::parse(app, argc, argv)) {
    return *exit;
  }
  if (o.behaviour.listPolicies) {
    std::cout << policyList();
    return 0;
  }
  if (auto s = checkFlags(o); !s) {
    return fail(s.error().message);
  }
  auto built = buildPolicyConfig(app, o.behaviour);
  if (!built) {
    return fail(built.error().message);
  }
  SimConfig config = std::move(*built);
  // Before generating them: a synthetic trace too long for the queue policy is refused at once.
  if (auto s = checkPlanningJobs(config.queue, o.workload.empty() ? 0 : o.jobs); !s) {
    return fail(s.error().message);
  }
  auto cluster = loadCluster(o);
  if (!cluster) {
    return fail(cluster.error().message);
  }
  auto trace = loadTrace(o);
  if (!trace) {
    return fail(trace.error().message);
  }
  if (trace->trace.jobs.empty()) {
    return fail(noJobsMessage(trace->stats));
  }
  const auto started = std::chrono::steady_clock::now();
  if (!o.quiet) {
    config.progress = ProgressLines(o.progress, started);
  }
  auto result = simulate(*cluster, trace->trace, config);
  if (!result) {
    return fail(result.error().message);
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (const std::string rejected = rejectedMessage(*result, trace->trace.jobs.size());
      !rejected.empty()) {
    if (o.failOnRejected) {
      return fail(rejected + " (--fail-on-rejected)");
    }
    std::cerr << "kubecomp-sim: warning: " << rejected << "\n";
  }
  nlohmann::json j = summaryJson(trace->trace, *result);
  j["config"] = policyConfigJson(o.behaviour, config);
  j["config"]["nodes"] = static_cast<std::uint64_t>(cluster->nodeCount());
  j["config"]["pools"] = static_cast<std::uint64_t>(cluster->poolCount());
  if (o.gpusPerChassis != 0) {
    j["config"]["gpus_per_chassis"] = o.gpusPerChassis;  // only when given: outputs unchanged
  }
  if (o.gangsFromMultiGpu) {
    j["config"]["gangs_from_multi_gpu"] = true;  // likewise
  }
  j["trace"] = statsJson(trace->stats);
  j["wall_s"] = wall;
  return writeResults(o, *trace, *result, *cluster, j);
}

}  // namespace

int runCli(int argc, char** argv) {
  // The limits keep a run within about 1.5 GiB; a machine with less memory (or a lower
  // RLIMIT_AS) still gets a message and exit code 1 instead of an abort. No file is written:
  // outputs are renamed into place only at the end of a successful run.
  try {
    return runUnguarded(argc, argv);
  } catch (const std::bad_alloc&) {
    return fail(
        "out of memory (see the limits in docs/simulator.md; fewer jobs, nodes or "
        "GPUs fit)");
  }
}

}  // namespace kc::sim
