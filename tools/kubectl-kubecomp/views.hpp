#pragma once
// What each command shows, computed from the objects it read: pure functions from the API
// objects (nlohmann::json as the server sent them) and the time now to a View (rows for people,
// typed items for -o json/yaml). No I/O, so the golden tests feed them recorded objects.
//
// The sources are the ones the daemons publish (docs/kubectl-plugin.md):
//  - GPUPool status.gpus, status.moves (the move journal), status.quarantine (reconfig-mgr);
//  - Pod conditions PodScheduled and the kubecomp.io/dst-node annotation (kubecomp-sched), Events;
//  - Node label/annotations rt.kubecomp.io/* and Pod rt.kubecomp.io/assigned (rt-kubelet-shim);
//  - VNI objects (vni-webhook), BridgeJob status (bridge-operator), ResourceClaims whose
//    allocation names the driver gpu.kubecomp.io (kube-scheduler or kubecomp-sched).

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "libcore/base/result.hpp"
#include "tools/kubectl-kubecomp/output.hpp"

namespace kc::kubectl {

using Objects = std::vector<nlohmann::json>;
using TimePoint = std::chrono::system_clock::time_point;

// One row per GPU of every pool: where it is attached, the pod using it, health, quarantine and
// the move in flight.
View poolsView(const Objects& pools);

// The journal of every pool (only `pool` when set): the moves in flight, then the finished ones,
// with their phase, time in the phase and total time.
View movesView(const Objects& pools, const std::string& pool, TimePoint now);

// Unbound pods that wait for pooled GPUs, RT cores, a VNI or a DRA claim of ours (or that
// kubecomp-sched places), with the scheduler's reason, the node it reserved and the moves in
// flight for them. `events`: the Events of their namespaces (the latest one per pod is shown).
View pendingView(const Objects& pods, const Objects& events, const Objects& pools, TimePoint now,
                 bool allNamespaces);

View vnisView(const Objects& vnis, TimePoint now, bool allNamespaces);

// One node's RT cores: per core the bound, what the pods' containers hold and the room left.
// `pods`: the pods bound to the node. Error "invalid" when the node is not RT capable or its
// annotations are malformed (the message says which).
Result<View> rtView(const nlohmann::json& node, const Objects& pods);

View bridgeJobsView(const Objects& jobs, TimePoint now, bool allNamespaces);

// ResourceClaims whose allocation names our driver (gpu.kubecomp.io), and unallocated ones that
// ask for its DeviceClass.
View claimsView(const Objects& claims, TimePoint now, bool allNamespaces);

// ---- moves --watch: the phase changes between two versions of a pool's journal.

struct MoveKey {
  std::string pool;
  std::string gpu;
  std::string startedAt;
  friend auto operator<=>(const MoveKey&, const MoveKey&) = default;
};

struct SeenMove {
  std::string phase;
  std::string phaseSince;
};

struct PhaseChange {
  std::string pool;
  std::string gpu;
  std::string requester;  // "default/big", "claim ns/name", "(background)"
  std::string toNode;
  std::string fromPhase;  // "" when the move is new
  std::string toPhase;
  // How long the move spent in fromPhase (phaseSince to phaseSince); nullopt when unknown.
  std::optional<std::int64_t> fromPhaseSeconds;
  std::string message;
  nlohmann::json record;  // the journal record as published

  nlohmann::json toJson() const;
  std::string line() const;  // one line for people
};

// Compares `pool`'s journal with what was seen before, updates `seen`, and returns the changes
// in journal order. `report` false: only records them (the state the watch starts from).
std::vector<PhaseChange> phaseChanges(const nlohmann::json& pool, std::map<MoveKey, SeenMove>& seen,
                                      bool report);

}  // namespace kc::kubectl
