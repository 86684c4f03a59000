#pragma once
// Field projections for Informer transforms: keep only the fields a daemon reads, so its cache
// holds a few hundred bytes per object instead of the whole object.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

// What a pod scheduler reads (kube-scheduler's view of a pod): identity, labels, owner refs,
// nodeName, schedulerName, priority, node selector/affinity, tolerations, each container's
// and init container's resource requests/limits, overhead, phase and conditions.
const std::vector<std::string>& schedulerPodFields();

}  // namespace kc::kube
