#include "tools/kubecomp-sim/sim_input.hpp"

#include <string>

namespace kc::sim {
namespace {

Status checkDraPath(const SimConfig& config) {
  if (config.idleTimeout < 0 || config.idleTimeout > kMaxTraceMs) {
    return makeError(kc::errc::kInvalid,
                     "idle timeout must be 0.." + std::to_string(kMaxTraceSeconds) + " s");
  }
  if (config.returnTime < 0 || config.returnTime > kMaxTraceMs) {
    return makeError(kc::errc::kInvalid,
                     "return time must be 0.." + std::to_string(kMaxTraceSeconds) + " s");
  }
  if (config.offer != alloc::DeviceOffer::LocalOrUnattached) {
    return okStatus();
  }
  if (config.mode == alloc::Composability::Composable &&
      config.idleReturn != alloc::ReturnKind::IdleTimeout) {
    // A GPU idle on another node would never be offered again: a pod could wait for ever.
    return makeError(kc::errc::kInvalid,
                     "the local-or-unattached offer needs the idle-timeout return");
  }
  if (config.queue != QueueDiscipline::Fcfs && config.queue != QueueDiscipline::Backfill) {
    return makeError(kc::errc::kInvalid,
                     "the local-or-unattached offer runs with the fcfs or backfill queue only "
                     "(the reservation passes assume every free GPU of a pool is offered)");
  }
  if (config.recompose != alloc::RecomposeKind::None) {
    return makeError(kc::errc::kInvalid,
                     "the local-or-unattached offer runs without idle recomposition");
  }
  return okStatus();
}

}  // namespace

Status checkPlanningJobs(QueueDiscipline queue, std::uint64_t jobs) {
  if (jobs <= kMaxPlanningJobs ||
      (queue != QueueDiscipline::EasyBackfill && queue != QueueDiscipline::SlackBackfill)) {
    return okStatus();
  }
  const char* name = queue == QueueDiscipline::EasyBackfill ? "easy-backfill" : "slack-backfill";
  return makeError(kc::errc::kInvalid,
                   std::string("the ") + name + " queue takes at most " +
                       std::to_string(kMaxPlanningJobs) + " jobs (got " + std::to_string(jobs) +
                       "): it plans for every waiting job at each event, a cost quadratic in "
                       "the jobs that wait at once; fcfs and backfill take up to " +
                       std::to_string(kMaxJobs));
}

Result<std::vector<alloc::GpuModelFilter>> checkSimInput(const Trace& trace,
                                                         const SimConfig& config) {
  std::vector<alloc::GpuModelFilter> filters;
  for (const std::string& spec : trace.gpuSpecs) {
    auto f = alloc::GpuModelFilter::parse(spec, alloc::kGpuSpecSeparator);
    if (!f) {
      return makeError(kc::errc::kInvalid, "gpu_spec: " + f.error().message);
    }
    filters.push_back(std::move(*f));
  }
  if (auto s = checkPlanningJobs(config.queue, trace.jobs.size()); !s) {
    return s.error();
  }
  if (filters.empty() || !filters[0].acceptsAny()) {
    return makeError(kc::errc::kInvalid, "the trace's gpu_spec 0 must be empty (any GPU)");
  }
  for (std::size_t i = 0; i < trace.jobs.size(); ++i) {
    const Job& j = trace.jobs[i];
    if (j.gpuSpec >= filters.size()) {
      return makeError(kc::errc::kInvalid, "job " + quoteInput(j.id) + " refers to gpu_spec " +
                                               std::to_string(j.gpuSpec) + " of " +
                                               std::to_string(filters.size()));
    }
    if (j.duration < 0 || j.arrival < 0 || j.cpuMilli < 0 || j.memoryMib < 0) {
      return makeError(kc::errc::kInvalid,
                       "job " + quoteInput(j.id) + " has a negative time or request");
    }
    if (j.arrival > kMaxTraceMs || j.duration > kMaxTraceMs) {
      return makeError(kc::errc::kInvalid, "job " + quoteInput(j.id) +
                                               ": arrival or duration above the limit of " +
                                               std::to_string(kMaxTraceSeconds) + " s");
    }
    if (j.members < 1 || j.members > kMaxMembers) {
      return makeError(kc::errc::kInvalid, "job " + quoteInput(j.id) + " has " +
                                               std::to_string(j.members) + " members (1.." +
                                               std::to_string(kMaxMembers) + ")");
    }
    if (j.members > 1 && (config.queue == QueueDiscipline::EasyBackfill ||
                          config.queue == QueueDiscipline::SlackBackfill)) {
      return makeError(kc::errc::kInvalid,
                       "gang " + quoteInput(j.id) +
                           ": gangs (members > 1) run with the fcfs or backfill queue only (the "
                           "reservation passes plan one pod per job)");
    }
    if (i > 0 && j.arrival < trace.jobs[i - 1].arrival) {
      return makeError(kc::errc::kInvalid,
                       "trace is not sorted by arrival at job " + quoteInput(j.id));
    }
  }
  if (config.gpuPolicy.rank == nullptr || config.nodePolicy.compare == nullptr) {
    return makeError(kc::errc::kInvalid, "node and GPU policies must be set");
  }
  if (config.moveTime < 0 || config.moveTime > kMaxTraceMs) {
    return makeError(kc::errc::kInvalid,
                     "move time must be 0.." + std::to_string(kMaxTraceSeconds) + " s");
  }
  if (config.moves.perChassis == 0) {
    return makeError(kc::errc::kInvalid, "moves per chassis must be >= 1");
  }
  if (auto s = checkDraPath(config); !s) {
    return s.error();
  }
  return filters;
}

}  // namespace kc::sim
