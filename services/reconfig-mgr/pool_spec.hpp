#pragma once
// A GPUPool object as reconfig-mgr reads it: the chassis of the pool (how to reach each
// one's management API) and the nodes the fabric connects, each with its host port per
// chassis. Parsed strictly: a pool whose spec cannot be read is reported on its status and
// left alone (no fabric call is made for it).

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::reconfig {

struct ChassisSpec {
  std::string name;
  std::string driver;           // "h3" | "redfish"
  std::string endpoint;         // base URL
  std::string secretNamespace;  // credentialsSecret (empty name: none)
  std::string secretName;
  std::string gpuModel;          // h3
  std::string gep = "0";         // h3
  std::string auth = "session";  // redfish: session | basic | none

  friend bool operator==(const ChassisSpec&, const ChassisSpec&) = default;
};

struct NodeSpec {
  std::string name;
  std::string hostPort;
  std::map<std::string, std::string> chassisHostPorts;  // chassis -> host where it differs

  friend bool operator==(const NodeSpec&, const NodeSpec&) = default;
};

struct PoolSpec {
  std::string name;
  std::int64_t generation = 0;
  std::vector<ChassisSpec> chassis;
  std::vector<NodeSpec> nodes;
  std::uint32_t pollIntervalSeconds = 30;
  bool dra = false;  // spec.allocationPath DRA: reconfig-mgr publishes ResourceSlices

  // The node's host on `chassis` (chassisHostPorts, else hostPort); nullopt for a node not in
  // the pool.
  std::optional<std::string> hostOf(std::string_view node, std::string_view chassis) const;
  // The pool-form host ("<chassis>/<host>", as FabricPool lists it) of `node` for the chassis
  // of GPU `gpuId`; nullopt when the node is not in the pool or the id has no chassis.
  std::optional<std::string> poolHostOf(std::string_view node, std::string_view gpuId) const;
  // The node behind a pool-form host "<chassis>/<host>"; "" when no node of the spec has it.
  std::string nodeAt(std::string_view poolHost) const;
  bool hasNode(std::string_view node) const;
  // True when what a driver is built from (chassis list) is the same.
  bool sameFabric(const PoolSpec& other) const { return chassis == other.chassis; }
};

// Reads metadata.name, metadata.generation and spec. Error "invalid" naming the field.
Result<PoolSpec> parsePoolSpec(const nlohmann::json& pool, std::string_view defaultSecretNamespace);

}  // namespace kc::reconfig
