#pragma once
// Storage kinds: the defaulting and validation kube-apiserver applies to PersistentVolume,
// PersistentVolumeClaim (core/v1) and StorageClass (storage.k8s.io/v1), re-stated from
// pkg/apis/core/{v1/defaults.go,validation} and pkg/apis/storage/validation for the fields the
// scheduler's volume binding reads and writes: access modes, capacity and requests, volume
// mode, class, node affinity, binding mode, allowed topologies, and what an update may change
// (a claim's spec.volumeName set once, a class's provisioner and binding mode never).
// Not modelled: the volume sources' own fields (one source is required, its content is kept as
// given), dataSource, volumeAttributesClassName, the PV status fields beyond the phase.

#include <nlohmann/json.hpp>
#include <string>

namespace kc::apiserver::storage {

// Defaults on create: a PV's persistentVolumeReclaimPolicy Retain, volumeMode Filesystem and
// status.phase Pending; a claim's volumeMode Filesystem and status.phase Pending; a class's
// reclaimPolicy Delete and volumeBindingMode Immediate. `resource` is the plural; other
// resources are left alone.
void applyDefaults(const std::string& group, const std::string& resource, nlohmann::json& object,
                   bool create);

// Throws the 422 Invalid when `object` (a create when `old` is null, else an update of the main
// resource, or of its status with `statusUpdate`) is invalid; nothing is stored then.
void admit(const std::string& group, const std::string& resource, const std::string& name,
           const nlohmann::json& object, const nlohmann::json* old, bool statusUpdate);

}  // namespace kc::apiserver::storage
