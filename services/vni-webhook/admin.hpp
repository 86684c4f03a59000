#pragma once
// Admin commands of vni-webhook (`vni-webhook admin ...`): list allocations, show a namespace's
// VNIs, audit the table against the live owners and (after confirmation) free orphans.
// They read the SQLite file directly (WAL readers never block the running webhook). A release
// done here is durable at once; a running webhook keeps treating the freed values as held
// until its next restart (never a duplicate, only a delay), and tells you so.

#include <iosfwd>
#include <set>
#include <string>
#include <vector>

#include "libcore/base/result.hpp"
#include "services/vni-webhook/vni_store.hpp"

namespace kc::vni {

// Live owners from `kubectl get jobs,replicasets,deployments,statefulsets,daemonsets -A -o json`
// (a List with items[].metadata.{namespace,uid}) or from lines "namespace/uid".
Result<std::set<OwnerKey>> parseLiveOwners(const std::string& text);

// Rows whose owner is not live. Only rows allocated at or before `cutoffMs` are judged: a row
// written after the live list was taken may belong to an owner created after it, so it is
// never an orphan here (`tooRecent`, if given, counts those rows).
std::vector<AllocationRow> findOrphans(const std::vector<AllocationRow>& rows,
                                       const std::set<OwnerKey>& live, std::int64_t cutoffMs,
                                       std::size_t* tooRecent = nullptr);

void printAllocations(std::ostream& out, const std::vector<AllocationRow>& rows, bool json);

}  // namespace kc::vni
