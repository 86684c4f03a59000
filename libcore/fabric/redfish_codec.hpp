#pragma once
// Wire shapes of DMTF Redfish composition used by the redfish driver. Only what the driver
// needs is parsed, strictly: wrong types and missing required properties are errors.
// Links are followed through "@odata.id"; nothing assumes a URI layout.
//
//  ServiceRoot          Systems, CompositionService, SessionService, Links.Sessions
//  CompositionService   ResourceBlocks
//  collection           Members[] of {"@odata.id"}
//  ResourceBlock        Id, CompositionStatus.CompositionState, Status.Health, Processors[],
//                       Links.ComputerSystems[]
//  Processor            ProcessorType ("GPU"), UUID, Model, Status.Health
//  ComputerSystem       Id, Links.ResourceBlocks[],
//  Actions."#ComputerSystem.AddResourceBlock".target,
//                       Actions."#ComputerSystem.RemoveResourceBlock".target
//  action body {"ResourceBlock":{"@odata.id":...},"ResourceBlockETag":...,"ComputerSystemETag":...}
//  session login        POST <Sessions> {"UserName","Password"} -> 201 + X-Auth-Token

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::fabric::redfish {

inline constexpr std::string_view kServiceRootPath = "/redfish/v1";
inline constexpr std::string_view kAddAction = "#ComputerSystem.AddResourceBlock";
inline constexpr std::string_view kRemoveAction = "#ComputerSystem.RemoveResourceBlock";

struct ServiceRoot {
  std::string systems;                  // @odata.id of the Systems collection
  std::string compositionService;       // @odata.id of the CompositionService
  std::optional<std::string> sessions;  // Links.Sessions (or SessionService/Sessions)
};
Result<ServiceRoot> parseServiceRoot(std::string_view body);

// CompositionService -> ResourceBlocks collection link.
Result<std::string> parseCompositionService(std::string_view body);

// Any resource collection -> member links.
Result<std::vector<std::string>> parseCollection(std::string_view body, std::string_view what);

struct ResourceBlock {
  std::string odataId;
  std::string id;
  std::string
      compositionState;  // Unused, Composed, ComposedAndAvailable, Composing, Failed, Unavailable
  std::optional<std::string> health;    // Status.Health: OK, Warning, Critical
  std::optional<std::string> state;     // Status.State: Enabled, Absent, UnavailableOffline ...
  std::vector<std::string> processors;  // links
  std::vector<std::string> systems;     // Links.ComputerSystems
  std::optional<std::string> etag;      // "@odata.etag" (services that send no ETag header)
};
Result<ResourceBlock> parseResourceBlock(std::string_view body);

struct Processor {
  std::string processorType;
  std::string uuid;
  std::string model;
  std::optional<std::string> health;
};
Result<Processor> parseProcessor(std::string_view body);

struct ComputerSystem {
  std::string odataId;
  std::string id;
  std::vector<std::string> resourceBlocks;
  std::optional<std::string> addTarget;
  std::optional<std::string> removeTarget;
  std::optional<std::string> etag;  // "@odata.etag"
};
Result<ComputerSystem> parseComputerSystem(std::string_view body);

std::string encodeBlockAction(std::string_view blockOdataId,
                              const std::optional<std::string>& blockEtag,
                              const std::optional<std::string>& systemEtag);
struct BlockActionRequest {
  std::string block;
  std::optional<std::string> blockEtag;
  std::optional<std::string> systemEtag;
};
Result<BlockActionRequest> parseBlockAction(std::string_view body);

std::string encodeLogin(std::string_view user, std::string_view password);
struct LoginRequest {
  std::string user;
  std::string password;
};
Result<LoginRequest> parseLogin(std::string_view body);

// Redfish error body {"error":{"code","message","@Message.ExtendedInfo":[{"Message"}]}} -> a
// one-line description, or an excerpt of the body when it is not one.
std::string describeError(std::string_view body);

}  // namespace kc::fabric::redfish
