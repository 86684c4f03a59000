#pragma once
// The synthetic cluster the kubecomp-sched benchmarks share (bench_sched, its preemption and gang
// parts): node i is "node-NNNN" with 64 cpu, 256Gi, 110 pods and `gpus` pool GPUs; pool p holds
// nodes [p * nodesPerPool, (p + 1) * nodesPerPool), each with gpusPerNode GPUs of chassis "c<p>"
// attached and Healthy.

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>

#include "libcore/api/gpupool.hpp"
#include "libcore/api/names.hpp"

namespace kc::bench {

inline std::string benchNodeName(int i) {
  return fmt::format("node-{:04d}", i);
}

inline nlohmann::json benchNode(int i, int gpus) {
  const nlohmann::json alloc = {{"cpu", "64"},
                                {"memory", "256Gi"},
                                {"pods", "110"},
                                {kc::api::kGpuResource, std::to_string(gpus)}};
  return {
      {"metadata",
       {{"name", benchNodeName(i)}, {"labels", {{"kubernetes.io/hostname", benchNodeName(i)}}}}},
      {"status", {{"allocatable", alloc}, {"capacity", alloc}}}};
}

inline nlohmann::json benchPool(int p, int nodesPerPool, int gpusPerNode) {
  nlohmann::json nodes = nlohmann::json::array();
  nlohmann::json gpus = nlohmann::json::array();
  for (int i = p * nodesPerPool; i < (p + 1) * nodesPerPool; ++i) {
    nodes.push_back(
        {{"name", benchNodeName(i)}, {"hostPort", std::to_string(i % nodesPerPool + 1)}});
    for (int g = 0; g < gpusPerNode; ++g) {
      const std::string id = fmt::format("c{}.{}", p, (i % nodesPerPool) * gpusPerNode + g);
      gpus.push_back({{"id", id},
                      {"uuid", "GPU-" + id},
                      {"chassis", fmt::format("c{}", p)},
                      {"node", benchNodeName(i)},
                      {"health", "Healthy"},
                      {"draining", false}});
    }
  }
  return {
      {"apiVersion", kc::api::kGpuPoolApiVersion},
      {"kind", "GPUPool"},
      {"metadata", {{"name", fmt::format("pool-{:02d}", p)}}},
      {"spec",
       {{"chassis",
         {{{"name", fmt::format("c{}", p)}, {"driver", "h3"}, {"endpoint", "http://127.0.0.1:1"}}}},
        {"nodes", nodes}}},
      {"status", {{"gpus", gpus}}}};
}

}  // namespace kc::bench
