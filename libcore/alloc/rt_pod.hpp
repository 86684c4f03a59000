#pragma once
// Real-time pods and nodes as the API shows them (seed 003): the pod annotations that ask for a
// reservation, the node labels/annotations that advertise RT capability, the pod annotation
// that records the cores each container holds, and the node's admission state over them.
// rt-kubelet-shim (the node) and kubecomp-sched (admission) both call these functions, so they
// read the same keys the same way and place reservations with the same code.
//
// Pod annotations (values are decimal integers):
//   rt.kubecomp.io/runtime-us, rt.kubecomp.io/period-us, rt.kubecomp.io/cpus
//       the reservation of EVERY container of the pod (init containers included) that has
//       no value of its own;
//   rt.kubecomp.io/<container>.runtime-us (.period-us, .cpus)
//       that container's own value, field by field.
// A container is real-time when runtime-us or period-us resolves for it; then both must, and
// cpus defaults to 1. Written by the shim:
//   rt.kubecomp.io/assigned = "<container>=<cpulist>;..." (the cores each container holds).
//
// Node (published by the shim):
//   label rt.kubecomp.io/capable = "true"
//   annotation rt.kubecomp.io/cores  = cpu list of the RT cores ("0-3,6")
//   annotation rt.kubecomp.io/bound  = "<runtime_us>/<period_us>" per-core bound
//   annotation rt.kubecomp.io/kernel = "rt-group" | "hcbs"
// "rt-group" is mainline cgroup v1 RT group scheduling: a group's runtime applies on every
// CPU, and the kernel admits a group only while the sum of runtime/period over sibling groups
// stays within the parent's, up to the root's sched_rt_runtime_us/sched_rt_period_us. So on
// such a node the sum over ALL real-time containers of runtime/period must stay within the
// bound as well, whatever cores they use (checked in RtNodeState::place). Nor does it serve a
// group like a server per core: groups on one core interfere by priority, bounded only by
// their budgets (rt_interference.hpp). So on such a node RtNodeState::place spreads: an empty
// core first, a core that already holds groups only if rtSharedCoreAdmits says every group
// there still gets its budget in each period. "hcbs" kernels (per-CPU deadline servers) are
// limited per core only.

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/alloc/rt_admission.hpp"
#include "libcore/alloc/rt_interference.hpp"
#include "libcore/api/names.hpp"
#include "libcore/base/result.hpp"

namespace kc::alloc {

using RtStringMap = std::map<std::string, std::string, std::less<>>;

// The names (libcore/api/names.hpp); this unit parses and writes their values.
using api::kRtAnnotationPrefix;
using api::kRtAssignedAnnotation;
using api::kRtBoundAnnotation;
using api::kRtCapableLabel;
using api::kRtCoresAnnotation;
using api::kRtCpusField;
using api::kRtKernelAnnotation;
using api::kRtPeriodField;
using api::kRtRuntimeField;

// Every rt.kubecomp.io/ key of a pod's annotations: a known field, a decimal value, a
// container prefix that is a container of the pod (when containerNames is given; the shim at
// RunPodSandbox does not know them yet). Error "invalid" naming the key and what is wrong.
Status validateRtAnnotations(const RtStringMap& annotations,
                             std::optional<std::span<const std::string>> containerNames = {});

// The reservation of one container (nullopt: not real-time). Error "invalid" naming the keys
// (missing runtime or period, zero values, runtime > period, non-numbers, overflow).
Result<std::optional<RtReservation>> rtReservationFor(const RtStringMap& annotations,
                                                      std::string_view container);

// "0-2,5" <-> {0,1,2,5} (Linux cpu list format). parse: ascending, no duplicates, at most
// kMaxRtCpus ids; error "invalid". format: compresses runs.
Result<std::vector<std::uint32_t>> parseCpuList(std::string_view text);
std::string formatCpuList(std::span<const std::uint32_t> cpus);

// rt.kubecomp.io/assigned: container name -> cores. Error "invalid" on a malformed value.
using RtAssignment = std::map<std::string, std::vector<std::uint32_t>, std::less<>>;
Result<RtAssignment> parseRtAssignment(std::string_view text);
std::string formatRtAssignment(const RtAssignment& a);

enum class RtKernel { kRtGroup, kHcbs };
std::string_view rtKernelName(RtKernel k);

struct RtNodeInfo {
  RtBound bound{};
  std::vector<std::uint32_t> cores{};
  RtKernel kernel = RtKernel::kRtGroup;
};
// From a Node's labels and annotations: nullopt when not labelled capable; error "invalid"
// when labelled capable but an annotation is missing or malformed.
Result<std::optional<RtNodeInfo>> parseRtNode(const RtStringMap& labels,
                                              const RtStringMap& annotations);
// The annotations the shim writes (plus the label kRtCapableLabel = "true").
RtStringMap formatRtNodeAnnotations(const RtNodeInfo& info);

// One node's RT admission state: per-core load, the budgets each core holds, and on rt-group
// kernels the sum over all admitted reservations of runtime/period (each reservation once,
// whatever its cpus).
class RtNodeState {
 public:
  static Result<RtNodeState> create(const RtNodeInfo& info);

  const RtCoreState& cores() const { return cores_; }
  RtKernel kernel() const { return kernel_; }
  std::uint64_t groupUsedPpb() const { return groupUsedPpb_; }
  // The budgets (one per admitted server) on an RT core; empty for an unknown or idle core.
  std::span<const RtBudget> budgetsOn(std::uint32_t cpu) const;

  // Where a reservation goes. hcbs: placeReservation with the packing. rt-group: the sum over
  // all groups must stay within the bound, then cores with room are tried empty ones first
  // (lowest first; worst-fit: the same, empty cores having the most room), then cores already
  // holding groups where rtSharedCoreAdmits passes with the new budget added (first-fit: lowest
  // first; worst-fit: most room first). Errors: "invalid", "insufficient" (message says which
  // limit or which core's test failed). Changes nothing.
  Result<std::vector<std::uint32_t>> place(const RtReservation& r, const RtPacking& packing) const;
  // Commit / undo a placement (cores as place() returned, or as a pod's assignment says).
  // admit records what the node holds (the per-core bound and group sum are checked, the
  // shared-core test is place()'s: a shim restarted over containers an older version packed
  // must still count them).
  Status admit(const RtReservation& r, std::span<const std::uint32_t> cpus);
  Status release(const RtReservation& r, std::span<const std::uint32_t> cpus);

 private:
  RtNodeState(RtCoreState cores, RtKernel kernel) : cores_(std::move(cores)), kernel_(kernel) {}
  Result<std::vector<std::uint32_t>> placeSpread(const RtReservation& r,
                                                 const RtPacking& packing) const;
  RtCoreState cores_;
  RtKernel kernel_;
  std::uint64_t groupUsedPpb_ = 0;
  std::map<std::uint32_t, std::vector<RtBudget>> budgets_;  // CPU id -> one entry per server
};

// A whole pod on a copy of the node: each reservation in order (init containers first, as
// kubelet creates them, then app containers), placed and admitted as the node would. Returns the
// cores of each, or the first failure (message names the container).
struct RtContainerRequest {
  std::string container;
  RtReservation reservation;
  friend bool operator==(const RtContainerRequest&, const RtContainerRequest&) = default;
};
Result<RtAssignment> placeRtPod(const RtNodeState& node, std::span<const RtContainerRequest> pod,
                                const RtPacking& packing);

// The real-time side of a pod as the scheduler keeps it: the reservation of each RT container
// (init containers first, then app containers, the order kubelet creates them), the cores the
// node says it gave (rt.kubecomp.io/assigned), or what is wrong with its annotations.
struct RtPodSpec {
  std::vector<RtContainerRequest> containers{};
  RtAssignment assigned{};
  std::string error{};  // non-empty: invalid annotations, the pod must not be scheduled
  bool realTime() const { return !containers.empty() || !error.empty(); }
  friend bool operator==(const RtPodSpec&, const RtPodSpec&) = default;
};
// Never fails: a problem is kept in `error` (naming the key) so the scheduler can tell the user.
RtPodSpec rtPodSpec(const RtStringMap& annotations, std::span<const std::string> initContainers,
                    std::span<const std::string> containers);

}  // namespace kc::alloc
