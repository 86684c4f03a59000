#include "libcore/alloc/rt_pod.hpp"

#include <algorithm>
#include <charconv>
#include <set>
#include <utility>

namespace kc::alloc {
namespace {

bool parseU64(std::string_view s, std::uint64_t& out) {
  if (s.empty() || s.size() > 20) {
    return false;
  }
  for (const char c : s) {
    if (c < '0' || c > '9') {
      return false;
    }
  }
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool knownField(std::string_view f) {
  return f == kRtRuntimeField || f == kRtPeriodField || f == kRtCpusField;
}

Error invalid(std::string msg) {
  return makeError(kc::errc::kInvalid, std::move(msg));
}

// The value of `field` for `container`: its own key, else the pod's. nullptr when neither.
const std::string* lookup(const RtStringMap& a, std::string_view container, std::string_view field,
                          std::string& keyOut) {
  std::string own = std::string(kRtAnnotationPrefix).append(container).append(".").append(field);
  if (auto it = a.find(own); it != a.end()) {
    keyOut = std::move(own);
    return &it->second;
  }
  std::string pod = std::string(kRtAnnotationPrefix).append(field);
  if (auto it = a.find(pod); it != a.end()) {
    keyOut = std::move(pod);
    return &it->second;
  }
  return nullptr;
}

}  // namespace

Status validateRtAnnotations(const RtStringMap& annotations,
                             std::optional<std::span<const std::string>> containerNames) {
  for (const auto& [key, value] : annotations) {
    if (!key.starts_with(kRtAnnotationPrefix) || key == kRtAssignedAnnotation) {
      continue;
    }
    const std::string_view rest = std::string_view(key).substr(kRtAnnotationPrefix.size());
    const auto dot = rest.rfind('.');
    const std::string_view field = dot == std::string_view::npos ? rest : rest.substr(dot + 1);
    if (!knownField(field)) {
      return invalid(
          "annotation " + key + ": unknown real-time field '" + std::string(field) +
          "' (known: runtime-us, period-us, cpus, each optionally as <container>.<field>)");
    }
    if (dot != std::string_view::npos) {
      const std::string_view container = rest.substr(0, dot);
      if (container.empty()) {
        return invalid("annotation " + key + ": empty container name");
      }
      if (containerNames && std::find(containerNames->begin(), containerNames->end(), container) ==
                                containerNames->end()) {
        return invalid("annotation " + key + ": the pod has no container named '" +
                       std::string(container) + "'");
      }
    }
    std::uint64_t v = 0;
    if (!parseU64(value, v)) {
      return invalid("annotation " + key + "=\"" + value + "\": not a decimal integer");
    }
  }
  // Every container the keys could apply to must resolve to a valid reservation.
  std::set<std::string, std::less<>> names;
  if (containerNames) {
    names.insert(containerNames->begin(), containerNames->end());
  } else {
    names.insert("");  // pod-level keys alone
    for (const auto& [key, value] : annotations) {
      if (key.starts_with(kRtAnnotationPrefix) && key != kRtAssignedAnnotation) {
        const std::string_view rest = std::string_view(key).substr(kRtAnnotationPrefix.size());
        if (const auto dot = rest.rfind('.'); dot != std::string_view::npos) {
          names.insert(std::string(rest.substr(0, dot)));
        }
      }
    }
  }
  for (const auto& n : names) {
    if (auto r = rtReservationFor(annotations, n); !r) {
      return r.error();
    }
  }
  return okStatus();
}

Result<std::optional<RtReservation>> rtReservationFor(const RtStringMap& annotations,
                                                      std::string_view container) {
  std::string runtimeKey, periodKey, cpusKey;
  const std::string* runtime = lookup(annotations, container, kRtRuntimeField, runtimeKey);
  const std::string* period = lookup(annotations, container, kRtPeriodField, periodKey);
  const std::string* cpus = lookup(annotations, container, kRtCpusField, cpusKey);
  if (runtime == nullptr && period == nullptr) {
    if (cpus != nullptr) {
      return invalid("annotation " + cpusKey + " without " + std::string(kRtAnnotationPrefix) +
                     "runtime-us and period-us");
    }
    return std::optional<RtReservation>{};
  }
  const std::string who =
      container.empty() ? std::string("the pod") : "container '" + std::string(container) + "'";
  if (runtime == nullptr) {
    return invalid(who + ": " + periodKey + " is set but no runtime-us");
  }
  if (period == nullptr) {
    return invalid(who + ": " + runtimeKey + " is set but no period-us");
  }
  RtReservation r;
  std::uint64_t c = 1;
  if (!parseU64(*runtime, r.runtimeUs)) {
    return invalid("annotation " + runtimeKey + "=\"" + *runtime + "\": not a decimal integer");
  }
  if (!parseU64(*period, r.periodUs)) {
    return invalid("annotation " + periodKey + "=\"" + *period + "\": not a decimal integer");
  }
  if (cpus != nullptr && !parseU64(*cpus, c)) {
    return invalid("annotation " + cpusKey + "=\"" + *cpus + "\": not a decimal integer");
  }
  if (c > kMaxRtCpus) {
    return invalid(who + ": cpus " + std::to_string(c) + " exceeds " + std::to_string(kMaxRtCpus));
  }
  r.cpus = static_cast<std::uint32_t>(c);
  if (auto s = validateReservation(r); !s) {
    // Name the key (and value) the user has to change, in validateReservation's order.
    auto at = [](const std::string& key, const std::string& value) {
      return "annotation " + key + "=\"" + value + "\"";
    };
    std::string keys = at(periodKey, *period);  // zero, or beyond the kernel's range
    if (r.periodUs != 0 && r.runtimeUs == 0) {
      keys = at(runtimeKey, *runtime);
    } else if (r.periodUs != 0 && r.runtimeUs > r.periodUs) {
      keys = at(runtimeKey, *runtime) + " is more than " + at(periodKey, *period);
    } else if (r.periodUs != 0 && r.cpus == 0) {
      keys = at(cpusKey, *cpus);  // cpus 0 can only come from its key
    }
    return invalid(who + ": " + keys + ": " + s.error().message);
  }
  return std::optional<RtReservation>{r};
}

Result<std::vector<std::uint32_t>> parseCpuList(std::string_view text) {
  std::vector<std::uint32_t> out;
  if (text.empty()) {
    return invalid("empty cpu list");
  }
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const auto comma = text.find(',', pos);
    const std::string_view part =
        text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    const auto dash = part.find('-');
    std::uint64_t lo = 0, hi = 0;
    if (dash == std::string_view::npos) {
      if (!parseU64(part, lo)) {
        return invalid("cpu list \"" + std::string(text) + "\": bad entry '" + std::string(part) +
                       "'");
      }
      hi = lo;
    } else if (!parseU64(part.substr(0, dash), lo) || !parseU64(part.substr(dash + 1), hi) ||
               hi < lo) {
      return invalid("cpu list \"" + std::string(text) + "\": bad range '" + std::string(part) +
                     "'");
    }
    if (hi >= (1u << 20) || out.size() + (hi - lo + 1) > kMaxRtCpus) {
      return invalid("cpu list \"" + std::string(text) + "\": too many or too large CPU ids");
    }
    for (std::uint64_t c = lo; c <= hi; ++c) {
      if (!out.empty() && out.back() >= c) {
        return invalid("cpu list \"" + std::string(text) + "\": not ascending or repeated");
      }
      out.push_back(static_cast<std::uint32_t>(c));
    }
    if (comma == std::string_view::npos) {
      break;
    }
    pos = comma + 1;
  }
  return out;
}

std::string formatCpuList(std::span<const std::uint32_t> cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) {
      ++j;
    }
    if (!out.empty()) {
      out += ',';
    }
    out += std::to_string(cpus[i]);
    if (j > i) {
      out += '-';
      out += std::to_string(cpus[j]);
    }
    i = j + 1;
  }
  return out;
}

Result<RtAssignment> parseRtAssignment(std::string_view text) {
  RtAssignment out;
  if (text.empty()) {
    return out;
  }
  std::size_t pos = 0;
  while (true) {
    const auto semi = text.find(';', pos);
    const std::string_view part =
        text.substr(pos, semi == std::string_view::npos ? std::string_view::npos : semi - pos);
    const auto eq = part.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return invalid("assignment \"" + std::string(text) + "\": expected <container>=<cpulist>");
    }
    auto cpus = parseCpuList(part.substr(eq + 1));
    if (!cpus) {
      return invalid("assignment \"" + std::string(text) + "\": " + cpus.error().message);
    }
    if (!out.emplace(std::string(part.substr(0, eq)), std::move(*cpus)).second) {
      return invalid("assignment \"" + std::string(text) + "\": container named twice");
    }
    if (semi == std::string_view::npos) {
      break;
    }
    pos = semi + 1;
  }
  return out;
}

std::string formatRtAssignment(const RtAssignment& a) {
  std::string out;
  for (const auto& [name, cpus] : a) {
    if (!out.empty()) {
      out += ';';
    }
    out += name + "=" + formatCpuList(cpus);
  }
  return out;
}

std::string_view rtKernelName(RtKernel k) {
  return k == RtKernel::kHcbs ? "hcbs" : "rt-group";
}

Result<std::optional<RtNodeInfo>> parseRtNode(const RtStringMap& labels,
                                              const RtStringMap& annotations) {
  const auto cap = labels.find(kRtCapableLabel);
  if (cap == labels.end() || cap->second != "true") {
    return std::optional<RtNodeInfo>{};
  }
  auto get = [&](std::string_view key) -> const std::string* {
    const auto it = annotations.find(key);
    return it == annotations.end() ? nullptr : &it->second;
  };
  const std::string* cores = get(kRtCoresAnnotation);
  const std::string* bound = get(kRtBoundAnnotation);
  const std::string* kernel = get(kRtKernelAnnotation);
  if (cores == nullptr || bound == nullptr || kernel == nullptr) {
    return invalid("node labelled " + std::string(kRtCapableLabel) +
                   " lacks one of the annotations cores, bound, kernel");
  }
  RtNodeInfo info;
  auto list = parseCpuList(*cores);
  if (!list) {
    return invalid(std::string(kRtCoresAnnotation) + ": " + list.error().message);
  }
  info.cores = std::move(*list);
  const auto slash = bound->find('/');
  std::uint64_t rt = 0, per = 0;
  if (slash == std::string::npos || !parseU64(std::string_view(*bound).substr(0, slash), rt) ||
      !parseU64(std::string_view(*bound).substr(slash + 1), per) || per == 0 || rt > per ||
      per > kMaxRtMicros) {
    return invalid(std::string(kRtBoundAnnotation) + "=\"" + *bound +
                   "\": expected <runtime_us>/<period_us> with runtime <= period");
  }
  info.bound = RtBound{rt, per};
  if (*kernel == "rt-group") {
    info.kernel = RtKernel::kRtGroup;
  } else if (*kernel == "hcbs") {
    info.kernel = RtKernel::kHcbs;
  } else {
    return invalid(std::string(kRtKernelAnnotation) + "=\"" + *kernel +
                   "\": expected rt-group or hcbs");
  }
  return std::optional<RtNodeInfo>{std::move(info)};
}

RtStringMap formatRtNodeAnnotations(const RtNodeInfo& info) {
  return RtStringMap{
      {std::string(kRtCoresAnnotation), formatCpuList(info.cores)},
      {std::string(kRtBoundAnnotation),
       std::to_string(info.bound.runtimeUs) + "/" + std::to_string(info.bound.periodUs)},
      {std::string(kRtKernelAnnotation), std::string(rtKernelName(info.kernel))},
  };
}

Result<RtNodeState> RtNodeState::create(const RtNodeInfo& info) {
  auto cores = RtCoreState::create(info.bound, info.cores);
  if (!cores) {
    return cores.error();
  }
  return RtNodeState(std::move(*cores), info.kernel);
}

std::span<const RtBudget> RtNodeState::budgetsOn(std::uint32_t cpu) const {
  const auto it = budgets_.find(cpu);
  return it == budgets_.end() ? std::span<const RtBudget>{} : std::span<const RtBudget>(it->second);
}

Result<std::vector<std::uint32_t>> RtNodeState::placeSpread(const RtReservation& r,
                                                            const RtPacking& packing) const {
  const std::uint64_t u = utilizationPpb(r);
  std::vector<std::size_t> empty, shared;
  std::size_t noRoom = 0;
  std::string sharedWhy;
  for (std::size_t c = 0; c < cores_.coreCount(); ++c) {
    const std::uint32_t cpu = cores_.cpuId(c);
    const auto held = budgetsOn(cpu);
    if (cores_.freePpb(c) < u) {
      ++noRoom;
    } else if (held.empty()) {
      empty.push_back(c);
    } else {
      std::vector<RtBudget> trial(held.begin(), held.end());
      trial.push_back(budgetOf(r));
      if (auto s = rtSharedCoreAdmits(trial); s) {
        shared.push_back(c);
      } else if (sharedWhy.empty()) {
        sharedWhy = "; CPU " + std::to_string(cpu) + ": " + s.error().message;
      }
    }
  }
  if (empty.size() + shared.size() < r.cpus) {
    return makeError(
        kc::errc::kInsufficient,
        "reservation (runtime " + std::to_string(r.runtimeUs) + " us, period " +
            std::to_string(r.periodUs) + " us, cpus " + std::to_string(r.cpus) + ") needs " +
            std::to_string(r.cpus) + " cores; of " + std::to_string(cores_.coreCount()) + ", " +
            std::to_string(empty.size()) + " hold no RT group, " + std::to_string(noRoom) +
            " lack the bandwidth and " +
            std::to_string(cores_.coreCount() - empty.size() - noRoom - shared.size()) +
            " would fail the shared-core test" + sharedWhy);
  }
  if (packing.worstFit) {
    std::stable_sort(shared.begin(), shared.end(), [&](std::size_t a, std::size_t b) {
      return cores_.usedPpb(a) < cores_.usedPpb(b);
    });
  }
  std::vector<std::uint32_t> cpus;
  for (std::size_t i = 0; i < r.cpus; ++i) {
    cpus.push_back(cores_.cpuId(i < empty.size() ? empty[i] : shared[i - empty.size()]));
  }
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

Result<std::vector<std::uint32_t>> RtNodeState::place(const RtReservation& r,
                                                      const RtPacking& packing) const {
  if (auto s = validateReservation(r); !s) {
    return s.error();
  }
  if (kernel_ == RtKernel::kRtGroup) {
    const std::uint64_t u = utilizationPpb(r);
    if (groupUsedPpb_ + u > cores_.boundPpb()) {
      return makeError(kc::errc::kInsufficient,
                       "RT group bandwidth exhausted: " + std::to_string(groupUsedPpb_) + " + " +
                           std::to_string(u) + " ppb exceeds the node's bound of " +
                           std::to_string(cores_.boundPpb()) +
                           " ppb (mainline cgroup v1 RT group scheduling limits the sum over all "
                           "real-time containers)");
    }
    return placeSpread(r, packing);
  }
  return placeReservation(cores_, r, packing);
}

Status RtNodeState::admit(const RtReservation& r, std::span<const std::uint32_t> cpus) {
  std::uint64_t u = 0;
  if (auto s = validateReservation(r); !s) {
    return s;
  }
  u = utilizationPpb(r);
  if (kernel_ == RtKernel::kRtGroup && groupUsedPpb_ + u > cores_.boundPpb()) {
    return makeError(kc::errc::kInsufficient, "RT group bandwidth exhausted");
  }
  if (auto s = cores_.admit(r, cpus); !s) {
    return s;
  }
  if (kernel_ == RtKernel::kRtGroup) {
    groupUsedPpb_ += u;
  }
  for (const std::uint32_t cpu : cpus) {
    budgets_[cpu].push_back(budgetOf(r));
  }
  return okStatus();
}

Status RtNodeState::release(const RtReservation& r, std::span<const std::uint32_t> cpus) {
  // Checked before anything changes: every CPU must hold this very budget.
  for (const std::uint32_t cpu : cpus) {
    const auto held = budgetsOn(cpu);
    if (validateReservation(r) && std::find(held.begin(), held.end(), budgetOf(r)) == held.end()) {
      return makeError(kc::errc::kConflict, "a budget of " + std::to_string(r.runtimeUs) +
                                                " us / " + std::to_string(r.periodUs) +
                                                " us is not reserved on CPU " +
                                                std::to_string(cpu));
    }
  }
  if (auto s = cores_.release(r, cpus); !s) {
    return s;
  }
  for (const std::uint32_t cpu : cpus) {
    auto& held = budgets_[cpu];
    held.erase(std::find(held.begin(), held.end(), budgetOf(r)));
    if (held.empty()) {
      budgets_.erase(cpu);
    }
  }
  if (kernel_ == RtKernel::kRtGroup) {
    groupUsedPpb_ -= std::min(groupUsedPpb_, utilizationPpb(r));
  }
  return okStatus();
}

Result<RtAssignment> placeRtPod(const RtNodeState& node, std::span<const RtContainerRequest> pod,
                                const RtPacking& packing) {
  RtNodeState trial = node;
  RtAssignment out;
  for (const auto& c : pod) {
    auto cpus = trial.place(c.reservation, packing);
    if (!cpus) {
      return makeError(cpus.error().code,
                       "container '" + c.container + "': " + cpus.error().message);
    }
    if (auto s = trial.admit(c.reservation, *cpus); !s) {
      return makeError(s.error().code, "container '" + c.container + "': " + s.error().message);
    }
    out[c.container] = std::move(*cpus);
  }
  return out;
}

RtPodSpec rtPodSpec(const RtStringMap& annotations, std::span<const std::string> initContainers,
                    std::span<const std::string> containers) {
  RtPodSpec out;
  const bool any = std::any_of(annotations.begin(), annotations.end(), [](const auto& kv) {
    return kv.first.starts_with(kRtAnnotationPrefix);
  });
  if (!any) {
    return out;
  }
  std::vector<std::string> names(initContainers.begin(), initContainers.end());
  names.insert(names.end(), containers.begin(), containers.end());
  if (auto s = validateRtAnnotations(annotations, std::span<const std::string>(names)); !s) {
    out.error = s.error().message;
    return out;
  }
  for (const auto& n : names) {
    auto r = rtReservationFor(annotations, n);
    if (!r) {
      out.error = r.error().message;
      out.containers.clear();
      return out;
    }
    if (*r) {
      out.containers.push_back(RtContainerRequest{n, **r});
    }
  }
  if (auto it = annotations.find(kRtAssignedAnnotation); it != annotations.end()) {
    auto a = parseRtAssignment(it->second);
    if (a) {
      out.assigned = std::move(*a);
    }  // a malformed assignment is ignored: the scheduler then places the pod itself
  }
  return out;
}

}  // namespace kc::alloc
