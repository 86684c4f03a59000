#include "tools/rtctl/rt_design.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

namespace kc::rtctl {
namespace {

std::uint64_t deadline(const Task& t) {
  return t.d == 0 ? t.t : t.d;
}

Error invalid(std::string m) {
  return makeError(kc::errc::kInvalid, std::move(m));
}

}  // namespace

double lsbf(std::uint64_t periodUs, std::uint64_t runtimeUs, std::uint64_t t) {
  const double p = static_cast<double>(periodUs), q = static_cast<double>(runtimeUs);
  const double v = (q / p) * (static_cast<double>(t) - 2.0 * (p - q));
  return v > 0 ? v : 0.0;
}

bool coreSchedulable(const std::vector<Task>& tasks, std::uint64_t periodUs,
                     std::uint64_t runtimeUs) {
  std::vector<std::size_t> order(tasks.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return deadline(tasks[a]) < deadline(tasks[b]);
  });
  for (std::size_t k = 0; k < order.size(); ++k) {
    const Task& ti = tasks[order[k]];
    const std::uint64_t di = deadline(ti);
    std::set<std::uint64_t> points{di};
    for (std::size_t j = 0; j < k; ++j) {
      const std::uint64_t tj = tasks[order[j]].t;
      for (std::uint64_t m = tj; m < di; m += tj) {
        points.insert(m);
      }
    }
    bool ok = false;
    for (const std::uint64_t t : points) {
      double rbf = static_cast<double>(ti.c);
      for (std::size_t j = 0; j < k; ++j) {
        const Task& tj = tasks[order[j]];
        rbf += static_cast<double>((t + tj.t - 1) / tj.t) * static_cast<double>(tj.c);
      }
      if (rbf <= lsbf(periodUs, runtimeUs, t) + 1e-9) {
        ok = true;
        break;
      }
    }
    if (!ok) {
      return false;
    }
  }
  return true;
}

std::optional<std::uint64_t> minRuntime(const std::vector<Task>& tasks, std::uint64_t periodUs) {
  if (!coreSchedulable(tasks, periodUs, periodUs)) {
    return std::nullopt;
  }
  std::uint64_t lo = 1, hi = periodUs;  // hi passes
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (coreSchedulable(tasks, periodUs, mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return hi;
}

Result<Design> design(const std::vector<Task>& tasks, std::uint64_t periodUs, double bound) {
  if (tasks.empty()) {
    return invalid("no tasks");
  }
  if (periodUs == 0) {
    return invalid("period is zero");
  }
  if (!(bound > 0.0 && bound <= 1.0)) {
    return invalid("bound must be in (0, 1]");
  }
  double u = 0;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const Task& t = tasks[i];
    if (t.c == 0 || t.t == 0 || deadline(t) > t.t || t.c > deadline(t)) {
      return invalid("task " + std::to_string(i) +
                     ": need 0 < C <= D <= T (C=" + std::to_string(t.c) +
                     " T=" + std::to_string(t.t) + " D=" + std::to_string(deadline(t)) + ")");
    }
    u += static_cast<double>(t.c) / static_cast<double>(t.t);
  }
  const auto maxRuntime =
      static_cast<std::uint64_t>(std::floor(bound * static_cast<double>(periodUs)));
  std::vector<std::size_t> byUtil(tasks.size());
  std::iota(byUtil.begin(), byUtil.end(), 0);
  std::stable_sort(byUtil.begin(), byUtil.end(), [&](std::size_t a, std::size_t b) {
    return tasks[a].c * tasks[b].t > tasks[b].c * tasks[a].t;
  });
  std::optional<Design> best;
  const auto first = static_cast<std::size_t>(std::max(1.0, std::ceil(u / bound - 1e-12)));
  for (std::size_t m = first; m <= tasks.size(); ++m) {
    std::vector<std::vector<Task>> cores(m);
    std::vector<std::uint32_t> coreOf(tasks.size(), 0);
    bool placed = true;
    for (const std::size_t i : byUtil) {
      bool fit = false;
      for (std::size_t k = 0; k < m && !fit; ++k) {
        cores[k].push_back(tasks[i]);
        const auto q = minRuntime(cores[k], periodUs);
        if (q && *q <= maxRuntime) {
          fit = true;
          coreOf[i] = static_cast<std::uint32_t>(k);
        } else {
          cores[k].pop_back();
        }
      }
      if (!fit) {
        placed = false;
        break;
      }
    }
    if (!placed) {
      continue;
    }
    Design d;
    d.periodUs = periodUs;
    d.cpus = 0;
    std::vector<std::uint32_t> renumber(m, UINT32_MAX);
    for (std::size_t k = 0; k < m; ++k) {
      if (cores[k].empty()) {
        continue;
      }
      renumber[k] = d.cpus++;
      d.coreRuntimeUs.push_back(*minRuntime(cores[k], periodUs));
      d.runtimeUs = std::max(d.runtimeUs, d.coreRuntimeUs.back());
    }
    for (auto& c : coreOf) {
      c = renumber[c];
    }
    d.coreOfTask = std::move(coreOf);
    if (!best || d.cpus * d.runtimeUs < best->cpus * best->runtimeUs) {
      best = std::move(d);
    }
  }
  if (!best) {
    return makeError(kc::errc::kInsufficient,
                     "no partition onto up to " + std::to_string(tasks.size()) +
                         " cores passes with period " + std::to_string(periodUs) +
                         " us under the per-core bound (try a shorter period)");
  }
  return *best;
}

Result<Task> parseTask(const std::string& text) {
  Task t;
  std::vector<std::uint64_t> v;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const auto comma = text.find(',', pos);
    const std::string part =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (part.empty() || part.size() > 12 ||
        part.find_first_not_of("0123456789") != std::string::npos) {
      return invalid("task '" + text + "': expected C,T or C,T,D in microseconds");
    }
    v.push_back(std::stoull(part));
    if (comma == std::string::npos) {
      break;
    }
    pos = comma + 1;
  }
  if (v.size() < 2 || v.size() > 3) {
    return invalid("task '" + text + "': expected C,T or C,T,D in microseconds");
  }
  t.c = v[0];
  t.t = v[1];
  t.d = v.size() == 3 ? v[2] : 0;
  return t;
}

}  // namespace kc::rtctl
