#pragma once
// Wire shapes of DSP0268 Fabrics used by the Redfish driver's "fabric" style (PCIe and CXL
// fabric managers: OpenFabrics' Sunfish, CXL fabric managers; DMTF's `public-cxl` mockup).
// Parsed strictly, like redfish_codec.hpp: wrong types and missing required properties are
// `protocol` errors; links are followed through "@odata.id".
//
//  ServiceRoot   Fabrics, Links.Sessions
//  Fabric        Id, FabricType, Endpoints, Connections, Zones
//  Endpoint      Id, ConnectedEntities[] {EntityType, EntityRole, EntityLink}, Status,
//                Links.Connections[]
//  Connection    Id, Links.InitiatorEndpoints[], Links.TargetEndpoints[]
//  attach        POST <Connections> {"Name", "Links": {"InitiatorEndpoints": [host],
//                "TargetEndpoints": [gpu]}} (ConnectionType is read-only in Connection v1_4_0
//                and its values, Storage and Memory, describe no GPU: none is sent)
//  detach        DELETE <the Connection>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::fabric::redfish {

struct FabricServiceRoot {
  std::string fabrics;                  // @odata.id of the Fabrics collection
  std::optional<std::string> sessions;  // Links.Sessions
};
// A root without "Fabrics" is errc::kUnsupported: the service manages no fabric.
Result<FabricServiceRoot> parseFabricServiceRoot(std::string_view body);

struct FabricResource {
  std::string odataId;
  std::string id;
  std::string fabricType;                  // "PCIe", "CXL", ... ("" when absent)
  std::optional<std::string> endpoints;    // @odata.id of its Endpoints collection
  std::optional<std::string> connections;  // @odata.id of its Connections collection
};
Result<FabricResource> parseFabric(std::string_view body);

struct ConnectedEntity {
  std::string entityType;  // Processor, RootComplex, CXLDevice, MemoryChunk, Switch, ...
  std::string entityRole;  // Initiator, Target, Both ("" when absent)
  std::optional<std::string> entityLink;
};

struct Endpoint {
  std::string odataId;
  std::string id;
  std::vector<ConnectedEntity> entities;
  std::optional<std::string> health;     // Status.Health
  std::optional<std::string> state;      // Status.State
  std::vector<std::string> connections;  // Links.Connections
  std::optional<std::string> etag;       // "@odata.etag"

  // An entity with role Initiator or Both: a host's side of the fabric.
  bool isInitiator() const;
  // EntityLinks of the Processor entities with role Target or Both (a GPU's side).
  std::vector<std::string> targetProcessors() const;
};
Result<Endpoint> parseEndpoint(std::string_view body);

struct Connection {
  std::string odataId;
  std::string id;
  std::vector<std::string> initiators;  // Links.InitiatorEndpoints
  std::vector<std::string> targets;     // Links.TargetEndpoints
};
Result<Connection> parseConnection(std::string_view body);

// The body of a Connection create request (one initiator, one target).
std::string encodeConnectionRequest(std::string_view name, std::string_view initiator,
                                    std::string_view target);
struct ConnectionRequest {
  std::vector<std::string> initiators;
  std::vector<std::string> targets;
};
// For the simulator: errc::kInvalid when the body is not a Connection with endpoint links.
Result<ConnectionRequest> parseConnectionRequest(std::string_view body);

}  // namespace kc::fabric::redfish
