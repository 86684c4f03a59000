#pragma once
// What reconfig-mgr knows about one pool at a moment, and the GPUPool status it writes from
// it. Pure: the inventory read from the fabric, the device plugins' usage reports (Node
// annotation kubecomp.io/gpu-usage), the move journal and the quarantine list go in; the
// per-GPU view (node, health, draining, in use by) and the status JSON come out.

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "libcore/api/usage_report.hpp"
#include "libcore/fabric/types.hpp"
#include "services/reconfig-mgr/move_journal.hpp"
#include "services/reconfig-mgr/pool_spec.hpp"

namespace kc::reconfig {

// GPUs kept out of use, by id: reason: those reconfig-mgr itself judged unhealthy (a chassis
// that lied about a move on them) and those an operator quarantined. Kept in status.quarantine
// across restarts; an operator adds or removes an entry there (mergeOperatorQuarantine).
using Quarantine = std::map<std::string, std::string>;
Quarantine parseQuarantine(const nlohmann::json& pool);
// An operator's edit of status.quarantine (`kubectl kubecomp gpu quarantine|release`, or by
// hand) folded into ours: `base` is what we last wrote, `theirs` the object now; an entry added
// since is added, one removed since is removed, the rest of ours stays. True when ours changed.
bool mergeOperatorQuarantine(Quarantine& ours, const Quarantine& base, const Quarantine& theirs);

struct GpuView {
  fabric::GpuInfo info;
  std::string node;  // "" when unattached or attached to a host no node of the spec has
  bool healthy = true;
  std::string healthDetail;
  bool draining = false;
  std::vector<std::string> inUseBy;  // "namespace/pod", from the node's usage report
  // Its moves failed lately (PoolWorker's backoff): the planners do not move it; pods on its
  // node still use it.
  bool heldBack = false;

  bool attached() const { return info.hostPort.has_value(); }
  bool free() const { return healthy && !draining && inUseBy.empty(); }
};

struct PoolView {
  std::vector<GpuView> gpus;  // sorted by id

  const GpuView* find(const std::string& id) const;
};

// Usage reports by node name (only nodes whose annotation parsed).
using UsageByNode = std::map<std::string, api::UsageReport>;

PoolView buildView(const PoolSpec& spec, const fabric::Inventory& inventory,
                   const UsageByNode& usage, const Journal& journal, const Quarantine& quarantine);

struct StatusInputs {
  const PoolSpec* spec = nullptr;
  const PoolView* view = nullptr;               // null: no inventory read yet
  std::optional<std::string> inventoryError;    // last read failed
  std::vector<std::string> inventorySkipped;    // last read left these out (fabric::Inventory)
  std::vector<std::string> movesBackingOff;     // GPUs and chassis held back after failures
  std::optional<std::string> movesUnsupported;  // the fabric cannot move (driver said so)
  std::optional<std::string> specError;         // the spec could not be read
  const Journal* journal = nullptr;
  const Quarantine* quarantine = nullptr;
  std::chrono::system_clock::time_point now{};
  std::string lastInventoryTime;  // RFC 3339, "" if never
  nlohmann::json previousStatus;  // to keep lastTransitionTime of unchanged conditions
};

nlohmann::json renderStatus(const StatusInputs& in);

}  // namespace kc::reconfig
