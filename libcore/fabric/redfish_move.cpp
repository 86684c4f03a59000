// RedfishDriver: attach and detach. How the service can do a move (its actions, or specific
// composition; see redfish_driver.hpp), sending it, and verifying it by re-reading the GPU's
// ResourceBlock, and the View where that block alone does not prove the move.

#include <algorithm>
#include <set>

#include "libcore/fabric/redfish_driver.hpp"
#include "libcore/fabric/redfish_driver_internal.hpp"

namespace kc::fabric {
namespace {

bool allows(const std::optional<std::vector<std::string>>& allowable, const std::string& link,
            const std::string& odataId) {
  return !allowable ||
         std::find_if(allowable->begin(), allowable->end(), [&](const std::string& a) {
           return a == link || a == odataId;
         }) != allowable->end();
}

}  // namespace

Result<MoveClaim> detail::claimOf(const std::string& chassis, const std::string& verb,
                                  const std::string& method, const std::string& target, unsigned st,
                                  const std::string& body) {
  MoveClaim claim;
  claim.note = "service answered HTTP " + std::to_string(st) + " but the " + verb + " happened";
  if (st == 200 || st == 201 || st == 204) {
    claim.kind = MoveClaim::Kind::kDone;
    claim.note.clear();
    claim.error = makeError(errc::kUnverified, "service answered HTTP " + std::to_string(st) +
                                                   " but the re-read does not show the change");
  } else if (st == 202) {
    claim.kind = MoveClaim::Kind::kAccepted;
    claim.note.clear();
    claim.error = makeError(errc::kTimeout,
                            "service accepted the request (202) but it did not complete in time");
  } else if (st == 405 || st == 501) {
    // The service does not implement what it seemed to offer: retrying will not help.
    return makeError(errc::kUnsupported, "redfish chassis " + chassis + ": " +
                                             detail::statusLine(method, target, st, body));
  } else if (st == 428 || st == 412) {
    claim.error = makeError(errc::kConflict, detail::statusLine(method, target, st, body));
    claim.note.clear();
    claim.attemptNote =
        "ETag precondition failed (HTTP " + std::to_string(st) + "); re-read and retried";
  } else if (st >= 500) {
    claim.error = makeError(errc::kUnavailable, detail::statusLine(method, target, st, body));
  } else {
    claim.error = makeError(errc::kRefused, detail::statusLine(method, target, st, body));
  }
  return claim;
}

Result<MoveReport> RedfishDriver::attach(const std::string& gpuId, const std::string& host) {
  std::lock_guard lock(mutex_);
  if (host.empty()) {
    return makeError(errc::kInvalid, "attach " + gpuId + ": empty host");
  }
  return move(gpuId, host);
}

Result<MoveReport> RedfishDriver::detach(const std::string& gpuId) {
  std::lock_guard lock(mutex_);
  return move(gpuId, std::nullopt);
}

// How the service can do this move (see the header); kUnsupported when it cannot.
Result<RedfishDriver::MovePlan> RedfishDriver::planMove(
    const View& view, const std::string& localId, const std::optional<std::string>& host) const {
  if (composition_ && composition_->serviceEnabled == false) {
    return makeError(errc::kUnsupported,
                     "redfish chassis " + options_.chassis +
                         ": the CompositionService reports ServiceEnabled=false");
  }
  return host ? planAttach(view, localId, *host) : planDetach(view, localId);
}

Result<RedfishDriver::MovePlan> RedfishDriver::planAttach(const View& view,
                                                          const std::string& localId,
                                                          const std::string& host) const {
  const Block& gpu = view.blocks.at(localId);
  const std::string& gpuOdataId = gpu.block.odataId;
  MovePlan plan;
  // The system to grow: the host's own system, or the one its compute block is composed into.
  std::optional<std::string> systemLink;
  const Block* compute = nullptr;
  if (view.computeHosts) {
    compute = &view.blocks.at(host);
    if (compute->systemLinks.size() == 1) {
      systemLink = *compute->systemLinks.begin();
    }
  } else {
    systemLink = view.systemIdToLink.at(host);
  }
  std::string why;
  if (systemLink) {
    const System& sys = view.systems.at(*systemLink);
    if (sys.system.addTarget && allows(sys.system.addAllowable, gpu.link, gpuOdataId)) {
      plan.kind = MovePlan::Kind::kAction;
      plan.target = *sys.system.addTarget;
      plan.systemLink = *systemLink;
      return plan;
    }
    why = sys.system.addTarget
              ? "ComputerSystem " + sys.system.id + "'s " + std::string(redfish::kAddAction) +
                    " does not list ResourceBlock " + localId + " among its allowable values"
              : "ComputerSystem " + sys.system.id + " offers no " +
                    std::string(redfish::kAddAction) + " action";
  } else if (!compute) {
    why = "host " + host + " has no ComputerSystem";
  } else {
    why = compute->systemLinks.empty() ? "host " + host + " is not composed into a system"
                                       : "host " + host + " is composed into several systems";
  }
  if (!compute) {
    return makeError(errc::kUnsupported,
                     "redfish chassis " + options_.chassis + " cannot attach " + localId + ": " +
                         why + ", and specific composition needs Compute ResourceBlocks");
  }
  if (!view.compositionTarget) {
    return makeError(
        errc::kUnsupported,
        "redfish chassis " + options_.chassis + " cannot attach " + localId + ": " + why +
            ", and no @Redfish.CollectionCapabilities with UseCase " +
            std::string(redfish::kCompositionUseCase) +
            " (on the Systems collection or a ResourceZone) offers specific composition");
  }
  if (!compute->block.canJoinAnotherComposition()) {
    return makeError(
        errc::kUnsupported,
        "redfish chassis " + options_.chassis + " cannot attach " + localId + ": " + why +
            ", and host " + host +
            "'s compute block cannot join another composition (SharingEnabled " +
            (compute->block.sharingEnabled ? (*compute->block.sharingEnabled ? "true" : "false")
                                           : "not reported") +
            "); recomposing its system would detach its other devices");
  }
  plan.kind = MovePlan::Kind::kCompose;
  plan.target = *view.compositionTarget;
  plan.blocks = {compute->block.odataId, gpuOdataId};
  return plan;
}

Result<RedfishDriver::MovePlan> RedfishDriver::planDetach(const View& view,
                                                          const std::string& localId) const {
  const Block& gpu = view.blocks.at(localId);
  const std::string& gpuOdataId = gpu.block.odataId;
  MovePlan plan;
  const std::string& systemLink = *gpu.systemLink;
  const System& sys = view.systems.at(systemLink);
  if (sys.system.removeTarget && allows(sys.system.removeAllowable, gpu.link, gpuOdataId)) {
    plan.kind = MovePlan::Kind::kAction;
    plan.target = *sys.system.removeTarget;
    plan.systemLink = systemLink;
    return plan;
  }
  // Decomposing the system is safe only when it was composed from a host's compute block (a
  // host that is a ComputerSystem of its own would be deleted with it) and holds nothing but
  // this GPU and compute blocks.
  if (!view.computeHosts) {
    return makeError(errc::kUnsupported,
                     "redfish chassis " + options_.chassis + " cannot detach " + localId +
                         ": ComputerSystem " + sys.system.id + " offers no usable " +
                         std::string(redfish::kRemoveAction) +
                         " action, and it is the host itself (no Compute ResourceBlocks), so "
                         "deleting it is no way to detach a GPU");
  }
  std::vector<std::string> others;
  for (const auto& [id, block] : view.blocks) {
    if (id != localId && block.gpuBlock && block.systemLinks.count(systemLink)) {
      others.push_back(id);
    }
  }
  for (const auto& link : sys.system.resourceBlocks) {
    if (!view.blockLinkToId.count(link)) {
      others.push_back(link);  // a memory, storage or network block we do not manage
    }
  }
  if (!others.empty()) {
    std::string list;
    for (const auto& o : others) {
      list += (list.empty() ? "" : ", ") + o;
    }
    return makeError(errc::kUnsupported, "redfish chassis " + options_.chassis + " cannot detach " +
                                             localId + ": ComputerSystem " + sys.system.id +
                                             " offers no usable " +
                                             std::string(redfish::kRemoveAction) +
                                             " action, and deleting it would also detach " + list);
  }
  plan.kind = MovePlan::Kind::kDecompose;
  plan.target = systemLink;
  return plan;
}

// attach (host set) or detach (host empty), verified by re-reading the ResourceBlocks.
Result<MoveReport> RedfishDriver::move(const std::string& gpuId,
                                       const std::optional<std::string>& host) {
  if (options_.style == RedfishStyle::kFabric) {
    return fabricMove(gpuId, host);
  }
  auto localId = localIdOf(gpuId);
  if (!localId) {
    return localId.error();
  }
  const std::string verb = host ? "attach" : "detach";
  auto view = readView();
  if (!view) {
    return view.error();
  }
  auto it = view->blocks.find(*localId);
  if (it == view->blocks.end() || !it->second.gpuBlock) {
    return makeError(errc::kNotFound,
                     "chassis " + options_.chassis + " has no GPU ResourceBlock " + *localId);
  }
  MoveReport report{gpuId, it->second.gpu.hostPort, host, false, 0, {}};
  auto needed = moveNeeded(*view, it->second.gpu, gpuId, host);
  if (!needed) {
    return needed.error();
  }
  if (!*needed) {
    return report;
  }

  MoveSteps steps;
  steps.what = verb + " " + gpuId + (host ? " to " + *host : std::string());
  steps.send = [&]() { return sendMove(*view, *localId, host, verb); };
  steps.observe = [&]() { return observeMove(*view, gpuId, *localId, host, verb); };
  return verifiedMove(std::move(report), options_.policy, options_.sleeper, steps);
}

// False when the GPU already is where the move would put it; an error when the move cannot
// start (unknown host, GPU held by another host, unhealthy GPU).
Result<bool> RedfishDriver::moveNeeded(const View& view, const GpuInfo& gpu,
                                       const std::string& gpuId,
                                       const std::optional<std::string>& host) const {
  if (!host) {
    return gpu.hostPort.has_value();
  }
  const bool known = view.computeHosts ? view.blocks.count(*host) && !view.blocks.at(*host).gpuBlock
                                       : view.systemIdToLink.count(*host) > 0;
  if (!known) {
    return makeError(errc::kNotFound,
                     "chassis " + options_.chassis + " has no " +
                         (view.computeHosts ? "Compute ResourceBlock " : "ComputerSystem ") +
                         *host);
  }
  if (gpu.hostPort == *host) {
    return false;
  }
  if (gpu.hostPort) {
    return makeError(errc::kConflict,
                     "GPU " + gpuId + " is composed into " + *gpu.hostPort + "; detach it first");
  }
  if (gpu.health != GpuHealth::kOk) {
    return makeError(errc::kUnhealthy,
                     "GPU " + gpuId + " is unhealthy (" + gpu.healthDetail + "); not attaching");
  }
  return true;
}

// Sends the move once, planned on the latest View.
Result<MoveClaim> RedfishDriver::sendMove(const View& view, const std::string& localId,
                                          const std::optional<std::string>& host,
                                          const std::string& verb) {
  if (view.blocks.find(localId) == view.blocks.end()) {
    return makeError(errc::kNotFound, "redfish chassis " + options_.chassis + ": ResourceBlock " +
                                          localId +
                                          " disappeared from the inventory during the move");
  }
  auto plan = planMove(view, localId, host);
  if (!plan) {
    return plan.error();
  }
  const Block& block = view.blocks.at(localId);
  std::string method = "POST";
  std::string body;
  switch (plan->kind) {
    case MovePlan::Kind::kAction: {
      // A resource that arrived inline in an expanded collection has no ETag header; when its
      // body carried no @odata.etag either, ask it for one (the action may require both).
      const System& sys = view.systems.at(plan->systemLink);
      auto blockEtag = block.etag || !block.embedded ? block.etag : freshEtag(block.link);
      auto systemEtag = sys.etag || !sys.embedded ? sys.etag : freshEtag(plan->systemLink);
      body = redfish::encodeBlockAction(block.block.odataId, blockEtag, systemEtag);
      break;
    }
    case MovePlan::Kind::kCompose:
      body = redfish::encodeComposeRequest(redfish::composeRequestId(*host, localId),
                                           "kubecomp " + *host + " + " + localId, plan->blocks);
      break;
    case MovePlan::Kind::kDecompose:
      method = "DELETE";
      break;
  }
  auto reply = call(method, plan->target, body, options_.policy.moveTimeout);
  if (!reply && reply.error().code == errc::kUnauthorized) {
    return reply.error();
  }
  if (!reply) {
    MoveClaim claim;
    claim.error = reply.error();
    claim.note = "request failed (" + reply.error().message + ") but the " + verb + " happened";
    return claim;
  }
  return detail::claimOf(options_.chassis, verb, method, plan->target, reply->status, reply->body);
}

// Re-reads the GPU's block, and where that does not prove the move the View (kept in `view`
// for the next send), and says whether the move shows.
Result<Observed> RedfishDriver::observeMove(View& view, const std::string& gpuId,
                                            const std::string& localId,
                                            const std::optional<std::string>& host,
                                            const std::string& verb) {
  auto proved = observeBlock(view, localId, host);
  if (!proved) {
    return makeError(proved.error().code,
                     verb + " " + gpuId + ": could not verify: " + proved.error().message);
  }
  if (*proved) {
    return **proved;
  }
  auto after = readView();
  if (!after) {
    return makeError(after.error().code,
                     verb + " " + gpuId + ": could not verify: " + after.error().message);
  }
  view = std::move(*after);
  auto now = view.blocks.find(localId);
  if (now == view.blocks.end() || !now->second.gpuBlock) {
    return makeError(errc::kUnhealthy,
                     "GPU " + gpuId + " disappeared from the ResourceBlocks during " + verb);
  }
  if (host ? now->second.gpu.hostPort == *host : !now->second.gpu.hostPort) {
    return Observed::kReached;
  }
  if (now->second.gpu.health != GpuHealth::kOk) {
    return makeError(errc::kUnhealthy, "GPU " + gpuId + " became unhealthy during " + verb + " (" +
                                           now->second.gpu.healthDetail + ")");
  }
  if (host && now->second.gpu.hostPort) {
    return makeError(errc::kConflict, "GPU " + gpuId + " is now composed into " +
                                          *now->second.gpu.hostPort + ", not " + *host +
                                          " (moved by someone else?)");
  }
  return Observed::kNotYet;
}

// The block is read and parsed as readView reads it (its collection link, parseResourceBlock,
// the ETag header else @odata.etag). It proves the move only when nothing else the View holds
// could change the verdict: the same GPU block (same Id, same Processors), composed into one
// system the View knows (its host by the View's own rule), or into none where the block named
// its system before the move (the service reports attachment on the block's side; a service
// that lists it only on the system's side needs the whole View). Whatever it does not prove,
// including not yet, unhealthy and moved elsewhere, and a 404 or malformed body (re-numbered,
// gone), is left to the full read, which decides it as before.
Result<std::optional<Observed>> RedfishDriver::observeBlock(
    View& view, const std::string& localId, const std::optional<std::string>& host) {
  const auto it = view.blocks.find(localId);
  if (it == view.blocks.end() || !it->second.gpuBlock) {
    return std::optional<Observed>();
  }
  Block& entry = it->second;
  auto reply = getOk(entry.link);
  if (!reply) {
    if (reply.error().code == errc::kNotFound || reply.error().code == errc::kProtocol) {
      return std::optional<Observed>();
    }
    return reply.error();
  }
  auto block = redfish::parseResourceBlock(reply->body);
  if (!block || block->id != localId || block->isCompute() ||
      block->processors != entry.block.processors) {
    return std::optional<Observed>();
  }
  const std::set<std::string> systems(block->systems.begin(), block->systems.end());
  std::optional<std::string> hostNow;
  if (systems.size() > 1 || (systems.size() == 1 && !view.systems.count(*systems.begin()))) {
    return std::optional<Observed>();
  }
  if (systems.size() == 1) {
    hostNow = hostOfSystem(view, *systems.begin());
  } else if (entry.block.systems.empty()) {
    return std::optional<Observed>();  // no proof the service names systems on the block
  }
  if (host ? hostNow != *host : hostNow.has_value()) {
    return std::optional<Observed>();
  }
  entry.etag = reply->etag ? reply->etag : block->etag;
  entry.embedded = false;
  entry.systemLinks = systems;
  entry.systemLink = systems.empty() ? std::nullopt : std::optional(*systems.begin());
  entry.gpu.hostPort = hostNow;
  entry.block = std::move(*block);
  return std::optional<Observed>(Observed::kReached);
}

}  // namespace kc::fabric
