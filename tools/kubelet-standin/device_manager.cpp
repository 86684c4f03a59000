#include "tools/kubelet-standin/device_manager.hpp"

#include <fcntl.h>
#include <grpcpp/client_context.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "libcore/grpc/channel.hpp"
#include "tools/kubelet-standin/admission.hpp"

namespace kc::kubelet {

struct DeviceManager::Endpoint {
  std::string resource;
  std::string socket;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub;
  v1beta1::DevicePluginOptions options;
  grpc::ClientContext streamCtx;  // ListAndWatch; TryCancel() stops the stream
  std::thread thread;
};

namespace {

constexpr const char* kCheckpointKind = "KubeletStandinDeviceCheckpoint";

// grpc::StatusCode as Go's codes.Code.String() spells it.
std::string goCodeName(int code) {
  static constexpr std::array<const char*, 17> kNames = {
      "OK",       "Canceled",       "Unknown",          "InvalidArgument",   "DeadlineExceeded",
      "NotFound", "AlreadyExists",  "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
      "Aborted",  "OutOfRange",     "Unimplemented",    "Internal",          "Unavailable",
      "DataLoss", "Unauthenticated"};
  if (code >= 0 && code < static_cast<int>(kNames.size())) {
    return kNames[static_cast<std::size_t>(code)];
  }
  return "Code(" + std::to_string(code) + ")";
}

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::set<std::string> inUseLocked(const std::map<std::string, std::vector<ContainerDevices>>& pods,
                                  const std::string& resource) {
  std::set<std::string> out;
  for (const auto& [uid, list] : pods) {
    for (const auto& cd : list) {
      if (cd.resource == resource) {
        out.insert(cd.ids.begin(), cd.ids.end());
      }
    }
  }
  return out;
}

}  // namespace

std::string goGrpcErrorText(int code, const std::string& message) {
  return "rpc error: code = " + goCodeName(code) + " desc = " + message;
}

std::uint64_t checkpointChecksum(const std::string& data) {
  return fnv1a(data);
}

Status writeFileAtomically(const std::string& path, const std::string& body) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  bool ok = fd >= 0;
  if (ok) {
    std::size_t off = 0;
    while (ok && off < body.size()) {
      const ssize_t n = ::write(fd, body.data() + off, body.size() - off);
      ok = n > 0;
      off += n > 0 ? static_cast<std::size_t>(n) : 0;
    }
    ok = ok && ::fsync(fd) == 0;
    ::close(fd);
  }
  // rename() makes the new state appear whole or not at all.
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    return makeError(kc::errc::kUnavailable, "cannot write " + path);
  }
  return okStatus();
}

DeviceManager::DeviceManager(DeviceManagerOptions options) : opts_(std::move(options)) {}

DeviceManager::~DeviceManager() {
  forgetPlugins();
}

DeviceManager::Stats DeviceManager::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

Status DeviceManager::restore() {
  if (opts_.checkpointPath.empty()) {
    return okStatus();
  }
  std::ifstream in(opts_.checkpointPath);
  if (!in) {
    return okStatus();  // a fresh node
  }
  std::stringstream text;
  text << in.rdbuf();
  const std::string where = "device checkpoint " + opts_.checkpointPath;
  nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || doc.value("kind", "") != kCheckpointKind ||
      !doc.contains("data") || !doc["data"].is_object() || !doc.contains("checksum") ||
      !doc["checksum"].is_number_unsigned()) {
    return makeError(kc::errc::kInvalid, where + " is corrupt (not a checkpoint document)");
  }
  if (fnv1a(doc["data"].dump()) != doc["checksum"].get<std::uint64_t>()) {
    return makeError(kc::errc::kInvalid, where + " is corrupt (checksum mismatch)");
  }
  const auto& data = doc["data"];
  std::lock_guard lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  try {
    for (const auto& [resource, ids] : data.at("registeredDevices").items()) {
      (void)ids;
      Resource r;
      r.stopped = true;
      r.stopTime = now;
      resources_[resource] = std::move(r);
    }
    for (const auto& e : data.at("podDeviceEntries")) {
      ContainerDevices cd;
      cd.container = e.at("containerName").get<std::string>();
      cd.resource = e.at("resourceName").get<std::string>();
      cd.ids = e.at("deviceIDs").get<std::vector<std::string>>();
      cd.envs = e.value("envs", std::map<std::string, std::string>{});
      if (resources_.count(cd.resource) == 0) {
        Resource r;
        r.stopTime = now;
        resources_[cd.resource] = std::move(r);
      }
      pods_[e.at("podUID").get<std::string>()].push_back(std::move(cd));
    }
  } catch (const nlohmann::json::exception& e) {
    resources_.clear();
    pods_.clear();
    return makeError(kc::errc::kInvalid, where + " is corrupt: " + e.what());
  }
  return okStatus();
}

void DeviceManager::writeCheckpointLocked() {
  if (opts_.checkpointPath.empty()) {
    return;
  }
  nlohmann::json data;
  data["registeredDevices"] = nlohmann::json::object();
  for (const auto& [name, r] : resources_) {
    auto ids = nlohmann::json::array();
    for (const auto& [id, healthy] : r.devices) {
      ids.push_back(id);
    }
    data["registeredDevices"][name] = ids;
  }
  data["podDeviceEntries"] = nlohmann::json::array();
  for (const auto& [uid, list] : pods_) {
    for (const auto& cd : list) {
      data["podDeviceEntries"].push_back({{"podUID", uid},
                                          {"containerName", cd.container},
                                          {"resourceName", cd.resource},
                                          {"deviceIDs", cd.ids},
                                          {"envs", cd.envs}});
    }
  }
  nlohmann::json doc = {
      {"kind", kCheckpointKind}, {"version", 1}, {"data", data}, {"checksum", fnv1a(data.dump())}};
  if (!writeFileAtomically(opts_.checkpointPath, doc.dump(1) + "\n")) {
    spdlog::error("cannot write device checkpoint {}", opts_.checkpointPath);
  }
}

Status DeviceManager::registerPlugin(const v1beta1::RegisterRequest& request) {
  auto refuse = [this](std::string message) {
    std::lock_guard lock(mu_);
    ++stats_.registrationsRefused;
    return makeError(kc::errc::kInvalid, std::move(message));
  };
  // kubelet's wording (pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go).
  if (request.version() != "v1beta1") {
    return refuse("requested API version \"" + request.version() +
                  "\" is not supported by kubelet. Supported versions are [\"v1beta1\"]");
  }
  if (!isExtendedResourceName(request.resource_name())) {
    return refuse("the ResourceName \"" + request.resource_name() + "\" is invalid");
  }
  // Stricter than kubelet (which joins whatever it gets to the directory and fails to dial):
  // the endpoint must name a socket file directly inside the device-plugin directory.
  const std::string& endpoint = request.endpoint();
  if (endpoint.empty() || endpoint.find('/') != std::string::npos || endpoint == "." ||
      endpoint == ".." || endpoint == "kubelet.sock") {
    return refuse("invalid endpoint \"" + endpoint +
                  "\": must be the name of the plugin's socket file in " + opts_.pluginDir);
  }
  auto ep = std::make_shared<Endpoint>();
  ep->resource = request.resource_name();
  ep->socket = (std::filesystem::path(opts_.pluginDir) / endpoint).string();
  ep->channel = grpcx::dialUnix(ep->socket);
  if (auto st = grpcx::waitConnected(*ep->channel, opts_.dialTimeout, ep->socket); !st) {
    return refuse("failed to dial device plugin: " + st.error().message);
  }
  ep->stub = v1beta1::DevicePlugin::NewStub(ep->channel);
  {
    grpc::ClientContext ctx;
    grpcx::setTimeout(ctx, opts_.rpcTimeout);
    v1beta1::Empty empty;
    const grpc::Status st = ep->stub->GetDevicePluginOptions(&ctx, empty, &ep->options);
    if (!st.ok()) {
      return refuse("failed to get device plugin options: " +
                    goGrpcErrorText(st.error_code(), st.error_message()));
    }
  }
  std::shared_ptr<Endpoint> old;
  {
    std::lock_guard lock(mu_);
    Resource& r = resources_[ep->resource];
    old = r.endpoint;
    r.endpoint = ep;
    r.stopped = false;
    removed_.erase(ep->resource);
    ++stats_.registrations;
    if (old) {
      retired_.push_back(old);
    }
    ep->thread = std::thread([this, ep] { runListAndWatch(ep); });
  }
  if (old) {
    old->streamCtx.TryCancel();
    if (old->thread.joinable()) {
      old->thread.join();
    }
    std::lock_guard lock(mu_);
    retired_.erase(std::remove(retired_.begin(), retired_.end(), old), retired_.end());
  }
  spdlog::info("device plugin registered: resource {} endpoint {} (preferred allocation: {})",
               ep->resource, ep->socket, ep->options.get_preferred_allocation_available());
  return okStatus();
}

void DeviceManager::runListAndWatch(std::shared_ptr<Endpoint> ep) {
  v1beta1::Empty empty;
  auto reader = ep->stub->ListAndWatch(&ep->streamCtx, empty);
  v1beta1::ListAndWatchResponse resp;
  while (reader->Read(&resp)) {
    {
      std::lock_guard lock(mu_);
      auto it = resources_.find(ep->resource);
      if (it == resources_.end() || it->second.endpoint != ep) {
        break;
      }
      it->second.devices.clear();
      for (const auto& d : resp.devices()) {
        it->second.devices[d.id()] = d.health() == "Healthy";
      }
      ++stats_.listUpdates;
      writeCheckpointLocked();
    }
  }
  const grpc::Status st = reader->Finish();
  spdlog::info("ListAndWatch of {} ended: {}", ep->resource,
               st.ok() ? "stream closed" : st.error_message());
  endpointEnded(ep);
}

void DeviceManager::endpointEnded(const std::shared_ptr<Endpoint>& ep) {
  {
    std::lock_guard lock(mu_);
    auto it = resources_.find(ep->resource);
    if (it == resources_.end() || it->second.endpoint != ep) {
      return;  // replaced or forgotten meanwhile
    }
    // kubelet's markResourceUnhealthy: capacity stays, allocatable drops to 0.
    it->second.stopped = true;
    it->second.stopTime = std::chrono::steady_clock::now();
    for (auto& [id, healthy] : it->second.devices) {
      healthy = false;
    }
  }
}

void DeviceManager::forgetPlugins() {
  std::vector<std::shared_ptr<Endpoint>> stopping;
  {
    std::lock_guard lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    for (auto& [name, r] : resources_) {
      if (r.endpoint) {
        stopping.push_back(r.endpoint);
      }
      r.endpoint.reset();
      r.devices.clear();
      r.stopped = true;
      r.stopTime = now;
    }
    stopping.insert(stopping.end(), retired_.begin(), retired_.end());
    retired_.clear();
  }
  for (auto& ep : stopping) {
    ep->streamCtx.TryCancel();
  }
  for (auto& ep : stopping) {
    if (ep->thread.joinable()) {
      ep->thread.join();
    }
  }
}

std::map<std::string, ResourceCounts> DeviceManager::counts() {
  std::map<std::string, ResourceCounts> out;
  std::vector<std::shared_ptr<Endpoint>> expired;
  {
    std::lock_guard lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    for (auto it = resources_.begin(); it != resources_.end();) {
      Resource& r = it->second;
      if (r.stopped && now - r.stopTime > opts_.stopGrace) {
        spdlog::info(
            "device plugin resource {} removed: its plugin has been gone for longer than the grace "
            "period",
            it->first);
        removed_.insert(it->first);
        if (r.endpoint) {
          expired.push_back(r.endpoint);
        }
        it = resources_.erase(it);
        writeCheckpointLocked();
        continue;
      }
      ResourceCounts c;
      c.capacity = static_cast<std::int64_t>(r.devices.size());
      for (const auto& [id, healthy] : r.devices) {
        c.allocatable += healthy ? 1 : 0;
      }
      out[it->first] = c;
      ++it;
    }
    for (const auto& name : removed_) {
      out.emplace(name, ResourceCounts{});
    }
  }
  for (auto& ep : expired) {
    if (ep->thread.joinable()) {
      ep->thread.join();  // its stream already ended (that is how it stopped)
    }
  }
  return out;
}

std::map<std::string, std::vector<std::string>> DeviceManager::allDevices() const {
  std::lock_guard lock(mu_);
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& [name, r] : resources_) {
    auto& ids = out[name];
    for (const auto& [id, healthy] : r.devices) {
      ids.push_back(id);
    }
  }
  return out;
}

bool DeviceManager::isDevicePluginResource(const std::string& resource) const {
  std::lock_guard lock(mu_);
  if (resources_.count(resource) != 0) {
    return true;
  }
  for (const auto& [uid, list] : pods_) {
    for (const auto& cd : list) {
      if (cd.resource == resource) {
        return true;
      }
    }
  }
  return false;
}

std::vector<std::string> DeviceManager::connectedResources() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, r] : resources_) {
    if (r.endpoint && !r.stopped) {
      out.push_back(name);
    }
  }
  return out;
}

Result<std::vector<std::string>> DeviceManager::devicesToAllocate(const std::string& podUid,
                                                                  const std::string& container,
                                                                  const std::string& resource,
                                                                  std::int64_t needed,
                                                                  std::set<std::string>& reusable) {
  (void)podUid;
  (void)container;
  std::vector<std::string> allocated;
  std::vector<std::string> available;
  std::shared_ptr<Endpoint> ep;
  {
    std::lock_guard lock(mu_);
    auto it = resources_.find(resource);
    if (it == resources_.end()) {
      return makeError(kc::errc::kUnavailable, "cannot allocate unregistered device " + resource);
    }
    for (const auto& id : reusable) {
      if (static_cast<std::int64_t>(allocated.size()) == needed) {
        break;
      }
      allocated.push_back(id);
    }
    if (static_cast<std::int64_t>(allocated.size()) == needed) {
      return allocated;
    }
    const std::set<std::string> inUse = inUseLocked(pods_, resource);
    for (const auto& [id, healthy] : it->second.devices) {
      if (healthy && inUse.count(id) == 0) {
        available.push_back(id);
      }
    }
    const std::int64_t remaining = needed - static_cast<std::int64_t>(allocated.size());
    if (static_cast<std::int64_t>(available.size()) < remaining) {
      return makeError(kc::errc::kExhausted,
                       "requested number of devices unavailable for " + resource +
                           ". Requested: " + std::to_string(remaining) +
                           ", Available: " + std::to_string(available.size()));
    }
    ep = it->second.endpoint;
  }
  if (ep && !ep->stub) {
    ep.reset();
  }
  if (ep && ep->options.get_preferred_allocation_available()) {
    v1beta1::PreferredAllocationRequest req;
    auto* cr = req.add_container_requests();
    for (const auto& id : available) {
      cr->add_available_deviceids(id);
    }
    for (const auto& id : allocated) {
      cr->add_available_deviceids(id);
      cr->add_must_include_deviceids(id);
    }
    cr->set_allocation_size(static_cast<std::int32_t>(needed));
    v1beta1::PreferredAllocationResponse resp;
    grpc::ClientContext ctx;
    grpcx::setTimeout(ctx, opts_.rpcTimeout);
    const grpc::Status st = ep->stub->GetPreferredAllocation(&ctx, req, &resp);
    if (!st.ok()) {
      return makeError(kc::errc::kUnavailable,
                       "device plugin GetPreferredAllocation rpc failed with err: " +
                           goGrpcErrorText(st.error_code(), st.error_message()));
    }
    if (resp.container_responses_size() > 0) {
      for (const auto& id : resp.container_responses(0).deviceids()) {
        if (static_cast<std::int64_t>(allocated.size()) == needed) {
          break;
        }
        auto pos = std::find(available.begin(), available.end(), id);
        if (pos != available.end()) {
          allocated.push_back(id);
          available.erase(pos);
        }
      }
    }
  }
  for (const auto& id : available) {
    if (static_cast<std::int64_t>(allocated.size()) == needed) {
      break;
    }
    allocated.push_back(id);
  }
  return allocated;
}

Result<std::vector<ContainerDevices>> DeviceManager::allocate(const nlohmann::json& pod) {
  const std::string uid =
      pod.value("metadata", nlohmann::json::object()).value("uid", std::string());
  {
    std::lock_guard lock(mu_);
    if (auto it = pods_.find(uid); it != pods_.end()) {
      return it->second;  // already holds its devices (admitted before a restart)
    }
  }
  auto fail = [&](Error e) -> Result<std::vector<ContainerDevices>> {
    std::lock_guard lock(mu_);
    pods_.erase(uid);
    ++stats_.allocateFailures;
    return e;
  };
  std::map<std::string, std::set<std::string>> reusable;  // resource -> init containers' devices
  std::vector<ContainerDevices> got;
  const auto spec = pod.value("spec", nlohmann::json::object());
  std::vector<std::pair<nlohmann::json, bool>> containers;
  for (const auto& c : spec.value("initContainers", nlohmann::json::array())) {
    containers.emplace_back(c, true);
  }
  for (const auto& c : spec.value("containers", nlohmann::json::array())) {
    containers.emplace_back(c, false);
  }
  for (const auto& [container, isInit] : containers) {
    const std::string cname = container.value("name", std::string());
    auto req = containerRequests(container);
    if (!req) {
      return fail(req.error());
    }
    for (const auto& [resource, count] : *req) {
      if (count <= 0 || !isDevicePluginResource(resource)) {
        continue;
      }
      auto ids = devicesToAllocate(uid, cname, resource, count, reusable[resource]);
      if (!ids) {
        return fail(ids.error());
      }
      std::shared_ptr<Endpoint> ep;
      bool stopped = true;
      {
        std::lock_guard lock(mu_);
        auto it = resources_.find(resource);
        if (it != resources_.end()) {
          ep = it->second.endpoint;
          stopped = it->second.stopped;
        }
      }
      if (!ep) {
        return fail(makeError(kc::errc::kUnavailable, "unknown Device Plugin " + resource));
      }
      if (stopped) {
        return fail(
            makeError(kc::errc::kUnavailable, "endpoint " + ep->socket + " has been stopped"));
      }
      v1beta1::AllocateRequest areq;
      auto* cr = areq.add_container_requests();
      for (const auto& id : *ids) {
        cr->add_devices_ids(id);
      }
      v1beta1::AllocateResponse aresp;
      grpc::ClientContext ctx;
      grpcx::setTimeout(ctx, opts_.rpcTimeout);
      {
        std::lock_guard lock(mu_);
        ++stats_.allocateCalls;
      }
      const grpc::Status st = ep->stub->Allocate(&ctx, areq, &aresp);
      if (!st.ok()) {
        return fail(makeError(kc::errc::kUnavailable,
                              goGrpcErrorText(st.error_code(), st.error_message())));
      }
      if (aresp.container_responses_size() == 0) {
        return fail(
            makeError(kc::errc::kUnavailable, "no containers return in allocation response"));
      }
      ContainerDevices cd;
      cd.container = cname;
      cd.resource = resource;
      cd.ids = *ids;
      for (const auto& [k, v] : aresp.container_responses(0).envs()) {
        cd.envs[k] = v;
      }
      auto& reuse = reusable[resource];
      for (const auto& id : cd.ids) {
        if (isInit) {
          reuse.insert(id);
        } else {
          reuse.erase(id);
        }
      }
      std::lock_guard lock(mu_);
      pods_[uid].push_back(cd);
      got.push_back(std::move(cd));
    }
  }
  std::lock_guard lock(mu_);
  writeCheckpointLocked();
  return got;
}

void DeviceManager::release(const std::string& podUid) {
  std::lock_guard lock(mu_);
  if (pods_.erase(podUid) != 0) {
    writeCheckpointLocked();
  }
}

void DeviceManager::retainOnly(const std::set<std::string>& activeUids) {
  std::lock_guard lock(mu_);
  bool changed = false;
  for (auto it = pods_.begin(); it != pods_.end();) {
    if (activeUids.count(it->first) == 0) {
      it = pods_.erase(it);
      changed = true;
    } else {
      ++it;
    }
  }
  if (changed) {
    writeCheckpointLocked();
  }
}

std::vector<ContainerDevices> DeviceManager::podDevices(const std::string& podUid) const {
  std::lock_guard lock(mu_);
  auto it = pods_.find(podUid);
  return it == pods_.end() ? std::vector<ContainerDevices>{} : it->second;
}

std::set<std::string> DeviceManager::podsWithDevices() const {
  std::lock_guard lock(mu_);
  std::set<std::string> out;
  for (const auto& [uid, list] : pods_) {
    out.insert(uid);
  }
  return out;
}

std::int64_t DeviceManager::allocatedCount(const std::string& resource) const {
  std::lock_guard lock(mu_);
  return static_cast<std::int64_t>(inUseLocked(pods_, resource).size());
}

}  // namespace kc::kubelet
