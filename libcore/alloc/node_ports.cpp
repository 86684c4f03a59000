#include "libcore/alloc/node_ports.hpp"

#include <string>
#include <vector>

namespace kc::alloc {

bool hostPortsConflict(const HostPort& a, const HostPort& b) {
  if (a.port <= 0 || a.port != b.port || a.protocol != b.protocol) {
    return false;
  }
  return a.hostIP == b.hostIP || a.hostIP == "0.0.0.0" || b.hostIP == "0.0.0.0";
}

std::vector<std::string> nodePortsFilter(const SchedPod& pod, const SchedNode& node,
                                         const PlacedPods* placed) {
  if (pod.hostPorts.empty() || placed == nullptr || !placed->anyHostPorts()) {
    return {};
  }
  for (const auto& other : placed->onNode(node.name)) {
    if (other->name == pod.name && other->ns == pod.ns) {
      continue;
    }
    for (const HostPort& used : other->hostPorts) {
      for (const HostPort& want : pod.hostPorts) {
        if (hostPortsConflict(want, used)) {
          return {std::string(kReasonNodePorts)};
        }
      }
    }
  }
  return {};
}

}  // namespace kc::alloc
