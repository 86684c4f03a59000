#pragma once
// FakeHostTree: the development double of a node's sysfs/procfs/dev, written with the real
// layout so that scanHost and openHolders read it exactly as they read a host. Tests build
// their cases with it; a chassis simulator uses it to show hot-add and hot-remove on simulated
// hosts and to act on the remove/rescan writes a node agent makes. One thread at a time.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/result.hpp"
#include "libcore/node/host_view.hpp"

namespace kc::node {

struct FakeGpu {
  std::string bdf;   // "0000:3b:00.0"
  std::string uuid;  // written as given (a malformed one makes a malformed file)
  std::int32_t minor = 0;
  std::int32_t numaNode = 0;
  std::string model = "NVIDIA H100 80GB HBM3";
  bool driverBound = true;
  bool withInformation = true;        // the procfs entry exists while the nvidia driver holds it
  std::string driverName = "nvidia";  // the driver when bound, e.g. "vfio-pci"
};

class FakeHostTree {
 public:
  // Creates the skeleton: <sysfs>/bus/pci/devices, <sysfs>/bus/pci/drivers/nvidia,
  // <sysfs>/bus/pci/rescan (empty), <procfs>/driver/nvidia/gpus and <dev>. A failure is kept
  // and returned by ready() and by every later call.
  explicit FakeHostTree(HostRoots roots);

  Status ready() const { return ready_; }

  // <sysfs>/devices/pci0000:00/<bdf>/{vendor,device,class,numa_node,remove}, the symlink
  // <sysfs>/bus/pci/devices/<bdf> to it, the driver link and the driver's link back when
  // bound, <procfs>/driver/nvidia/gpus/<bdf>/information when bound to nvidia with
  // withInformation, and an empty regular file <dev>/nvidia<minor>. "already_exists" when the
  // bdf is present, "invalid" when it is not DDDD:BB:DD.F.
  Status addGpu(const FakeGpu& gpu);
  // A PCI function that is not one of our GPUs (a bridge, a NIC, a GPU's audio function):
  // vendor and class files ("0x8086", "0x060400") and the bus link. Removed by removeGpu too.
  Status addPciFunction(std::string_view bdf, std::string_view vendor, std::string_view pciClass);
  // As if gone from the bus: removes the sysfs and procfs entries and the dev file.
  Status removeGpu(std::string_view bdf);
  // Binds (to the GPU's driverName) or unbinds; the procfs entry follows the nvidia driver.
  Status setDriverBound(std::string_view bdf, bool bound);

  // <procfs>/<pid>/comm and a new <procfs>/<pid>/fd/<n> linking to devicePath (which need not
  // exist: a dangling link reads the same).
  Status holdOpen(std::int32_t pid, std::string comm, std::string_view devicePath);
  // The process exits: <procfs>/<pid> goes.
  Status release(std::int32_t pid);

  // The bdfs whose `remove` file a node agent wrote since the last call, sorted; each file is
  // reset to empty. The GPU stays until the caller removes it (removeGpu), as a simulator
  // decides.
  std::vector<std::string> takeRemoveRequests();
  // Whether <sysfs>/bus/pci/rescan was written since the last call; resets it.
  bool takeRescanRequest();

  const HostRoots& roots() const { return roots_; }

 private:
  std::string deviceDir(const std::string& bdf) const;
  Status writeInformation(const FakeGpu& gpu);
  Status bind(const FakeGpu& gpu);
  Status unbind(const FakeGpu& gpu);

  HostRoots roots_;
  Status ready_;
  std::map<std::string, FakeGpu> gpus_;          // by lowercased bdf
  std::set<std::string> others_;                 // addPciFunction's bdfs
  std::map<std::int32_t, std::int32_t> nextFd_;  // by pid
};

}  // namespace kc::node
