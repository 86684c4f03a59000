#pragma once
// FabricDriver: the one interface the rest of the suite uses to read and change which host
// each pooled GPU is attached to. Implementations: H3Driver (H3 Falcon REST), RedfishDriver
// (DMTF Redfish CompositionService) and FabricPool (several chassis behind one view).
//
// Contract, checked by tests/unit/fabric/contract_test.cpp for every implementation:
//  - inventory() returns every GPU with its pool-wide id, UUID, model, attached host, health.
//  - attach()/detach() are idempotent and never report success they have not verified by
//    re-reading the inventory: a chassis that says "done" but did nothing, or says "failed" but
//    did it (the real H3 quirk), is judged by what the inventory shows afterwards.
//  - attach() of a GPU attached to another host fails with errc::kConflict and changes nothing
//    (a move is detach + attach, decided by the caller, who must drain the GPU first).
//  - move() is a drained GPU's whole journey (detach from `from`, attach to `to`) verified the
//    same way: success only when a re-read shows the GPU on `to`. A driver may do it with fewer
//    reads than detach() + attach() (H3: unassign, assign, ONE re-read: the chassis' own time of
//    a move); the default is exactly detach() + attach(). On failure the GPU may be anywhere
//    (still on `from`, unattached, on `to` unverified): the caller re-reads to decide.
//  - every call is bounded by timeouts; failures carry one of the errc codes.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/result.hpp"
#include "libcore/fabric/types.hpp"

namespace kc::fabric {

class FabricDriver {
 public:
  virtual ~FabricDriver() = default;

  // "h3", "redfish" or "pool".
  virtual std::string_view dialect() const = 0;
  // The chassis name used as the prefix of this driver's GPU ids (for a pool: the pool name).
  virtual const std::string& name() const = 0;

  virtual Result<Inventory> inventory() = 0;
  virtual Result<MoveReport> attach(const std::string& gpuId, const std::string& host) = 0;
  virtual Result<MoveReport> detach(const std::string& gpuId) = 0;
  // `from`: where the caller's journal has the GPU (nullopt: unattached, nothing to detach).
  virtual Result<MoveReport> move(const std::string& gpuId, const std::optional<std::string>& from,
                                  const std::string& to) {
    if (to.empty()) {
      return makeError(errc::kInvalid, "move of GPU " + gpuId + ": no destination host");
    }
    std::optional<std::string> before;
    std::vector<std::string> notes;
    std::uint32_t attempts = 0;
    std::optional<Error> detachError;
    if (from) {
      auto d = detach(gpuId);
      if (d) {
        before = d->hostBefore;
        notes = d->notes;
        attempts = d->attempts;
      } else if (d.error().code == errc::kUnauthorized || d.error().code == errc::kUnsupported ||
                 d.error().code == errc::kInvalid) {
        return d.error();
      } else {
        // A detach that answered an error may have happened all the same: the attach (which
        // refuses a GPU still attached elsewhere, changing nothing) decides.
        detachError = d.error();
      }
    }
    auto a = attach(gpuId, to);
    if (!a) {
      return detachError && a.error().code == errc::kConflict ? *detachError : a.error();
    }
    a->hostBefore = from ? before : a->hostBefore;
    a->attempts += attempts;
    a->notes.insert(a->notes.begin(), notes.begin(), notes.end());
    return a;
  }
};

}  // namespace kc::fabric
