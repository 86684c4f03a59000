#include "libcore/fabric/redfish_driver.hpp"

#include <algorithm>

#include "libcore/base/json_guard.hpp"
#include "libcore/fabric/http_endpoint.hpp"
#include "libcore/fabric/verified_move.hpp"

namespace kc::fabric {
namespace {

bool healthy(const std::optional<std::string>& health) {
  return !health || *health == "OK";
}

std::string statusLine(const std::string& method, const std::string& target, unsigned status,
                       const std::string& body) {
  return method + " " + target + " answered HTTP " + std::to_string(status) + ": " +
         redfish::describeError(body);
}

}  // namespace

Result<std::unique_ptr<RedfishDriver>> RedfishDriver::create(RedfishOptions options) {
  if (!isValidChassisName(options.chassis)) {
    return makeError(errc::kInvalid, "redfish chassis name \"" + options.chassis +
                                         "\" must be a lower-case DNS label");
  }
  if (options.policy.attempts == 0) {
    return makeError(errc::kInvalid,
                     "redfish chassis " + options.chassis + ": attempts must be >= 1");
  }
  if (options.auth != RedfishAuth::kNone &&
      (!options.credentials || options.credentials->empty())) {
    return makeError(errc::kInvalid, "redfish chassis " + options.chassis +
                                         ": session/basic auth needs credentials");
  }
  if (!options.sleeper) {
    options.sleeper = realSleeper();
  }
  auto endpoint = detail::makeEndpoint(options.baseUrl, options.tls, options.policy.readTimeout);
  if (!endpoint) {
    return endpoint.error();
  }
  auto ep = std::make_unique<detail::Endpoint>(std::move(endpoint).value());
  return std::unique_ptr<RedfishDriver>(new RedfishDriver(std::move(options), std::move(ep)));
}

RedfishDriver::RedfishDriver(RedfishOptions options, std::unique_ptr<detail::Endpoint> endpoint)
    : options_(std::move(options)), endpoint_(std::move(endpoint)) {}

RedfishDriver::~RedfishDriver() {
  // Log out so sessions do not pile up on the service (best effort, short timeout).
  if (!token_.empty() && !sessionLink_.empty()) {
    net::RequestOptions ro;
    ro.timeout = std::chrono::milliseconds(2000);
    (void)endpoint_->client->request("DELETE", sessionLink_, {}, {{"X-Auth-Token", token_}}, ro);
  }
}

Result<Ok> RedfishDriver::login() {
  if (!root_ || !root_->sessions) {
    return makeError(errc::kProtocol,
                     "redfish service of chassis " + options_.chassis +
                         " lists no Links.Sessions in its service root; use basic auth");
  }
  const std::string& target = *root_->sessions;
  net::RequestOptions ro;
  ro.timeout = options_.policy.readTimeout;
  auto resp = endpoint_->client->request(
      "POST", target,
      redfish::encodeLogin(options_.credentials->username, options_.credentials->password),
      {{"Content-Type", "application/json"}}, ro);
  if (!resp) {
    return detail::transportError(resp.error(), "POST " + target);
  }
  if (resp->status == 401 || resp->status == 403) {
    return makeError(errc::kUnauthorized, "redfish chassis " + options_.chassis +
                                              " refused the session login for user " +
                                              options_.credentials->username + " (HTTP " +
                                              std::to_string(resp->status) + ")");
  }
  if (resp->status != 201 && resp->status != 200) {
    return makeError(errc::kProtocol, statusLine("POST", target, resp->status, resp->body));
  }
  auto token = resp->header("X-Auth-Token");
  if (!token || token->empty() || token->size() > 4096) {
    return makeError(errc::kProtocol,
                     "session login answered without a usable X-Auth-Token header");
  }
  token_ = *token;
  sessionLink_.clear();
  if (auto location = resp->header("Location")) {
    auto url = net::parseUrl(*location);
    sessionLink_ = url ? url->basePath : *location;  // absolute URL or absolute path
    if (sessionLink_.empty() || sessionLink_.front() != '/') {
      sessionLink_.clear();
    }
  }
  ++logins_;
  return Ok{};
}

Result<RedfishDriver::Reply> RedfishDriver::call(const std::string& method,
                                                 const std::string& target, const std::string& body,
                                                 std::chrono::milliseconds timeout,
                                                 bool authenticated) {
  for (int round = 0; round < 2; ++round) {
    net::Headers headers;
    if (!body.empty()) {
      headers.push_back({"Content-Type", "application/json"});
    }
    if (authenticated && options_.auth == RedfishAuth::kBasic) {
      headers.push_back({"Authorization", detail::basicAuthorization(*options_.credentials)});
    } else if (authenticated && options_.auth == RedfishAuth::kSession) {
      if (token_.empty()) {
        auto in = login();
        if (!in) {
          return in.error();
        }
      }
      headers.push_back({"X-Auth-Token", token_});
    }
    net::RequestOptions ro;
    ro.timeout = timeout;
    auto resp = endpoint_->client->request(method, target, body, std::move(headers), ro);
    if (!resp) {
      return detail::transportError(resp.error(), method + " " + target);
    }
    if (resp->status == 401 && authenticated && options_.auth == RedfishAuth::kSession &&
        round == 0) {
      token_.clear();  // session expired or was deleted: log in again once
      continue;
    }
    if (resp->status == 401 || resp->status == 403) {
      const std::string who =
          options_.credentials ? "user " + options_.credentials->username : "anonymous access";
      return makeError(errc::kUnauthorized, "redfish chassis " + options_.chassis + " rejected " +
                                                who + " (HTTP " + std::to_string(resp->status) +
                                                " on " + method + " " + target + ")");
    }
    return Reply{resp->status, std::move(resp->body), resp->header("ETag")};
  }
  return makeError(errc::kUnauthorized, "redfish chassis " + options_.chassis + ": unreachable");
}

Result<RedfishDriver::Reply> RedfishDriver::getOk(const std::string& target, bool authenticated) {
  Error last = makeError(errc::kUnavailable, "no attempt made");
  for (std::uint32_t attempt = 1; attempt <= options_.policy.attempts; ++attempt) {
    if (attempt > 1) {
      options_.sleeper(options_.policy.backoffBefore(attempt));
    }
    auto reply = call("GET", target, {}, options_.policy.readTimeout, authenticated);
    if (!reply) {
      if (!detail::retryable(reply.error())) {
        return reply.error();
      }
      last = reply.error();
      continue;
    }
    if (reply->status == 200) {
      return reply;
    }
    last = makeError(reply->status >= 500   ? errc::kUnavailable
                     : reply->status == 404 ? errc::kNotFound
                                            : errc::kProtocol,
                     statusLine("GET", target, reply->status, reply->body));
    if (reply->status < 500) {
      return last;
    }
  }
  return makeError(last.code, "redfish chassis " + options_.chassis + ": " + last.message +
                                  " (after " + std::to_string(options_.policy.attempts) +
                                  " attempts)");
}

Result<Ok> RedfishDriver::discover() {
  if (root_ && !blocksLink_.empty()) {
    return Ok{};
  }
  const std::string rootPath = endpoint_->basePath + std::string(redfish::kServiceRootPath);
  auto rootReply = getOk(rootPath, /*authenticated=*/false);  // the service root is public
  if (!rootReply) {
    return rootReply.error();
  }
  auto root = redfish::parseServiceRoot(rootReply->body);
  if (!root) {
    return root.error();
  }
  root_ = *root;  // the session login below needs Links.Sessions
  auto comp = getOk(root->compositionService);
  if (!comp) {
    root_.reset();
    return comp.error();
  }
  auto service = redfish::parseCompositionService(comp->body);
  if (!service) {
    root_.reset();
    return service.error();
  }
  composition_ = *service;
  blocksLink_ = service->resourceBlocks;
  // A ResourceZone may advertise specific composition (the Systems collection may too; that
  // one is read with every inventory). Zones are read once per discovery, at most 16.
  zoneCompositionTarget_.reset();
  if (service->resourceZones) {
    auto zones =
        readCollection(*service->resourceZones, "Redfish ResourceZones collection", nullptr);
    if (!zones) {
      root_.reset();
      return zones.error();
    }
    for (std::size_t i = 0; i < zones->size() && i < 16 && !zoneCompositionTarget_; ++i) {
      auto zone = getOk((*zones)[i]);
      if (!zone) {
        root_.reset();
        return zone.error();
      }
      auto target =
          redfish::parseCompositionTarget(zone->body, "Redfish ResourceZone " + (*zones)[i]);
      if (!target) {
        root_.reset();
        return target.error();
      }
      zoneCompositionTarget_ = *target;
    }
  }
  return Ok{};
}

// Every member of a collection, following Members@odata.nextLink (at most 64 pages).
Result<std::vector<std::string>> RedfishDriver::readCollection(
    const std::string& link, const std::string& what,
    std::optional<std::string>* compositionTarget) {
  std::vector<std::string> out;
  std::string next = link;
  for (int page = 0; page < 64; ++page) {
    auto reply = getOk(next);
    if (!reply) {
      return reply.error();
    }
    auto parsed = redfish::parseCollectionPage(reply->body, what + " at " + next);
    if (!parsed) {
      return parsed.error();
    }
    if (compositionTarget && parsed->compositionTarget) {
      *compositionTarget = parsed->compositionTarget;
    }
    out.insert(out.end(), parsed->members.begin(), parsed->members.end());
    if (!parsed->nextLink) {
      return out;
    }
    next = *parsed->nextLink;
  }
  return makeError(errc::kProtocol, what + " at " + link + " has more than 64 pages");
}

Result<RedfishDriver::View> RedfishDriver::readView() {
  auto view = readViewOnce();
  if (!view && view.error().code == errc::kNotFound) {
    // A link we cached may have moved (service restarted, re-cabled): discover again once.
    root_.reset();
    blocksLink_.clear();
    view = readViewOnce();
  }
  return view;
}

Result<RedfishDriver::View> RedfishDriver::readViewOnce() {
  auto found = discover();
  if (!found) {
    return found.error();
  }
  View view;
  std::optional<std::string> systemsTarget;
  auto systemLinks = readCollection(root_->systems, "Redfish Systems collection", &systemsTarget);
  if (!systemLinks) {
    return systemLinks.error();
  }
  view.compositionTarget = systemsTarget ? systemsTarget : zoneCompositionTarget_;
  auto loadSystem = [&](const std::string& link) -> Result<Ok> {
    auto reply = getOk(link);
    if (!reply) {
      return reply.error();
    }
    auto sys = redfish::parseComputerSystem(reply->body);
    if (!sys) {
      return sys.error();
    }
    if (view.systemIdToLink.count(sys->id) && view.systemIdToLink[sys->id] != link) {
      return makeError(errc::kProtocol, "two ComputerSystems share the Id " + sys->id);
    }
    view.systemIdToLink[sys->id] = link;
    // The ETag header wins; some services only put it in the body as @odata.etag.
    auto etag = reply->etag ? reply->etag : sys->etag;
    view.systems[link] = System{std::move(*sys), std::move(etag)};
    return Ok{};
  };
  for (const auto& link : *systemLinks) {
    if (auto r = loadSystem(link); !r) {
      return r.error();
    }
  }
  auto blockLinks = readCollection(blocksLink_, "Redfish ResourceBlocks collection", nullptr);
  if (!blockLinks) {
    return blockLinks.error();
  }
  for (const auto& link : *blockLinks) {
    auto reply = getOk(link);
    if (!reply) {
      return reply.error();
    }
    auto block = redfish::parseResourceBlock(reply->body);
    if (!block) {
      return block.error();
    }
    Block entry;
    entry.link = link;
    entry.etag = reply->etag ? reply->etag : block->etag;
    std::optional<redfish::Processor> gpuProc;
    if (!block->isCompute()) {
      for (const auto& procLink : block->processors) {
        auto procReply = getOk(procLink);
        if (!procReply) {
          return procReply.error();
        }
        auto proc = redfish::parseProcessor(procReply->body);
        if (!proc) {
          return proc.error();
        }
        if (proc->processorType == "GPU") {
          gpuProc = std::move(*proc);
          break;  // one GPU per block is the composable-GPU norm; the block moves as a unit
        }
      }
    }
    if (gpuProc) {
      entry.gpuBlock = true;
      entry.gpu.chassis = options_.chassis;
      entry.gpu.localId = block->id;
      entry.gpu.id = makeGpuId(options_.chassis, block->id);
      // Redfish UUIDs are bare; NVIDIA_VISIBLE_DEVICES and nvidia-smi use "GPU-<uuid>".
      entry.gpu.uuid = gpuProc->uuid.empty() || gpuProc->uuid.rfind("GPU-", 0) == 0
                           ? gpuProc->uuid
                           : "GPU-" + gpuProc->uuid;
      entry.gpu.model = gpuProc->model;
      const bool stateBad =
          block->compositionState == "Failed" || block->compositionState == "Unavailable" ||
          (block->state && (*block->state == "Absent" || *block->state == "UnavailableOffline"));
      if (!healthy(block->health) || !healthy(gpuProc->health) || stateBad) {
        entry.gpu.health = GpuHealth::kUnhealthy;
        entry.gpu.healthDetail = "ResourceBlock health " + block->health.value_or("-") +
                                 ", GPU health " + gpuProc->health.value_or("-") +
                                 ", CompositionState " + block->compositionState;
      }
    } else if (!block->isCompute()) {
      continue;  // memory, storage or network blocks are not ours
    } else {
      view.computeHosts = true;
    }
    entry.systemLinks.insert(block->systems.begin(), block->systems.end());
    const std::string id = block->id;
    view.blockLinkToId[link] = id;
    view.blockLinkToId[block->odataId] = id;
    entry.block = std::move(*block);
    if (!view.blocks.emplace(id, std::move(entry)).second) {
      return makeError(errc::kProtocol, "two ResourceBlocks share the Id " + id);
    }
  }
  // Attachment from both sides: a block names its systems, a system names its blocks. Systems a
  // block names that the Systems collection did not list are read too.
  for (auto& [id, block] : view.blocks) {
    for (const auto& sysLink : block.systemLinks) {
      if (!view.systems.count(sysLink)) {
        if (auto r = loadSystem(sysLink); !r) {
          return r.error();
        }
      }
    }
  }
  for (const auto& [sysLink, sys] : view.systems) {
    for (const auto& blockLink : sys.system.resourceBlocks) {
      const auto it = view.blockLinkToId.find(blockLink);
      if (it != view.blockLinkToId.end()) {
        view.blocks[it->second].systemLinks.insert(sysLink);
      }
    }
  }
  for (auto& [id, block] : view.blocks) {
    if (!block.gpuBlock) {
      continue;
    }
    if (block.systemLinks.size() > 1) {
      return makeError(errc::kProtocol, "ResourceBlock " + id + " is composed into " +
                                            std::to_string(block.systemLinks.size()) +
                                            " systems; shared GPU blocks are not supported");
    }
    if (block.systemLinks.empty()) {
      continue;
    }
    const std::string& sysLink = *block.systemLinks.begin();
    block.systemLink = sysLink;
    block.gpu.hostPort = view.systems[sysLink].system.id;
    if (view.computeHosts) {
      // The host is the compute block composed into the same system.
      for (const auto& [otherId, other] : view.blocks) {
        if (!other.gpuBlock && other.systemLinks.count(sysLink)) {
          block.gpu.hostPort = otherId;
          break;
        }
      }
    }
  }
  return view;
}

Result<Inventory> RedfishDriver::inventory() {
  std::lock_guard lock(mutex_);
  auto view = readView();
  if (!view) {
    return view.error();
  }
  Inventory inv;
  for (auto& [id, block] : view->blocks) {
    inv.gpus.push_back(block.gpu);
  }
  if (view->computeHosts) {
    for (const auto& [id, block] : view->blocks) {
      if (!block.gpuBlock) {
        inv.hosts.push_back(id);
      }
    }
  } else {
    for (const auto& [sysId, link] : view->systemIdToLink) {
      inv.hosts.push_back(sysId);
    }
  }
  std::sort(inv.gpus.begin(), inv.gpus.end(),
            [](const GpuInfo& a, const GpuInfo& b) { return a.id < b.id; });
  return inv;
}

Result<std::string> RedfishDriver::localIdOf(const std::string& gpuId) const {
  const auto parts = splitGpuId(gpuId);
  if (!parts || parts->chassis != options_.chassis) {
    return makeError(errc::kInvalid,
                     "\"" + gpuId + "\" is not a GPU id of chassis " + options_.chassis);
  }
  return parts->localId;
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

namespace {

bool allows(const std::optional<std::vector<std::string>>& allowable, const std::string& link,
            const std::string& odataId) {
  return !allowable ||
         std::find_if(allowable->begin(), allowable->end(), [&](const std::string& a) {
           return a == link || a == odataId;
         }) != allowable->end();
}

}  // namespace

// How the service can do this move (see the header); kUnsupported when it cannot.
Result<RedfishDriver::MovePlan> RedfishDriver::planMove(
    const View& view, const std::string& localId, const std::optional<std::string>& host) const {
  const Block& gpu = view.blocks.at(localId);
  const std::string& gpuOdataId = gpu.block.odataId;
  if (composition_ && composition_->serviceEnabled == false) {
    return makeError(errc::kUnsupported,
                     "redfish chassis " + options_.chassis +
                         ": the CompositionService reports ServiceEnabled=false");
  }
  MovePlan plan;
  if (host) {
    // The system to grow: the host's own system, or the one its compute block is composed into.
    std::optional<std::string> systemLink;
    const Block* compute = nullptr;
    if (view.computeHosts) {
      compute = &view.blocks.at(*host);
      if (compute->systemLinks.size() == 1) {
        systemLink = *compute->systemLinks.begin();
      }
    } else {
      systemLink = view.systemIdToLink.at(*host);
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
      why = "host " + *host + " has no ComputerSystem";
    } else {
      why = compute->systemLinks.empty() ? "host " + *host + " is not composed into a system"
                                         : "host " + *host + " is composed into several systems";
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
              ", and host " + *host +
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
  if (host) {
    const bool known = view->computeHosts
                           ? view->blocks.count(*host) && !view->blocks.at(*host).gpuBlock
                           : view->systemIdToLink.count(*host) > 0;
    if (!known) {
      return makeError(errc::kNotFound,
                       "chassis " + options_.chassis + " has no " +
                           (view->computeHosts ? "Compute ResourceBlock " : "ComputerSystem ") +
                           *host);
    }
    if (it->second.gpu.hostPort == *host) {
      return report;
    }
    if (it->second.gpu.hostPort) {
      return makeError(errc::kConflict, "GPU " + gpuId + " is composed into " +
                                            *it->second.gpu.hostPort + "; detach it first");
    }
    if (it->second.gpu.health != GpuHealth::kOk) {
      return makeError(errc::kUnhealthy, "GPU " + gpuId + " is unhealthy (" +
                                             it->second.gpu.healthDetail + "); not attaching");
    }
  } else if (!it->second.gpu.hostPort) {
    return report;
  }

  MoveSteps steps;
  steps.what = verb + " " + gpuId + (host ? " to " + *host : std::string());
  steps.send = [&]() -> Result<MoveClaim> {
    if (view->blocks.find(*localId) == view->blocks.end()) {
      return makeError(errc::kNotFound, "redfish chassis " + options_.chassis + ": ResourceBlock " +
                                            *localId +
                                            " disappeared from the inventory during the move");
    }
    auto plan = planMove(*view, *localId, host);
    if (!plan) {
      return plan.error();
    }
    const Block& block = view->blocks.at(*localId);
    std::string method = "POST";
    std::string body;
    switch (plan->kind) {
      case MovePlan::Kind::kAction:
        body = redfish::encodeBlockAction(block.block.odataId, block.etag,
                                          view->systems.at(plan->systemLink).etag);
        break;
      case MovePlan::Kind::kCompose:
        body = redfish::encodeComposeRequest("kubecomp " + *host + " + " + *localId, plan->blocks);
        break;
      case MovePlan::Kind::kDecompose:
        method = "DELETE";
        break;
    }
    auto reply = call(method, plan->target, body, options_.policy.moveTimeout);
    if (!reply && reply.error().code == errc::kUnauthorized) {
      return reply.error();
    }
    MoveClaim claim;
    if (!reply) {
      claim.error = reply.error();
      claim.note = "request failed (" + reply.error().message + ") but the " + verb + " happened";
      return claim;
    }
    const unsigned st = reply->status;
    claim.note = "service answered HTTP " + std::to_string(st) + " but the " + verb + " happened";
    if (st == 200 || st == 201 || st == 204) {
      claim.kind = MoveClaim::Kind::kDone;
      claim.note.clear();
      claim.error =
          makeError(errc::kUnverified, "service answered HTTP " + std::to_string(st) +
                                           " but the ResourceBlock does not show the change");
    } else if (st == 202) {
      claim.kind = MoveClaim::Kind::kAccepted;
      claim.note.clear();
      claim.error = makeError(errc::kTimeout,
                              "service accepted the request (202) but it did not complete in time");
    } else if (st == 405 || st == 501) {
      // The service does not implement what it seemed to offer: retrying will not help.
      return makeError(errc::kUnsupported, "redfish chassis " + options_.chassis + ": " +
                                               statusLine(method, plan->target, st, reply->body));
    } else if (st == 428 || st == 412) {
      claim.error = makeError(errc::kConflict, statusLine(method, plan->target, st, reply->body));
      claim.note.clear();
      claim.attemptNote =
          "ETag precondition failed (HTTP " + std::to_string(st) + "); re-read and retried";
    } else if (st >= 500) {
      claim.error =
          makeError(errc::kUnavailable, statusLine(method, plan->target, st, reply->body));
    } else {
      claim.error = makeError(errc::kRefused, statusLine(method, plan->target, st, reply->body));
    }
    return claim;
  };
  steps.observe = [&]() -> Result<Observed> {
    auto after = readView();
    if (!after) {
      return makeError(after.error().code,
                       verb + " " + gpuId + ": could not verify: " + after.error().message);
    }
    view = std::move(after);
    auto now = view->blocks.find(*localId);
    if (now == view->blocks.end() || !now->second.gpuBlock) {
      return makeError(errc::kUnhealthy,
                       "GPU " + gpuId + " disappeared from the ResourceBlocks during " + verb);
    }
    if (host ? now->second.gpu.hostPort == *host : !now->second.gpu.hostPort) {
      return Observed::kReached;
    }
    if (now->second.gpu.health != GpuHealth::kOk) {
      return makeError(errc::kUnhealthy, "GPU " + gpuId + " became unhealthy during " + verb +
                                             " (" + now->second.gpu.healthDetail + ")");
    }
    if (host && now->second.gpu.hostPort) {
      return makeError(errc::kConflict, "GPU " + gpuId + " is now composed into " +
                                            *now->second.gpu.hostPort + ", not " + *host +
                                            " (moved by someone else?)");
    }
    return Observed::kNotYet;
  };
  return verifiedMove(std::move(report), options_.policy, options_.sleeper, steps);
}

}  // namespace kc::fabric
