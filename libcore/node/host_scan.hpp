#pragma once
// The thin reader under host_view.hpp: lists the PCI functions in sysfs, reads the nvidia
// driver's procfs entries, finds the processes holding a GPU's device node open, and asks the
// kernel to rescan the bus or remove a function. Every read is bounded and nothing throws; the
// decisions are made by the pure functions of host_view.hpp.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/result.hpp"
#include "libcore/node/host_view.hpp"

namespace kc::node {

// Lists <sysfs>/bus/pci/devices, reads each function's vendor and class, and for NVIDIA display
// controllers numa_node, the driver link and <procfs>/driver/nvidia/gpus/<bdf>/information.
// An information file over kMaxInformationBytes is refused after reading at most one byte more
// (a problem, and the GPU !usable with reason "information file too large"). A missing devices
// directory gives an empty view with a problem.
HostView scanHost(const HostRoots& roots);

struct OpenHolder {
  std::int32_t pid = 0;
  std::string comm;

  friend bool operator==(const OpenHolder&, const OpenHolder&) = default;
};

struct HoldersReport {
  // Keyed by the device path asked; a path nobody holds is absent. Holders sorted by pid.
  std::map<std::string, std::vector<OpenHolder>> holders;
  // Processes whose fd directory could not be read (other users' processes without
  // CAP_SYS_PTRACE), plus one when procfs itself could not be listed or its listing stopped
  // early: above 0, a GPU may be held by someone we cannot see.
  std::int32_t unreadable = 0;
};

// For each host device path asked (e.g. "/dev/nvidia3"), the processes with an fd whose link
// target is that path (also when the node was deleted while open: "<path> (deleted)"). Walks
// <procfs>/[0-9]*/fd/*; comm from <procfs>/<pid>/comm. A process that exits during the walk is
// skipped.
HoldersReport openHolders(const HostRoots& roots, const std::vector<std::string>& devicePaths);

// Writes "1" to <sysfs>/bus/pci/rescan. Error "not_found" when the file is absent.
Status requestPciRescan(const HostRoots& roots);

// Validates the bdf (DDDD:BB:DD.F hex; "invalid" otherwise), then writes "1" to
// <sysfs>/bus/pci/devices/<bdf>/remove. Error "not_found" when the function is gone.
Status removePciFunction(const HostRoots& roots, std::string_view bdf);

}  // namespace kc::node
