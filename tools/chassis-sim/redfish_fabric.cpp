#include "tools/chassis-sim/redfish_fabric.hpp"

#include "libcore/fabric/redfish_fabric_codec.hpp"

namespace kc::chassis_sim::fabric_profile {
namespace {

using nlohmann::json;

std::string etag(char kind, std::uint64_t version) {
  std::string tag = "\"";
  tag.push_back(kind);
  tag.append(std::to_string(version)).push_back('"');
  return tag;
}

json linkRef(const std::string& link) {
  return {{"@odata.id", link}};
}

json status(bool healthy) {
  return {{"State", healthy ? "Enabled" : "UnavailableOffline"},
          {"Health", healthy ? "OK" : "Critical"}};
}

json collection(const std::string& link, const std::string& type, const std::string& name,
                const std::vector<std::string>& members) {
  json m = json::array();
  for (const auto& l : members) {
    m.push_back(linkRef(l));
  }
  return {{"@odata.id", link},
          {"@odata.type", type},
          {"Name", name},
          {"Members", m},
          {"Members@odata.count", members.size()}};
}

std::string hostEndpoint(const Uris& u, const Host& h) {
  return u.endpoints + "/" + h.system;
}
std::string gpuEndpoint(const Uris& u, const Gpu& g) {
  return u.endpoints + "/" + g.gid;
}

json hostEndpointJson(const Uris& u, const Chassis& c, const Host& h) {
  json conns = json::array();
  for (const auto& g : c.gpus) {
    if (g.host == h.port) {
      conns.push_back(linkRef(connectionLink(u, g)));
    }
  }
  return {
      {"@odata.id", hostEndpoint(u, h)},
      {"@odata.type", "#Endpoint.v1_8_2.Endpoint"},
      {"@odata.etag", etag('h', h.version)},
      {"Id", h.system},
      {"Name", "Host " + h.system + " (port " + std::to_string(h.port) + ")"},
      {"EndpointProtocol", "PCIe"},
      {"ConnectedEntities", json::array({{{"EntityType", "RootComplex"},
                                          {"EntityRole", "Initiator"},
                                          {"EntityLink", linkRef(u.systems + "/" + h.system)}}})},
      {"Status", status(true)},
      {"Links", {{"Connections", conns}}}};
}

json gpuEndpointJson(const Uris& u, const Gpu& g) {
  json conns = g.host ? json::array({linkRef(connectionLink(u, g))}) : json::array();
  return {
      {"@odata.id", gpuEndpoint(u, g)},
      {"@odata.type", "#Endpoint.v1_8_2.Endpoint"},
      {"@odata.etag", etag('e', g.version)},
      {"Id", g.gid},
      {"Name", "GPU slot " + g.gid},
      {"EndpointProtocol", "PCIe"},
      {"ConnectedEntities", json::array({{{"EntityType", "Processor"},
                                          {"EntityRole", "Target"},
                                          {"EntityLink", linkRef(u.processors + "/" + g.gid)}}})},
      {"Status", status(g.healthy)},
      {"Links", {{"Connections", conns}}}};
}

json processorJson(const Uris& u, const Gpu& g) {
  // Redfish UUIDs carry no "GPU-" prefix (nvidia-smi's spelling); the driver adds it back.
  const std::string uuid = g.uuid.rfind("GPU-", 0) == 0 ? g.uuid.substr(4) : g.uuid;
  return {{"@odata.id", u.processors + "/" + g.gid},
          {"@odata.type", "#Processor.v1_18_0.Processor"},
          {"Id", g.gid},
          {"Name", "GPU"},
          {"ProcessorType", "GPU"},
          {"Manufacturer", "NVIDIA"},
          {"Model", g.model},
          {"UUID", uuid},
          {"Status", status(g.healthy)},
          {"Links", {{"Endpoints", json::array({linkRef(gpuEndpoint(u, g))})}}}};
}

json fabricJson(const Uris& u) {
  return {{"@odata.id", u.fabric},
          {"@odata.type", "#Fabric.v1_4_0.Fabric"},
          {"Id", kFabricId},
          {"Name", "PCIe fabric of the chassis"},
          {"FabricType", "PCIe"},
          {"Status", status(true)},
          {"Endpoints", linkRef(u.endpoints)},
          {"Connections", linkRef(u.connections)}};
}

// The host or GPU Endpoint a request link names, by link.
const Host* hostAt(const Uris& u, const Chassis& c, const std::string& link) {
  for (const auto& h : c.hosts) {
    if (link == hostEndpoint(u, h)) {
      return &h;
    }
  }
  return nullptr;
}
const Gpu* gpuAt(const Uris& u, const Chassis& c, const std::string& link) {
  for (const auto& g : c.gpus) {
    if (link == gpuEndpoint(u, g)) {
      return &g;
    }
  }
  return nullptr;
}

}  // namespace

Uris urisFor(const std::string& prefix) {
  Uris u;
  u.root = prefix + "/redfish/v1";
  u.systems = u.root + "/Systems";
  u.fabrics = u.root + "/Fabrics";
  u.fabric = u.fabrics + "/" + kFabricId;
  u.endpoints = u.fabric + "/Endpoints";
  u.connections = u.fabric + "/Connections";
  u.processors = u.root + "/Chassis/GPUs/Processors";
  return u;
}

json endpointsCollection(const Uris& u, const Chassis& c) {
  std::vector<std::string> members;
  for (const auto& h : c.hosts) {
    members.push_back(hostEndpoint(u, h));
  }
  for (const auto& g : c.gpus) {
    members.push_back(gpuEndpoint(u, g));
  }
  return collection(u.endpoints, "#EndpointCollection.EndpointCollection", "Endpoints", members);
}

std::string connectionLink(const Uris& u, const Gpu& g) {
  return u.connections + "/conn-" + g.gid;
}

json connectionJson(const Uris& u, const Chassis& c, const Gpu& g) {
  const Host* h = g.host ? c.hostByPort(*g.host) : nullptr;
  json initiators = h ? json::array({linkRef(hostEndpoint(u, *h))}) : json::array();
  return {{"@odata.id", connectionLink(u, g)},
          {"@odata.type", "#Connection.v1_4_0.Connection"},
          {"Id", "conn-" + g.gid},
          {"Name", "GPU " + g.gid + " to " + (h ? h->system : std::string("-"))},
          {"Status", status(g.healthy)},
          {"Links",
           {{"InitiatorEndpoints", initiators},
            {"TargetEndpoints", json::array({linkRef(gpuEndpoint(u, g))})}}}};
}

const Gpu* connectionGpu(const Uris& u, const Chassis& c, const std::string& path) {
  for (const auto& g : c.gpus) {
    if (g.host && path == connectionLink(u, g)) {
      return &g;
    }
  }
  return nullptr;
}

std::optional<json> resourceAt(const Uris& u, const Chassis& c, const std::string& path) {
  if (path == u.fabrics) {
    return collection(u.fabrics, "#FabricCollection.FabricCollection", "Fabrics", {u.fabric});
  }
  if (path == u.fabric) {
    return fabricJson(u);
  }
  std::vector<std::string> conns;
  std::vector<std::string> systems;
  for (const auto& h : c.hosts) {
    systems.push_back(u.systems + "/" + h.system);
    if (path == hostEndpoint(u, h)) {
      return hostEndpointJson(u, c, h);
    }
    if (path == systems.back()) {
      return json{{"@odata.id", path},
                  {"@odata.type", "#ComputerSystem.v1_20_0.ComputerSystem"},
                  {"Id", h.system},
                  {"Name", "Host on port " + std::to_string(h.port)},
                  {"SystemType", "Physical"}};
    }
  }
  for (const auto& g : c.gpus) {
    if (path == gpuEndpoint(u, g)) {
      return gpuEndpointJson(u, g);
    }
    if (path == u.processors + "/" + g.gid) {
      return processorJson(u, g);
    }
    if (g.host) {
      conns.push_back(connectionLink(u, g));
      if (path == conns.back()) {
        return connectionJson(u, c, g);
      }
    }
  }
  if (path == u.connections) {
    return collection(u.connections, "#ConnectionCollection.ConnectionCollection", "Connections",
                      conns);
  }
  if (path == u.systems) {
    return collection(u.systems, "#ComputerSystemCollection.ComputerSystemCollection", "Systems",
                      systems);
  }
  return std::nullopt;
}

Result<Connect> resolveConnect(const Uris& u, const Chassis& c, const std::string& body) {
  auto req = fabric::redfish::parseConnectionRequest(body);
  if (!req) {
    return req.error();
  }
  if (req->initiators.size() != 1 || req->targets.size() != 1) {
    return makeError(errc::kInvalid,
                     "a Connection here links one InitiatorEndpoint (a host) to one "
                     "TargetEndpoint (a GPU)");
  }
  const Host* h = hostAt(u, c, req->initiators.front());
  const Gpu* g = gpuAt(u, c, req->targets.front());
  if (!h || !g) {
    return makeError(
        errc::kInvalid,
        std::string("Links.") +
            (!h ? "InitiatorEndpoints: " + req->initiators.front() + " is not a host Endpoint"
                : "TargetEndpoints: " + req->targets.front() + " is not a GPU Endpoint"));
  }
  if (g->host) {
    return makeError(errc::kConflict, "GPU Endpoint " + g->gid + " is already connected");
  }
  return Connect{g->gid, h->port};
}

}  // namespace kc::chassis_sim::fabric_profile
