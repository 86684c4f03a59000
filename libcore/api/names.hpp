#pragma once
// Every name one process of the suite tells another, defined once: API groups, versions, kinds
// and resources of our custom objects, the resource and driver names, the annotations and labels
// on Pods and Nodes. Pure constants; the typed shapes that carry values are in the other headers
// of this folder (docs/architecture.md lists which unit writes and which reads each).

#include <string_view>

#include "libcore/kube/resource.hpp"

namespace kc::api {

// ---- Groups, versions, kinds, resources

inline constexpr std::string_view kGroup = "kubecomp.io";

// GPUPool (charts/kubecomp/crds/gpupools.kubecomp.io.yaml): cluster scoped.
inline constexpr std::string_view kGpuPoolVersion = "v1alpha1";
inline constexpr std::string_view kGpuPoolApiVersion = "kubecomp.io/v1alpha1";
inline constexpr std::string_view kGpuPoolKind = "GPUPool";
inline constexpr std::string_view kGpuPoolResource = "gpupools";

// VNI (charts/kubecomp/crds/vnis.kubecomp.io.yaml): namespaced, written by vni-webhook as a
// Metacontroller attachment.
inline constexpr std::string_view kVniApiVersion = "kubecomp.io/v1";
inline constexpr std::string_view kVniKind = "VNI";
inline constexpr std::string_view kVniResource = "vnis";

// BridgeJob (charts/kubecomp/crds/bridgejobs.bridge.kubecomp.io.yaml): namespaced.
inline constexpr std::string_view kBridgeGroup = "bridge.kubecomp.io";
inline constexpr std::string_view kBridgeJobVersion = "v1alpha1";
inline constexpr std::string_view kBridgeJobApiVersion = "bridge.kubecomp.io/v1alpha1";
inline constexpr std::string_view kBridgeJobKind = "BridgeJob";
inline constexpr std::string_view kBridgeJobResource = "bridgejobs";

namespace gvr {
inline kube::GroupVersionResource gpuPools() {
  return {std::string(kGroup), std::string(kGpuPoolVersion), std::string(kGpuPoolResource), false};
}
inline kube::GroupVersionResource vnis() {
  return {std::string(kGroup), "v1", std::string(kVniResource), true};
}
// resource.k8s.io/v1 (Dynamic Resource Allocation; docs/dra.md).
inline kube::GroupVersionResource resourceSlices() {
  return {"resource.k8s.io", "v1", "resourceslices", false};
}
inline kube::GroupVersionResource resourceClaims() {
  return {"resource.k8s.io", "v1", "resourceclaims", true};
}
inline kube::GroupVersionResource deviceClasses() {
  return {"resource.k8s.io", "v1", "deviceclasses", false};
}
inline kube::GroupVersionResource bridgeJobs() {
  return {std::string(kBridgeGroup), std::string(kBridgeJobVersion),
          std::string(kBridgeJobResource), true};
}
}  // namespace gvr

// ---- Pooled GPUs

// The extended resource of the device-plugin path (docs/devplugin.md): pods ask for it in
// resources.limits, kubelet advertises it as allocatable.
inline constexpr std::string_view kGpuResource = "kubecomp.io/gpu";
// The DRA driver name of the DRA path (docs/dra.md).
inline constexpr std::string_view kDraDriverName = "gpu.kubecomp.io";
// The DeviceClass the chart ships (selector: the driver), which pods' claims name.
inline constexpr std::string_view kDraDeviceClassName = "gpu.kubecomp.io";
// GPUPool spec.allocationPath: which path offers the pool's GPUs to pods (docs/dra.md). One
// path per pool, so a GPU is never offered on both.
inline constexpr std::string_view kPathDevicePlugin = "DevicePlugin";  // the default
inline constexpr std::string_view kPathDra = "DRA";
// The environment a container with pooled GPUs gets, from the device plugin's Allocate and from
// the CDI specs of libcore/cdi: the GPUs' UUIDs (GPU-...) and their pool GPU ids, comma-joined in
// the order of the request.
inline constexpr std::string_view kVisibleDevicesEnv = "NVIDIA_VISIBLE_DEVICES";
inline constexpr std::string_view kGpuIdsEnv = "KUBECOMP_GPU_IDS";
// The kind of the CDI specs the node agent writes (libcore/cdi): devices are named
// "kubecomp.io/gpu=<name>" in AllocateResponse.cdi_devices and in DRA's NodePrepareResources.
inline constexpr std::string_view kCdiKind = kGpuResource;
// spec.schedulerName of the pods kubecomp-sched places.
inline constexpr std::string_view kSchedulerName = "kubecomp-sched";

// The reconfiguration request kubecomp-sched puts on a pod for reconfig-mgr
// (reconfig_request.hpp).
inline constexpr std::string_view kDstNodeAnnotation = "kubecomp.io/dst-node";
inline constexpr std::string_view kDemandAnnotation = "kubecomp.io/demand";
inline constexpr std::string_view kReservedAtAnnotation = "kubecomp.io/reserved-at";

// A pod's expected run time in whole seconds (read by libcore/alloc's pod parser).
inline constexpr std::string_view kExpectedRuntimeAnnotation =
    "kubecomp.io/expected-runtime-seconds";
// The GPU models a pod accepts, comma-separated (libcore/alloc/gpu_model.hpp).
inline constexpr std::string_view kGpuModelsAnnotation = "kubecomp.io/gpu-models";
// Development control plane only: how long a kubelet stand-in lets the pod run.
inline constexpr std::string_view kRunSecondsAnnotation = "kubecomp.io/run-seconds";

// Node annotation with the device plugin's usage report (usage_report.hpp).
inline constexpr std::string_view kUsageAnnotation = "kubecomp.io/gpu-usage";

// GPU health as GPUPool status.gpus[].health spells it.
inline constexpr std::string_view kHealthy = "Healthy";
inline constexpr std::string_view kUnhealthy = "Unhealthy";

// ---- Real-time containers (libcore/alloc/rt_pod.hpp parses and writes the values)

inline constexpr std::string_view kRtAnnotationPrefix = "rt.kubecomp.io/";
inline constexpr std::string_view kRtRuntimeField = "runtime-us";
inline constexpr std::string_view kRtPeriodField = "period-us";
inline constexpr std::string_view kRtCpusField = "cpus";
inline constexpr std::string_view kRtAssignedAnnotation = "rt.kubecomp.io/assigned";
inline constexpr std::string_view kRtCapableLabel = "rt.kubecomp.io/capable";
inline constexpr std::string_view kRtCoresAnnotation = "rt.kubecomp.io/cores";
inline constexpr std::string_view kRtBoundAnnotation = "rt.kubecomp.io/bound";
inline constexpr std::string_view kRtKernelAnnotation = "rt.kubecomp.io/kernel";
// rt-kubelet-shim's annotations on the CRI sandboxes and containers it creates: written and read
// by the shim only, kept for it by the container runtime across the shim's restarts.
inline constexpr std::string_view kShimReservationAnnotation = "rt.kubecomp.io/shim-reservation";
inline constexpr std::string_view kShimCoresAnnotation = "rt.kubecomp.io/shim-cores";
inline constexpr std::string_view kShimCgroupParentAnnotation = "rt.kubecomp.io/shim-cgroup-parent";
inline constexpr std::string_view kShimPodAnnotation = "rt.kubecomp.io/shim-pod";

// ---- Slingshot VNIs (vni.hpp)

inline constexpr std::string_view kVniOptInAnnotation = "vni.kubecomp.io/request";
inline constexpr std::string_view kVniLabel = "vni.kubecomp.io/vni";
inline constexpr std::string_view kVniOwnerUidLabel = "vni.kubecomp.io/owner-uid";

// ---- Bridge (bridge_job.hpp)

inline constexpr std::string_view kBridgeJobLabel = "bridge.kubecomp.io/job";
inline constexpr std::string_view kBridgeJobUidLabel = "bridge.kubecomp.io/job-uid";
inline constexpr std::string_view kBridgeAttemptLabel = "bridge.kubecomp.io/attempt";

}  // namespace kc::api
