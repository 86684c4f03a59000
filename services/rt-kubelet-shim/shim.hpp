#pragma once
// rt-kubelet-shim's core: the CRI hooks that turn a pod's RT annotations into a placed,
// budgeted container cgroup, the admission state (libcore's RtNodeState, the same code the
// scheduler runs), the rebuild after a restart, and what it publishes on the Node and Pods.
//
// Call by call (every other call, and everything of non-RT pods, passes through unchanged):
//   RunPodSandbox     RT annotations validated (INVALID_ARGUMENT naming the key), refused
//                     with FAILED_PRECONDITION on a node without RT support.
//   CreateContainer   the container's reservation resolved, cores chosen (first-fit or
//                     worst-fit) and admitted (RESOURCE_EXHAUSTED when they do not fit), the
//                     cpuset set to those cores, and the reservation recorded in the
//                     container's annotations (rt.kubecomp.io/shim-*) so a restarted shim can
//                     rebuild from the runtime alone. A new attempt of the same container in
//                     the same sandbox takes over its predecessor's cores.
//   StartContainer    the container cgroup <cgroup_parent>/<id> pre-created in the cpu
//                     hierarchy with its budget, ancestors raised top-down, BEFORE the call is
//                     forwarded (runc joins the existing directory, and nothing is written
//                     after the workload runs).
//   UpdateContainerResources  a cpuset for an RT container is kept on its cores.
//   RemoveContainer / RemovePodSandbox  budget released bottom-up once the runtime succeeded.

#include <grpcpp/channel.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "libcore/alloc/rt_pod.hpp"
#include "libcore/api/names.hpp"
#include "libcore/base/result.hpp"
#include "services/rt-kubelet-shim/cri_proxy.hpp"
#include "services/rt-kubelet-shim/rt_cgroups.hpp"

namespace kc::kube {
class KubeClient;
}
namespace kc::obs {
class Metrics;
}

namespace kc::rtshim {

// Container annotations the shim adds at CreateContainer (the runtime keeps them).
using api::kShimCgroupParentAnnotation;
using api::kShimCoresAnnotation;
using api::kShimPodAnnotation;
using api::kShimReservationAnnotation;

struct ShimOptions {
  std::string packing = "first-fit";
  std::string nodeName;  // for the Node labels (empty: nothing published)
};

class RtShim final : public CallHooks {
 public:
  // `support` from detectRtSupport; `client` may be null (publish nothing).
  RtShim(ShimOptions options, RtSupport support, RtCgroupOptions cgroups, kube::KubeClient* client,
         obs::Metrics* metrics);
  ~RtShim() override;

  // Checks options (packing name). Error "invalid".
  static Status validate(const ShimOptions& o);

  // Rebuilds reservations from the runtime's containers (ListContainers over `runtime`) and
  // their cgroups, then publishes the Node's RT capability. Error when the runtime cannot be
  // listed (the shim must not serve with unknown state).
  Status rebuild(grpc::Channel& runtime);
  bool ready() const { return ready_.load(); }

  std::unique_ptr<CallHook> hookFor(std::string_view method) override;
  void observeCall(const std::string& method, grpc::StatusCode code, double seconds);

  // Stops the publisher thread (pending patches are attempted once more).
  void stop();

  // For tests and /metrics.
  struct Held {
    std::string containerId, sandboxId, container, pod, cgroupPath;
    alloc::RtReservation reservation;
    std::vector<std::uint32_t> cpus;
  };
  std::vector<Held> held() const;
  const RtSupport& support() const { return support_; }

  // Implementation pieces used by the hooks.
  struct Entry {
    std::string sandboxId, container, pod, cgroupParent;
    alloc::RtReservation reservation;
    std::vector<std::uint32_t> cpus;
  };
  grpc::Status createRequest(grpc::ByteBuffer& request, std::optional<Entry>& pending,
                             std::optional<std::string>& replaced);
  void createDone(const std::optional<Entry>& pending, const std::optional<std::string>& replaced,
                  const std::string& containerId, bool ok);
  grpc::Status startRequest(const std::string& containerId);
  grpc::Status sandboxRequest(grpc::ByteBuffer& request);
  grpc::Status updateRequest(grpc::ByteBuffer& request);
  void removed(const std::string& containerId);
  void sandboxRemoved(const std::string& sandboxId);

 private:
  struct Metrics;
  void publishNode();
  void queuePodPublish(const std::string& pod);
  void publisherLoop();
  void updateGauges();
  Status releaseEntry(const std::string& id, const Entry& e);

  ShimOptions o_;
  RtSupport support_;
  alloc::RtPacking packing_;
  std::optional<alloc::RtNodeState> node_;
  RtCgroupTree tree_;
  kube::KubeClient* client_;
  std::unique_ptr<Metrics> metrics_;

  mutable std::mutex mu_;                 // guards node_, entries_
  std::map<std::string, Entry> entries_;  // container id -> entry
  std::atomic<bool> ready_{false};

  std::mutex pubMu_;
  std::condition_variable pubCv_;
  std::set<std::string> pubQueue_;  // "ns/name" of pods whose assignment changed
  bool pubStop_ = false;
  std::thread publisher_;
};

}  // namespace kc::rtshim
