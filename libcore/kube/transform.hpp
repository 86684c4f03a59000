#pragma once
// Field projections for Informer transforms: keep only the fields a daemon reads, so its cache
// holds a few hundred bytes per object instead of the whole object.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "libcore/base/result.hpp"
#include "libcore/kube/informer.hpp"

namespace kc::kube {

// A transform that keeps the given fields and drops everything else. A path is dot-separated
// object keys; a segment ending in "[]" is an array whose elements are projected by the rest of
// the path ("spec.containers[].resources.requests"). Paths that are absent in an object are
// skipped; a path naming a whole subtree keeps it whole. metadata.name, metadata.namespace,
// metadata.uid and metadata.resourceVersion are always kept (the store needs them).
// Errors on an empty path or an empty segment.
kc::Result<ObjectTransform> keepFields(const std::vector<std::string>& paths);

// keepFields, with the kept fields other than metadata.name, namespace, uid and
// resourceVersion stored as one MessagePack value under kPackedFieldsKey: about 35 bytes of
// cache per kept field instead of about 165 as a JSON tree (one heap node per key). Read them
// with unpackFields(). For large caches (every pod of a cluster).
kc::Result<ObjectTransform> keepFieldsPacked(const std::vector<std::string>& paths);
inline constexpr const char* kPackedFieldsKey = "kubecomp.packed";
// The object keepFields() would have kept: the packed fields merged back with the metadata.
// An object without packed fields is returned as it is. Error "invalid" when the packed value
// is not a MessagePack object.
kc::Result<nlohmann::json> unpackFields(const nlohmann::json& obj);

// What a pod scheduler reads: identity, labels and annotations (kubecomp.io/* hints),
// deletion, nodeName, schedulerName, priority, node selector and affinity, tolerations, each
// container's and init container's requests (the API server fills missing requests from
// limits), init containers' restartPolicy (sidecars), overhead, phase, nominated node.
const std::vector<std::string>& schedulerPodFields();

}  // namespace kc::kube
