#pragma once
// Trace readers: the Alibaba GPU cluster trace v2023 (`openb_pod_list_*.csv`,
// `openb_node_list_*.csv`) and the simulator's generic CSV. Every reader validates every row:
// a malformed row is an error naming the file line, never a silent skip. Rows that are
// well-formed but unusable for a simulation (no start time, CPU-only) are skipped on purpose
// and COUNTED in TraceStats, so a caller can always account for every input row.
// Hostile input: a line longer than kMaxLineBytes (1 MiB) is an error naming it, read no
// further; an error quotes at most kMaxQuotedChars of a field (quoteInput, job.hpp); the *File
// readers refuse a path that is not a regular file (or a symlink to one) before reading:
// "invalid", "<path>: not a regular file (a directory)".

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "libcore/base/result.hpp"
#include "tools/kubecomp-sim/job.hpp"

namespace kc::sim {

// How an Alibaba task that shares a GPU (num_gpu = 1, gpu_milli < 1000) is treated. The
// device-plugin model of KubeComp hands out whole GPUs exclusively, so GPU sharing cannot be
// expressed; by default such a task takes one whole GPU (its demand is rounded up).
enum class GpuSharing : std::uint8_t { WholeGpu, Skip };

struct AlibabaOptions {
  GpuSharing sharing = GpuSharing::WholeGpu;
  bool includeCpuOnly = false;  // num_gpu = 0 tasks; skipped (and counted) by default
  // pod_phase Running rows were still running when the trace ended: their duration is censored
  // (long-lived services). Kept by default (ending at deletion_time, the trace's end); skipped
  // and counted when set, leaving the tasks that completed (Succeeded / Failed).
  bool skipCensored = false;
};

// What happened to every data row of a pod list. rows = sum of all the "skipped_*" counters
// plus jobs; the other counters describe kept jobs.
struct TraceStats {
  std::uint64_t rows = 0;                // data rows read (header excluded)
  std::uint64_t jobs = 0;                // jobs produced
  std::uint64_t skippedNoStartTime = 0;  // scheduled_time empty (pending at trace end)
  std::uint64_t skippedNoEndTime = 0;    // deletion_time empty
  std::uint64_t skippedCpuOnly = 0;      // num_gpu = 0 (when not included)
  std::uint64_t skippedGpuSharing = 0;   // gpu_milli < 1000 with GpuSharing::Skip
  std::uint64_t skippedCensored = 0;     // pod_phase Running with skipCensored
  std::uint64_t gpuSharingAsWhole = 0;   // gpu_milli < 1000 kept as one whole GPU
  std::uint64_t censoredRunning = 0;     // pod_phase Running: ends at the trace's end time
  std::uint64_t zeroDuration = 0;        // deletion_time == scheduled_time
  std::uint64_t gpuSpecConstrained = 0;  // kept GPU jobs with a gpu_spec (accepted GPU models)
};

struct LoadedTrace {
  Trace trace;
  TraceStats stats;
};

// Alibaba cluster-trace-gpu-v2023 pod list. Required columns: name, cpu_milli, memory_mib,
// num_gpu, gpu_milli, creation_time, deletion_time, scheduled_time (pod_phase and gpu_spec
// optional). gpu_spec ("V100M16|V100M32"; empty or "nan" = any GPU) becomes Job::gpuSpec.
// Times are at most kMaxTraceSeconds, rows at most kMaxJobs.
// arrival = creation_time, duration = deletion_time - scheduled_time (the time the task held
// its resources; the trace's own queueing is discarded, the simulator produces its own).
// Errors ("invalid", message "<source>:<line>: ..."): missing column, non-numeric or negative
// field, deletion before scheduling, scheduling before creation, wrong field count.
Result<LoadedTrace> readAlibabaPods(std::istream& in, const std::string& source,
                                    const AlibabaOptions& options = {});
Result<LoadedTrace> readAlibabaPodsFile(const std::string& path,
                                        const AlibabaOptions& options = {});

struct NodeSpec {
  std::string name;
  std::int64_t cpuMilli = 0;
  std::int64_t memoryMib = 0;
  std::uint32_t gpus = 0;  // GPUs attached at the start
  std::uint32_t pool = 0;  // pool index
  std::string model;       // GPU model of the node's GPUs ("" = unknown; matches no gpu_spec)
};

// Alibaba node list (`sn,cpu_milli,memory_mib,gpu,model`): one node per row, all in pool 0.
// At most kMaxNodes nodes and kMaxGpus GPUs; `model` is optional (empty or "nan": none).
Result<std::vector<NodeSpec>> readAlibabaNodes(std::istream& in, const std::string& source);
Result<std::vector<NodeSpec>> readAlibabaNodesFile(const std::string& path);

// Generic job CSV (documented in docs/simulator.md). First line is a header naming columns
// in any order. Required: arrival_s, duration_s, gpus. Optional: id, cpu (cores, decimal),
// memory_mib, gpu_spec (as the Alibaba column), members (a gang of that many pods, each with
// the row's requests; 1..kMaxMembers, default 1) and priority (queue priority, a 32-bit integer,
// default 0). Times are seconds (decimal, up to millisecond
// precision), 0..kMaxTraceSeconds; at most kMaxJobs rows. A leading UTF-8 BOM is ignored.
// Unknown columns are an error (a typo must not silently drop a field).
Result<LoadedTrace> readJobCsv(std::istream& in, const std::string& source);
Result<LoadedTrace> readJobCsvFile(const std::string& path);

// Writes jobs in the generic CSV format (round-trips through readJobCsv).
void writeJobCsv(std::ostream& out, const Trace& trace);

}  // namespace kc::sim
