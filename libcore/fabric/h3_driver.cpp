#include "libcore/fabric/h3_driver.hpp"

#include <algorithm>

#include "libcore/base/json_guard.hpp"
#include "libcore/fabric/http_endpoint.hpp"
#include "libcore/fabric/verified_move.hpp"

namespace kc::fabric {
namespace {

const h3::GpuRow* findRow(const h3::Resources& res, const std::string& devGid) {
  for (const auto& row : res.gpus) {
    if (row.devGid == devGid) {
      return &row;
    }
  }
  return nullptr;
}

std::optional<std::string> hostOf(const h3::GpuRow& row) {
  if (!row.hostPort) {
    return std::nullopt;
  }
  return std::to_string(*row.hostPort);
}

std::string describeHost(const std::optional<std::string>& host) {
  return host ? "host port " + *host : "no host";
}

// An allocation reply as a claim for verifiedMove: Result:[true] claims the move, anything
// else is a refusal or a failed request (errors other than rejected credentials are not fatal:
// the re-read decides).
Result<MoveClaim> claimOf(Result<h3::Reply> reply, const std::string& unseen,
                          const std::string& happened) {
  if (!reply && reply.error().code == errc::kUnauthorized) {
    return reply.error();
  }
  MoveClaim claim;
  if (reply && reply->result) {
    claim.kind = MoveClaim::Kind::kDone;
    claim.error = makeError(errc::kUnverified, "chassis answered Result:[true] but " + unseen);
  } else if (reply) {
    claim.error = makeError(errc::kRefused, "chassis answered Result:[false]: " + reply->remark);
    claim.note = "chassis answered Result:[false] (" + reply->remark + ") but " + happened;
  } else {
    claim.error = reply.error();
    claim.note = "request failed (" + reply.error().message + ") but " + happened;
  }
  return claim;
}

}  // namespace

Result<std::unique_ptr<H3Driver>> H3Driver::create(H3Options options) {
  if (!isValidChassisName(options.chassis)) {
    return makeError(errc::kInvalid,
                     "h3 chassis name \"" + options.chassis + "\" must be a lower-case DNS label");
  }
  if (options.policy.attempts == 0) {
    return makeError(errc::kInvalid, "h3 chassis " + options.chassis + ": attempts must be >= 1");
  }
  if (!options.sleeper) {
    options.sleeper = realSleeper();
  }
  auto endpoint = detail::makeEndpoint(options.baseUrl, options.tls, options.policy.readTimeout);
  if (!endpoint) {
    return endpoint.error();
  }
  auto ep = std::make_unique<detail::Endpoint>(std::move(endpoint).value());
  return std::unique_ptr<H3Driver>(new H3Driver(std::move(options), std::move(ep)));
}

H3Driver::H3Driver(H3Options options, std::unique_ptr<detail::Endpoint> endpoint)
    : options_(std::move(options)), endpoint_(std::move(endpoint)) {}

H3Driver::~H3Driver() = default;

net::Headers H3Driver::headers() const {
  net::Headers h;
  if (options_.credentials && !options_.credentials->empty()) {
    h.push_back({"Authorization", detail::basicAuthorization(*options_.credentials)});
  }
  return h;
}

Result<h3::Resources> H3Driver::readResources() {
  const std::string target = endpoint_->basePath + std::string(h3::kResourcesPath);
  Error last = makeError(errc::kUnavailable, "no attempt made");
  for (std::uint32_t attempt = 1; attempt <= options_.policy.attempts; ++attempt) {
    if (attempt > 1) {
      options_.sleeper(options_.policy.backoffBefore(attempt));
    }
    net::RequestOptions ro;
    ro.timeout = options_.policy.readTimeout;
    auto resp = endpoint_->client->request("GET", target, {}, headers(), ro);
    if (!resp) {
      last = detail::transportError(resp.error(), "GET " + target);
      continue;
    }
    if (resp->status == 401 || resp->status == 403) {
      return makeError(errc::kUnauthorized, "h3 chassis " + options_.chassis +
                                                " rejected the credentials (HTTP " +
                                                std::to_string(resp->status) + ")");
    }
    if (resp->status != 200) {
      last = makeError(resp->status >= 500 ? errc::kUnavailable : errc::kProtocol,
                       "GET " + target + " answered HTTP " + std::to_string(resp->status) + ": " +
                           excerpt(resp->body));
      if (resp->status >= 500) {
        continue;
      }
      return last;
    }
    auto parsed = h3::parseResources(resp->body);
    if (!parsed) {
      last = parsed.error();
      continue;
    }
    return parsed;
  }
  return makeError(last.code, "h3 chassis " + options_.chassis + ": inventory failed after " +
                                  std::to_string(options_.policy.attempts) +
                                  " attempts: " + last.message);
}

Inventory H3Driver::toInventory(const h3::Resources& resources) const {
  Inventory inv;
  for (const auto& row : resources.gpus) {
    GpuInfo gpu;
    gpu.localId = row.devGid;
    gpu.chassis = options_.chassis;
    gpu.id = makeGpuId(options_.chassis, row.devGid);
    gpu.uuid = row.guid;
    gpu.model = options_.gpuModel;
    gpu.hostPort = hostOf(row);
    if (row.guid.empty()) {
      // The chassis lists the slot but cannot read the GPU: treat it as lost.
      gpu.health = GpuHealth::kUnhealthy;
      gpu.healthDetail = "chassis reports no OB_GPU_GUID for this device";
    }
    inv.gpus.push_back(std::move(gpu));
  }
  for (const auto& [port, gid] : resources.ports) {
    inv.hosts.push_back(std::to_string(port));
  }
  std::sort(inv.gpus.begin(), inv.gpus.end(),
            [](const GpuInfo& a, const GpuInfo& b) { return a.id < b.id; });
  std::sort(inv.hosts.begin(), inv.hosts.end());
  return inv;
}

Result<Inventory> H3Driver::inventory() {
  std::lock_guard lock(mutex_);
  auto res = readResources();
  if (!res) {
    return res.error();
  }
  return toInventory(*res);
}

Result<std::string> H3Driver::localIdOf(const std::string& gpuId) const {
  const auto parts = splitGpuId(gpuId);
  if (!parts || parts->chassis != options_.chassis) {
    return makeError(errc::kInvalid,
                     "\"" + gpuId + "\" is not a GPU id of chassis " + options_.chassis);
  }
  if (!h3::isValidDevGid(parts->localId)) {
    return makeError(errc::kInvalid, "\"" + parts->localId + "\" is not an H3 Dev_GID");
  }
  return parts->localId;
}

Result<h3::Reply> H3Driver::sendAllocation(const std::string& method, const std::string& body) {
  const std::string target = endpoint_->basePath + std::string(h3::kAllocationPath);
  net::Headers h = headers();
  h.push_back(
      {"Content-Type", "text/plain"});  // what the chassis expects, although the body is JSON
  net::RequestOptions ro;
  ro.timeout = options_.policy.moveTimeout;
  auto resp = endpoint_->client->request(method, target, body, std::move(h), ro);
  if (!resp) {
    return detail::transportError(resp.error(), method + " " + target);
  }
  if (resp->status == 401 || resp->status == 403) {
    return makeError(errc::kUnauthorized, "h3 chassis " + options_.chassis +
                                              " rejected the credentials (HTTP " +
                                              std::to_string(resp->status) + ")");
  }
  if (resp->status >= 500) {
    return makeError(errc::kUnavailable, method + " " + target + " answered HTTP " +
                                             std::to_string(resp->status) + ": " +
                                             excerpt(resp->body));
  }
  if (resp->status != 200) {
    return makeError(errc::kRefused, method + " " + target + " answered HTTP " +
                                         std::to_string(resp->status) + ": " + excerpt(resp->body));
  }
  return h3::parseReply(resp->body);
}

Result<MoveReport> H3Driver::attach(const std::string& gpuId, const std::string& host) {
  std::lock_guard lock(mutex_);
  auto devGid = localIdOf(gpuId);
  if (!devGid) {
    return devGid.error();
  }
  auto port = h3::parseHostPort(host);
  if (!port) {
    return makeError(errc::kInvalid, "h3 host \"" + host + "\": " + port.error().message);
  }
  const std::string hostText = std::to_string(*port);
  auto before = readResources();
  if (!before) {
    return before.error();
  }
  const h3::GpuRow* row = findRow(*before, *devGid);
  if (!row) {
    return makeError(errc::kNotFound, "chassis " + options_.chassis + " has no GPU " + *devGid);
  }
  if (!before->ports.empty() && !before->ports.count(*port)) {
    return makeError(errc::kNotFound,
                     "chassis " + options_.chassis + " has no host port " + hostText);
  }
  MoveReport report{gpuId, hostOf(*row), hostText, false, 0, {}};
  if (row->guid.empty()) {
    return makeError(errc::kUnhealthy,
                     "GPU " + gpuId + " is not readable by the chassis (lost); not attaching");
  }
  if (row->hostPort == *port) {
    return report;  // already there
  }
  if (row->hostPort) {
    return makeError(errc::kConflict, "GPU " + gpuId + " is attached to host port " +
                                          std::to_string(*row->hostPort) + "; detach it first");
  }
  return assignVerified(std::move(report), *devGid, *port, "attach", std::nullopt, false);
}

Result<MoveReport> H3Driver::detach(const std::string& gpuId) {
  std::lock_guard lock(mutex_);
  auto devGid = localIdOf(gpuId);
  if (!devGid) {
    return devGid.error();
  }
  auto before = readResources();
  if (!before) {
    return before.error();
  }
  const h3::GpuRow* row = findRow(*before, *devGid);
  if (!row) {
    return makeError(errc::kNotFound, "chassis " + options_.chassis + " has no GPU " + *devGid);
  }
  MoveReport report{gpuId, hostOf(*row), std::nullopt, false, 0, {}};
  if (!row->hostPort) {
    return report;  // already detached
  }
  const std::string body = h3::encodeUnassign(options_.gep, *devGid);
  std::optional<std::string> lastSeenOn = hostOf(*row);
  MoveSteps steps;
  steps.what = "detach " + gpuId;
  steps.send = [&]() -> Result<MoveClaim> {
    return claimOf(sendAllocation("DELETE", body),
                   "the inventory still shows GPU " + gpuId + " on " + describeHost(lastSeenOn),
                   "the GPU is detached");
  };
  bool lostAfterDetach = false;
  steps.observe = [&]() -> Result<Observed> {
    auto after = readResources();
    if (!after) {
      return makeError(after.error().code,
                       "detach " + gpuId + ": could not verify: " + after.error().message);
    }
    const h3::GpuRow* now = findRow(*after, *devGid);
    if (!now) {
      return makeError(errc::kUnhealthy,
                       "GPU " + gpuId + " disappeared from the chassis inventory during detach");
    }
    if (!now->hostPort) {
      lostAfterDetach = now->guid.empty();
      return Observed::kReached;
    }
    if (now->guid.empty()) {
      // The chassis can no longer read the GPU and still has it on the host: retrying the
      // unassign will not help; the caller must treat the GPU as broken.
      return makeError(
          errc::kUnhealthy,
          "GPU " + gpuId + " was lost during detach and is still on " + describeHost(hostOf(*now)));
    }
    lastSeenOn = hostOf(*now);
    return Observed::kNotYet;
  };
  auto done = verifiedMove(std::move(report), options_.policy, options_.sleeper, steps);
  if (done && lostAfterDetach) {
    done->notes.push_back("GPU is no longer readable by the chassis (lost)");
  }
  return done;
}

Result<MoveReport> H3Driver::move(const std::string& gpuId, const std::optional<std::string>& from,
                                  const std::string& to) {
  std::lock_guard lock(mutex_);
  auto devGid = localIdOf(gpuId);
  if (!devGid) {
    return devGid.error();
  }
  auto port = h3::parseHostPort(to);
  if (!port) {
    return makeError(errc::kInvalid, "h3 host \"" + to + "\": " + port.error().message);
  }
  std::optional<std::uint32_t> fromPort;
  if (from) {
    auto f = h3::parseHostPort(*from);
    if (!f) {
      return makeError(errc::kInvalid, "h3 host \"" + *from + "\": " + f.error().message);
    }
    fromPort = *f;
  }
  const std::string hostText = std::to_string(*port);
  MoveReport report{gpuId, from, hostText, false, 0, {}};
  bool unassignClaimed = false;
  if (fromPort && *fromPort != *port) {
    auto reply = sendAllocation("DELETE", h3::encodeUnassign(options_.gep, *devGid));
    if (!reply && reply.error().code == errc::kUnauthorized) {
      return reply.error();
    }
    unassignClaimed = reply && reply->result;
    report.attempts += 1;
  }
  const auto sent = report.attempts;
  auto done = assignVerified(std::move(report), *devGid, *port, "move", fromPort, unassignClaimed);
  if (done) {
    done->attempts += sent;
  }
  return done;
}

Result<MoveReport> H3Driver::assignVerified(MoveReport report, const std::string& devGid,
                                            std::uint32_t port, const std::string& what,
                                            std::optional<std::uint32_t> fromPort,
                                            bool unassignClaimed) {
  const std::string gpuId = report.gpu;
  const std::string hostText = std::to_string(port);
  const std::string body = h3::encodeAssign(options_.gep, *h3::portGid(port), devGid);
  MoveSteps steps;
  steps.what = what + " " + gpuId + " to host port " + hostText;
  steps.send = [&]() -> Result<MoveClaim> {
    return claimOf(sendAllocation("POST", body), "the inventory shows GPU " + gpuId + " unattached",
                   "the GPU is attached");
  };
  steps.observe = [&]() -> Result<Observed> {
    auto after = readResources();
    if (!after) {
      return makeError(after.error().code,
                       what + " " + gpuId + ": could not verify: " + after.error().message);
    }
    const h3::GpuRow* now = findRow(*after, devGid);
    if (!now) {
      return makeError(errc::kUnhealthy,
                       "GPU " + gpuId + " disappeared from the chassis inventory during " + what);
    }
    if (now->guid.empty()) {
      return makeError(errc::kUnhealthy,
                       "GPU " + gpuId + " was lost (no OB_GPU_GUID) during " + what);
    }
    if (now->hostPort == port) {
      return Observed::kReached;
    }
    if (now->hostPort && now->hostPort == fromPort) {
      // The unassign of a move did not take: the chassis refused the assign of an attached GPU.
      return makeError(unassignClaimed ? errc::kUnverified : errc::kConflict,
                       "GPU " + gpuId + " is still on host port " + std::to_string(*fromPort) +
                           (unassignClaimed ? ": the chassis answered Result:[true] to the unassign"
                                            : ": the unassign did not take effect"));
    }
    if (now->hostPort) {
      return makeError(errc::kConflict, "GPU " + gpuId + " is now on host port " +
                                            std::to_string(*now->hostPort) + ", not " + hostText +
                                            " (moved by someone else?)");
    }
    return Observed::kNotYet;
  };
  return verifiedMove(std::move(report), options_.policy, options_.sleeper, steps);
}

}  // namespace kc::fabric
