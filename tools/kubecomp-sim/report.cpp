#include "tools/kubecomp-sim/report.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace kc::sim {
namespace {

std::string seconds(SimMs ms) {
  char buf[40];
  const int n = std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ms) / kMsPerSecond);
  return std::string(buf, static_cast<std::size_t>(n));
}

Distribution distribution(std::vector<double>& v) {
  Distribution d;
  if (v.empty()) {
    return d;
  }
  double sum = 0;
  for (double x : v) {
    sum += x;
  }
  d.mean = sum / static_cast<double>(v.size());
  // Nearest-rank percentiles.
  auto rank = [&](double q) {
    std::size_t k = static_cast<std::size_t>(q * static_cast<double>(v.size()) + 0.999999);
    k = std::clamp<std::size_t>(k, 1, v.size()) - 1;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    return v[k];
  };
  d.p50 = rank(0.50);
  d.p95 = rank(0.95);
  d.max = *std::max_element(v.begin(), v.end());
  return d;
}

nlohmann::json toJson(const Distribution& d) {
  return {{"mean", d.mean}, {"p50", d.p50}, {"p95", d.p95}, {"max", d.max}};
}

// Gangs (only when the trace has some): how many, their members, their wait, how many were
// rejected, and the stranded GPU time. Priorities (only when some job has one): the mean
// wait of each priority's completed jobs.
void addGangsAndPriorities(nlohmann::json& j, const Trace& trace, const SimResult& result) {
  std::uint64_t gangs = 0;
  std::uint64_t members = 0;
  std::uint64_t rejected = 0;
  std::vector<double> waits;
  std::map<std::int32_t, std::pair<double, std::uint64_t>> byPriority;
  bool priorities = false;
  for (std::size_t i = 0; i < trace.jobs.size(); ++i) {
    const Job& job = trace.jobs[i];
    const JobOutcome& o = result.jobs[i];
    priorities = priorities || job.priority != 0;
    const double wait = static_cast<double>(o.start - job.arrival) / kMsPerSecond;
    if (!o.rejected()) {
      auto& [sum, n] = byPriority[job.priority];
      sum += wait;
      ++n;
    }
    if (job.members <= 1) {
      continue;
    }
    ++gangs;
    members += job.members;
    if (o.rejected()) {
      ++rejected;
    } else {
      waits.push_back(wait);
    }
  }
  if (gangs > 0) {
    j["gangs"] = {{"gangs", gangs},
                  {"members", members},
                  {"rejected", rejected},
                  {"wait_s", toJson(distribution(waits))},
                  {"stranded_gpu_s", result.strandedGpuMs / kMsPerSecond}};
  }
  if (priorities) {
    nlohmann::json p = nlohmann::json::object();
    for (const auto& [priority, acc] : byPriority) {
      p[std::to_string(priority)] = {{"jobs", acc.second},
                                     {"mean_wait_s", acc.first / static_cast<double>(acc.second)}};
    }
    j["priorities"] = p;
  }
}

}  // namespace

void writeJobOutcomes(std::ostream& out, const Trace& trace, const SimResult& result,
                      const alloc::ClusterState& cluster) {
  out << "id,arrival,start,end,wait,node,gpus,gpus_moved,status\n";
  for (std::size_t i = 0; i < trace.jobs.size(); ++i) {
    const Job& j = trace.jobs[i];
    const JobOutcome& o = result.jobs[i];
    out << j.id << ',' << seconds(j.arrival) << ',';
    if (o.rejected()) {
      out << ",,,," << j.totalGpus() << ",0,rejected\n";
      continue;
    }
    out << seconds(o.start) << ',' << seconds(o.end) << ',' << seconds(o.start - j.arrival) << ','
        << cluster.node(o.node).name << ',' << j.totalGpus() << ',' << o.gpusMoved << ",done\n";
  }
}

Summary summarise(const Trace& trace, const SimResult& result) {
  Summary s;
  s.jobs = trace.jobs.size();
  s.rejected = result.rejected;
  std::vector<double> waits;
  std::vector<double> jcts;
  waits.reserve(trace.jobs.size());
  jcts.reserve(trace.jobs.size());
  SimMs first = trace.jobs.empty() ? 0 : trace.jobs.front().arrival;
  SimMs last = first;
  for (std::size_t i = 0; i < trace.jobs.size(); ++i) {
    const JobOutcome& o = result.jobs[i];
    if (o.rejected()) {
      continue;
    }
    ++s.completed;
    waits.push_back(static_cast<double>(o.start - trace.jobs[i].arrival) / kMsPerSecond);
    jcts.push_back(static_cast<double>(o.end - trace.jobs[i].arrival) / kMsPerSecond);
    last = std::max(last, o.end);
  }
  s.waitS = distribution(waits);
  s.jctS = distribution(jcts);
  s.makespanS = static_cast<double>(last - first) / kMsPerSecond;
  double usedGpuMs = 0;
  for (std::size_t k = 0; k < result.usage.histogramMs.size(); ++k) {
    usedGpuMs += static_cast<double>(k) * static_cast<double>(result.usage.histogramMs[k]);
  }
  if (last > first && result.totalGpus > 0) {
    s.gpuUtilisation =
        usedGpuMs / (static_cast<double>(result.totalGpus) * static_cast<double>(last - first));
  }
  s.gpusMoved = result.gpusMoved;
  s.jobsWithMoves = result.jobsWithMoves;
  s.gpusMovedWhileWaiting = result.gpusMovedWhileWaiting;
  s.idleMoves = result.idleMoves;
  return s;
}

nlohmann::json summaryJson(const Trace& trace, const SimResult& result) {
  const Summary s = summarise(trace, result);
  nlohmann::json j;
  j["jobs"] = s.jobs;
  j["completed"] = s.completed;
  j["rejected"] = s.rejected;
  j["rejected_gpu_model"] = result.rejectedGpuModel;
  j["wait_s"] = toJson(s.waitS);
  j["jct_s"] = toJson(s.jctS);
  j["makespan_s"] = s.makespanS;
  j["total_gpus"] = result.totalGpus;
  j["gpu_utilisation"] = s.gpuUtilisation;
  j["gpus_moved"] = s.gpusMoved;
  j["jobs_with_moves"] = s.jobsWithMoves;
  j["gpus_moved_while_waiting"] = s.gpusMovedWhileWaiting;
  j["gpus_moved_nothing_waiting"] = s.gpusMoved - s.gpusMovedWhileWaiting;
  j["idle_moves"] = s.idleMoves;
  j["idle_moves_interrupted"] = result.idleMovesInterrupted;
  j["idle_returns"] = result.idleReturns;  // of gpus_moved: idle-timeout detaches to the pool
  j["placement_attempts"] = result.placementAttempts;
  const UsageRecord& u = result.usage;
  std::vector<double> series;
  series.reserve(u.bucketGpuMs.size());
  for (SimMs b : u.bucketGpuMs) {
    series.push_back(static_cast<double>(b) / static_cast<double>(u.bucketMs));
  }
  j["utilisation_over_time"] = {{"origin_s", static_cast<double>(u.origin) / kMsPerSecond},
                                {"bucket_s", static_cast<double>(u.bucketMs) / kMsPerSecond},
                                {"used_gpus_avg", series}};
  SimMs total = 0;
  for (SimMs h : u.histogramMs) {
    total += h;
  }
  std::vector<double> cdf;
  cdf.reserve(u.histogramMs.size());
  SimMs acc = 0;
  for (SimMs h : u.histogramMs) {
    acc += h;
    cdf.push_back(total > 0 ? static_cast<double>(acc) / static_cast<double>(total) : 1.0);
  }
  j["used_gpus_cdf"] = cdf;
  addGangsAndPriorities(j, trace, result);
  return j;
}

}  // namespace kc::sim
