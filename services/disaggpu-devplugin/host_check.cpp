#include "services/disaggpu-devplugin/host_check.hpp"

#include <algorithm>

namespace kc::devplugin {

namespace {

void markUnhealthy(NodeGpu& g, const std::string& why) {
  if (g.healthy) {
    g.healthy = false;
    g.detail = why;
  } else if (g.detail.find(why) == std::string::npos) {
    g.detail += g.detail.empty() ? why : "; " + why;
  }
}

// The host's GPU that carries `uuid` in any state (byUuid finds usable ones only).
const node::HostGpu* anyWithUuid(const node::HostView& view, const std::string& uuid) {
  auto it = std::find_if(view.gpus.begin(), view.gpus.end(),
                         [&](const node::HostGpu& h) { return h.uuid == uuid; });
  return it == view.gpus.end() ? nullptr : &*it;
}

// NVIDIA functions on the bus whose UUID the host cannot tell (driver unbound: the
// /proc/driver/nvidia entry goes with it), one of which may be the GPU looked for.
std::string unidentified(const node::HostView& view) {
  std::string out;
  for (const node::HostGpu& h : view.gpus) {
    if (h.uuid.empty()) {
      out += (out.empty() ? "" : ", ") + h.bdf + " (" + h.reason + ")";
    }
  }
  return out.empty() ? "" : "; NVIDIA function(s) not identified: " + out;
}

}  // namespace

void applyHostView(NodeInventory& inventory, const node::HostView& view,
                   const std::set<std::string>& advertisedBefore) {
  inventory.hostChecked = true;
  for (NodeGpu& g : inventory.gpus) {
    g.hostChecked = true;
    g.hostVisible = false;
    g.hidden = false;
    if (g.uuid.empty()) {
      g.hidden = true;
      markUnhealthy(g, "no UUID in the GPUPool status: cannot match it on the host");
      continue;
    }
    if (const node::HostGpu* h = view.byUuid(g.uuid); h != nullptr) {
      g.hostVisible = true;
      g.bdf = h->bdf;
      g.minor = h->minor;
      g.numaNode = h->numaNode;
      continue;
    }
    if (const node::HostGpu* h = anyWithUuid(view, g.uuid); h != nullptr) {
      g.bdf = h->bdf;
      g.numaNode = h->numaNode;
      markUnhealthy(g, "host: " + h->bdf + " " + h->reason);
      continue;
    }
    markUnhealthy(
        g, "host: no GPU with UUID " + g.uuid + " on this host's PCI bus" + unidentified(view));
    g.hidden = advertisedBefore.count(g.id) == 0;
  }
}

nlohmann::json hostViewJson(const node::HostView& view) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const node::HostGpu& g : view.gpus) {
    nlohmann::json j = {{"bdf", g.bdf},       {"uuid", g.uuid},   {"numaNode", g.numaNode},
                        {"driver", g.driver}, {"model", g.model}, {"usable", g.usable}};
    j["minor"] = g.minor ? nlohmann::json(*g.minor) : nlohmann::json();
    if (!g.usable) {
      j["reason"] = g.reason;
    }
    gpus.push_back(std::move(j));
  }
  return {{"gpus", gpus}, {"problems", view.problems}};
}

HostVerdicts hostVerdicts(const NodeInventory& inventory) {
  HostVerdicts out;
  for (const NodeGpu& g : inventory.gpus) {
    if (!g.hostChecked) {
      continue;
    }
    if (g.hostVisible) {
      out.visible.push_back(g.id);
    } else {
      out.notVisible[g.id] = g.detail;
    }
  }
  return out;
}

}  // namespace kc::devplugin
