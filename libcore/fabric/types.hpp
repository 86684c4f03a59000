#pragma once
// Vocabulary of the fabric layer: what a PCIe-fabric chassis holds and where each GPU is
// attached. Dialect-neutral; the h3 and redfish drivers translate their wire shapes into it.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/error_codes.hpp"

namespace kc::fabric {

enum class GpuHealth : std::uint8_t { kOk, kUnhealthy };

std::string_view toString(GpuHealth health);

// Pool-wide GPU id: "<chassis>.<local id>". Chassis names are DNS labels (no '.'), so the
// first '.' always separates the two parts; the local id is the chassis' own device id
// (H3: Dev_GID, Redfish: ResourceBlock Id) and may itself contain dots.
std::string makeGpuId(std::string_view chassis, std::string_view localId);
struct GpuIdParts {
  std::string chassis;
  std::string localId;
};
std::optional<GpuIdParts> splitGpuId(std::string_view gpuId);

// True for a lower-case RFC 1123 label of 1..63 characters.
bool isValidChassisName(std::string_view name);

struct GpuInfo {
  std::string id;  // pool-wide, see makeGpuId
  std::string chassis;
  std::string localId;
  std::string uuid;   // "GPU-..." as nvidia-smi prints it; empty when the chassis cannot read it
  std::string model;  // empty when the dialect does not report it
  std::optional<std::string> hostPort;  // attached host (H3: decimal port, Redfish: system Id)
  GpuHealth health = GpuHealth::kOk;
  std::string healthDetail;  // why a GPU is unhealthy, for people

  friend bool operator==(const GpuInfo&, const GpuInfo&) = default;
};

// One chassis' (or, from a pool, several chassis') view at one moment.
struct Inventory {
  std::vector<GpuInfo> gpus;       // sorted by id
  std::vector<std::string> hosts;  // host ports the chassis can attach GPUs to, sorted
  // Resources the chassis listed that could not be read (a malformed ResourceBlock), each with
  // why: left out, so that one bad entry does not hide the others.
  std::vector<std::string> skipped;

  const GpuInfo* find(std::string_view gpuId) const;
};

// What a successful attach/detach did. `changed` is false when the GPU already was where it
// was asked to be (operations are idempotent).
struct MoveReport {
  std::string gpu;
  std::optional<std::string> hostBefore;
  std::optional<std::string> hostAfter;
  bool changed = false;
  std::uint32_t attempts = 0;      // requests sent to the chassis
  std::vector<std::string> notes;  // e.g. "chassis answered Result:[false] but the move happened"
};

// Error codes of every driver: the project's one set (libcore/base/error_codes.hpp). A driver
// answers kInvalid, kNotFound, kConflict, kTimeout, kUnavailable, kProtocol, kUnauthorized
// (credentials rejected), kUnverified, kUnhealthy, kRefused or kUnsupported.
namespace errc = ::kc::errc;

}  // namespace kc::fabric
