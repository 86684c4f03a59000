#pragma once
// The node usage report: what disaggpu-devplugin publishes on its Node (annotation
// kubecomp.io/gpu-usage, a JSON text) for reconfig-mgr, the only reader: which GPUs kubelet
// sees, which draining GPUs are confirmed withdrawn, and which pods use which GPU.

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/api/names.hpp"
#include "libcore/base/result.hpp"

namespace kc::api {

// The "pod" a GPU is in use by while kubelet's Allocate for it is in flight and PodResources
// does not show the pod yet.
inline constexpr std::string_view kAllocatingPod = "(allocating)";
// An annotation larger than this is not a usage report (a node's is a few KiB).
inline constexpr std::size_t kMaxUsageReportBytes = 256 * 1024;

struct UsageReport {
  std::string pool;                     // "" when the node's GPUs come from several pools
  std::vector<std::string> advertised;  // ids kubelet sees, sorted
  // Draining GPUs confirmed withdrawn: kubelet has received a list without them AND a
  // PodResources read taken after that delivery is reflected in `inUse`. reconfig-mgr may
  // detach a GPU only when it is here and not in `inUse`.
  std::vector<std::string> withdrawn;
  std::map<std::string, std::vector<std::string>>
      inUse;                // id -> ["namespace/pod" or kAllocatingPod, ...]
  bool registered = false;  // kubelet accepted the plugin's registration
  // The node judges its GPUs by its own host view (sysfs, /proc/driver/nvidia): a GPU is
  // offered to pods only when the GPUPool says it is attached here AND the host sees it, usable,
  // with the same UUID. False (a plugin before the host view, or one run with
  // --host-check=false): `hostVisible` and `notVisible` say nothing, and reconfig-mgr verifies
  // a move by the fabric alone.
  bool hostChecked = false;
  std::vector<std::string> hostVisible;  // ids attached here that the host sees usable, sorted
  // Ids attached here (GPUPool) that the host does not see usable -> why, for people.
  std::map<std::string, std::string> notVisible;
  // Draining GPUs the node hot-removes before the fabric detaches them (node agent run with
  // --hot-remove) but cannot yet -> why ("held open by pid 4242 (python3)"). Such a GPU is not
  // in `withdrawn` until it is gone from the host.
  std::map<std::string, std::string> removeBlocked;

  friend bool operator==(const UsageReport&, const UsageReport&) = default;
};

nlohmann::json toJson(const UsageReport& report);
// The annotation's value.
std::string serialize(const UsageReport& report);
// Strict: error "invalid" naming the field when the annotation is not a UsageReport (over
// kMaxUsageReportBytes, too deep, not JSON, a field of the wrong type). Unknown fields are
// ignored (a newer writer may add some); every field is optional.
Result<UsageReport> parseUsageReport(std::string_view text);

}  // namespace kc::api
