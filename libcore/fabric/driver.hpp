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
//  - every call is bounded by timeouts; failures carry one of the errc codes.

#include <string>
#include <string_view>

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
};

}  // namespace kc::fabric
