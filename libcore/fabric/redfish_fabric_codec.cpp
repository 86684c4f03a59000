#include "libcore/fabric/redfish_fabric_codec.hpp"

#include <nlohmann/json.hpp>

#include "libcore/base/json_guard.hpp"
#include "libcore/fabric/redfish_codec.hpp"

namespace kc::fabric::redfish {
namespace {

using nlohmann::json;

// An optional link property of `obj` (absent or null: nullopt).
Result<std::optional<std::string>> optionalLink(const json& obj, const char* key,
                                                const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return std::optional<std::string>{};
  }
  auto link = linkOf(*it, where + "." + key);
  if (!link) {
    return link.error();
  }
  return std::optional<std::string>{std::move(*link)};
}

Result<std::optional<std::string>> optionalString(const json& obj, const char* key,
                                                  const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return std::optional<std::string>{};
  }
  if (!it->is_string()) {
    return protocolError(where + ": \"" + key + "\" is " + it->type_name() + ", expected a string");
  }
  return std::optional<std::string>{it->get<std::string>()};
}

Result<std::vector<std::string>> linkArray(const json& obj, const char* key,
                                           const std::string& where) {
  std::vector<std::string> out;
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return out;
  }
  if (!it->is_array()) {
    return protocolError(where + ": \"" + key + "\" is " + it->type_name() + ", expected an array");
  }
  for (std::size_t i = 0; i < it->size(); ++i) {
    auto link = linkOf((*it)[i], where + "." + key + "[" + std::to_string(i) + "]");
    if (!link) {
      return link.error();
    }
    out.push_back(std::move(*link));
  }
  return out;
}

// "@odata.id" and "Id" (1..128 characters) of a resource.
Result<std::pair<std::string, std::string>> identityOf(const json& doc, const std::string& what) {
  auto odataId = optionalString(doc, "@odata.id", what);
  auto id = optionalString(doc, "Id", what);
  if (!odataId || !id) {
    return !odataId ? odataId.error() : id.error();
  }
  if (!*odataId || !*id) {
    return protocolError(what + " needs a string \"@odata.id\" and \"Id\"");
  }
  if ((*id)->empty() || (*id)->size() > 128) {
    return protocolError(what + " Id must have 1..128 characters");
  }
  return std::pair{**odataId, **id};
}

// The "Links" object of a resource (empty when absent).
Result<json> linksOf(const json& doc, const std::string& where) {
  const auto it = doc.find("Links");
  if (it == doc.end() || it->is_null()) {
    return json::object();
  }
  if (!it->is_object()) {
    return protocolError(where + ": \"Links\" is " + it->type_name() + ", expected an object");
  }
  return *it;
}

Result<std::vector<ConnectedEntity>> entitiesOf(const json& doc, const std::string& where) {
  std::vector<ConnectedEntity> out;
  const auto it = doc.find("ConnectedEntities");
  if (it == doc.end() || it->is_null()) {
    return out;
  }
  if (!it->is_array()) {
    return protocolError(where + ": \"ConnectedEntities\" is " + it->type_name() +
                         ", expected an array");
  }
  for (std::size_t i = 0; i < it->size(); ++i) {
    const std::string at = where + ".ConnectedEntities[" + std::to_string(i) + "]";
    const json& e = (*it)[i];
    if (!e.is_object()) {
      return protocolError(at + " is not an object");
    }
    auto type = optionalString(e, "EntityType", at);
    auto role = optionalString(e, "EntityRole", at);
    auto link = optionalLink(e, "EntityLink", at);
    if (!type || !role || !link) {
      return !type ? type.error() : !role ? role.error() : link.error();
    }
    out.push_back(ConnectedEntity{type->value_or(""), role->value_or(""), *link});
  }
  return out;
}

}  // namespace

Result<FabricServiceRoot> parseFabricServiceRoot(std::string_view body) {
  auto doc = parseObject(body, "Redfish service root");
  if (!doc) {
    return doc.error();
  }
  FabricServiceRoot root;
  auto fabrics = optionalLink(*doc, "Fabrics", "ServiceRoot");
  if (!fabrics) {
    return fabrics.error();
  }
  if (!*fabrics) {
    return makeError(errc::kUnsupported,
                     "Redfish service root has no Fabrics link: the service manages no fabric");
  }
  root.fabrics = **fabrics;
  auto links = linksOf(*doc, "ServiceRoot");
  if (!links) {
    return links.error();
  }
  auto sessions = optionalLink(*links, "Sessions", "ServiceRoot.Links");
  if (!sessions) {
    return sessions.error();
  }
  root.sessions = *sessions;
  return root;
}

Result<FabricResource> parseFabric(std::string_view body) {
  auto doc = parseObject(body, "Redfish Fabric");
  if (!doc) {
    return doc.error();
  }
  auto ids = identityOf(*doc, "Fabric");
  if (!ids) {
    return ids.error();
  }
  FabricResource out;
  out.odataId = ids->first;
  out.id = ids->second;
  const std::string where = "Fabric " + excerpt(out.id, 40);
  auto type = optionalString(*doc, "FabricType", where);
  auto endpoints = optionalLink(*doc, "Endpoints", where);
  auto connections = optionalLink(*doc, "Connections", where);
  if (!type || !endpoints || !connections) {
    return !type ? type.error() : !endpoints ? endpoints.error() : connections.error();
  }
  out.fabricType = type->value_or("");
  out.endpoints = *endpoints;
  out.connections = *connections;
  return out;
}

Result<Endpoint> parseEndpoint(std::string_view body) {
  auto doc = parseObject(body, "Redfish Endpoint");
  if (!doc) {
    return doc.error();
  }
  auto ids = identityOf(*doc, "Endpoint");
  if (!ids) {
    return ids.error();
  }
  Endpoint ep;
  ep.odataId = ids->first;
  ep.id = ids->second;
  const std::string where = "Endpoint " + excerpt(ep.id, 40);
  auto entities = entitiesOf(*doc, where);
  auto etag = optionalString(*doc, "@odata.etag", where);
  auto links = linksOf(*doc, where);
  if (!entities || !etag || !links) {
    return !entities ? entities.error() : !etag ? etag.error() : links.error();
  }
  ep.entities = std::move(*entities);
  ep.etag = *etag;
  auto connections = linkArray(*links, "Connections", where + ".Links");
  if (!connections) {
    return connections.error();
  }
  ep.connections = std::move(*connections);
  if (const auto st = doc->find("Status"); st != doc->end() && !st->is_null()) {
    if (!st->is_object()) {
      return protocolError(where + ": \"Status\" is " + st->type_name() + ", expected an object");
    }
    auto health = optionalString(*st, "Health", where + ".Status");
    auto state = optionalString(*st, "State", where + ".Status");
    if (!health || !state) {
      return !health ? health.error() : state.error();
    }
    ep.health = *health;
    ep.state = *state;
  }
  return ep;
}

bool Endpoint::isInitiator() const {
  for (const auto& e : entities) {
    if (e.entityRole == "Initiator" || e.entityRole == "Both") {
      return true;
    }
  }
  return false;
}

std::vector<std::string> Endpoint::targetProcessors() const {
  std::vector<std::string> out;
  for (const auto& e : entities) {
    if (e.entityType == "Processor" && e.entityLink &&
        (e.entityRole == "Target" || e.entityRole == "Both")) {
      out.push_back(*e.entityLink);
    }
  }
  return out;
}

Result<Connection> parseConnection(std::string_view body) {
  auto doc = parseObject(body, "Redfish Connection");
  if (!doc) {
    return doc.error();
  }
  auto ids = identityOf(*doc, "Connection");
  if (!ids) {
    return ids.error();
  }
  Connection c;
  c.odataId = ids->first;
  c.id = ids->second;
  const std::string where = "Connection " + excerpt(c.id, 40);
  auto links = linksOf(*doc, where);
  if (!links) {
    return links.error();
  }
  auto initiators = linkArray(*links, "InitiatorEndpoints", where + ".Links");
  auto targets = linkArray(*links, "TargetEndpoints", where + ".Links");
  if (!initiators || !targets) {
    return !initiators ? initiators.error() : targets.error();
  }
  c.initiators = std::move(*initiators);
  c.targets = std::move(*targets);
  return c;
}

std::string encodeConnectionRequest(std::string_view name, std::string_view initiator,
                                    std::string_view target) {
  nlohmann::ordered_json body;
  body["Name"] = std::string(name);
  body["Links"]["InitiatorEndpoints"] = {{{"@odata.id", std::string(initiator)}}};
  body["Links"]["TargetEndpoints"] = {{{"@odata.id", std::string(target)}}};
  return body.dump();
}

Result<ConnectionRequest> parseConnectionRequest(std::string_view body) {
  auto doc = parseJsonGuarded(body, "Connection request", 64 * 1024);
  if (!doc || !doc->is_object()) {
    return makeError(errc::kInvalid, "Connection request must be a JSON object");
  }
  auto links = linksOf(*doc, "Connection request");
  if (!links) {
    return makeError(errc::kInvalid, links.error().message);
  }
  auto initiators = linkArray(*links, "InitiatorEndpoints", "Connection request.Links");
  auto targets = linkArray(*links, "TargetEndpoints", "Connection request.Links");
  if (!initiators || !targets) {
    return makeError(errc::kInvalid, (!initiators ? initiators.error() : targets.error()).message);
  }
  return ConnectionRequest{std::move(*initiators), std::move(*targets)};
}

}  // namespace kc::fabric::redfish
