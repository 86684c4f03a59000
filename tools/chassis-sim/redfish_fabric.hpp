#pragma once
// chassis-sim's Redfish "fabric" profile (RedfishProfile::kFabric): the model rendered as a
// DSP0268 Fabric, as PCIe/CXL fabric managers serve one. Pure functions of a Chassis; the
// server (server.cpp) routes requests here and applies latency and faults.
//
//   <root>/Fabrics/PCIe                      Fabric (FabricType PCIe): Endpoints, Connections
//   <root>/Fabrics/PCIe/Endpoints/<system>   a host: RootComplex Initiator -> /Systems/<system>
//   <root>/Fabrics/PCIe/Endpoints/<gid>      a GPU: Processor Target -> its GPU Processor
//   <root>/Fabrics/PCIe/Connections/conn-<gid>   one per attached GPU (Initiator host, Target GPU)
//   <root>/Chassis/GPUs/Processors/<gid>     the GPU Processor (UUID, Model, Status)
//   <root>/Systems, <root>/Systems/<system>  the hosts' ComputerSystems

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "libcore/base/result.hpp"
#include "tools/chassis-sim/model.hpp"

namespace kc::chassis_sim::fabric_profile {

inline constexpr const char* kFabricId = "PCIe";

struct Uris {
  std::string root, systems, fabrics, fabric, endpoints, connections, processors;
};
Uris urisFor(const std::string& prefix);  // prefix: "" or "/chassis/<name>"

// The Endpoints collection (the inventory read; the server applies its faults).
nlohmann::json endpointsCollection(const Uris& u, const Chassis& c);
// Any other resource of the profile at `path`, or nullopt (404).
std::optional<nlohmann::json> resourceAt(const Uris& u, const Chassis& c, const std::string& path);

// A Connection create request resolved against the chassis: errc::kInvalid (400) for a body
// that does not name one known host Endpoint and one known GPU Endpoint, errc::kConflict (409)
// for a GPU already connected.
struct Connect {
  std::string gid;
  std::uint32_t port = 0;
};
Result<Connect> resolveConnect(const Uris& u, const Chassis& c, const std::string& body);
std::string connectionLink(const Uris& u, const Gpu& g);
nlohmann::json connectionJson(const Uris& u, const Chassis& c, const Gpu& g);
// The attached GPU whose Connection is at `path`, or nullptr.
const Gpu* connectionGpu(const Uris& u, const Chassis& c, const std::string& path);

}  // namespace kc::chassis_sim::fabric_profile
