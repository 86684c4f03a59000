#include "libcore/alloc/pod_fit.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <string_view>

namespace kc::alloc {
namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

// Amounts are never negative (the parser refuses negative quantities), so only the upper end
// can overflow.
std::int64_t satAdd(std::int64_t a, std::int64_t b) {
  return a > kMax - b ? kMax : a + b;
}

void addTo(Resources& into, const Resources& r) {
  into.milliCpu = satAdd(into.milliCpu, r.milliCpu);
  into.memory = satAdd(into.memory, r.memory);
  into.ephemeralStorage = satAdd(into.ephemeralStorage, r.ephemeralStorage);
  for (const auto& [name, amount] : r.scalar) {
    auto& slot = into.scalar[name];
    slot = satAdd(slot, amount);
  }
}

void maxInto(Resources& into, const Resources& r) {
  into.milliCpu = std::max(into.milliCpu, r.milliCpu);
  into.memory = std::max(into.memory, r.memory);
  into.ephemeralStorage = std::max(into.ephemeralStorage, r.ephemeralStorage);
  for (const auto& [name, amount] : r.scalar) {
    auto& slot = into.scalar[name];
    slot = std::max(slot, amount);
  }
}

void subtractFrom(Resources& from, const Resources& r) {
  auto sub = [](std::int64_t& a, std::int64_t b) { a = a > b ? a - b : 0; };
  sub(from.milliCpu, r.milliCpu);
  sub(from.memory, r.memory);
  sub(from.ephemeralStorage, r.ephemeralStorage);
  for (const auto& [name, amount] : r.scalar) {
    auto it = from.scalar.find(name);
    if (it != from.scalar.end()) {
      sub(it->second, amount);
    }
  }
}

}  // namespace

Resources podRequests(const SchedPod& pod) {
  Resources regular;
  for (const auto& c : pod.containers) {
    addTo(regular, c.requests);
  }
  Resources sidecars;  // the restartable init containers declared so far
  Resources initMax;
  for (const auto& c : pod.initContainers) {
    Resources during;
    if (c.restartable) {
      addTo(regular, c.requests);
      addTo(sidecars, c.requests);
      during = sidecars;
    } else {
      during = c.requests;
      addTo(during, sidecars);
    }
    maxInto(initMax, during);
  }
  maxInto(regular, initMax);
  addTo(regular, pod.overhead);
  if (pod.claimGpus > 0) {
    auto& gpus = regular.scalar[std::string(kGpuResource)];
    gpus = satAdd(gpus, pod.claimGpus);
  }
  return regular;
}

std::int64_t gpuRequest(const SchedPod& pod) {
  return podRequests(pod).scalarOr0(kGpuResource);
}

void addPodUsage(NodeUsage& usage, const Resources& podRequest) {
  addTo(usage.requested, podRequest);
  usage.pods = satAdd(usage.pods, 1);
}

void removePodUsage(NodeUsage& usage, const Resources& podRequest) {
  subtractFrom(usage.requested, podRequest);
  usage.pods = usage.pods > 0 ? usage.pods - 1 : 0;
}

bool holdsNodeResources(const SchedPod& pod) {
  return !pod.nodeName.empty() && pod.phase != "Succeeded" && pod.phase != "Failed";
}

Result<std::vector<NodeUsage>> nodeUsage(std::span<const SchedNode> nodes,
                                         std::span<const SchedPod> pods) {
  std::map<std::string_view, std::size_t> index;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (!index.emplace(nodes[i].name, i).second) {
      return makeError(kc::errc::kInvalid,
                       "nodeUsage: node '" + nodes[i].name + "' is listed twice");
    }
  }
  std::vector<NodeUsage> usage(nodes.size());
  for (const auto& pod : pods) {
    if (!holdsNodeResources(pod)) {
      continue;
    }
    auto it = index.find(pod.nodeName);
    if (it != index.end()) {
      addPodUsage(usage[it->second], podRequests(pod));
    }
  }
  return usage;
}

}  // namespace kc::alloc
