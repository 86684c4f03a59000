#include "libcore/fabric/redfish_driver.hpp"

#include <algorithm>

#include "libcore/fabric/http_endpoint.hpp"
#include "libcore/fabric/json_guard.hpp"

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
    return makeError(errc::kAuth, "redfish chassis " + options_.chassis +
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
      return makeError(errc::kAuth, "redfish chassis " + options_.chassis + " rejected " + who +
                                        " (HTTP " + std::to_string(resp->status) + " on " + method +
                                        " " + target + ")");
    }
    return Reply{resp->status, std::move(resp->body), resp->header("ETag")};
  }
  return makeError(errc::kAuth, "redfish chassis " + options_.chassis + ": unreachable");
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
  root_ = *root;
  auto comp = getOk(root_->compositionService);
  if (!comp) {
    return comp.error();
  }
  auto blocks = redfish::parseCompositionService(comp->body);
  if (!blocks) {
    return blocks.error();
  }
  blocksLink_ = *blocks;
  return Ok{};
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
  auto systemsReply = getOk(root_->systems);
  if (!systemsReply) {
    return systemsReply.error();
  }
  auto systemLinks = redfish::parseCollection(systemsReply->body, "Redfish Systems collection");
  if (!systemLinks) {
    return systemLinks.error();
  }
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
  auto blocksReply = getOk(blocksLink_);
  if (!blocksReply) {
    return blocksReply.error();
  }
  auto blockLinks =
      redfish::parseCollection(blocksReply->body, "Redfish ResourceBlocks collection");
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
    std::optional<redfish::Processor> gpuProc;
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
    if (!gpuProc) {
      continue;  // CPU, memory, storage or network blocks are not ours
    }
    if (block->systems.size() > 1) {
      return makeError(errc::kProtocol, "ResourceBlock " + block->id + " is composed into " +
                                            std::to_string(block->systems.size()) +
                                            " systems; shared GPU blocks are not supported");
    }
    Block entry;
    entry.etag = reply->etag ? reply->etag : block->etag;
    entry.gpu.chassis = options_.chassis;
    entry.gpu.localId = block->id;
    entry.gpu.id = makeGpuId(options_.chassis, block->id);
    // Redfish UUIDs are bare; NVIDIA_VISIBLE_DEVICES and nvidia-smi use "GPU-<uuid>".
    entry.gpu.uuid = gpuProc->uuid.empty() || gpuProc->uuid.rfind("GPU-", 0) == 0
                         ? gpuProc->uuid
                         : "GPU-" + gpuProc->uuid;
    entry.gpu.model = gpuProc->model;
    if (!block->systems.empty()) {
      const std::string& sysLink = block->systems.front();
      if (!view.systems.count(sysLink)) {
        if (auto r = loadSystem(sysLink); !r) {
          return r.error();
        }
      }
      entry.systemLink = sysLink;
      entry.gpu.hostPort = view.systems[sysLink].system.id;
    }
    const bool stateBad =
        block->compositionState == "Failed" || block->compositionState == "Unavailable" ||
        (block->state && (*block->state == "Absent" || *block->state == "UnavailableOffline"));
    if (!healthy(block->health) || !healthy(gpuProc->health) || stateBad) {
      entry.gpu.health = GpuHealth::kUnhealthy;
      entry.gpu.healthDetail = "ResourceBlock health " + block->health.value_or("-") +
                               ", GPU health " + gpuProc->health.value_or("-") +
                               ", CompositionState " + block->compositionState;
    }
    const std::string id = block->id;
    entry.block = std::move(*block);
    if (!view.blocks.emplace(id, std::move(entry)).second) {
      return makeError(errc::kProtocol, "two ResourceBlocks share the Id " + id);
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
  for (const auto& [sysId, link] : view->systemIdToLink) {
    inv.hosts.push_back(sysId);
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
  if (it == view->blocks.end()) {
    return makeError(errc::kNotFound,
                     "chassis " + options_.chassis + " has no GPU ResourceBlock " + *localId);
  }
  MoveReport report{gpuId, it->second.gpu.hostPort, host, false, 0, {}};
  std::string systemLink;
  if (host) {
    const auto sys = view->systemIdToLink.find(*host);
    if (sys == view->systemIdToLink.end()) {
      return makeError(errc::kNotFound,
                       "chassis " + options_.chassis + " has no ComputerSystem " + *host);
    }
    systemLink = sys->second;
    if (it->second.systemLink == systemLink) {
      return report;
    }
    if (it->second.systemLink) {
      return makeError(errc::kConflict, "GPU " + gpuId + " is composed into " +
                                            *it->second.gpu.hostPort + "; detach it first");
    }
    if (it->second.gpu.health != GpuHealth::kOk) {
      return makeError(errc::kUnhealthy, "GPU " + gpuId + " is unhealthy (" +
                                             it->second.gpu.healthDetail + "); not attaching");
    }
  } else {
    if (!it->second.systemLink) {
      return report;
    }
    systemLink = *it->second.systemLink;
  }
  auto reached = [&](const Block& b) {
    return host ? b.systemLink == systemLink : !b.systemLink.has_value();
  };
  Error last = makeError(errc::kRefused, "no attempt made");
  bool claimedSuccess = false;
  for (std::uint32_t attempt = 1; attempt <= options_.policy.attempts; ++attempt) {
    if (attempt > 1) {
      options_.sleeper(options_.policy.backoffBefore(attempt));
    }
    report.attempts = attempt;
    const auto blockIt = view->blocks.find(*localId);
    const auto systemIt = view->systems.find(systemLink);
    if (blockIt == view->blocks.end() || systemIt == view->systems.end()) {
      // A re-read between attempts no longer lists the GPU or the target system.
      return makeError(errc::kNotFound,
                       "redfish chassis " + options_.chassis + ": " +
                           (blockIt == view->blocks.end() ? "ResourceBlock " + *localId
                                                          : "ComputerSystem " + systemLink) +
                           " disappeared from the inventory during the move");
    }
    const Block& block = blockIt->second;
    const System& system = systemIt->second;
    const auto& target = host ? system.system.addTarget : system.system.removeTarget;
    if (!target) {
      return makeError(errc::kProtocol,
                       "ComputerSystem " + system.system.id + " offers no " +
                           std::string(host ? redfish::kAddAction : redfish::kRemoveAction) +
                           " action");
    }
    auto reply = call("POST", *target,
                      redfish::encodeBlockAction(block.block.odataId, block.etag, system.etag),
                      options_.policy.moveTimeout);
    if (!reply && reply.error().code == errc::kAuth) {
      return reply.error();
    }
    bool accepted = false;
    if (reply) {
      const unsigned st = reply->status;
      if (st == 200 || st == 201 || st == 204) {
        claimedSuccess = true;
        last = makeError(errc::kUnverified, "service answered HTTP " + std::to_string(st) +
                                                " but the ResourceBlock does not show the change");
      } else if (st == 202) {
        accepted = true;
        last = makeError(errc::kTimeout,
                         "service accepted the action (202) but it did not complete in time");
      } else if (st == 428 || st == 412) {
        report.notes.push_back("ETag precondition failed (HTTP " + std::to_string(st) +
                               "); re-read and retried");
        last = makeError(errc::kConflict, statusLine("POST", *target, st, reply->body));
      } else if (st >= 500) {
        last = makeError(errc::kUnavailable, statusLine("POST", *target, st, reply->body));
      } else {
        last = makeError(errc::kRefused, statusLine("POST", *target, st, reply->body));
      }
    } else {
      last = reply.error();
    }
    // The ResourceBlock decides. A 202 gets a few polls before the action is re-sent.
    for (std::uint32_t poll = 0;; ++poll) {
      auto after = readView();
      if (!after) {
        return makeError(after.error().code,
                         verb + " " + gpuId + ": could not verify: " + after.error().message);
      }
      view = std::move(after);
      auto now = view->blocks.find(*localId);
      if (now == view->blocks.end()) {
        return makeError(errc::kUnhealthy,
                         "GPU " + gpuId + " disappeared from the ResourceBlocks during " + verb);
      }
      if (reached(now->second)) {
        report.changed = true;
        if (reply && reply->status >= 300) {
          report.notes.push_back("service answered HTTP " + std::to_string(reply->status) +
                                 " but the " + verb + " happened");
        } else if (!reply) {
          report.notes.push_back("request failed (" + reply.error().message + ") but the " + verb +
                                 " happened");
        }
        return report;
      }
      if (now->second.gpu.health != GpuHealth::kOk) {
        return makeError(errc::kUnhealthy, "GPU " + gpuId + " became unhealthy during " + verb +
                                               " (" + now->second.gpu.healthDetail + ")");
      }
      if (host && now->second.systemLink) {
        return makeError(errc::kConflict, "GPU " + gpuId + " is now composed into " +
                                              *now->second.gpu.hostPort + ", not " + *host +
                                              " (moved by someone else?)");
      }
      if (!host && now->second.systemLink != systemLink) {
        systemLink = *now->second.systemLink;  // moved elsewhere meanwhile: detach from there
      }
      if (!accepted || poll + 1 >= options_.policy.attempts) {
        break;
      }
      options_.sleeper(options_.policy.backoffBefore(poll + 2));
    }
  }
  return makeError(claimedSuccess ? std::string(errc::kUnverified) : last.code,
                   verb + " " + gpuId + (host ? " to " + *host : std::string()) + " failed after " +
                       std::to_string(options_.policy.attempts) + " attempts: " + last.message);
}

}  // namespace kc::fabric
