#pragma once
// Host-port conflicts recomputed from the Pod objects themselves, written from the Kubernetes
// documentation and not from node_ports.cpp: the slow, obviously-right oracle the NodePorts
// filter is checked against.
//
// What the documentation says ("Assigning Pods to Nodes", the PodSpec reference for
// containerPort.hostPort/hostIP/protocol, kube-scheduler's NodePorts plugin): a pod fits a node
// only if no host port it asks for is already bound there; a port is bound for one protocol
// (TCP when left out) on one host address, 0.0.0.0 (also when left out) meaning every address
// of the node, so it collides with the same port and protocol on any address. Only
// spec.containers count; a hostPort of 0 or left out binds nothing.

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace kc::alloc::test {

// "PROTO/PORT@IP" for every host port a Pod object binds.
inline std::vector<std::string> naiveBoundPorts(const nlohmann::json& pod) {
  std::vector<std::string> out;
  for (const auto& c : pod["spec"].value("containers", nlohmann::json::array())) {
    for (const auto& p : c.value("ports", nlohmann::json::array())) {
      const int port = p.value("hostPort", 0);
      if (port == 0) {
        continue;
      }
      std::string ip = p.value("hostIP", std::string());
      std::string proto = p.value("protocol", std::string());
      out.push_back((proto.empty() ? "TCP" : proto) + "/" + std::to_string(port) + "@" +
                    (ip.empty() ? "0.0.0.0" : ip));
    }
  }
  return out;
}

// Whether `pod` may go where the pods `onNode` already bind their ports.
inline bool naivePortsFree(const nlohmann::json& pod, const std::vector<nlohmann::json>& onNode) {
  std::set<std::string> taken;
  for (const auto& other : onNode) {
    for (auto& k : naiveBoundPorts(other)) {
      taken.insert(k);
    }
  }
  for (const std::string& want : naiveBoundPorts(pod)) {
    const std::string head = want.substr(0, want.find('@') + 1);  // "PROTO/PORT@"
    const std::string ip = want.substr(want.find('@') + 1);
    for (const std::string& t : taken) {
      if (t.rfind(head, 0) != 0) {
        continue;  // another port or protocol
      }
      const std::string tip = t.substr(head.size());
      if (ip == "0.0.0.0" || tip == "0.0.0.0" || ip == tip) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace kc::alloc::test
