#pragma once
// HostTrees: the hosts' side of attach and detach (chassis-sim --host-root). For every host
// of the simulated chassis it keeps a sysfs/procfs/dev tree with the real layout
// (kc::node::FakeHostTree) showing the chassis GPUs that host's kernel would see, so that a
// node agent pointed at it (disaggpu-devplugin --sysfs-root/--procfs-root/--dev-root) judges
// its GPUs as it would on a real node:
//   - at start, every GPU attached to a host is on its bus, bound to nvidia;
//   - after an attach, the GPU appears visibleDelay later (PCIe hot-add, enumeration, driver
//     probe), or, with needsRescan, only once the host's agent wrote <sys>/bus/pci/rescan;
//   - after a detach it is gone at once (the fabric yanks it off the bus);
//   - a write to <sys>/bus/pci/devices/<bdf>/remove hot-removes it while the chassis still
//     shows it attached; a later rescan brings back every GPU still attached to the host;
//   - a GPU the chassis lost (fault lose_gpu, or healthy: false) stays on the bus without a
//     driver: no driver link, no /proc/driver/nvidia entry.
// The naming rules below are what the demo and the end-to-end tests compute, and are
// documented in docs/fabric.md ("The hosts' side of attach and detach").
//
// Thread-safe: every member locks mutex_. Driven by ChassisModel's change listener (called with
// the model's lock held; HostTrees never calls the model, so the lock order is model, then
// HostTrees) and by poll(), which the thread of start() runs every pollInterval.

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "libcore/base/clock.hpp"
#include "libcore/base/result.hpp"
#include "libcore/node/fake_host.hpp"
#include "tools/chassis-sim/model.hpp"

namespace kc::chassis_sim {

// GPU n is the n-th GPU of the topology counted from 0 over all chassis in file order (all of
// the first chassis' GPUs, then the second's, ...). It keeps one BDF, minor and NUMA node on
// whichever host it is attached to:
//   BDF   0000:<0x10 + n, two hex digits>:00.0   (falcon-0's first GPU 0000:10:00.0)
//   minor n                                        (/dev/nvidia<n>)
//   NUMA  0
// so a topology with --host-root holds at most kMaxHostGpus GPUs.
inline constexpr std::size_t kMaxHostGpus = 0xff - 0x10 + 1;
std::string hostGpuBdf(std::size_t n);
std::int32_t hostGpuMinor(std::size_t n);
inline constexpr std::int32_t kHostGpuNumaNode = 0;

// The tree of the host whose topology `system` is `system` (its Redfish ComputerSystem Id,
// "host-<port>" when the topology names none; the same system on several chassis is one host):
// <root>/<system>/{sys,proc,dev}. The demo names systems after the Kubernetes nodes.
node::HostRoots hostTreeRoots(std::string_view root, std::string_view system);

struct HostTreeOptions {
  std::string root;                          // --host-root
  Millis visibleDelay{300};                  // attach to visible, already scaled
  bool needsRescan = false;                  // --host-needs-rescan
  Millis pollInterval{50};                   // how often remove and rescan writes are read
  Clock* clock = nullptr;                    // null: the system clock
  std::function<void(std::string)> onError;  // a tree write that failed; null: ignored
};

class HostTrees {
 public:
  // Creates a tree per host of `state` (the model's snapshotAll()), after clearing what an
  // earlier run left of its PCIe side (sys, proc/driver/nvidia, dev/nvidia<n>; other files
  // stay), and puts the GPUs attached now on their hosts' buses. "invalid" for more than
  // kMaxHostGpus GPUs, the tree's error when one cannot be written.
  static Result<std::unique_ptr<HostTrees>> create(const std::vector<Chassis>& state,
                                                   HostTreeOptions options);
  ~HostTrees();
  HostTrees(const HostTrees&) = delete;
  HostTrees& operator=(const HostTrees&) = delete;

  // The model's listener: a GPU attached elsewhere, detached, or lost.
  void onChange(const GpuChange& change);
  // One pass: acts on the remove and rescan writes of every host, then shows the GPUs whose
  // delay is over. The thread of start() calls it; tests call it after moving a fake clock.
  void poll();
  // The thread that polls every pollInterval, until stop() (or destruction).
  void start();
  void stop();

  // The systems, in order of first appearance in the topology.
  std::vector<std::string> systems() const;

 private:
  enum class Seen : std::uint8_t {
    kAbsent,       // not on the host's bus (or not attached)
    kPending,      // hot-add in progress: shown at `due`
    kAwaitRescan,  // attached, but only a rescan shows it (needsRescan, or hot-removed)
    kShown,        // on the bus
  };
  struct Slot {
    std::size_t index = 0;  // n of the naming rules
    std::string chassis;
    std::string gid;
    std::string uuid;
    std::string model;
    std::optional<std::size_t> host;  // into hosts_, as the chassis says
    bool healthy = true;
    Seen seen = Seen::kAbsent;
    Clock::time_point due{};
  };
  struct HostTree {
    std::string system;
    std::unique_ptr<node::FakeHostTree> tree;
  };
  struct PortOfChassis {
    std::string chassis;
    std::uint32_t port = 0;
    std::size_t host = 0;
  };

  explicit HostTrees(HostTreeOptions options);
  std::optional<std::size_t> hostOf(std::string_view chassis, std::uint32_t port) const;
  Slot* slot(std::string_view chassis, std::string_view gid);
  Status show(Slot& slot);  // with mutex_ held
  void unshow(Slot& slot);  // with mutex_ held
  void report(const Status& status) const;
  void pollHost(std::size_t host);  // with mutex_ held

  const HostTreeOptions options_;
  Clock& clock_;
  mutable std::mutex mutex_;  // guards everything below
  std::vector<HostTree> hosts_;
  std::vector<PortOfChassis> ports_;
  std::vector<Slot> slots_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

// Builds the trees from the model's current state, makes them the model's listener and starts
// polling. Call before the server serves (a change between the snapshot and the listener would
// be missed).
Result<std::shared_ptr<HostTrees>> attachHostTrees(ChassisModel& model, HostTreeOptions options);

}  // namespace kc::chassis_sim
