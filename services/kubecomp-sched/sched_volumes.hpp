#pragma once
// kubecomp-sched's VolumeBinding (docs/sched.md "Volumes"): the shapes the cache and the
// writers share. The decision is libcore/alloc/volume_binding.hpp (the filter runs inside
// placePod through FilterOptions::volumes); sched_volumes.cpp feeds the catalog from the
// PVC/PV/StorageClass informers, plans the writes for the chosen node (kube-scheduler's Reserve:
// the catalog assumes them at once), checks the claims until they are bound (PreBind's wait,
// bounded) and writes them (scheduler_volumes.cpp).

#include <chrono>
#include <string>
#include <vector>

#include "libcore/alloc/volume_binding.hpp"
#include "libcore/base/clock.hpp"

namespace kc::sched {

// kube-scheduler's VolumeBindingArgs.bindTimeoutSeconds default: how long PreBind waits for the
// pod's claims to be bound before the pod is scheduled again.
inline constexpr std::chrono::seconds kDefaultVolumeBindTimeout{600};

// One PV to bind to a claim (kube-scheduler's static binding): the PV's spec.claimRef, written
// with the resourceVersion the decision saw (a PV taken meanwhile answers 409).
struct VolumeBindingWrite {
  std::string volume;
  std::string volumeVersion;
  std::string claimNs;
  std::string claimName;
  std::string claimUid;
  std::string claimVersion;
};

// One claim to provision for the node: the selected-node annotation.
struct ProvisionWrite {
  std::string claimNs;
  std::string claimName;
  std::string claimVersion;
};

struct VolumeWrites {
  std::vector<VolumeBindingWrite> bindings;
  std::vector<ProvisionWrite> provisions;

  bool empty() const { return bindings.empty() && provisions.empty(); }
};

// What the scheduler asked for a pod's claims on its node, until every claim shows bound.
struct VolumeWait {
  std::string node;  // "" none
  std::vector<alloc::StaticBinding> bindings;
  std::vector<std::string> provisions;  // claims "ns/name"
  Clock::time_point deadline{};
  bool written = false;  // the writes were accepted by the API server

  bool active() const { return !node.empty(); }
};

}  // namespace kc::sched
