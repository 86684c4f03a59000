#pragma once
// Wire shapes of DMTF Redfish composition used by the redfish driver. Only what the driver
// needs is parsed, strictly: wrong types and missing required properties are errors.
// Links are followed through "@odata.id"; nothing assumes a URI layout.
//
//  ServiceRoot          Systems, CompositionService, SessionService, Links.Sessions
//  CompositionService   ResourceBlocks, ResourceZones, ServiceEnabled, AllowOverprovisioning,
//                       AllowZoneAffinity
//  collection           Members[] of {"@odata.id"} (DSP0266), Members@odata.nextLink, and
//                       @Redfish.CollectionCapabilities (UseCase "ComputerSystemComposition");
//                       tolerated deviations: see parseCollectionPage
//  ResourceBlock        Id, ResourceBlockType[], CompositionStatus (CompositionState,
//                       SharingEnabled, MaxCompositions, NumberOfCompositions), Status.Health,
//                       Processors[], Links.ComputerSystems[]
//  Processor            ProcessorType ("GPU"), UUID, Model, Status.Health
//  ComputerSystem       Id, Links.ResourceBlocks[],
//  Actions."#ComputerSystem.AddResourceBlock".target,
//                       Actions."#ComputerSystem.RemoveResourceBlock".target, and each
//                       action's "ResourceBlock@Redfish.AllowableValues"
//  action body {"ResourceBlock":{"@odata.id":...},"ResourceBlockETag":...,"ComputerSystemETag":...}
//  specific composition POST <Systems> {"Name":...,"Links":{"ResourceBlocks":[{"@odata.id"}...]}},
//                       DELETE <composed system> to decompose (DSP0266 "Composition requests")
//  session login        POST <Sessions> {"UserName","Password"} -> 201 + X-Auth-Token

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::fabric::redfish {

// JSON helpers of both Redfish codecs (the composition style here, the Fabrics style in
// redfish_fabric_codec.cpp): a `protocol` error; a body that must be one JSON object (size and
// depth guarded); an {"@odata.id": "/..."} link, an absolute path without query or fragment.
Error protocolError(std::string message);
Result<nlohmann::json> parseObject(std::string_view body, std::string_view what);
Result<std::string> linkOf(const nlohmann::json& value, std::string_view where);

// DSP0266 names the service root "/redfish/v1/" (with the slash); some services redirect the
// slash-less form, others answer both.
inline constexpr std::string_view kServiceRootPath = "/redfish/v1/";
inline constexpr std::string_view kCompositionUseCase = "ComputerSystemComposition";
inline constexpr std::string_view kAddAction = "#ComputerSystem.AddResourceBlock";
inline constexpr std::string_view kRemoveAction = "#ComputerSystem.RemoveResourceBlock";

struct ServiceRoot {
  std::string systems;                  // @odata.id of the Systems collection
  std::string compositionService;       // @odata.id of the CompositionService
  std::optional<std::string> sessions;  // Links.Sessions (or SessionService/Sessions)
};
Result<ServiceRoot> parseServiceRoot(std::string_view body);

struct CompositionService {
  std::string resourceBlocks;                // @odata.id of the ResourceBlocks collection
  std::optional<std::string> resourceZones;  // @odata.id of the ResourceZones collection
  std::optional<bool> serviceEnabled;
  std::optional<bool> allowOverprovisioning;  // a composition may get more than was asked
  std::optional<bool> allowZoneAffinity;      // a request may name the zone to compose from
};
Result<CompositionService> parseCompositionService(std::string_view body);

struct Collection {
  std::vector<std::string> members;
  std::optional<std::string> nextLink;  // Members@odata.nextLink: more members on another page
  // @Redfish.CollectionCapabilities lists UseCase "ComputerSystemComposition" (on a Systems
  // collection or a ResourceZone): a POST of Links.ResourceBlocks to `compositionTarget`
  // composes a system.
  std::optional<std::string> compositionTarget;
  std::string shape;  // "Members", "Links.Members", ... which form was found, for people
};
// Any resource collection (or a ResourceZone, for its capabilities). The DSP0266 form is read
// first: "Members": [{"@odata.id": ...}]. Deviations seen in public services are accepted:
// "Links": {"Members": [...]} (older schema drafts; the DMTF Redfish Interface Emulator),
// member entries that are bare URI strings, and a missing "Members" when
// "Members@odata.count" is 0. Anything else is a "protocol" error saying what was missing.
Result<Collection> parseCollectionPage(std::string_view body, std::string_view what);
// Where a @Redfish.CollectionCapabilities "ComputerSystemComposition" entry of any resource
// (a ResourceZone, a collection) says compositions are POSTed; nullopt when it has none.
Result<std::optional<std::string>> parseCompositionTarget(std::string_view body,
                                                          std::string_view what);
// Member links only (the first page).
Result<std::vector<std::string>> parseCollection(std::string_view body, std::string_view what);

struct ResourceBlock {
  std::string odataId;
  std::string id;
  std::vector<std::string> types;  // ResourceBlockType: "Compute", "Processor", ...
  std::string
      compositionState;  // Unused, Composed, ComposedAndAvailable, Composing, Failed, Unavailable
  std::optional<std::string> health;    // Status.Health: OK, Warning, Critical
  std::optional<std::string> state;     // Status.State: Enabled, Absent, UnavailableOffline ...
  std::vector<std::string> processors;  // links
  std::vector<std::string> systems;     // Links.ComputerSystems
  std::optional<std::string> etag;      // "@odata.etag" (services that send no ETag header)
  std::optional<bool> sharingEnabled;   // CompositionStatus.SharingEnabled
  std::optional<std::int64_t> maxCompositions;
  std::optional<std::int64_t> numberOfCompositions;

  bool isCompute() const;  // ResourceBlockType lists "Compute" or "ComputerSystem"
  // Can join one more composition (shared compute block of a host)?
  bool canJoinAnotherComposition() const;
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
  // "ResourceBlock@Redfish.AllowableValues" of each action, when the service lists them: the
  // only blocks that action accepts.
  std::optional<std::vector<std::string>> addAllowable;
  std::optional<std::vector<std::string>> removeAllowable;
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

// Specific composition request body: {"Id": id, "Name": name, "Links": {"ResourceBlocks":
// [...]}}. DSP0266 lets the service assign the Id, but the DMTF Redfish Interface Emulator
// answers 400 "Missing attribute: Id" without one, and services that assign their own ignore
// it: the driver always sends one (composeRequestId).
std::string encodeComposeRequest(std::string_view id, std::string_view name,
                                 const std::vector<std::string>& blocks);
struct ComposeRequest {
  std::string id;  // "" when the body has none
  std::vector<std::string> blocks;
};
Result<ComposeRequest> parseComposeRequest(std::string_view body);
// The Id the driver asks for a composed system of `host` and GPU block `block`: "kubecomp-"
// then both, every character outside [A-Za-z0-9._-] replaced by '-' (an Id is a URI segment).
std::string composeRequestId(std::string_view host, std::string_view block);

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
