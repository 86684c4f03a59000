#pragma once
// CDI (Container Device Interface, ../shared/peers/cdi/SPEC.md) specs for pooled GPUs: the JSON
// a CDI-enabled runtime (containerd >= 1.7, CRI-O) reads from /var/run/cdi to inject a GPU's
// device nodes and environment into a container. Written by the node agent in two modes:
//  - device plugin with --device-list-strategy cdi-cri: one spec with every GPU of the node,
//    kubelet passes AllocateResponse.cdi_devices to the runtime;
//  - DRA kubelet plugin: one spec per prepared claim, its CDI ids returned by
//    NodePrepareResources (claimEnv: the claim's env is spec-level, see buildSpec).
// Pure: no I/O (cdi_store.hpp writes the files).

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::cdi {

// The cdiVersion of every spec we write: the lowest version that has everything we use
// (SPEC.md, "Released versions"): `hostPath` on device nodes (v0.5.0; the host's device root
// may differ from the container's /dev) and device names beginning with a digit (v0.5.0; names
// made from UUIDs or numeric ids). Nothing of v0.6.0 or later is used: no annotations, no dot in
// the kind's name segment ("gpu"), no intelRdt/additionalGids, no netDevices. A runtime refuses a
// spec whose version is newer than its CDI library knows, so the lowest sufficient version is
// read by the most runtimes (containerd 1.7 ships a CDI library of the v0.5 line).
inline constexpr std::string_view kCdiVersion = "0.5.0";

// The control device nodes a CUDA container needs besides /dev/nvidia<minor>, in the order a
// spec lists them; only those present on the host go into a spec (presentControlNodes).
inline constexpr std::array<std::string_view, 3> kControlNodeNames = {"nvidiactl", "nvidia-uvm",
                                                                      "nvidia-uvm-tools"};

// A device name kept as given is at most this long; longer ones are shortened and hashed.
inline constexpr std::size_t kMaxKeptNameLength = 128;

struct CdiGpu {
  std::string name;        // CDI device name (isValidDeviceName; make one with cdiDeviceName)
  std::string gpuId;       // pool GPU id (KUBECOMP_GPU_IDS)
  std::string uuid;        // NVIDIA_VISIBLE_DEVICES; may be "" when the chassis cannot read it
  std::int32_t minor = 0;  // /dev/nvidia<minor>

  friend bool operator==(const CdiGpu&, const CdiGpu&) = default;
};

struct SpecOptions {
  // Host-side root of the device nodes: hostPath = devRoot + "/nvidiaN"; the path in the
  // container is always /dev/nvidiaN.
  std::string devRoot = "/dev";
  // Which of kControlNodeNames to add (those present on the host: presentControlNodes). Names
  // not in kControlNodeNames are ignored; the spec lists them in kControlNodeNames' order.
  std::vector<std::string> controlNodes;
};

// SPEC.md's device name rule (v0.5.0): non-empty, beginning and ending with [A-Za-z0-9], with
// only [A-Za-z0-9_.-] between.
bool isValidDeviceName(std::string_view name);

// A valid CDI device name made from an arbitrary string (pool GPU ids may hold '/', ':', ' ',
// ...). A valid name of at most kMaxKeptNameLength characters is kept unless it has the mapped
// form below; any other input maps to "<sanitised>_h<16 hex>" (or "h<16 hex>" when nothing of it
// survives), the sanitised part being the input with invalid characters replaced by '-',
// trimmed to begin and end with an alphanumeric and cut to 64 characters, and the hex a 64-bit
// FNV-1a hash of the whole input. A kept name never has the mapped form, so a kept and a mapped
// name never collide; two mapped names collide only if their 64-bit hashes do.
std::string cdiDeviceName(std::string_view raw);

// "kubecomp.io/gpu=<deviceName>": the fully-qualified CDI device name a runtime is given.
std::string qualifiedName(std::string_view deviceName);

// "kubecomp.io-gpu": the "<vendor>-<class>" prefix of our spec files' names (cdi_store.hpp).
std::string specFilePrefix();

// One spec of kind kubecomp.io/gpu. Each GPU is a device whose containerEdits hold its node
// {path /dev/nvidia<minor>, hostPath devRoot/nvidia<minor>} and, unless claimEnv, its env
// NVIDIA_VISIBLE_DEVICES=<uuid> and KUBECOMP_GPU_IDS=<gpuId>. The control nodes go into the
// spec-level containerEdits (applied once whichever devices are requested). claimEnv (a DRA
// claim's spec) puts the env of ALL the GPUs, comma-joined in the given order, in the
// spec-level containerEdits instead: a container gets every device of its claim, and a runtime
// applying per-device env of one name keeps only the last device's value.
// The spec-level containerEdits is left out when it would be empty. The caller gives at least
// one GPU, valid and distinct names and minors >= 0; SpecDir::write refuses a spec that breaks
// this (parseOurSpec).
nlohmann::json buildSpec(const std::vector<CdiGpu>& gpus, const SpecOptions& options,
                         bool claimEnv);

// Strict reader of the specs buildSpec writes (restart path, tests): the GPUs in spec order, or
// an errc::kInvalid error whose message names the offending field. Refuses other versions and
// kinds, unknown fields, invalid or repeated device names, nodes other than /dev/nvidia<minor>
// and the control nodes, env other than ours, and env both per device and spec-level.
Result<std::vector<CdiGpu>> parseOurSpec(const nlohmann::json& spec);

}  // namespace kc::cdi
