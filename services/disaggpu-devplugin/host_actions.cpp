#include "services/disaggpu-devplugin/host_actions.hpp"

#include <spdlog/spdlog.h>

#include "libcore/node/host_scan.hpp"

namespace kc::devplugin {

bool goneFromHost(const NodeGpu& gpu) {
  return gpu.hostChecked && !gpu.hostVisible && gpu.bdf.empty();
}

HostActions::HostActions(HostActionOptions options, node::HostRoots roots, kc::Clock& clock)
    : opts_(options), roots_(std::move(roots)), clock_(clock) {}

std::map<std::string, std::string> HostActions::removeDrained(
    const NodeInventory& inventory, const std::set<std::string>& withdrawable) {
  std::map<std::string, std::string> blocked;
  if (!opts_.hotRemove) {
    return blocked;
  }
  for (const NodeGpu& g : inventory.gpus) {
    if (withdrawable.count(g.id) == 0 || !g.hostChecked || g.bdf.empty()) {
      continue;  // not to be removed, or already gone
    }
    if (g.minor) {
      const std::string path = "/dev/nvidia" + std::to_string(*g.minor);
      const node::HoldersReport h = node::openHolders(roots_, {path});
      if (auto it = h.holders.find(path); it != h.holders.end() && !it->second.empty()) {
        std::string who;
        for (const node::OpenHolder& p : it->second) {
          who += (who.empty() ? "" : ", ") + std::string("pid ") + std::to_string(p.pid) + " (" +
                 p.comm + ")";
        }
        blocked[g.id] = path + " held open by " + who;
        continue;
      }
      if (h.unreadable > 0) {
        // Never remove a GPU someone might hold: an agent without CAP_SYS_PTRACE (hostPID)
        // cannot see other users' descriptors.
        blocked[g.id] =
            std::to_string(h.unreadable) + " process(es) could not be checked for open " + path;
        continue;
      }
    }
    if (Status s = node::removePciFunction(roots_, g.bdf); !s) {
      blocked[g.id] = "hot-remove of " + g.bdf + " failed: " + s.error().message;
      continue;
    }
    spdlog::info("hot-removed GPU {} ({}) before its detach", g.id, g.bdf);
  }
  return blocked;
}

bool HostActions::rescanIfDue(const NodeInventory& inventory) {
  if (opts_.rescanAfter.count() <= 0) {
    return false;
  }
  std::lock_guard lock(mu_);
  const auto now = clock_.now();
  std::map<std::string, kc::Clock::time_point> missing;
  bool due = false;
  for (const NodeGpu& g : inventory.gpus) {
    if (!g.hostChecked || !g.bdf.empty() || g.hostVisible || g.uuid.empty()) {
      continue;  // seen on the bus (usable or not): a rescan would not help
    }
    auto it = missingSince_.find(g.id);
    const auto since = it != missingSince_.end() ? it->second : now;
    missing.emplace(g.id, since);
    due = due || now - since >= opts_.rescanAfter;
  }
  missingSince_ = std::move(missing);
  if (!due || (lastRescan_ != kc::Clock::time_point{} && now - lastRescan_ < opts_.rescanAfter)) {
    return false;
  }
  lastRescan_ = now;
  if (Status s = node::requestPciRescan(roots_); !s) {
    spdlog::warn("PCI rescan: {}", s.error().message);
    return false;
  }
  spdlog::info("rescanned the PCI bus: {} attached GPU(s) missing from the host",
               missingSince_.size());
  return true;
}

void applyHotRemove(api::UsageReport& report, const NodeInventory& inventory,
                    const std::map<std::string, std::string>& blocked) {
  std::vector<std::string> kept;
  for (const std::string& id : report.withdrawn) {
    const NodeGpu* g = inventory.find(id);
    if (g != nullptr && goneFromHost(*g)) {
      kept.push_back(id);
    }
  }
  report.withdrawn = std::move(kept);
  report.removeBlocked = blocked;
}

}  // namespace kc::devplugin
