#include "services/disaggpu-devplugin/device_state.hpp"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <utility>

#include "libcore/api/names.hpp"
#include "libcore/cdi/cdi_spec.hpp"

namespace kc::devplugin {
namespace {

using nlohmann::json;

std::string joinIds(const std::vector<std::string>& ids, const std::vector<NodeGpu>& gpus,
                    bool uuids) {
  std::string out;
  for (const std::string& id : ids) {
    if (!out.empty()) {
      out += ',';
    }
    if (!uuids) {
      out += id;
      continue;
    }
    for (const NodeGpu& g : gpus) {
      if (g.id == id) {
        out += g.uuid;
        break;
      }
    }
  }
  return out;
}

}  // namespace

const NodeGpu* NodeInventory::find(std::string_view id) const {
  const auto it = std::lower_bound(gpus.begin(), gpus.end(), id,
                                   [](const NodeGpu& g, std::string_view v) { return g.id < v; });
  return it != gpus.end() && it->id == id ? &*it : nullptr;
}

NodeInventory nodeInventory(const std::vector<json>& pools, std::string_view node, PoolPath path) {
  NodeInventory inv;
  std::map<std::string, NodeGpu> byId;
  std::set<std::string> duplicated;
  for (const json& pool : pools) {
    if (api::servesDevicePlugin(pool) != (path == PoolPath::kDevicePlugin)) {
      continue;  // offered through the other path (docs/dra.md), never on both
    }
    api::PoolGpus parsed = api::parsePoolGpus(pool);
    inv.problems.insert(inv.problems.end(), parsed.problems.begin(), parsed.problems.end());
    for (api::PoolGpu& g : parsed.gpus) {
      if (g.node != node) {
        continue;
      }
      NodeGpu gpu;
      gpu.id = std::move(g.id);
      gpu.pool = parsed.pool;
      gpu.uuid = std::move(g.uuid);
      gpu.chassis = std::move(g.chassis);
      gpu.model = std::move(g.model);
      gpu.draining = g.draining;
      gpu.healthy = g.healthy;
      gpu.detail = g.healthy ? std::string() : std::move(g.healthDetail);
      // A device kubelet hands out must name exactly one GPU.
      if (gpu.uuid.empty() || gpu.uuid.find(',') != std::string::npos) {
        gpu.healthy = false;
        gpu.detail = "no usable UUID";
        inv.problems.push_back("GPUPool " + parsed.pool + ": GPU " + gpu.id +
                               " has no usable uuid; advertised as Unhealthy");
      }
      if (byId.count(gpu.id) != 0) {
        duplicated.insert(gpu.id);
        continue;
      }
      byId.emplace(gpu.id, std::move(gpu));
    }
  }
  for (const std::string& id : duplicated) {
    inv.problems.push_back("GPU id " + id +
                           " is attached to this node in more than one GPUPool; withdrawn");
    byId.erase(id);
  }
  for (auto& [id, gpu] : byId) {
    inv.gpus.push_back(std::move(gpu));
  }
  return inv;
}

std::vector<Advertised> advertisedDevices(const NodeInventory& inventory) {
  std::vector<Advertised> out;
  for (const NodeGpu& g : inventory.gpus) {
    if (!g.draining && !g.hidden) {
      out.push_back({g.id, g.healthy, g.numaNode});
    }
  }
  return out;
}

std::vector<std::string> drainingIds(const NodeInventory& inventory) {
  std::vector<std::string> out;
  for (const NodeGpu& g : inventory.gpus) {
    if (g.draining) {
      out.push_back(g.id);
    }
  }
  return out;
}

std::string nodeCdiName(std::string_view gpuId) {
  return cdi::cdiDeviceName(gpuId);
}

Result<std::vector<ContainerAllocation>> planAllocation(
    const NodeInventory& inventory, const std::vector<std::vector<std::string>>& containers,
    DeviceListStrategy strategy) {
  if (containers.empty()) {
    return makeError(kc::errc::kInvalid, "Allocate: no container requests");
  }
  std::set<std::string> seen;
  for (std::size_t c = 0; c < containers.size(); ++c) {
    if (containers[c].empty()) {
      return makeError(kc::errc::kInvalid,
                       "Allocate: container request " + std::to_string(c) + " names no device");
    }
    for (const std::string& id : containers[c]) {
      if (!seen.insert(id).second) {
        return makeError(kc::errc::kInvalid, "Allocate: device " + id + " requested twice");
      }
      const NodeGpu* gpu = inventory.find(id);
      if (gpu == nullptr) {
        return makeError(kc::errc::kNotFound,
                         "Allocate: device " + id + " is not attached to this node");
      }
      if (gpu->draining) {
        return makeError(kc::errc::kNotFound,
                         "Allocate: device " + id + " is being withdrawn (draining for a move)");
      }
      if (gpu->hidden) {
        return makeError(
            kc::errc::kNotFound,
            "Allocate: device " + id + " is not visible on this host (" + gpu->detail + ")");
      }
      if (!gpu->healthy) {
        return makeError(kc::errc::kFailedPrecondition,
                         "Allocate: device " + id + " is unhealthy" +
                             (gpu->detail.empty() ? "" : " (" + gpu->detail + ")"));
      }
    }
  }
  std::vector<ContainerAllocation> out;
  for (const auto& ids : containers) {
    ContainerAllocation a;
    a.envs[std::string(api::kVisibleDevicesEnv)] = joinIds(ids, inventory.gpus, true);
    a.envs[std::string(api::kGpuIdsEnv)] = joinIds(ids, inventory.gpus, false);
    if (strategy == DeviceListStrategy::kCdiCri) {
      for (const std::string& id : ids) {
        a.cdiDevices.push_back(cdi::qualifiedName(nodeCdiName(id)));
      }
    }
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<std::string> preferredAllocation(const NodeInventory& inventory,
                                             const std::vector<std::string>& available,
                                             const std::vector<std::string>& mustInclude,
                                             std::int32_t size) {
  std::vector<std::string> out;
  if (size <= 0) {
    return out;
  }
  const auto want = static_cast<std::size_t>(size);
  std::set<std::string> taken;
  std::set<std::string> preferredChassis;
  const auto chassisOf = [&](const std::string& id) {
    const NodeGpu* g = inventory.find(id);
    return g != nullptr ? g->chassis : std::string();
  };
  for (const std::string& id : mustInclude) {
    if (out.size() < want && taken.insert(id).second) {
      out.push_back(id);
      preferredChassis.insert(chassisOf(id));
    }
  }
  // Remaining candidates grouped by chassis (ids sorted inside a group).
  std::map<std::string, std::vector<std::string>> groups;
  for (const std::string& id : available) {
    if (taken.count(id) == 0) {
      groups[chassisOf(id)].push_back(id);
      taken.insert(id);
    }
  }
  for (auto& [chassis, ids] : groups) {
    std::sort(ids.begin(), ids.end());
  }
  // A group is taken from its front: `next` counts what is gone, so nothing is erased.
  std::map<std::string, std::size_t> next;
  const auto left = [&](const std::string& chassis) {
    return groups[chassis].size() - next[chassis];
  };
  const auto takeFrom = [&](const std::string& chassis) {
    const std::vector<std::string>& ids = groups[chassis];
    std::size_t& i = next[chassis];
    while (out.size() < want && i < ids.size()) {
      out.push_back(ids[i++]);
    }
  };
  // 1. The must-include GPUs' chassis first.
  for (const std::string& chassis : preferredChassis) {
    if (groups.count(chassis) != 0) {
      takeFrom(chassis);
    }
  }
  // Non-empty groups by (ids left, chassis): the smallest group that can supply the rest is
  // the first at or above `need`, the largest the first of the last size. Same choice as a
  // scan of every group per step (ties go to the first chassis by name), in O(log groups).
  std::set<std::pair<std::size_t, std::string>> bySize;
  for (const auto& [chassis, ids] : groups) {
    if (left(chassis) != 0) {
      bySize.emplace(left(chassis), chassis);
    }
  }
  while (out.size() < want && !bySize.empty()) {
    const std::size_t need = want - out.size();
    // 2. The smallest group that can supply the rest alone; 3. else the largest group.
    auto pick = bySize.lower_bound({need, std::string()});
    if (pick == bySize.end()) {
      pick = bySize.lower_bound({std::prev(bySize.end())->first, std::string()});
    }
    const std::string chassis = pick->second;
    bySize.erase(pick);
    takeFrom(chassis);
    if (left(chassis) != 0) {
      bySize.emplace(left(chassis), chassis);
    }
  }
  return out;
}

}  // namespace kc::devplugin
