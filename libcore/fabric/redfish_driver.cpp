// RedfishDriver: creation, sessions and authenticated calls, discovery of the service's links,
// and the inventory. Reading the View is in redfish_view.cpp, moves in redfish_move.cpp.

#include "libcore/fabric/redfish_driver.hpp"

#include <algorithm>

#include "libcore/base/json_guard.hpp"
#include "libcore/fabric/http_endpoint.hpp"
#include "libcore/fabric/redfish_driver_internal.hpp"

namespace kc::fabric {

std::string detail::statusLine(const std::string& method, const std::string& target,
                               unsigned status, const std::string& body) {
  return method + " " + target + " answered HTTP " + std::to_string(status) + ": " +
         redfish::describeError(body);
}

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
  if (options.style != RedfishStyle::kFabric && !options.fabric.empty()) {
    return makeError(errc::kInvalid, "redfish chassis " + options.chassis +
                                         ": a fabric Id applies to the fabric style only");
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
  std::lock_guard session(sessionMutex_);
  if (!token_.empty() && !sessionLink_.empty()) {
    net::RequestOptions ro;
    ro.timeout = std::chrono::milliseconds(2000);
    (void)endpoint_->client->request("DELETE", sessionLink_, {}, {{"X-Auth-Token", token_}}, ro);
  }
}

std::string RedfishDriver::expandInUse() const {
  if (!options_.expand || expandRefused_.load()) {
    return {};
  }
  return redfish::expandQuery(expand_, 1).value_or("");
}

Error RedfishDriver::transport(const Error& error, const std::string& what) const {
  // A TLS failure is about this chassis' settings (its CA, or the switch): name the chassis.
  if (error.code == kc::errc::kTls) {
    return detail::transportError(error, "redfish chassis " + options_.chassis + ": " + what);
  }
  return detail::transportError(error, what);
}

// Called with sessionMutex_ held.
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
    return transport(resp.error(), "POST " + target);
  }
  if (resp->status == 401 || resp->status == 403) {
    return makeError(errc::kUnauthorized, "redfish chassis " + options_.chassis +
                                              " refused the session login for user " +
                                              options_.credentials->username + " (HTTP " +
                                              std::to_string(resp->status) + ")");
  }
  // DSP0266 says 201; services answer 200 or 204 too (the DMTF Mockup Server: 204 with the
  // token and Location). The token header is what counts.
  if (resp->status < 200 || resp->status > 299) {
    return makeError(errc::kProtocol, detail::statusLine("POST", target, resp->status, resp->body));
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
    std::string usedToken;
    if (authenticated && options_.auth == RedfishAuth::kBasic) {
      headers.push_back({"Authorization", detail::basicAuthorization(*options_.credentials)});
    } else if (authenticated && options_.auth == RedfishAuth::kSession) {
      std::lock_guard session(sessionMutex_);
      if (token_.empty()) {
        auto in = login();
        if (!in) {
          return in.error();
        }
      }
      usedToken = token_;
      headers.push_back({"X-Auth-Token", usedToken});
    }
    net::RequestOptions ro;
    ro.timeout = timeout;
    if (method == "GET") {
      ++gets_;
    }
    auto resp = endpoint_->client->request(method, target, body, std::move(headers), ro);
    if (!resp) {
      return transport(resp.error(), method + " " + target);
    }
    if (resp->status == 401 && authenticated && options_.auth == RedfishAuth::kSession &&
        round == 0) {
      // Session expired or was deleted: log in again once (unless a parallel read already did).
      std::lock_guard session(sessionMutex_);
      if (token_ == usedToken) {
        token_.clear();
      }
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

Result<RedfishDriver::Reply> RedfishDriver::getOk(const std::string& target, bool authenticated,
                                                  bool probe) {
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
    if (probe && (reply->status == 400 || reply->status == 405 || reply->status == 501)) {
      return makeError(errc::kUnsupported,
                       detail::statusLine("GET", target, reply->status, reply->body));
    }
    last = makeError(reply->status >= 500   ? errc::kUnavailable
                     : reply->status == 404 ? errc::kNotFound
                                            : errc::kProtocol,
                     detail::statusLine("GET", target, reply->status, reply->body));
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
  expand_ = redfish::parseExpandSupport(rootReply->body);
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
    auto read = readCollection(*service->resourceZones, "Redfish ResourceZones collection");
    if (!read) {
      root_.reset();
      return read.error();
    }
    const auto& zones = read->members;
    for (std::size_t i = 0; i < zones.size() && i < 16 && !zoneCompositionTarget_; ++i) {
      auto zone = getOk(zones[i]);
      if (!zone) {
        root_.reset();
        return zone.error();
      }
      auto target = redfish::parseCompositionTarget(zone->body, "Redfish ResourceZone " + zones[i]);
      if (!target) {
        root_.reset();
        return target.error();
      }
      zoneCompositionTarget_ = *target;
    }
  }
  return Ok{};
}

// Every member of a collection, following Members@odata.nextLink (at most 64 pages). A next
// link is read as the service wrote it: one that dropped $expand only costs member GETs.
Result<RedfishDriver::CollectionRead> RedfishDriver::readCollection(const std::string& link,
                                                                    const std::string& what,
                                                                    std::int64_t expandLevels) {
  CollectionRead out;
  std::optional<std::string> query;
  if (expandLevels > 0 && options_.expand && !expandRefused_.load()) {
    query = redfish::expandQuery(expand_, expandLevels);
  }
  std::string next = query ? redfish::withQuery(link, *query) : link;
  for (int page = 0; page < 64; ++page) {
    auto reply = getOk(next, true, /*probe=*/query.has_value() && page == 0);
    if (!reply && query && page == 0 && reply.error().code == errc::kUnsupported) {
      // It advertised $expand but refuses it: read plainly from now on.
      expandRefused_ = true;
      query.reset();
      next = link;
      reply = getOk(next);
    }
    if (!reply) {
      return reply.error();
    }
    auto parsed = redfish::parseCollectionPage(reply->body, what + " at " + next);
    if (!parsed) {
      return parsed.error();
    }
    if (query) {
      auto inline_ = redfish::embeddedResources(reply->body, what + " at " + next);
      if (!inline_) {
        return inline_.error();
      }
      out.embedded.merge(*inline_);
    }
    if (parsed->compositionTarget) {
      out.compositionTarget = parsed->compositionTarget;
    }
    out.members.insert(out.members.end(), parsed->members.begin(), parsed->members.end());
    if (!parsed->nextLink) {
      return out;
    }
    next = *parsed->nextLink;
  }
  return makeError(errc::kProtocol, what + " at " + link + " has more than 64 pages");
}

void detail::markDuplicateUuids(std::vector<GpuInfo>& gpus) {
  std::map<std::string, std::vector<GpuInfo*>> byUuid;
  for (auto& g : gpus) {
    if (!g.uuid.empty()) {
      byUuid[g.uuid].push_back(&g);
    }
  }
  for (auto& [uuid, same] : byUuid) {
    for (GpuInfo* g : same) {
      if (same.size() > 1 && g->health == GpuHealth::kOk) {
        g->health = GpuHealth::kUnhealthy;
        g->healthDetail = "UUID " + uuid + " is reported by " + std::to_string(same.size()) +
                          " GPUs of this chassis (no identity a node can check)";
      }
    }
  }
}

Result<Inventory> RedfishDriver::inventory() {
  std::lock_guard lock(mutex_);
  Inventory inv;
  if (options_.style == RedfishStyle::kFabric) {
    auto read = fabricInventory();
    if (!read) {
      return read.error();
    }
    inv = std::move(*read);
  } else {
    auto view = readView();
    if (!view) {
      return view.error();
    }
    inv.skipped = view->skipped;
    for (auto& [id, block] : view->blocks) {
      if (block.gpuBlock) {  // compute blocks are hosts, never GPUs
        inv.gpus.push_back(block.gpu);
      }
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
  }
  std::sort(inv.gpus.begin(), inv.gpus.end(),
            [](const GpuInfo& a, const GpuInfo& b) { return a.id < b.id; });
  // A UUID two GPUs report identifies neither: a node could not tell which one it has.
  detail::markDuplicateUuids(inv.gpus);
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

}  // namespace kc::fabric
