#include "libcore/fabric/pool.hpp"

#include <algorithm>
#include <future>
#include <set>

namespace kc::fabric {
namespace {

// Hosts in the pool view carry their chassis: "<chassis>/<host>".
Result<MoveReport> qualify(const std::string& chassis, Result<MoveReport> report) {
  if (report) {
    for (auto* host : {&report->hostBefore, &report->hostAfter}) {
      if (*host) {
        **host = chassis + "/" + **host;
      }
    }
  }
  return report;
}

}  // namespace

Result<std::unique_ptr<FabricPool>> FabricPool::create(
    std::string name, std::vector<std::unique_ptr<FabricDriver>> chassis) {
  if (!isValidChassisName(name)) {
    return makeError(errc::kInvalid, "pool name \"" + name + "\" must be a lower-case DNS label");
  }
  if (chassis.empty()) {
    return makeError(errc::kInvalid, "pool " + name + " has no chassis");
  }
  std::set<std::string> names;
  std::vector<Member> members;
  for (auto& driver : chassis) {
    if (!driver) {
      return makeError(errc::kInvalid, "pool " + name + ": null driver");
    }
    if (!names.insert(driver->name()).second) {
      return makeError(errc::kInvalid,
                       "pool " + name + ": chassis " + driver->name() + " listed twice");
    }
    members.push_back(Member{std::move(driver), std::make_unique<std::mutex>()});
  }
  return std::unique_ptr<FabricPool>(new FabricPool(std::move(name), std::move(members)));
}

FabricPool::FabricPool(std::string name, std::vector<Member> members)
    : name_(std::move(name)), members_(std::move(members)) {}

std::vector<FabricPool::ChassisInventory> FabricPool::inventoryByChassis() {
  std::vector<std::future<Result<Inventory>>> pending;
  pending.reserve(members_.size());
  for (auto& member : members_) {
    pending.push_back(std::async(std::launch::async, [&member]() -> Result<Inventory> {
      std::lock_guard lock(*member.mutex);
      return member.driver->inventory();
    }));
  }
  std::vector<ChassisInventory> out;
  out.reserve(members_.size());
  for (std::size_t i = 0; i < members_.size(); ++i) {
    out.push_back(ChassisInventory{members_[i].driver->name(), pending[i].get()});
  }
  return out;
}

Result<Inventory> FabricPool::inventory() {
  Inventory merged;
  std::string failures;
  std::string firstCode;
  for (auto& entry : inventoryByChassis()) {
    if (!entry.inventory) {
      if (firstCode.empty()) {
        firstCode = entry.inventory.error().code;
      }
      failures +=
          (failures.empty() ? "" : "; ") + entry.chassis + ": " + entry.inventory.error().message;
      continue;
    }
    for (auto& gpu : entry.inventory->gpus) {
      if (gpu.hostPort) {
        gpu.hostPort = entry.chassis + "/" + *gpu.hostPort;
      }
      merged.gpus.push_back(std::move(gpu));
    }
    for (const auto& host : entry.inventory->hosts) {
      merged.hosts.push_back(entry.chassis + "/" + host);
    }
    for (const auto& why : entry.inventory->skipped) {
      merged.skipped.push_back(entry.chassis + ": " + why);
    }
  }
  if (!failures.empty()) {
    return makeError(firstCode, "pool " + name_ + ": " + failures);
  }
  std::sort(merged.gpus.begin(), merged.gpus.end(),
            [](const GpuInfo& a, const GpuInfo& b) { return a.id < b.id; });
  std::sort(merged.hosts.begin(), merged.hosts.end());
  return merged;
}

Result<FabricPool::Member*> FabricPool::route(const std::string& gpuId) {
  const auto parts = splitGpuId(gpuId);
  if (!parts) {
    return makeError(errc::kInvalid, "\"" + gpuId + "\" is not a pool GPU id (<chassis>.<device>)");
  }
  for (auto& member : members_) {
    if (member.driver->name() == parts->chassis) {
      return &member;
    }
  }
  return makeError(errc::kNotFound, "pool " + name_ + " has no chassis " + parts->chassis);
}

Result<std::string> FabricPool::localHost(const Member& member, const std::string& gpuId,
                                          const std::string& host) {
  const auto slash = host.find('/');
  if (slash == std::string::npos) {
    return host;
  }
  if (host.substr(0, slash) != member.driver->name()) {
    return makeError(errc::kInvalid, "host " + host + " is not on the chassis of GPU " + gpuId);
  }
  return host.substr(slash + 1);
}

Result<MoveReport> FabricPool::attach(const std::string& gpuId, const std::string& host) {
  auto member = route(gpuId);
  if (!member) {
    return member.error();
  }
  auto local = localHost(**member, gpuId, host);
  if (!local) {
    return local.error();
  }
  std::lock_guard lock(*(*member)->mutex);
  return qualify((*member)->driver->name(), (*member)->driver->attach(gpuId, *local));
}

Result<MoveReport> FabricPool::move(const std::string& gpuId,
                                    const std::optional<std::string>& from, const std::string& to) {
  auto member = route(gpuId);
  if (!member) {
    return member.error();
  }
  auto localTo = localHost(**member, gpuId, to);
  if (!localTo) {
    return localTo.error();
  }
  std::optional<std::string> localFrom;
  if (from) {
    auto f = localHost(**member, gpuId, *from);
    if (!f) {
      return f.error();
    }
    localFrom = *f;
  }
  std::lock_guard lock(*(*member)->mutex);
  return qualify((*member)->driver->name(), (*member)->driver->move(gpuId, localFrom, *localTo));
}

Result<MoveReport> FabricPool::detach(const std::string& gpuId) {
  auto member = route(gpuId);
  if (!member) {
    return member.error();
  }
  std::lock_guard lock(*(*member)->mutex);
  return qualify((*member)->driver->name(), (*member)->driver->detach(gpuId));
}

}  // namespace kc::fabric
