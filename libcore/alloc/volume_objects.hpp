#pragma once
// The storage objects kube-scheduler's VolumeBinding plugin reads, as compact models:
// PersistentVolumeClaims, PersistentVolumes and StorageClasses (only the fields the plugin
// reads), parsed from the API's JSON and validated as strictly as the rest of sched_objects
// (a bad shape is an "invalid" error naming the field), and the catalog that holds a cluster's
// worth of them with the scheduler's assumptions on top (a PV it has just bound to a claim, a
// claim it has just given a selected node) until the API shows the written objects.
//
// Class of a claim or volume: the beta annotation volume.beta.kubernetes.io/storage-class when
// present, else spec.storageClassName, else "" (no class; the DefaultStorageClass admission
// plugin fills the field when the claim is created, not later).

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/alloc/pod_affinity.hpp"
#include "libcore/alloc/sched_objects.hpp"
#include "libcore/base/result.hpp"

namespace kc::alloc {

// Annotations of the PV controller's and the scheduler's protocol (k8s.io/component-helpers
// storage/volume): the node a WaitForFirstConsumer claim is to be provisioned for, a claim's
// binding completed, a binding made by a controller rather than by the user, and the old class
// annotation.
inline constexpr std::string_view kAnnSelectedNode = "volume.kubernetes.io/selected-node";
inline constexpr std::string_view kAnnBindCompleted = "pv.kubernetes.io/bind-completed";
inline constexpr std::string_view kAnnBoundByController = "pv.kubernetes.io/bound-by-controller";
inline constexpr std::string_view kAnnBetaStorageClass = "volume.beta.kubernetes.io/storage-class";
// A StorageClass provisioner that provisions nothing (static local volumes).
inline constexpr std::string_view kNoProvisioner = "kubernetes.io/no-provisioner";

// spec.accessModes as a bit set.
enum AccessMode : std::uint8_t {
  kReadWriteOnce = 1,
  kReadOnlyMany = 2,
  kReadWriteMany = 4,
  kReadWriteOncePod = 8,
};

struct VolumeClaim {
  std::string ns{};
  std::string name{};
  std::string uid{};
  std::string resourceVersion{};
  std::string storageClass{};                 // see the file comment
  std::string volumeName{};                   // spec.volumeName
  bool bindCompleted = false;                 // annotation pv.kubernetes.io/bind-completed present
  std::optional<std::string> selectedNode{};  // annotation volume.kubernetes.io/selected-node
  std::uint8_t accessModes = 0;
  bool block = false;                       // spec.volumeMode Block (default Filesystem)
  std::int64_t storage = 0;                 // spec.resources.requests.storage, bytes (0: none)
  std::optional<LabelSelector> selector{};  // spec.selector over PV labels
  bool deleting = false;                    // metadata.deletionTimestamp
  bool lost = false;                        // status.phase Lost
  std::string controllerUid{};              // the uid of the ownerReference with controller: true

  std::string key() const { return ns + "/" + name; }
  // kube-scheduler's isPVCFullyBound: a volume named and the binding completed.
  bool fullyBound() const { return !volumeName.empty() && bindCompleted; }
};

struct ClaimRef {
  std::string ns{};
  std::string name{};
  std::string uid{};  // "" binds to any claim of that name (pre-binding by the user)
};

struct PersistentVolume {
  std::string name{};
  std::string resourceVersion{};
  std::string storageClass{};
  std::int64_t capacity = 0;  // spec.capacity.storage, bytes
  std::uint8_t accessModes = 0;
  bool block = false;
  std::optional<ClaimRef> claimRef{};
  std::string phase{};  // status.phase ("" before the PV controller has seen it)
  bool deleting = false;
  bool boundByController = false;  // annotation pv.kubernetes.io/bound-by-controller present
  // spec.nodeAffinity.required; nullopt: the volume is reachable from every node.
  std::optional<std::vector<NodeSelectorTerm>> nodeAffinity{};
  StringMap labels{};
};

enum class VolumeBindingMode { Immediate, WaitForFirstConsumer };

// One allowedTopologies term: every (key, values) pair must match a node label (In).
struct TopologySelectorTerm {
  std::vector<std::pair<std::string, std::vector<std::string>>> matchLabelExpressions{};
};

struct StorageClass {
  std::string name{};
  std::string provisioner{};
  VolumeBindingMode bindingMode = VolumeBindingMode::Immediate;  // the API's default
  std::vector<TopologySelectorTerm> allowedTopologies{};
};

// A PersistentVolumeClaim (v1). Requires metadata.name and metadata.namespace.
Result<VolumeClaim> parseVolumeClaim(const nlohmann::json& pvc);
// A PersistentVolume (v1). Requires metadata.name.
Result<PersistentVolume> parsePersistentVolume(const nlohmann::json& pv);
// A StorageClass (storage.k8s.io/v1). Requires metadata.name and provisioner; a missing
// volumeBindingMode is Immediate, as the API server defaults it.
Result<StorageClass> parseStorageClass(const nlohmann::json& sc);

// Fills out.claimVolumes from a Pod's spec.volumes (called by parsePodFields): a volume's name
// must be a DNS label, persistentVolumeClaim.claimName non-empty, an ephemeral volume needs its
// volumeClaimTemplate.
Status parsePodClaimVolumes(const nlohmann::json& pod, SchedPod& out);

// The cluster's claims, volumes and classes, with the scheduler's assumptions over the API's
// objects. An object from the API replaces the assumption about it (the written object came
// back, or something newer did); restore() drops assumptions whose write failed.
class VolumeCatalog {
 public:
  void setClaim(VolumeClaim claim);
  void removeClaim(const std::string& key);
  void setVolume(PersistentVolume volume);
  void removeVolume(const std::string& name);
  void setClass(StorageClass storageClass);
  void removeClass(const std::string& name);

  // The assumed object when there is one, else the API's; null when neither.
  const VolumeClaim* claim(const std::string& key) const;
  const PersistentVolume* volume(const std::string& name) const;
  const StorageClass* storageClass(const std::string& name) const;
  // The volumes of a class (assumptions applied), by name.
  std::vector<const PersistentVolume*> volumesOfClass(const std::string& storageClass) const;

  // The scheduler has chosen `volume` for `claim` (static binding) / a node for a claim to be
  // provisioned on: later decisions see it so.
  void assumeBound(const std::string& volume, const VolumeClaim& claim);
  void assumeSelectedNode(const std::string& claimKey, const std::string& node);
  // Drops the assumptions about these objects (a write failed): the API's objects count again.
  void restore(const std::vector<std::string>& volumes, const std::vector<std::string>& claims);

  std::size_t claimCount() const { return claims_.size(); }
  std::size_t volumeCount() const { return volumes_.size(); }

 private:
  std::map<std::string, VolumeClaim, std::less<>> claims_;
  std::map<std::string, PersistentVolume, std::less<>> volumes_;
  std::map<std::string, StorageClass, std::less<>> classes_;
  std::map<std::string, VolumeClaim, std::less<>> assumedClaims_;
  std::map<std::string, PersistentVolume, std::less<>> assumedVolumes_;
};

}  // namespace kc::alloc
