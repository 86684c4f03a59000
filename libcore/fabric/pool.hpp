#pragma once
// FabricPool: several chassis behind one FabricDriver (paper 001 section V-C: a GPU pool may
// span chassis, each chassis connecting its own GPUs to the same nodes).
//
// - inventory() reads every chassis at the same time (one thread per chassis), so the pool
//   answers in the time of the slowest chassis rather than the sum.
// - Calls on one chassis are serialised by that chassis' mutex (a chassis re-programs one
//   DLUT entry at a time; concurrent moves on one switch are not something to rely on);
//   different chassis proceed in parallel.
// - GPU ids are routed by their chassis prefix ("<chassis>.<local id>").

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "libcore/fabric/driver.hpp"

namespace kc::fabric {

class FabricPool final : public FabricDriver {
 public:
  // Fails ("invalid") on an empty list, an invalid pool name, or two drivers with one name.
  static Result<std::unique_ptr<FabricPool>> create(
      std::string name, std::vector<std::unique_ptr<FabricDriver>> chassis);

  std::string_view dialect() const override { return "pool"; }
  const std::string& name() const override { return name_; }

  struct ChassisInventory {
    std::string chassis;
    Result<Inventory> inventory;
  };
  // One entry per chassis, in construction order; a failed chassis does not hide the others.
  std::vector<ChassisInventory> inventoryByChassis();

  // Merged inventory; fails if any chassis failed (the error names every failed chassis).
  // Hosts (the list and each GPU's hostPort) are "<chassis>/<host>" because a host port number
  // means something only on its chassis.
  Result<Inventory> inventory() override;
  // `host` may be "<chassis>/<host>" (as inventory() lists it) or the bare chassis-local host.
  Result<MoveReport> attach(const std::string& gpuId, const std::string& host) override;
  Result<MoveReport> detach(const std::string& gpuId) override;
  // Both hosts as for attach(); `from` must be on the GPU's chassis too.
  Result<MoveReport> move(const std::string& gpuId, const std::optional<std::string>& from,
                          const std::string& to) override;

  std::size_t chassisCount() const { return members_.size(); }

 private:
  struct Member {
    std::unique_ptr<FabricDriver> driver;
    std::unique_ptr<std::mutex> mutex;  // serialises every call on this chassis
  };
  FabricPool(std::string name, std::vector<Member> members);
  Result<Member*> route(const std::string& gpuId);
  // `host` without its "<chassis>/" prefix; error when the prefix names another chassis.
  static Result<std::string> localHost(const Member& member, const std::string& gpuId,
                                       const std::string& host);

  std::string name_;
  std::vector<Member> members_;
};

}  // namespace kc::fabric
