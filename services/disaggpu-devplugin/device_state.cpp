#include "services/disaggpu-devplugin/device_state.hpp"

#include <algorithm>
#include <set>
#include <utility>

namespace kc::devplugin {
namespace {

using nlohmann::json;

// Device IDs travel through kubelet's checkpoint, environment variables and our annotations:
// keep them to characters that need no quoting anywhere.
bool isValidDeviceId(std::string_view id) {
  if (id.empty() || id.size() > kMaxDeviceIdLength) {
    return false;
  }
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '-' || c == '_' || c == ':';
  });
}

std::string stringField(const json& obj, const char* key) {
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) {
    return {};
  }
  return it->get<std::string>();
}

std::string poolName(const json& pool) {
  const auto meta = pool.find("metadata");
  if (meta == pool.end() || !meta->is_object()) {
    return {};
  }
  return stringField(*meta, "name");
}

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

Result<std::vector<std::string>> stringArray(const json& obj, const char* key) {
  std::vector<std::string> out;
  const auto it = obj.find(key);
  if (it == obj.end()) {
    return out;
  }
  if (!it->is_array()) {
    return makeError(kc::errc::kInvalid, std::string("usage report: '") + key + "' is not an array");
  }
  for (const json& v : *it) {
    if (!v.is_string()) {
      return makeError(kc::errc::kInvalid, std::string("usage report: '") + key + "' holds a non-string");
    }
    out.push_back(v.get<std::string>());
  }
  return out;
}

}  // namespace

const NodeGpu* NodeInventory::find(std::string_view id) const {
  const auto it = std::lower_bound(gpus.begin(), gpus.end(), id,
                                   [](const NodeGpu& g, std::string_view v) { return g.id < v; });
  return it != gpus.end() && it->id == id ? &*it : nullptr;
}

NodeInventory nodeInventory(const std::vector<json>& pools, std::string_view node) {
  NodeInventory inv;
  std::map<std::string, NodeGpu> byId;
  std::set<std::string> duplicated;
  for (const json& pool : pools) {
    if (!pool.is_object()) {
      continue;
    }
    const std::string name = poolName(pool);
    const auto status = pool.find("status");
    if (status == pool.end() || !status->is_object()) {
      continue;  // reconfig-mgr has not written an inventory yet
    }
    const auto gpus = status->find("gpus");
    if (gpus == status->end()) {
      continue;
    }
    if (!gpus->is_array()) {
      inv.problems.push_back("GPUPool " + name + ": status.gpus is not an array");
      continue;
    }
    for (std::size_t i = 0; i < gpus->size(); ++i) {
      const json& g = (*gpus)[i];
      if (!g.is_object()) {
        inv.problems.push_back("GPUPool " + name + ": status.gpus[" + std::to_string(i) +
                               "] is not an object");
        continue;
      }
      if (stringField(g, "node") != node) {
        continue;
      }
      NodeGpu gpu;
      gpu.id = stringField(g, "id");
      if (!isValidDeviceId(gpu.id)) {
        inv.problems.push_back("GPUPool " + name + ": status.gpus[" + std::to_string(i) +
                               "].id '" + gpu.id +
                               "' is not a device ID (1-63 of [A-Za-z0-9._:-])");
        continue;
      }
      gpu.pool = name;
      gpu.uuid = stringField(g, "uuid");
      gpu.chassis = stringField(g, "chassis");
      gpu.model = stringField(g, "model");
      const auto draining = g.find("draining");
      gpu.draining = draining != g.end() && draining->is_boolean() && draining->get<bool>();
      const std::string health = stringField(g, "health");
      if (health == kHealthy || (health.empty() && !g.contains("health"))) {
        gpu.healthy = true;
      } else if (health == kUnhealthy) {
        gpu.healthy = false;
        gpu.detail = stringField(g, "healthDetail");
      } else {
        gpu.healthy = false;
        gpu.detail = "unknown health value";
        inv.problems.push_back("GPUPool " + name + ": GPU " + gpu.id + " has health '" + health +
                               "' (want Healthy or Unhealthy); advertised as Unhealthy");
      }
      if (gpu.uuid.empty() || gpu.uuid.find(',') != std::string::npos) {
        gpu.healthy = false;
        gpu.detail = "no usable UUID";
        inv.problems.push_back("GPUPool " + name + ": GPU " + gpu.id +
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
    if (!g.draining) {
      out.push_back({g.id, g.healthy});
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

Result<std::vector<ContainerAllocation>> planAllocation(
    const NodeInventory& inventory, const std::vector<std::vector<std::string>>& containers) {
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
        return makeError(kc::errc::kNotFound, "Allocate: device " + id + " is not attached to this node");
      }
      if (gpu->draining) {
        return makeError(kc::errc::kNotFound,
                         "Allocate: device " + id + " is being withdrawn (draining for a move)");
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
    a.envs["NVIDIA_VISIBLE_DEVICES"] = joinIds(ids, inventory.gpus, true);
    a.envs["KUBECOMP_GPU_IDS"] = joinIds(ids, inventory.gpus, false);
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
  const auto takeFrom = [&](std::vector<std::string>& ids) {
    while (out.size() < want && !ids.empty()) {
      out.push_back(ids.front());
      ids.erase(ids.begin());
    }
  };
  // 1. The must-include GPUs' chassis first.
  for (const std::string& chassis : preferredChassis) {
    if (auto it = groups.find(chassis); it != groups.end()) {
      takeFrom(it->second);
    }
  }
  while (out.size() < want) {
    const std::size_t need = want - out.size();
    // 2. The smallest group that can supply the rest alone; 3. else the largest group.
    std::string bestFit;
    std::size_t bestFitSize = 0;
    std::string largest;
    std::size_t largestSize = 0;
    for (const auto& [chassis, ids] : groups) {
      if (ids.empty()) {
        continue;
      }
      if (ids.size() >= need && (bestFitSize == 0 || ids.size() < bestFitSize)) {
        bestFit = chassis;
        bestFitSize = ids.size();
      }
      if (ids.size() > largestSize) {
        largest = chassis;
        largestSize = ids.size();
      }
    }
    if (bestFitSize == 0 && largestSize == 0) {
      break;  // available is short
    }
    takeFrom(groups[bestFitSize != 0 ? bestFit : largest]);
  }
  return out;
}

json toJson(const UsageReport& report) {
  json inUse = json::object();
  for (const auto& [id, pods] : report.inUse) {
    inUse[id] = pods;
  }
  return json{{"pool", report.pool},         {"advertised", report.advertised},
              {"withdrawn", report.withdrawn}, {"inUse", inUse},
              {"registered", report.registered}};
}

Result<UsageReport> parseUsageReport(std::string_view text) {
  const json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return makeError(kc::errc::kInvalid, "usage report: not a JSON object");
  }
  UsageReport r;
  if (const auto it = doc.find("pool"); it != doc.end()) {
    if (!it->is_string()) {
      return makeError(kc::errc::kInvalid, "usage report: 'pool' is not a string");
    }
    r.pool = it->get<std::string>();
  }
  auto advertised = stringArray(doc, "advertised");
  if (!advertised) {
    return std::move(advertised).error();
  }
  r.advertised = std::move(*advertised);
  auto withdrawn = stringArray(doc, "withdrawn");
  if (!withdrawn) {
    return std::move(withdrawn).error();
  }
  r.withdrawn = std::move(*withdrawn);
  if (const auto it = doc.find("inUse"); it != doc.end()) {
    if (!it->is_object()) {
      return makeError(kc::errc::kInvalid, "usage report: 'inUse' is not an object");
    }
    for (const auto& [id, pods] : it->items()) {
      auto list = stringArray(json{{"p", pods}}, "p");
      if (!list) {
        return makeError(kc::errc::kInvalid, "usage report: inUse['" + id + "'] is not a list of pods");
      }
      r.inUse[id] = std::move(*list);
    }
  }
  if (const auto it = doc.find("registered"); it != doc.end()) {
    if (!it->is_boolean()) {
      return makeError(kc::errc::kInvalid, "usage report: 'registered' is not a boolean");
    }
    r.registered = it->get<bool>();
  }
  return r;
}

}  // namespace kc::devplugin
