#pragma once
// A GPUPool object as reconfig-mgr reads it: the chassis of the pool (how to reach each
// one's management API) and the nodes the fabric connects, each with its host port per
// chassis. Parsed strictly: a pool whose spec cannot be read is reported on its status and
// left alone (no fabric call is made for it).

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/result.hpp"
#include "libcore/net/http_client.hpp"

namespace kc::reconfig {

// Where a chassis' CA bundle (PEM) is: key `key` of a Secret or a ConfigMap.
struct CaBundleRef {
  std::string kind;  // "Secret" | "ConfigMap"
  std::string namespaceName;
  std::string name;
  std::string key = "ca.crt";

  friend bool operator==(const CaBundleRef&, const CaBundleRef&) = default;
};

struct ChassisSpec {
  std::string name;
  std::string driver;           // "h3" | "redfish"
  std::string endpoint;         // base URL
  std::string secretNamespace;  // credentialsSecret (empty name: none)
  std::string secretName;
  std::string gpuModel;               // h3
  std::string gep = "0";              // h3
  std::string auth = "session";       // redfish: session | basic | none
  std::string style = "composition";  // redfish: composition | fabric (DSP0268 Fabrics)
  std::string fabric;                 // redfish style fabric: the Fabric Id ("" = the only one)
  // spec.chassis[].tls (https endpoints only): the CA that signed the chassis' certificate
  // (without one: the system trust store), or no verification at all (explicit, logged).
  std::optional<CaBundleRef> caBundle;
  bool insecureSkipVerify = false;

  friend bool operator==(const ChassisSpec&, const ChassisSpec&) = default;
};

// Reads one object of the core API ("secrets" or "configmaps") in a namespace, as JSON.
using CoreObjectReader = std::function<Result<nlohmann::json>(
    const std::string& resource, const std::string& namespaceName, const std::string& name)>;

// The TLS options of a chassis' driver: its CA bundle read through `read` (a Secret's data is
// base64, a ConfigMap's plain text; the key must hold at least one PEM certificate), or
// insecureSkipVerify. Errors name the chassis and the object: "unavailable" when the object
// cannot be read, "invalid" when it lacks the key or the key holds no certificate.
Result<net::ClientTlsOptions> chassisTls(const ChassisSpec& chassis, const CoreObjectReader& read);

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
