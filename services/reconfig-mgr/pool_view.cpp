#include "services/reconfig-mgr/pool_view.hpp"

#include <algorithm>

#include "libcore/api/gpupool.hpp"
#include "libcore/base/rfc3339.hpp"

namespace kc::reconfig {
namespace {

using nlohmann::json;

json condition(const std::string& type, bool ok, const std::string& reason,
               const std::string& message, std::int64_t generation, const std::string& now,
               const json& previous) {
  const std::string status = ok ? "True" : "False";
  std::string since = now;
  if (previous.is_object() && previous.contains("conditions") &&
      previous["conditions"].is_array()) {
    for (const json& c : previous["conditions"]) {
      if (c.is_object() && c.value("type", "") == type && c.value("status", "") == status &&
          c.contains("lastTransitionTime") && c["lastTransitionTime"].is_string()) {
        since = c["lastTransitionTime"].get<std::string>();
      }
    }
  }
  return {{"type", type},
          {"status", status},
          {"reason", reason},
          {"message", message},
          {"observedGeneration", generation},
          {"lastTransitionTime", since}};
}

}  // namespace

Quarantine parseQuarantine(const json& pool) {
  Quarantine out;
  const auto status = pool.find("status");
  if (status == pool.end() || !status->is_object()) {
    return out;
  }
  const auto q = status->find("quarantine");
  if (q == status->end() || !q->is_array()) {
    return out;
  }
  for (const json& e : *q) {
    if (e.is_object() && e.contains("gpu") && e["gpu"].is_string()) {
      out[e["gpu"].get<std::string>()] = e.value("reason", std::string("quarantined"));
    }
  }
  return out;
}

bool mergeOperatorQuarantine(Quarantine& ours, const Quarantine& base, const Quarantine& theirs) {
  bool changed = false;
  for (const auto& [gpu, reason] : base) {
    if (!theirs.contains(gpu)) {
      changed = ours.erase(gpu) > 0 || changed;
    }
  }
  for (const auto& [gpu, reason] : theirs) {
    const auto b = base.find(gpu);
    if (b == base.end() || b->second != reason) {
      const auto o = ours.find(gpu);
      if (o == ours.end() || o->second != reason) {
        ours[gpu] = reason;
        changed = true;
      }
    }
  }
  return changed;
}

const GpuView* PoolView::find(const std::string& id) const {
  const auto it =
      std::lower_bound(gpus.begin(), gpus.end(), id,
                       [](const GpuView& g, const std::string& v) { return g.info.id < v; });
  return it != gpus.end() && it->info.id == id ? &*it : nullptr;
}

PoolView buildView(const PoolSpec& spec, const fabric::Inventory& inventory,
                   const UsageByNode& usage, const Journal& journal, const Quarantine& quarantine) {
  PoolView view;
  for (const fabric::GpuInfo& info : inventory.gpus) {
    GpuView g;
    g.info = info;
    if (info.hostPort) {
      g.node = spec.nodeAt(*info.hostPort);
    }
    g.healthy = info.health == fabric::GpuHealth::kOk;
    g.healthDetail = info.healthDetail;
    if (const auto q = quarantine.find(info.id); q != quarantine.end()) {
      g.healthy = false;
      g.healthDetail = "quarantined by reconfig-mgr: " + q->second;
    }
    if (info.hostPort && g.node.empty()) {
      // Attached to a host the spec does not list: no node of this pool can use it.
      g.healthDetail = g.healthDetail.empty()
                           ? "attached to host " + *info.hostPort + " of no node in the pool"
                           : g.healthDetail;
    }
    g.draining = journal.active.find(info.id) != nullptr;
    if (!g.node.empty()) {
      const auto u = usage.find(g.node);
      if (u != usage.end()) {
        const auto it = u->second.inUse.find(info.id);
        if (it != u->second.inUse.end()) {
          g.inUseBy = it->second;
        }
      }
    }
    view.gpus.push_back(std::move(g));
  }
  std::sort(view.gpus.begin(), view.gpus.end(),
            [](const GpuView& a, const GpuView& b) { return a.info.id < b.info.id; });
  return view;
}

namespace {

// The pool's conditions (kept with their transition time while unchanged).
json renderConditions(const StatusInputs& in, std::int64_t generation, const std::string& now) {
  json conditions = json::array();
  if (in.specError) {
    conditions.push_back(condition("SpecValid", false, "InvalidSpec", *in.specError, generation,
                                   now, in.previousStatus));
  }
  if (in.inventoryError) {
    conditions.push_back(condition("InventoryRead", false, "ReadFailed", *in.inventoryError,
                                   generation, now, in.previousStatus));
  } else if (in.view != nullptr) {
    conditions.push_back(condition("InventoryRead", true, "ReadOK", "the fabric inventory was read",
                                   generation, now, in.previousStatus));
  }
  if (!in.inventorySkipped.empty()) {
    std::string why;
    for (const auto& s : in.inventorySkipped) {
      why += (why.empty() ? "" : "; ") + s;
    }
    conditions.push_back(condition("InventoryComplete", false, "ResourcesSkipped",
                                   std::to_string(in.inventorySkipped.size()) +
                                       " resource(s) the fabric listed could not be read and are "
                                       "left out: " +
                                       why,
                                   generation, now, in.previousStatus));
  } else if (in.view != nullptr && !in.inventoryError) {
    conditions.push_back(condition("InventoryComplete", true, "AllRead",
                                   "every resource the fabric listed was read", generation, now,
                                   in.previousStatus));
  }
  if (!in.movesBackingOff.empty()) {
    std::string why;
    for (const auto& s : in.movesBackingOff) {
      why += (why.empty() ? "" : "; ") + s;
    }
    conditions.push_back(condition("MovesBackingOff", true, "FabricFailures", why, generation, now,
                                   in.previousStatus));
  } else {
    conditions.push_back(condition("MovesBackingOff", false, "NoRecentFailures",
                                   "no GPU or chassis is held back after failed moves", generation,
                                   now, in.previousStatus));
  }
  if (in.movesUnsupported) {
    conditions.push_back(condition("MovesSupported", false, "FabricCannotMove",
                                   *in.movesUnsupported, generation, now, in.previousStatus));
  } else {
    conditions.push_back(
        condition("MovesSupported", true, "NoRefusal",
                  "no move refused as unsupported since the last one that went through", generation,
                  now, in.previousStatus));
  }
  const bool ready =
      !in.specError && !in.inventoryError && in.view != nullptr && !in.movesUnsupported;
  conditions.push_back(
      condition("Ready", ready, ready ? "Ready" : "NotReady",
                ready ? "inventory current, moves possible" : "see the other conditions",
                generation, now, in.previousStatus));
  return conditions;
}

}  // namespace

json renderStatus(const StatusInputs& in) {
  const std::string now = formatRfc3339(in.now);
  const std::int64_t generation = in.spec != nullptr ? in.spec->generation : 0;
  json status = json::object();
  status["observedGeneration"] = generation;
  if (in.view != nullptr) {
    std::int64_t total = 0;
    std::int64_t freeCount = 0;
    std::int64_t attached = 0;
    json gpus = json::array();
    for (const GpuView& g : in.view->gpus) {
      ++total;
      if (g.attached()) {
        ++attached;
      }
      if (g.free()) {
        ++freeCount;
      }
      gpus.push_back(api::toJson(api::PoolGpu{.id = g.info.id,
                                              .uuid = g.info.uuid,
                                              .model = g.info.model,
                                              .chassis = g.info.chassis,
                                              .node = g.node,
                                              .hostPort = g.info.hostPort.value_or(""),
                                              .healthy = g.healthy,
                                              .healthDetail = g.healthDetail,
                                              .draining = g.draining,
                                              .inUseBy = g.inUseBy}));
    }
    status["totalGPUs"] = total;
    status["freeGPUs"] = freeCount;
    status["attachedGPUs"] = attached;
    status["gpus"] = std::move(gpus);
  } else if (in.previousStatus.is_object()) {
    // No inventory yet (or only failed reads since start): keep what the last writer knew.
    for (const char* key : {"totalGPUs", "freeGPUs", "attachedGPUs", "gpus"}) {
      if (in.previousStatus.contains(key)) {
        status[key] = in.previousStatus[key];
      }
    }
  }
  if (!in.lastInventoryTime.empty()) {
    status["lastInventoryTime"] = in.lastInventoryTime;
  } else if (in.previousStatus.is_object() && in.previousStatus.contains("lastInventoryTime")) {
    status["lastInventoryTime"] = in.previousStatus["lastInventoryTime"];
  }
  status["moves"] = in.journal != nullptr ? in.journal->toJson() : json::array();
  json quarantine = json::array();
  if (in.quarantine != nullptr) {
    for (const auto& [gpu, reason] : *in.quarantine) {
      quarantine.push_back({{"gpu", gpu}, {"reason", reason}});
    }
  }
  status["quarantine"] = std::move(quarantine);

  status["conditions"] = renderConditions(in, generation, now);
  return status;
}

}  // namespace kc::reconfig
