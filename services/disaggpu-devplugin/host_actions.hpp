#pragma once
// What the node agent does to its own host, each opt-in (docs/devplugin.md, "Host view"):
//   --hot-remove             a draining GPU this node no longer uses is removed from the PCI bus
//                            (<sysfs>/bus/pci/devices/<BDF>/remove) before reconfig-mgr detaches
//                            it at the fabric; one whose device node a process holds open is
//                            never removed, the move waits and the usage report says why.
//   --rescan-after-seconds   a GPU the GPUPool says is attached here that the host has not shown
//                            for this long makes the agent rescan the bus (<sysfs>/bus/pci/rescan),
//                            at most once per that period: a hot-add the kernel missed.
// The rescan is the node's own decision rather than reconfig-mgr's request: the node knows when
// a GPU it was told about is missing, and no new write path between the two is needed; the
// move's Verifying still waits for the node and fails after its timeout as before.

#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "libcore/base/clock.hpp"
#include "libcore/node/host_view.hpp"
#include "services/disaggpu-devplugin/device_state.hpp"

namespace kc::devplugin {

struct HostActionOptions {
  bool hotRemove = false;
  std::chrono::milliseconds rescanAfter{0};  // 0: never rescan
};

// Whether a GPU is gone from the host (hot-removed, or never there): not usable and on no BDF.
bool goneFromHost(const NodeGpu& gpu);

class HostActions {
 public:
  HostActions(HostActionOptions options, node::HostRoots roots, kc::Clock& clock);

  bool hotRemove() const { return opts_.hotRemove; }

  // Hot-removes every GPU of `withdrawable` (draining, withdrawn from new users, unused here)
  // that the host still shows, unless a process holds its device node open or some process
  // could not be checked. Returns id -> why not (yet) removed; removed or absent ids are not in
  // it. The host view shows a removal at its next scan.
  std::map<std::string, std::string> removeDrained(const NodeInventory& inventory,
                                                   const std::set<std::string>& withdrawable);

  // Rescans the PCI bus when a GPU attached here per the pool has been missing from the host for
  // rescanAfter, at most once per rescanAfter. True when it rescanned.
  bool rescanIfDue(const NodeInventory& inventory);

 private:
  HostActionOptions opts_;
  node::HostRoots roots_;
  kc::Clock& clock_;
  std::mutex mu_;  // guards the two below (the reporter and the host monitor both call in)
  std::map<std::string, kc::Clock::time_point> missingSince_;
  kc::Clock::time_point lastRescan_{};
};

// The usage report's withdrawal with hot-remove: a withdrawable GPU counts as withdrawn only once
// it is gone from the host; the others are listed in removeBlocked (why) or wait for the scan.
void applyHotRemove(api::UsageReport& report, const NodeInventory& inventory,
                    const std::map<std::string, std::string>& blocked);

}  // namespace kc::devplugin
