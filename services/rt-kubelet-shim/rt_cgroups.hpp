#pragma once
// The node's real-time kernel interface, as rt-kubelet-shim uses it: detection of RT group
// scheduling (cgroup v1 cpu.rt_runtime_us, the kernel.sched_rt_* sysctls; HCBS files are
// detected and reported), and the RT budget of container cgroups, written top-down
// (ancestors first, leaf last) on admission and released bottom-up.
//
// cgroup v1 RT group scheduling checks, on every write, that the sum over a group's children of
// runtime/period stays within the group's own runtime/period. So every ancestor of a container
// cgroup (kubepods -> QoS -> pod) must hold at least the sum of the budgets beneath it. The
// shim keeps that sum per ancestor in memory (in parts per billion) and writes each ancestor at
// period 1 s with runtime ceil(sum / 1000) us, which is never below the kernel's own rounded
// sum of the children.

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "libcore/alloc/rt_pod.hpp"
#include "libcore/base/result.hpp"

namespace kc::rtshim {

struct RtCgroupOptions {
  std::string cpuRoot = "/sys/fs/cgroup/cpu";        // cgroup v1 cpu controller mount
  std::string cpusetRoot = "/sys/fs/cgroup/cpuset";  // cgroup v1 cpuset controller mount
  std::string unifiedRoot = "/sys/fs/cgroup/unified";
  std::string sysctlDir = "/proc/sys/kernel";
  std::string rtCores;  // "" = every CPU in the cpuset root's effective_cpus
};

struct RtSupport {
  bool capable = false;
  std::string reason;  // why not (capable = false), or a one-line description
  alloc::RtNodeInfo info{};
};

// Reads the kernel's interface. Never fails: a node without support gets capable = false and a
// reason saying exactly what is missing.
RtSupport detectRtSupport(const RtCgroupOptions& o);

// Relative cgroup path ("/kubepods/burstable/pod1/<cid>") from a cgroupfs-style parent and a
// container id. Errors "invalid": systemd-style parents (".slice"), "..", relative or empty
// parents, ids with '/'.
Result<std::string> containerCgroupPath(const std::string& cgroupParent, const std::string& id);

class RtCgroupTree {
 public:
  explicit RtCgroupTree(RtCgroupOptions o) : o_(std::move(o)) {}

  // Gives leaf `path` (relative to cpuRoot) the budget runtime/period: raises every ancestor
  // top-down, creates the leaf directory if missing, writes its period then runtime. All or
  // nothing: on a failed write the ancestors raised so far are lowered again. Error
  // "insufficient" when the kernel refuses (EINVAL/EBUSY: parent budget), "internal" otherwise;
  // the message names the file and the errno text.
  Status apply(const std::string& path, const alloc::RtReservation& r);
  // Releases a leaf: its runtime to 0 and its directory removed if this shim created it (or it
  // is gone already), then the ancestors lowered bottom-up. Idempotent for unknown leaves.
  Status release(const std::string& path);
  // After a restart: counts a leaf the runtime already set up (ancestor sums rebuilt, nothing
  // written). `created`: the leaf directory was made by the shim (removed on release).
  void adopt(const std::string& path, const alloc::RtReservation& r, bool created);

  bool has(const std::string& path) const;
  std::uint64_t ancestorPpb(const std::string& path) const;  // 0 when none
  const RtCgroupOptions& options() const { return o_; }

  // File helpers (absolute paths), exposed for tests.
  static Result<std::string> readFile(const std::string& path);
  static Status writeFile(const std::string& path, const std::string& value);

 private:
  struct Leaf {
    alloc::RtReservation r;
    bool created = false;
  };
  std::vector<std::string> ancestorsOf(const std::string& path) const;
  Status setAncestor(const std::string& rel, std::uint64_t ppb);

  RtCgroupOptions o_;
  mutable std::mutex mu_;
  std::map<std::string, Leaf> leaves_;
  std::map<std::string, std::uint64_t> ancestorPpb_;
  std::set<std::string> createdDirs_;  // ancestors this process created
};

}  // namespace kc::rtshim
