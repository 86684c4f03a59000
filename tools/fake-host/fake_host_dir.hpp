#pragma once
// A fake node host kept in a directory across processes: <root>/sys, <root>/proc and <root>/dev
// written by libcore/node's FakeHostTree (the real layout, so a plugin given --sysfs-root
// <root>/sys --procfs-root <root>/proc --dev-root <root>/dev reads it as a host), and
// <root>/fake-host.json, the GPUs and processes it holds. FakeHostTree keeps its GPUs in memory,
// so each command replays the recorded host into a staging tree, applies the command there and
// mirrors the difference onto the live tree (tree_mirror.hpp). Commands on one root are
// serialised by a lock file; a TEST DOUBLE for development control planes and tests only.

#include <cstdint>
#include <string>
#include <vector>

#include "libcore/base/result.hpp"
#include "libcore/node/fake_host.hpp"

namespace kc::fakehost {

// A fake process holding device nodes open, in the order it opened them.
struct FakeProcess {
  std::int32_t pid = 0;
  std::string comm;
  std::vector<std::string> devices;
};

// What <root>/fake-host.json records.
struct HostRecord {
  std::vector<node::FakeGpu> gpus;  // bdf lowercased, in the order added
  std::vector<FakeProcess> processes;
};

// The remove/rescan writes a node agent made since they were last taken.
struct PendingRequests {
  std::vector<std::string> remove;  // bdfs, sorted
  bool rescan = false;
};

class FakeHostDir {
 public:
  explicit FakeHostDir(std::string root) : root_(std::move(root)) {}

  // Creates <root> and an empty host (the skeleton) when none is there; a host already there is
  // kept as it is.
  Status init();
  // FakeHostTree's addGpu, removeGpu, setDriverBound, holdOpen and release, with their errors
  // ("already_exists", "not_found", "invalid"); "not_found" also when <root> holds no host.
  Status add(const node::FakeGpu& gpu);
  Status remove(const std::string& bdf);
  Status setBound(const std::string& bdf, bool bound);
  Status hold(std::int32_t pid, const std::string& comm, const std::string& device);
  Status release(std::int32_t pid);
  // The pending requests, consumed (the files are reset as FakeHostTree does).
  Result<PendingRequests> takeRequests();

  node::HostRoots roots() const;

 private:
  // One command: lock, replay the record into a staging tree, `change` it, save, mirror.
  template <typename Change>
  Status transact(bool create, Change change);

  std::string root_;
};

}  // namespace kc::fakehost
