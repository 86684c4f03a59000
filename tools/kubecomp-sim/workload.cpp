#include "tools/kubecomp-sim/workload.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string_view>
#include <vector>

namespace kc::sim {
namespace {

std::optional<double> parseDouble(std::string_view s) {
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || ptr != s.data() + s.size() || s.empty() || !std::isfinite(v)) {
    return std::nullopt;
  }
  return v;
}

}  // namespace

Result<Mix> mixByName(const std::string& name) {
  if (name == "w1") {
    return Mix{name, {0.5, 0.5, 0, 0, 0}};
  }
  if (name == "w2") {
    return Mix{name, {0.5, 0, 0.5, 0, 0}};
  }
  if (name == "w3") {
    return Mix{name, {0.25, 0.25, 0.25, 0.25, 0}};
  }
  if (name == "w4") {
    return Mix{name, {0.24, 0.24, 0.24, 0.24, 0.04}};
  }
  if (name == "fig13") {
    return Mix{name, {0.2, 0.2, 0.2, 0.2, 0.2}};
  }
  if (name.rfind("ae:", 0) == 0) {
    auto p = parseDouble(std::string_view(name).substr(3));
    if (!p || *p < 0 || *p > 100) {
      return makeError(kc::errc::kInvalid,
                       "mix " + quoteInput(name) + ": the Job A share must be a percentage 0..100");
    }
    return Mix{name, {*p / 100.0, 0, 0, 0, 1.0 - *p / 100.0}};
  }
  if (name.rfind("custom:", 0) == 0) {
    std::string_view rest = std::string_view(name).substr(7);
    Mix mix{name, {}};
    double sum = 0;
    for (std::size_t i = 0; i < kJobTypeCount; ++i) {
      const std::size_t comma = rest.find(',');
      if ((comma == std::string_view::npos) != (i + 1 == kJobTypeCount)) {
        return makeError(kc::errc::kInvalid,
                         "mix " + quoteInput(name) + ": needs exactly five weights a,b,c,d,e");
      }
      auto w = parseDouble(rest.substr(0, comma));
      if (!w || *w < 0) {
        return makeError(kc::errc::kInvalid,
                         "mix " + quoteInput(name) + ": weights must be non-negative numbers");
      }
      mix.fractions[i] = *w;
      sum += *w;
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
    if (sum <= 0) {
      return makeError(kc::errc::kInvalid, "mix " + quoteInput(name) + ": weights sum to zero");
    }
    for (auto& f : mix.fractions) {
      f /= sum;
    }
    return mix;
  }
  return makeError(kc::errc::kInvalid,
                   "unknown mix " + quoteInput(name) +
                       " (known: w1 w2 w3 w4 fig13 ae:<percent A> custom:a,b,c,d,e)");
}

std::array<std::uint64_t, kJobTypeCount> mixCounts(const Mix& mix, std::uint64_t jobs) {
  std::array<std::uint64_t, kJobTypeCount> counts{};
  std::array<double, kJobTypeCount> rem{};
  std::uint64_t used = 0;
  for (std::size_t i = 0; i < kJobTypeCount; ++i) {
    const double exact = mix.fractions[i] * static_cast<double>(jobs);
    counts[i] = static_cast<std::uint64_t>(std::floor(exact + 1e-9));
    rem[i] = exact - static_cast<double>(counts[i]);
    used += counts[i];
  }
  while (used < jobs) {
    std::size_t best = 0;
    for (std::size_t i = 1; i < kJobTypeCount; ++i) {
      if (rem[i] > rem[best] + 1e-12) {
        best = i;
      }
    }
    ++counts[best];
    rem[best] = -1;
    ++used;
  }
  return counts;
}

namespace {

Status checkGangSpec(const WorkloadSpec& spec) {
  if (!(spec.gangShare >= 0 && spec.gangShare <= 1)) {
    std::ostringstream m;
    m << "gang share must be in 0..1 (got " << spec.gangShare << ")";
    return makeError(kc::errc::kInvalid, m.str());
  }
  if (spec.gangMembers < 2 || spec.gangMembers > kMaxMembers) {
    return makeError(kc::errc::kInvalid, "gang members must be 2.." + std::to_string(kMaxMembers) +
                                             " (got " + std::to_string(spec.gangMembers) + ")");
  }
  if (spec.priorityLevels < 1 || spec.priorityLevels > 1000) {
    return makeError(kc::errc::kInvalid, "priority levels must be 1..1000 (got " +
                                             std::to_string(spec.priorityLevels) + ")");
  }
  return okStatus();
}

// Gangs and priorities, each from a generator of its own seeded from spec.seed: without them
// nothing is drawn and the trace is the one generated before they existed.
void addGangsAndPriorities(const WorkloadSpec& spec, Trace& trace) {
  const auto gangs = static_cast<std::size_t>(
      std::llround(spec.gangShare * static_cast<double>(trace.jobs.size())));
  if (gangs > 0) {
    std::vector<std::size_t> order(trace.jobs.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::mt19937_64 rng(spec.seed ^ 0x67616e67'5f6a6f62ULL);  // "gang_job"
    std::shuffle(order.begin(), order.end(), rng);
    for (std::size_t i = 0; i < gangs; ++i) {
      trace.jobs[order[i]].members = spec.gangMembers;
    }
  }
  if (spec.priorityLevels > 1) {
    std::mt19937_64 rng(spec.seed ^ 0x7072696f'72697479ULL);  // "priority"
    std::uniform_int_distribution<std::int32_t> level(
        0, static_cast<std::int32_t>(spec.priorityLevels) - 1);
    for (Job& j : trace.jobs) {
      j.priority = level(rng);
    }
  }
}

}  // namespace

Result<Trace> generateWorkload(const WorkloadSpec& spec) {
  if (auto s = checkGangSpec(spec); !s) {
    return s.error();
  }
  // Bounded so that a Poisson draw stays far inside int64 (the flag has the same range).
  if (!(spec.lambda > 0 && spec.lambda <= kMaxLambda)) {
    std::ostringstream m;
    m << "lambda must be in (0, 1e9] (got " << spec.lambda << ")";
    return makeError(kc::errc::kInvalid, m.str());
  }
  if (spec.intervalUnit < 1) {
    return makeError(kc::errc::kInvalid, "interval unit must be at least 1 ms");
  }
  if (spec.duration < 0 || spec.duration > kMaxTraceMs) {
    return makeError(kc::errc::kInvalid,
                     "duration must be 0.." + std::to_string(kMaxTraceSeconds) + " s (the limit)");
  }
  if (spec.jobs == 0 || spec.jobs > kMaxJobs) {
    return makeError(kc::errc::kInvalid,
                     "the number of jobs must be 1.." + std::to_string(kMaxJobs) + " (the limit)");
  }
  const auto counts = mixCounts(spec.mix, spec.jobs);
  std::vector<std::uint8_t> types;
  types.reserve(spec.jobs);
  for (std::size_t t = 0; t < kJobTypeCount; ++t) {
    types.insert(types.end(), counts[t], static_cast<std::uint8_t>(t));
  }
  std::mt19937_64 rng(spec.seed);
  std::shuffle(types.begin(), types.end(), rng);
  std::poisson_distribution<std::int64_t> gap(spec.lambda);
  Trace trace;
  trace.jobs.reserve(types.size());
  SimMs now = 0;
  for (std::size_t i = 0; i < types.size(); ++i) {
    if (i > 0) {
      SimMs step = 0;
      if (__builtin_mul_overflow(gap(rng), spec.intervalUnit, &step) ||
          __builtin_add_overflow(now, step, &now) || now > kMaxTraceMs) {
        return makeError(kc::errc::kInvalid,
                         "job " + std::to_string(i) + " would arrive after the limit of " +
                             std::to_string(kMaxTraceSeconds) +
                             " s (lower --lambda, --interval-unit-ms or --jobs)");
      }
    }
    const JobType& jt = kPaperJobTypes[types[i]];
    Job job;
    job.id = std::string(1, jt.name) + "-" + std::to_string(i);
    job.arrival = now;
    job.duration = spec.duration;
    job.gpus = jt.gpus;
    job.cpuMilli = jt.cpuMilli;
    trace.jobs.push_back(std::move(job));
  }
  addGangsAndPriorities(spec, trace);
  return trace;
}

std::uint64_t gangsFromMultiGpu(Trace& trace) {
  std::uint64_t made = 0;
  for (Job& j : trace.jobs) {
    if (j.members != 1 || j.gpus <= 1) {
      continue;
    }
    const std::int64_t n = j.gpus;
    j.members = j.gpus;
    j.gpus = 1;
    j.cpuMilli = (j.cpuMilli + n - 1) / n;
    j.memoryMib = (j.memoryMib + n - 1) / n;
    ++made;
  }
  return made;
}

}  // namespace kc::sim
