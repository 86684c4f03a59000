#include "services/rt-kubelet-shim/rt_cgroups.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace kc::rtshim {
namespace {

bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) {
    s.pop_back();
  }
  return s;
}

Result<std::int64_t> readInt(const std::string& path) {
  auto text = RtCgroupTree::readFile(path);
  if (!text) {
    return text.error();
  }
  try {
    std::size_t used = 0;
    const std::string t = trim(*text);
    const long long v = std::stoll(t, &used);
    if (used != t.size()) {
      throw std::invalid_argument("trailing");
    }
    return static_cast<std::int64_t>(v);
  } catch (const std::exception&) {
    return makeError(kc::errc::kProtocol, path + ": not an integer: '" + *text + "'");
  }
}

// runtime for `ppb` of a cgroup whose period is `periodUs`, rounded up.
std::uint64_t runtimeFor(std::uint64_t ppb, std::uint64_t periodUs) {
  __extension__ typedef unsigned __int128 U128;
  const U128 num = static_cast<U128>(ppb) * periodUs;
  return static_cast<std::uint64_t>((num + alloc::kPpbPerUnit - 1) / alloc::kPpbPerUnit);
}

}  // namespace

Result<std::string> RtCgroupTree::readFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return makeError(kc::errc::kNotFound, "cannot read " + path + ": " + std::strerror(errno));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status RtCgroupTree::writeFile(const std::string& path, const std::string& value) {
  // O_CREAT | O_TRUNC only matter on plain files (tests); cgroupfs files exist and ignore them.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return makeError(kc::errc::kInternal, "cannot open " + path + ": " + std::strerror(errno));
  }
  const ssize_t n = ::write(fd, value.data(), value.size());
  const int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    const char* code =
        (err == EINVAL || err == EBUSY) ? kc::errc::kInsufficient : kc::errc::kInternal;
    return makeError(code, "write " + value + " to " + path + ": " + std::strerror(err) +
                               (err == EINVAL || err == EBUSY
                                    ? " (the kernel refused the RT budget: a parent holds too "
                                      "little, or RT tasks still run in the group)"
                                    : ""));
  }
  return okStatus();
}

RtSupport detectRtSupport(const RtCgroupOptions& o) {
  RtSupport s;
  auto rt = readInt(o.sysctlDir + "/sched_rt_runtime_us");
  auto per = readInt(o.sysctlDir + "/sched_rt_period_us");
  if (!rt || !per) {
    s.reason = "kernel has no RT throttling sysctls (" + o.sysctlDir + "/sched_rt_runtime_us)";
    return s;
  }
  auto bound = alloc::rtBoundFromSysctl(*rt, *per);
  if (!bound) {
    s.reason = bound.error().message;
    return s;
  }
  for (const std::string& f :
       {o.cpuRoot + "/cpu.rt_multi_runtime_us", o.unifiedRoot + "/cpu.rt.max",
        o.unifiedRoot + "/cpu.rt_runtime_us"}) {
    if (exists(f)) {
      s.reason = "HCBS kernel interface found (" + f +
                 "); this shim version drives only mainline cgroup v1 RT group scheduling, so the "
                 "node is not advertised as RT-capable";
      return s;
    }
  }
  const std::string rootRuntime = o.cpuRoot + "/cpu.rt_runtime_us";
  if (!exists(rootRuntime)) {
    s.reason = "no RT group scheduling: " + rootRuntime +
               " is missing (kernel without CONFIG_RT_GROUP_SCHED, or no cgroup v1 cpu controller "
               "at " +
               o.cpuRoot + ")";
    return s;
  }
  if (::access(rootRuntime.c_str(), W_OK) != 0 || ::geteuid() != 0) {
    s.reason = "not root: cannot write RT budgets under " + o.cpuRoot;
    return s;
  }
  std::string cores = o.rtCores;
  if (cores.empty()) {
    for (const std::string& f :
         {o.cpusetRoot + "/cpuset.effective_cpus", o.cpusetRoot + "/cpuset.cpus",
          std::string("/sys/devices/system/cpu/online")}) {
      if (auto t = RtCgroupTree::readFile(f); t && !trim(*t).empty()) {
        cores = trim(*t);
        break;
      }
    }
  }
  auto list = alloc::parseCpuList(cores);
  if (!list) {
    s.reason = "RT cores: " + list.error().message;
    return s;
  }
  s.info.bound = *bound;
  s.info.cores = std::move(*list);
  s.info.kernel = alloc::RtKernel::kRtGroup;
  if (auto st = alloc::RtCoreState::create(s.info.bound, s.info.cores); !st) {
    s.reason = st.error().message;
    return s;
  }
  s.capable = true;
  s.reason = "cgroup v1 RT group scheduling at " + o.cpuRoot + ", cores " +
             alloc::formatCpuList(s.info.cores) + ", bound " + std::to_string(bound->runtimeUs) +
             "/" + std::to_string(bound->periodUs) + " us";
  return s;
}

Result<std::string> containerCgroupPath(const std::string& cgroupParent, const std::string& id) {
  if (cgroupParent.empty() || cgroupParent.front() != '/') {
    return makeError(kc::errc::kInvalid,
                     "cgroup parent '" + cgroupParent +
                         "' is not a cgroupfs path (kubelet's cgroupDriver must be cgroupfs)");
  }
  if (cgroupParent.find("..") != std::string::npos || cgroupParent.ends_with(".slice")) {
    return makeError(kc::errc::kInvalid, "cgroup parent '" + cgroupParent +
                                             "' is not supported (systemd slices or '..')");
  }
  if (id.empty() || id.find('/') != std::string::npos || id == "." || id == "..") {
    return makeError(kc::errc::kInvalid, "bad container id '" + id + "'");
  }
  std::string p = cgroupParent;
  while (p.size() > 1 && p.back() == '/') {
    p.pop_back();
  }
  return p == "/" ? "/" + id : p + "/" + id;
}

std::vector<std::string> RtCgroupTree::ancestorsOf(const std::string& path) const {
  std::vector<std::string> out;
  for (std::size_t pos = path.find('/', 1); pos != std::string::npos;
       pos = path.find('/', pos + 1)) {
    out.push_back(path.substr(0, pos));
  }
  return out;
}

Status RtCgroupTree::setAncestor(const std::string& rel, std::uint64_t ppb) {
  const std::string dir = o_.cpuRoot + rel;
  auto period = readInt(dir + "/cpu.rt_period_us");
  if (!period) {
    return period.error();
  }
  if (*period <= 0) {
    return makeError(kc::errc::kInternal, dir + "/cpu.rt_period_us is not positive");
  }
  return writeFile(dir + "/cpu.rt_runtime_us",
                   std::to_string(runtimeFor(ppb, static_cast<std::uint64_t>(*period))));
}

Status RtCgroupTree::apply(const std::string& path, const alloc::RtReservation& r) {
  if (auto s = alloc::validateReservation(r); !s) {
    return s;
  }
  std::lock_guard lock(mu_);
  if (auto it = leaves_.find(path); it != leaves_.end()) {
    if (it->second.r == r) {
      return okStatus();
    }
    return makeError(kc::errc::kConflict, path + " already holds a different RT budget");
  }
  const std::uint64_t u = alloc::utilizationPpb(r);
  const auto ancestors = ancestorsOf(path);
  std::vector<std::string> raised;
  std::vector<std::string> made;
  auto rollback = [&] {
    for (auto it = raised.rbegin(); it != raised.rend(); ++it) {
      (void)setAncestor(*it, ancestorPpb_[*it]);
    }
    for (auto it = made.rbegin(); it != made.rend(); ++it) {
      ::rmdir((o_.cpuRoot + *it).c_str());
    }
  };
  for (const auto& a : ancestors) {
    const std::string dir = o_.cpuRoot + a;
    if (!exists(dir)) {
      if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
        const Error e =
            makeError(kc::errc::kInternal, "mkdir " + dir + ": " + std::strerror(errno));
        rollback();
        return e;
      }
      made.push_back(a);
    }
    if (auto s = setAncestor(a, ancestorPpb_[a] + u); !s) {
      rollback();
      return s;
    }
    raised.push_back(a);
  }
  const std::string leaf = o_.cpuRoot + path;
  bool created = false;
  if (!exists(leaf)) {
    if (::mkdir(leaf.c_str(), 0755) != 0 && errno != EEXIST) {
      const Error e = makeError(kc::errc::kInternal, "mkdir " + leaf + ": " + std::strerror(errno));
      rollback();
      return e;
    }
    created = true;
  }
  Status s = writeFile(leaf + "/cpu.rt_period_us", std::to_string(r.periodUs));
  if (s) {
    s = writeFile(leaf + "/cpu.rt_runtime_us", std::to_string(r.runtimeUs));
  }
  if (!s) {
    (void)writeFile(leaf + "/cpu.rt_runtime_us", "0");
    if (created) {
      ::rmdir(leaf.c_str());
    }
    rollback();
    return s;
  }
  for (const auto& a : ancestors) {
    ancestorPpb_[a] += u;
  }
  createdDirs_.insert(made.begin(), made.end());
  leaves_[path] = Leaf{r, created};
  return okStatus();
}

Status RtCgroupTree::release(const std::string& path) {
  std::lock_guard lock(mu_);
  const auto it = leaves_.find(path);
  if (it == leaves_.end()) {
    return okStatus();
  }
  const std::string leaf = o_.cpuRoot + path;
  if (exists(leaf)) {
    if (auto s = writeFile(leaf + "/cpu.rt_runtime_us", "0"); !s) {
      return makeError(
          kc::errc::kFailedPrecondition,
          "cannot release " + path + " while real-time tasks run in it: " + s.error().message);
    }
    if (it->second.created) {
      ::rmdir(leaf.c_str());  // runc removes it on delete; EBUSY only while tasks remain
    }
  }
  const std::uint64_t u = alloc::utilizationPpb(it->second.r);
  leaves_.erase(it);
  Status result = okStatus();
  const auto ancestors = ancestorsOf(path);
  for (auto a = ancestors.rbegin(); a != ancestors.rend(); ++a) {
    std::uint64_t& held = ancestorPpb_[*a];
    held -= std::min(held, u);
    if (exists(o_.cpuRoot + *a)) {
      // A container cgroup runc has just removed still counts for its parent until the kernel
      // releases it (asynchronously, after rmdir): lowering the parent is refused (EINVAL) for
      // a few milliseconds. Measured with containerd 1.6: about 4 removals in 10. Retry for up
      // to a second.
      Status s = setAncestor(*a, held);
      for (int i = 0; !s && s.error().code == kc::errc::kInsufficient && i < 50; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        s = setAncestor(*a, held);
      }
      if (!s && result) {
        result = s;
      }
    }
    if (held == 0) {
      ancestorPpb_.erase(*a);
      if (createdDirs_.erase(*a) > 0) {
        ::rmdir((o_.cpuRoot + *a).c_str());
      }
    }
  }
  return result;
}

void RtCgroupTree::adopt(const std::string& path, const alloc::RtReservation& r, bool created) {
  std::lock_guard lock(mu_);
  if (leaves_.count(path) != 0) {
    return;
  }
  const std::uint64_t u = alloc::utilizationPpb(r);
  for (const auto& a : ancestorsOf(path)) {
    ancestorPpb_[a] += u;
  }
  leaves_[path] = Leaf{r, created};
}

bool RtCgroupTree::has(const std::string& path) const {
  std::lock_guard lock(mu_);
  return leaves_.count(path) != 0;
}

std::uint64_t RtCgroupTree::ancestorPpb(const std::string& path) const {
  std::lock_guard lock(mu_);
  const auto it = ancestorPpb_.find(path);
  return it == ancestorPpb_.end() ? 0 : it->second;
}

}  // namespace kc::rtshim
