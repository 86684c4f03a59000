#pragma once
// The scheduler's compact view of Pods and Nodes: only what the node filters (node_filter.hpp)
// and the effective request (pod_fit.hpp) read, as plain structs instead of whole API objects
// (the informer cache of whole JSON objects costs about 8.5 KiB a pod). kubecomp-sched fills
// them from its informers, the simulator builds them directly; both call the same filters.
//
// parsePod / parseNode read a Pod or Node object as the API server returns it (JSON) and
// validate it strictly: a bad quantity, operator, effect or shape is an "invalid" error that
// names the field (e.g. "spec.containers[0].resources.requests.cpu: quantity 'x': no digits").

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/alloc/gpu_model.hpp"
#include "libcore/alloc/rt_pod.hpp"
#include "libcore/api/names.hpp"
#include "libcore/base/result.hpp"

namespace kc::alloc {

// The pooled-GPU extended resource (docs/devplugin.md).
using api::kGpuResource;

// A pod's expected run time in whole seconds (a positive decimal integer), for the queue
// policies that plan ahead (backfill.hpp) and idle-time recomposition: like an HPC job's
// walltime. Without it the pod's spec.activeDeadlineSeconds is used, the Kubernetes field that
// bounds how long the pod may run.
using api::kExpectedRuntimeAnnotation;
// Ten years: larger values are refused as a typo rather than planned with.
inline constexpr std::int64_t kMaxExpectedRuntimeSeconds = 10LL * 366 * 24 * 3600;

using StringMap = std::map<std::string, std::string, std::less<>>;

// Amounts as kube-scheduler's framework.Resource keeps them: cpu in millicores, memory and
// ephemeral storage in bytes, scalar resources (extended resources, hugepages-*,
// attachable-volumes-*, kubernetes.io/-prefixed names) in whole units. Other resource names
// are validated and then dropped, as the scheduler ignores them.
struct Resources {
  std::int64_t milliCpu = 0;
  std::int64_t memory = 0;
  std::int64_t ephemeralStorage = 0;
  std::map<std::string, std::int64_t, std::less<>> scalar{};

  std::int64_t scalarOr0(std::string_view name) const;
  bool isZero() const;

  friend bool operator==(const Resources&, const Resources&) = default;
};

// schedutil.IsScalarResourceName, simplified: a name with a '/' (an extended resource or a
// kubernetes.io/-prefixed native one), or one starting with "hugepages-" or
// "attachable-volumes-". (The API server has already checked the name's syntax.)
bool isScalarResourceName(std::string_view name);

struct ContainerRequest {
  std::string name{};
  Resources requests{};      // resources.requests, limits filling in missing entries
  bool restartable = false;  // an init container with restartPolicy Always (a sidecar)
};

enum class SelectorOperator { In, NotIn, Exists, DoesNotExist, Gt, Lt };

struct SelectorRequirement {
  std::string key{};
  SelectorOperator op = SelectorOperator::In;
  std::vector<std::string> values{};
};

// One nodeSelectorTerm: its requirements are ANDed; the terms of a node selector are ORed.
struct NodeSelectorTerm {
  std::vector<SelectorRequirement> matchExpressions{};  // on node labels
  std::vector<SelectorRequirement> matchFields{};       // key metadata.name, In/NotIn only
};

// One preferredDuringSchedulingIgnoredDuringExecution entry of a node affinity: a node matching
// `preference` (an empty term matches no node) adds `weight` to the NodeAffinity score.
struct PreferredSchedulingTerm {
  std::int32_t weight = 0;  // 1..100
  NodeSelectorTerm preference{};
};

enum class TaintEffect { NoSchedule, PreferNoSchedule, NoExecute };

struct Taint {
  std::string key{};
  std::string value{};
  TaintEffect effect = TaintEffect::NoSchedule;
};

enum class TolerationOperator { Equal, Exists };

struct Toleration {
  std::string key{};  // empty (only with Exists): every key
  TolerationOperator op = TolerationOperator::Equal;
  std::string value{};
  std::optional<TaintEffect> effect{};  // empty: every effect
};

struct PodAffinity;     // pod_affinity.hpp
struct TopologySpread;  // topology_spread.hpp

// A container port with a hostPort (kube-scheduler's NodePorts filter reads only these): the
// API's defaults applied, protocol "" read as TCP and hostIP "" as 0.0.0.0 (every address).
struct HostPort {
  std::string hostIP{"0.0.0.0"};
  std::string protocol{"TCP"};  // TCP, UDP or SCTP
  std::int32_t port = 0;        // 1..65535

  friend bool operator==(const HostPort&, const HostPort&) = default;
};

// A volume of the pod backed by a PersistentVolumeClaim (volume_binding.hpp): a
// persistentVolumeClaim volume names its claim; a generic ephemeral volume's claim is
// "<pod name>-<volume name>", created and owned by the pod.
struct PodClaimVolume {
  std::string claim{};
  bool ephemeral = false;

  friend bool operator==(const PodClaimVolume&, const PodClaimVolume&) = default;
};

struct SchedPod {
  std::string ns{};
  std::string name{};
  std::string uid{};
  std::string schedulerName{};  // "default-scheduler" when the object leaves it out
  std::string nodeName{};       // set once bound (or when created pre-bound)
  std::string phase{};          // status.phase ("" when the object has no status yet)
  std::vector<ContainerRequest> containers{};
  std::vector<ContainerRequest> initContainers{};
  Resources overhead{};
  StringMap nodeSelector{};
  // spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms;
  // nullopt when the pod has no required node affinity (empty is refused by validation).
  std::optional<std::vector<NodeSelectorTerm>> requiredNodeAffinity{};
  // spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution, in spec order
  // (pod_fields.hpp parses it; pod_preference.hpp scores it).
  std::vector<PreferredSchedulingTerm> preferredNodeAffinity{};
  std::vector<Toleration> tolerations{};
  GpuModelFilter gpuModels{};  // annotation kubecomp.io/gpu-models
  RtPodSpec rt{};              // annotations rt.kubecomp.io/* (rt_pod.hpp)
  // kExpectedRuntimeAnnotation, else spec.activeDeadlineSeconds; nullopt when neither is set.
  std::optional<std::int64_t> expectedRuntimeSeconds{};
  // The DRA path: the pod names ResourceClaims (spec.resourceClaims). The GPUs its claims of
  // driver gpu.kubecomp.io ask for are filled in by the scheduler from the claims (parsePod
  // leaves 0) and count in podRequests as kubecomp.io/gpu, so the pool policy places the pod
  // like one that asks them in its limits.
  bool usesClaims = false;
  std::int64_t claimGpus = 0;
  // The fields the filters that look at the other pods read (pod_fields.hpp parses them):
  StringMap labels{};                          // metadata.labels
  std::vector<std::string> schedulingGates{};  // spec.schedulingGates[*].name; non-empty: gated
  std::vector<HostPort> hostPorts{};           // spec.containers[*].ports with a hostPort
  // spec.affinity.podAffinity / podAntiAffinity (pod_affinity.hpp); null when neither is given.
  std::shared_ptr<const PodAffinity> podAffinity{};
  // spec.topologySpreadConstraints (topology_spread.hpp); null when none.
  std::shared_ptr<const TopologySpread> topologySpread{};
  // spec.volumes backed by PersistentVolumeClaims, in spec order (VolumeBinding reads them).
  std::vector<PodClaimVolume> claimVolumes{};
  // spec.priority (the API server's Priority admission fills it from priorityClassName; 0 when
  // absent) and spec.preemptionPolicy Never (the pod waits rather than preempting anyone):
  // the queue order (pod_order.hpp) and preemption (preemption.hpp) read them.
  std::int32_t priority = 0;
  bool preemptNever = false;
};

struct SchedNode {
  std::string name{};
  StringMap labels{};
  std::vector<Taint> taints{};
  Resources allocatable{};           // status.allocatable
  std::int64_t allocatablePods = 0;  // status.allocatable.pods
  bool unschedulable = false;        // spec.unschedulable (cordoned)
  // Real-time capability the node's rt-kubelet-shim publishes (rt_pod.hpp); nullopt: none.
  std::optional<RtNodeInfo> rt{};
  std::string rtError{};  // labelled capable but the annotations are malformed
};

std::string_view taintEffectName(TaintEffect e);

// Go's strconv.ParseInt(text, 10, 64), as Gt/Lt read label values: an optional sign and
// decimal digits, nothing else, within int64.
bool parseLabelInt(std::string_view text, std::int64_t& out);

// A Pod object (v1) as the API returns it. Requires metadata.name and at least one container.
Result<SchedPod> parsePod(const nlohmann::json& pod);
// A v1.NodeSelector object ({nodeSelectorTerms: [...]}: terms ORed, each non-empty list of
// requirements ANDed; matchFields on metadata.name only), errors naming `field`.
Result<std::vector<NodeSelectorTerm>> parseNodeSelector(const nlohmann::json& selector,
                                                        const std::string& field);
// One v1.NodeSelectorTerm object (matchExpressions and matchFields), errors naming `field`.
Result<NodeSelectorTerm> parseNodeSelectorTerm(const nlohmann::json& term,
                                               const std::string& field);
// A Node object (v1). Requires metadata.name; a missing status.allocatable is all zero.
Result<SchedNode> parseNode(const nlohmann::json& node);

}  // namespace kc::alloc
