#include "tools/kubecomp-sim/sim_fabric.hpp"

#include <algorithm>

namespace kc::sim {

SimFabric::SimFabric(const alloc::ClusterState& cluster, const alloc::MoveConcurrency& concurrency)
    : concurrency_(concurrency) {
  clock_.busyUntil.assign(cluster.poolCount(), 0);
  clock_.booked.resize(cluster.poolCount());
  chassis_.reserve(cluster.gpuCount());
  for (alloc::GpuIndex g = 0; g < cluster.gpuCount(); ++g) {
    chassis_.emplace_back(alloc::chassisOfGpu(cluster.gpu(g).id));
  }
}

void SimFabric::prune(SimMs now) {
  for (auto& moves : clock_.booked) {
    std::erase_if(moves, [now](const alloc::MoveInFlight& m) { return m.end <= now; });
  }
}

Result<std::vector<alloc::MoveSlot>> SimFabric::slots(alloc::PoolIndex pool,
                                                      std::span<const alloc::GpuIndex> gpus,
                                                      SimMs moveTime, SimMs now) const {
  std::vector<std::string> chassis;
  chassis.reserve(gpus.size());
  for (alloc::GpuIndex g : gpus) {
    chassis.push_back(chassis_[g]);
  }
  alloc::PlacementRules rules;
  rules.moveTime = moveTime;
  rules.moves = concurrency_;
  return alloc::poolMoveSlots(clock_, pool, chassis, rules, now);
}

Result<std::vector<alloc::MoveSlot>> SimFabric::slotsWithout(alloc::PoolIndex pool,
                                                             std::span<const alloc::GpuIndex> gpus,
                                                             SimMs moveTime, SimMs now,
                                                             alloc::GpuIndex skip,
                                                             SimMs skipEnd) const {
  std::vector<std::string> chassis;
  chassis.reserve(gpus.size());
  for (alloc::GpuIndex g : gpus) {
    chassis.push_back(chassis_[g]);
  }
  std::vector<alloc::MoveInFlight> others = clock_.booked[pool];
  const alloc::MoveInFlight skipped{chassis_[skip], skipEnd};
  if (auto it = std::find(others.begin(), others.end(), skipped); it != others.end()) {
    others.erase(it);
  }
  return alloc::scheduleMoves(chassis, now, moveTime, concurrency_, others);
}

void SimFabric::book(alloc::PoolIndex pool, std::span<const alloc::GpuIndex> gpus,
                     std::span<const alloc::MoveSlot> slots) {
  for (std::size_t i = 0; i < gpus.size() && i < slots.size(); ++i) {
    clock_.booked[pool].push_back(alloc::MoveInFlight{chassis_[gpus[i]], slots[i].end});
    clock_.busyUntil[pool] = std::max(clock_.busyUntil[pool], slots[i].end);
  }
}

SimMs lastEnd(std::span<const alloc::MoveSlot> slots, SimMs now) {
  SimMs last = now;
  for (const alloc::MoveSlot& s : slots) {
    last = std::max(last, s.end);
  }
  return last;
}

}  // namespace kc::sim
