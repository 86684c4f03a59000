#pragma once
// API objects as the cache's tests hand them in (the informers' view): a Node with
// status.allocatable, a GPUPool with its inventory. Tests only.

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace kc::sched::test {

inline nlohmann::json node(const std::string& name, int gpus) {
  nlohmann::json alloc = {{"cpu", "64"},
                          {"memory", "256Gi"},
                          {"pods", "110"},
                          {"kubecomp.io/gpu", std::to_string(gpus)}};
  return {{"metadata", {{"name", name}, {"resourceVersion", "1"}}},
          {"status", {{"allocatable", alloc}}}};
}

// GPUs as (id, node) pairs; "" = unattached.
inline nlohmann::json pool(const std::string& name, const std::vector<std::string>& nodes,
                           const std::vector<std::pair<std::string, std::string>>& gpus) {
  nlohmann::json ns = nlohmann::json::array();
  for (const auto& n : nodes) {
    ns.push_back({{"name", n}, {"hostPort", "1"}});
  }
  nlohmann::json gs = nlohmann::json::array();
  for (const auto& [id, at] : gpus) {
    nlohmann::json g = {{"id", id}, {"health", "Healthy"}, {"draining", false}};
    if (!at.empty()) {
      g["node"] = at;
    }
    gs.push_back(g);
  }
  return {{"metadata", {{"name", name}, {"resourceVersion", "1"}}},
          {"spec", {{"nodes", ns}}},
          {"status", {{"gpus", gs}}}};
}

}  // namespace kc::sched::test
