// RedfishDriver, style "fabric": DSP0268 Fabrics (Endpoints and Connections), as PCIe and CXL
// fabric managers expose them. Reading the Fabric into a FabricView, the inventory, and moves:
// attach = POST of a Connection (host initiator Endpoint -> GPU target Endpoint) to the
// Fabric's Connections collection, detach = DELETE of the Connections that target the GPU.
// Every move is verified by re-reading (verifiedMove), as in the composition style.

#include <algorithm>

#include "libcore/fabric/http_endpoint.hpp"
#include "libcore/fabric/redfish_driver.hpp"
#include "libcore/fabric/redfish_driver_internal.hpp"
#include "libcore/fabric/redfish_fabric_codec.hpp"

namespace kc::fabric {
namespace {

bool healthy(const std::optional<std::string>& health) {
  return !health || *health == "OK";
}

// The pool's view of a GPU target Endpoint and its GPU Processor.
GpuInfo fabricGpuInfo(const std::string& chassis, const redfish::Endpoint& ep,
                      const redfish::Processor& proc) {
  GpuInfo gpu;
  gpu.chassis = chassis;
  gpu.localId = ep.id;
  gpu.id = makeGpuId(chassis, ep.id);
  // Redfish UUIDs are bare; NVIDIA_VISIBLE_DEVICES and nvidia-smi use "GPU-<uuid>".
  gpu.uuid = proc.uuid.empty() || proc.uuid.rfind("GPU-", 0) == 0 ? proc.uuid : "GPU-" + proc.uuid;
  gpu.model = proc.model;
  const bool stateBad = ep.state && (*ep.state == "Absent" || *ep.state == "UnavailableOffline");
  if (!healthy(ep.health) || !healthy(proc.health) || stateBad) {
    gpu.health = GpuHealth::kUnhealthy;
    gpu.healthDetail = "Endpoint health " + ep.health.value_or("-") + ", state " +
                       ep.state.value_or("-") + ", GPU health " + proc.health.value_or("-");
  } else if (gpu.uuid.empty()) {
    // Without a UUID no node can tell this GPU from another: never handed to a pod.
    gpu.health = GpuHealth::kUnhealthy;
    gpu.healthDetail = "the GPU Processor reports no UUID (no identity a node can check)";
  }
  return gpu;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) {
    out += (out.empty() ? "" : ", ") + i;
  }
  return out.empty() ? "none" : out;
}

}  // namespace

Result<Ok> RedfishDriver::discoverFabric() {
  if (fabric_) {
    return Ok{};
  }
  const std::string rootPath = endpoint_->basePath + std::string(redfish::kServiceRootPath);
  auto rootReply = getOk(rootPath, /*authenticated=*/false);  // the service root is public
  if (!rootReply) {
    return rootReply.error();
  }
  auto root = redfish::parseFabricServiceRoot(rootReply->body);
  if (!root) {
    return root.error();
  }
  // The session login reads Links.Sessions from root_; this style uses nothing else of it.
  root_ = redfish::ServiceRoot{{}, {}, root->sessions};
  expand_ = redfish::parseExpandSupport(rootReply->body);
  auto fabrics = readCollection(root->fabrics, "Redfish Fabrics collection");
  if (!fabrics) {
    root_.reset();
    return fabrics.error();
  }
  auto chosen = chooseFabric(fabrics->members);
  if (!chosen) {
    root_.reset();
    return chosen.error();
  }
  fabric_ = std::move(*chosen);
  return Ok{};
}

// The configured Fabric (by Id), or the only one when none is configured.
Result<RedfishDriver::FabricLinks> RedfishDriver::chooseFabric(
    const std::vector<std::string>& links) {
  std::vector<redfish::FabricResource> found;
  std::vector<std::string> ids;
  for (std::size_t i = 0; i < links.size() && i < 64; ++i) {
    auto reply = getOk(links[i]);
    if (!reply) {
      return reply.error();
    }
    auto f = redfish::parseFabric(reply->body);
    if (!f) {
      return f.error();
    }
    ids.push_back(f->id);
    if (options_.fabric.empty() || f->id == options_.fabric) {
      found.push_back(std::move(*f));
    }
  }
  const std::string who = "redfish chassis " + options_.chassis;
  if (found.empty()) {
    return makeError(errc::kNotFound,
                     who + " has no Fabric" +
                         (options_.fabric.empty() ? "" : " with Id \"" + options_.fabric + "\"") +
                         " (its Fabrics: " + joined(ids) + ")");
  }
  if (found.size() > 1) {
    return makeError(errc::kInvalid, who + " has several Fabrics (" + joined(ids) +
                                         "): configure which one to use (fabric)");
  }
  const auto& f = found.front();
  if (!f.endpoints) {
    return makeError(errc::kUnsupported,
                     who + ": Fabric " + f.id + " lists no Endpoints collection");
  }
  return FabricLinks{f.id, *f.endpoints, f.connections};
}

Result<RedfishDriver::FabricView> RedfishDriver::readFabricView() {
  auto view = readFabricViewOnce();
  if (!view && view.error().code == errc::kNotFound) {
    // A link we cached may have moved (service restarted, fabric re-created): discover again.
    fabric_.reset();
    root_.reset();
    view = readFabricViewOnce();
  }
  return view;
}

// Endpoints and Connections at once (expanded where the service can), then the members that
// did not arrive inline and the GPU Endpoints' Processors in parallel; the View is built in
// collection order from those replies.
Result<RedfishDriver::FabricView> RedfishDriver::readFabricViewOnce() {
  if (auto found = discoverFabric(); !found) {
    return found.error();
  }
  const FabricLinks links = *fabric_;
  Result<CollectionRead> endpoints = makeError(errc::kInternal, "not read");
  Result<CollectionRead> conns = CollectionRead{};
  detail::runBounded(links.connections ? 2 : 1, options_.readParallelism, [&](std::size_t i) {
    if (i == 0) {
      endpoints = readCollection(links.endpoints, "Redfish Endpoints collection", 1);
    } else {
      conns = readCollection(*links.connections, "Redfish Connections collection", 1);
    }
  });
  if (!endpoints) {
    return endpoints.error();
  }
  if (!conns) {
    return conns.error();
  }
  Fetched fetched;
  for (auto* read : {&*endpoints, &*conns}) {
    for (auto& [link, text] : read->embedded) {
      fetched.emplace(link, Reply{200, std::move(text), std::nullopt, true});
    }
  }
  std::vector<std::string> members = endpoints->members;
  members.insert(members.end(), conns->members.begin(), conns->members.end());
  prefetch(members, fetched);
  std::vector<std::string> processors;
  for (const auto& link : endpoints->members) {
    const auto it = fetched.find(link);
    if (it == fetched.end() || !it->second) {
      continue;
    }
    auto ep = redfish::parseEndpoint(it->second->body);
    if (ep && !ep->isInitiator()) {
      const auto procs = ep->targetProcessors();
      processors.insert(processors.end(), procs.begin(), procs.end());
    }
  }
  prefetch(processors, fetched);

  FabricView view;
  for (const auto& link : endpoints->members) {
    if (auto r = loadEndpoint(view, link, fetched); !r) {
      return r.error();
    }
  }
  if (auto r = loadConnections(view, conns->members, fetched); !r) {
    return r.error();
  }
  return view;
}

// A host (initiator) or GPU (target with a GPU Processor) Endpoint into the view; others are
// not ours. A malformed Endpoint or Processor is left out with the reason.
Result<Ok> RedfishDriver::loadEndpoint(FabricView& view, const std::string& link,
                                       const Fetched& fetched) {
  auto reply = fetch(link, fetched);
  if (!reply) {
    return reply.error();
  }
  auto ep = redfish::parseEndpoint(reply->body);
  if (!ep) {
    view.skipped.push_back("Endpoint " + link + ": " + ep.error().message);
    return Ok{};
  }
  if (view.hosts.count(ep->id) || view.gpus.count(ep->id)) {
    return makeError(errc::kProtocol,
                     "two Endpoints of Fabric " + fabric_->id + " share the Id " + ep->id);
  }
  if (ep->isInitiator()) {
    view.hosts[ep->id] = ep->odataId;
    view.linkToId[link] = ep->id;
    view.linkToId[ep->odataId] = ep->id;
    return Ok{};
  }
  std::optional<redfish::Processor> gpu;
  for (const auto& procLink : ep->targetProcessors()) {
    auto procReply = fetch(procLink, fetched);
    if (!procReply) {
      return procReply.error();  // the service failed, not the Endpoint
    }
    auto proc = redfish::parseProcessor(procReply->body);
    if (!proc) {
      view.skipped.push_back("Endpoint " + link + ": " + proc.error().message);
      return Ok{};
    }
    if (proc->processorType == "GPU") {
      gpu = std::move(*proc);
      break;
    }
  }
  if (!gpu) {
    return Ok{};  // memory, FPGA, switch or storage Endpoints are not ours
  }
  FabricGpu entry{ep->odataId, fabricGpuInfo(options_.chassis, *ep, *gpu), {}, ep->connections};
  view.linkToId[link] = ep->id;
  view.linkToId[ep->odataId] = ep->id;
  view.gpus.emplace(ep->id, std::move(entry));
  return Ok{};
}

// The Connections the collection lists and those a GPU Endpoint names (a service may list
// fewer: DMTF's public-cxl names Connection 14 from its Endpoints only), then who holds which
// GPU. A malformed Connection fails the read: the attachment it hides cannot be guessed.
Result<Ok> RedfishDriver::loadConnections(FabricView& view, const std::vector<std::string>& links,
                                          Fetched& fetched) {
  std::vector<std::string> all = links;
  for (const auto& [id, gpu] : view.gpus) {
    for (const auto& c : gpu.named) {
      if (std::find(all.begin(), all.end(), c) == all.end()) {
        all.push_back(c);
      }
    }
  }
  prefetch(all, fetched);
  for (std::size_t i = 0; i < all.size(); ++i) {
    auto reply = fetch(all[i], fetched);
    if (!reply && i >= links.size() && reply.error().code == errc::kNotFound) {
      continue;  // a stale link in an Endpoint; the collection is what counts
    }
    if (!reply) {
      return reply.error();
    }
    auto conn = redfish::parseConnection(reply->body);
    if (!conn) {
      return makeError(errc::kProtocol, "Connection " + all[i] + ": " + conn.error().message +
                                            " (which GPU it attaches cannot be known)");
    }
    view.conns[all[i]] = std::move(*conn);
  }
  for (const auto& [link, conn] : view.conns) {
    std::vector<std::string> hostIds;
    for (const auto& i : conn.initiators) {
      const auto it = view.linkToId.find(i);
      if (it != view.linkToId.end() && view.hosts.count(it->second)) {
        hostIds.push_back(it->second);
      }
    }
    for (const auto& t : conn.targets) {
      const auto it = view.linkToId.find(t);
      if (it == view.linkToId.end() || !view.gpus.count(it->second)) {
        continue;
      }
      FabricGpu& gpu = view.gpus.at(it->second);
      gpu.connections.push_back(link);
      if (hostIds.size() != 1) {
        gpu.gpu.health = GpuHealth::kUnhealthy;
        gpu.gpu.healthDetail = "Connection " + conn.id + " links it to " +
                               std::to_string(hostIds.size()) +
                               " host Endpoints (one host per GPU is supported)";
        continue;
      }
      if (gpu.gpu.hostPort && *gpu.gpu.hostPort != hostIds.front()) {
        return makeError(errc::kProtocol, "GPU Endpoint " + it->second + " is connected to " +
                                              *gpu.gpu.hostPort + " and " + hostIds.front() +
                                              "; shared GPUs are not supported");
      }
      gpu.gpu.hostPort = hostIds.front();
    }
  }
  return Ok{};
}

Result<Inventory> RedfishDriver::fabricInventory() {
  auto view = readFabricView();
  if (!view) {
    return view.error();
  }
  Inventory inv;
  inv.skipped = view->skipped;
  for (const auto& [id, gpu] : view->gpus) {
    inv.gpus.push_back(gpu.gpu);
  }
  for (const auto& [id, link] : view->hosts) {
    inv.hosts.push_back(id);
  }
  return inv;
}

// attach (host set) or detach, verified by re-reading the Fabric.
Result<MoveReport> RedfishDriver::fabricMove(const std::string& gpuId,
                                             const std::optional<std::string>& host) {
  auto localId = localIdOf(gpuId);
  if (!localId) {
    return localId.error();
  }
  const std::string verb = host ? "attach" : "detach";
  auto view = readFabricView();
  if (!view) {
    return view.error();
  }
  const auto it = view->gpus.find(*localId);
  if (it == view->gpus.end()) {
    return makeError(errc::kNotFound, "chassis " + options_.chassis + " has no GPU Endpoint " +
                                          *localId + " in Fabric " + fabric_->id);
  }
  const GpuInfo& gpu = it->second.gpu;
  MoveReport report{gpuId, gpu.hostPort, host, false, 0, {}};
  if (host && !view->hosts.count(*host)) {
    return makeError(errc::kNotFound, "chassis " + options_.chassis +
                                          " has no host (initiator) Endpoint " + *host +
                                          " in Fabric " + fabric_->id);
  }
  if (host ? gpu.hostPort == *host : !gpu.hostPort) {
    return report;  // already where the move would put it: nothing sent
  }
  if (host && gpu.hostPort) {
    return makeError(errc::kConflict,
                     "GPU " + gpuId + " is connected to " + *gpu.hostPort + "; detach it first");
  }
  if (host && gpu.health != GpuHealth::kOk) {
    return makeError(errc::kUnhealthy,
                     "GPU " + gpuId + " is unhealthy (" + gpu.healthDetail + "); not attaching");
  }
  MoveSteps steps;
  steps.what = verb + " " + gpuId + (host ? " to " + *host : std::string());
  steps.send = [&]() { return sendFabricMove(*view, *localId, host, verb); };
  steps.observe = [&]() { return observeFabricMove(*view, gpuId, *localId, host, verb); };
  return verifiedMove(std::move(report), options_.policy, options_.sleeper, steps);
}

// Sends the move once, planned on the latest view: a Connection POST, or the DELETE of every
// Connection that targets the GPU (each only when it connects nothing else).
Result<MoveClaim> RedfishDriver::sendFabricMove(const FabricView& view, const std::string& localId,
                                                const std::optional<std::string>& host,
                                                const std::string& verb) {
  const std::string who = "redfish chassis " + options_.chassis;
  const auto it = view.gpus.find(localId);
  if (it == view.gpus.end()) {
    return makeError(errc::kNotFound, who + ": GPU Endpoint " + localId +
                                          " disappeared from the Fabric during the move");
  }
  const FabricGpu& gpu = it->second;
  std::vector<std::pair<std::string, std::string>> requests;  // method, target
  std::string body;
  if (host) {
    if (!fabric_->connections) {
      return makeError(errc::kUnsupported, who + " cannot attach " + localId + ": Fabric " +
                                               fabric_->id +
                                               " lists no Connections collection to POST to");
    }
    requests.emplace_back("POST", *fabric_->connections);
    body = redfish::encodeConnectionRequest("kubecomp " + *host + " + " + localId,
                                            view.hosts.at(*host), gpu.link);
  } else {
    for (const auto& link : gpu.connections) {
      std::vector<std::string> others;
      for (const auto& t : view.conns.at(link).targets) {
        const auto id = view.linkToId.find(t);
        if (id == view.linkToId.end() || id->second != localId) {
          others.push_back(t);
        }
      }
      if (!others.empty()) {
        return makeError(errc::kUnsupported, who + " cannot detach " + localId +
                                                 ": deleting Connection " + link +
                                                 " would also detach " + joined(others));
      }
      requests.emplace_back("DELETE", link);
    }
  }
  Result<MoveClaim> claim = makeError(errc::kInternal, "nothing sent");
  for (const auto& [method, target] : requests) {
    auto reply = call(method, target, body, options_.policy.moveTimeout);
    if (!reply && reply.error().code == errc::kUnauthorized) {
      return reply.error();
    }
    if (!reply) {
      MoveClaim failed;
      failed.error = reply.error();
      failed.note = "request failed (" + reply.error().message + ") but the " + verb + " happened";
      return failed;
    }
    claim = detail::claimOf(options_.chassis, verb, method, target, reply->status, reply->body);
    if (!claim || claim->kind != MoveClaim::Kind::kDone) {
      return claim;
    }
  }
  return claim;
}

// Re-reads the Fabric (kept in `view` for the next send) and says whether the move shows.
Result<Observed> RedfishDriver::observeFabricMove(FabricView& view, const std::string& gpuId,
                                                  const std::string& localId,
                                                  const std::optional<std::string>& host,
                                                  const std::string& verb) {
  auto after = readFabricView();
  if (!after) {
    return makeError(after.error().code,
                     verb + " " + gpuId + ": could not verify: " + after.error().message);
  }
  view = std::move(*after);
  const auto now = view.gpus.find(localId);
  if (now == view.gpus.end()) {
    return makeError(errc::kUnhealthy,
                     "GPU " + gpuId + " disappeared from the Fabric's Endpoints during " + verb);
  }
  const GpuInfo& gpu = now->second.gpu;
  if (host ? gpu.hostPort == *host : !gpu.hostPort) {
    return Observed::kReached;
  }
  if (gpu.health != GpuHealth::kOk) {
    return makeError(errc::kUnhealthy, "GPU " + gpuId + " became unhealthy during " + verb + " (" +
                                           gpu.healthDetail + ")");
  }
  if (host && gpu.hostPort) {
    return makeError(errc::kConflict, "GPU " + gpuId + " is now connected to " + *gpu.hostPort +
                                          ", not " + *host + " (moved by someone else?)");
  }
  return Observed::kNotYet;
}

}  // namespace kc::fabric
