#include "tools/kubelet-standin/dra_manager.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "tools/kubelet-standin/device_manager.hpp"

namespace kc::kubelet {

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

namespace {

// kubelet's checkpoint names (pkg/kubelet/cm/dra/state); the checksum is the stand-in's own.
constexpr const char* kCheckpointKind = "DRACheckpoint";
constexpr const char* kCheckpointApiVersion = "checkpoint.dra.kubelet.k8s.io/v1";

std::string claimKey(const std::string& ns, const std::string& name) {
  return ns + "/" + name;
}

std::string podUidOf(const json& pod) {
  const auto& meta = pod.contains("metadata") ? pod["metadata"] : json::object();
  return meta.value("uid", std::string());
}

std::string podNsOf(const json& pod) {
  const auto& meta = pod.contains("metadata") ? pod["metadata"] : json::object();
  return meta.value("namespace", std::string());
}

std::string podKeyOf(const json& pod) {
  const auto& meta = pod.contains("metadata") ? pod["metadata"] : json::object();
  return podNsOf(pod) + "/" + meta.value("name", std::string());
}

Error prefixed(const std::string& prefix, const Error& e) {
  return makeError(e.code, prefix + e.message);
}

json devicesJson(const std::vector<PreparedDevice>& devices) {
  json out = json::array();
  for (const auto& d : devices) {
    out.push_back({{"PoolName", d.pool},
                   {"DeviceName", d.device},
                   {"RequestNames", d.requestNames},
                   {"CDIDeviceIDs", d.cdiDeviceIds}});
  }
  return out;
}

// kubelet's ClaimInfoState.
json claimStateJson(const ClaimInfo& c) {
  json pods = json::object();
  for (const auto& uid : c.podUids) {
    pods[uid] = json::object();
  }
  json drivers = json::object();
  for (const auto& [driver, devices] : c.drivers) {
    drivers[driver] = {{"Devices", devicesJson(devices)}};
  }
  return {{"ClaimUID", c.uid},
          {"ClaimName", c.name},
          {"Namespace", c.ns},
          {"PodUIDs", pods},
          {"DriverState", drivers}};
}

ClaimInfo claimFromState(const json& s) {
  ClaimInfo c;
  c.uid = s.at("ClaimUID").get<std::string>();
  c.name = s.at("ClaimName").get<std::string>();
  c.ns = s.at("Namespace").get<std::string>();
  for (const auto& [uid, v] : s.at("PodUIDs").items()) {
    (void)v;
    c.podUids.insert(uid);
  }
  for (const auto& [driver, state] : s.at("DriverState").items()) {
    auto& list = c.drivers[driver];
    for (const auto& d : state.value("Devices", json::array())) {
      list.push_back({d.value("RequestNames", std::vector<std::string>{}),
                      d.value("PoolName", std::string()), d.value("DeviceName", std::string()),
                      d.value("CDIDeviceIDs", std::vector<std::string>{})});
    }
  }
  return c;
}

std::vector<PreparedDevice> devicesFrom(const drav1::NodePrepareResourceResponse& r) {
  std::vector<PreparedDevice> out;
  for (const auto& d : r.devices()) {
    out.push_back({{d.request_names().begin(), d.request_names().end()},
                   d.pool_name(),
                   d.device_name(),
                   {d.cdi_device_ids().begin(), d.cdi_device_ids().end()}});
  }
  return out;
}

template <typename Request>
void addClaim(Request& req, const ClaimInfo& c) {
  auto* claim = req.add_claims();
  claim->set_namespace_(c.ns);
  claim->set_uid(c.uid);
  claim->set_name(c.name);
}

// The checks kubelet makes on every response: a result for each claim sent, none for others,
// no claim-level error. `method`: NodePrepareResources or NodeUnprepareResources.
template <typename Response>
Status checkClaimResults(const std::string& method, const std::map<std::string, std::string>& sent,
                         const Response& resp) {
  for (const auto& [uid, result] : resp.claims()) {
    auto it = sent.find(uid);
    if (it == sent.end()) {
      return makeError(errc::kProtocol, method + " returned result for unknown claim UID " + uid);
    }
    if (!result.error().empty()) {
      return makeError(errc::kFailedPrecondition,
                       method + " failed for ResourceClaim " + it->second + ": " + result.error());
    }
  }
  const auto unfinished = static_cast<std::int64_t>(sent.size()) - resp.claims_size();
  if (unfinished != 0) {
    return makeError(errc::kProtocol,
                     method + " skipped " + std::to_string(unfinished) + " ResourceClaims");
  }
  return okStatus();
}

Error callFailed(const std::string& method, const Error& e) {
  // "DRA driver X is not registered" stands alone; a failed call is prefixed by its method.
  return e.code == errc::kUnavailable ? prefixed(method + ": ", e) : e;
}

}  // namespace

DraManager::DraManager(DraManagerOptions options, DraPlugins& plugins, DraCallbacks callbacks)
    : opts_(std::move(options)), plugins_(plugins), callbacks_(std::move(callbacks)) {}

DraManager::~DraManager() {
  stop();
}

Status DraManager::restore() {
  if (opts_.checkpointPath.empty()) {
    return okStatus();
  }
  std::ifstream in(opts_.checkpointPath);
  if (!in) {
    return okStatus();  // a fresh node
  }
  std::stringstream text;
  text << in.rdbuf();
  const std::string where = "DRA checkpoint " + opts_.checkpointPath;
  const json doc = json::parse(text.str(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("Data") || !doc["Data"].is_string() ||
      !doc.contains("Checksum") || !doc["Checksum"].is_number_unsigned() ||
      checkpointChecksum(doc["Data"].get<std::string>()) != doc["Checksum"].get<std::uint64_t>()) {
    return makeError(errc::kInvalid, where +
                                         " is corrupt; please drain the node and remove the "
                                         "DRA state file");
  }
  const json data = json::parse(doc["Data"].get<std::string>(), nullptr, false);
  std::lock_guard lock(mu_);
  try {
    if (data.at("kind").get<std::string>() != kCheckpointKind) {
      return makeError(errc::kInvalid, where + " is not a " + kCheckpointKind);
    }
    for (const auto& s : data.at("ClaimInfoStateList")) {
      ClaimInfo c = claimFromState(s);
      cache_[claimKey(c.ns, c.name)] = std::move(c);
    }
  } catch (const json::exception& e) {
    cache_.clear();
    return makeError(errc::kInvalid, where + " is corrupt: " + e.what());
  }
  spdlog::info("DRA: {} claim(s) restored from {}", cache_.size(), opts_.checkpointPath);
  return okStatus();
}

void DraManager::writeCheckpointLocked() {
  if (opts_.checkpointPath.empty()) {
    return;
  }
  json list = json::array();
  for (const auto& [key, c] : cache_) {
    list.push_back(claimStateJson(c));
  }
  const json data = {{"kind", kCheckpointKind},
                     {"apiVersion", kCheckpointApiVersion},
                     {"ClaimInfoStateList", list}};
  const std::string text = data.dump();
  const json doc = {{"Data", text}, {"Checksum", checkpointChecksum(text)}};
  if (!writeFileAtomically(opts_.checkpointPath, doc.dump() + "\n")) {
    spdlog::error("cannot write DRA checkpoint {}", opts_.checkpointPath);
  }
}

void DraManager::start() {
  std::lock_guard lock(mu_);
  if (worker_.joinable()) {
    return;
  }
  stopping_ = false;
  worker_ = std::thread([this] { run(); });
}

void DraManager::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) {
    worker_.join();
  }
}

void DraManager::requestPrepare(const json& pod) {
  const std::string uid = podUidOf(pod);
  {
    std::lock_guard lock(mu_);
    if (preparedPods_.count(uid) != 0) {
      return;
    }
    auto [it, fresh] = toPrepare_.try_emplace(uid);
    it->second.key = podKeyOf(pod);
    it->second.pod = pod;
    if (fresh) {
      // A known pod keeps its retry time: kubelet tries again at its pod worker's next sync
      // with the newest object, not at every status write.
      it->second.due = SteadyClock::now();
    }
  }
  cv_.notify_all();
}

bool DraManager::podPrepared(const std::string& podUid) const {
  std::lock_guard lock(mu_);
  return preparedPods_.count(podUid) != 0;
}

void DraManager::requestUnprepare(const std::string& podUid) {
  {
    std::lock_guard lock(mu_);
    toPrepare_.erase(podUid);
    preparedPods_.erase(podUid);
    // Even when the cache does not name the pod yet: a preparation in flight may add it.
    toUnprepare_.try_emplace(podUid, SteadyClock::now());
  }
  cv_.notify_all();
}

void DraManager::retainOnly(const std::set<std::string>& activeUids) {
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, c] : cache_) {
      for (const auto& uid : c.podUids) {
        if (activeUids.count(uid) == 0) {
          spdlog::info("DRA: pod {} using claim {} is gone; unpreparing", uid, key);
          toUnprepare_.try_emplace(uid, SteadyClock::now());
        }
      }
    }
  }
  cv_.notify_all();
}

std::optional<ClaimInfo> DraManager::claim(const std::string& ns, const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = cache_.find(claimKey(ns, name));
  if (it == cache_.end()) {
    return std::nullopt;
  }
  return it->second;
}

Result<std::vector<ClaimInfo>> DraManager::checkPodClaims(const json& pod) {
  auto names = podClaimNames(pod);
  if (!names) {
    return names.error();
  }
  const std::string ns = podNsOf(pod);
  std::vector<ClaimInfo> out;
  for (const auto& ref : *names) {
    auto obj = callbacks_.getClaim(ns, ref.claim);
    if (!obj) {
      return prefixed("fetch ResourceClaim " + ref.claim + ": ", obj.error());
    }
    auto info = claimForPod(pod, ref, *obj);
    if (!info) {
      return info.error();
    }
    for (const auto& [driver, devices] : info->drivers) {
      if (!plugins_.registered(driver)) {
        return makeError(errc::kNotFound, "DRA driver " + driver + " is not registered");
      }
    }
    out.push_back(std::move(*info));
  }
  return out;
}

Result<std::map<std::string, std::vector<std::string>>> DraManager::addPodLocked(
    const std::string& podUid, const std::vector<ClaimInfo>& claims) {
  for (const auto& c : claims) {
    auto it = cache_.find(claimKey(c.ns, c.name));
    if (it != cache_.end() && it->second.uid != c.uid) {
      return makeError(errc::kConflict, "old ResourceClaim with same name " + c.name +
                                            " and different UID " + it->second.uid +
                                            " still exists (previous pod force-deleted?!)");
    }
  }
  std::map<std::string, std::vector<std::string>> batches;  // driver -> claim keys
  for (const auto& c : claims) {
    const std::string key = claimKey(c.ns, c.name);
    auto& entry = cache_.try_emplace(key, c).first->second;
    entry.podUids.insert(podUid);
    if (entry.prepared) {
      continue;  // prepared for another pod of the node: not again
    }
    for (const auto& [driver, devices] : entry.drivers) {
      auto& keys = batches[driver];
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        keys.push_back(key);
      }
    }
  }
  // Checkpointed before the calls: a pod deleted before its claims are prepared still gets
  // them unprepared.
  writeCheckpointLocked();
  return batches;
}

Status DraManager::callPrepare(const std::string& driver, const std::vector<std::string>& keys) {
  drav1::NodePrepareResourcesRequest req;
  std::map<std::string, std::string> sent;   // claim uid -> name
  std::map<std::string, std::string> keyOf;  // claim uid -> cache key
  {
    std::lock_guard lock(mu_);
    for (const auto& key : keys) {
      auto it = cache_.find(key);
      if (it == cache_.end()) {
        continue;  // unprepared meanwhile (only by a caller outside the worker)
      }
      const ClaimInfo& c = it->second;
      addClaim(req, c);
      sent[c.uid] = c.name;
      keyOf[c.uid] = key;
    }
  }
  auto resp = plugins_.prepare(driver, req);
  if (!resp) {
    return callFailed("NodePrepareResources", resp.error());
  }
  // Devices of the claims that succeeded are kept even when another claim failed (kubelet).
  for (const auto& [uid, result] : resp->claims()) {
    if (sent.count(uid) != 0 && result.error().empty()) {
      std::lock_guard lock(mu_);
      if (auto it = cache_.find(keyOf[uid]); it != cache_.end()) {
        it->second.drivers[driver] = devicesFrom(result);
      }
    }
  }
  return checkClaimResults("NodePrepareResources", sent, *resp);
}

Status DraManager::prepare(const json& pod) {
  const std::string prefix = "prepare dynamic resources: ";
  auto claims = checkPodClaims(pod);  // every check before the cache changes
  if (!claims) {
    return prefixed(prefix, claims.error());
  }
  Result<std::map<std::string, std::vector<std::string>>> batches = makeError(errc::kInternal, "");
  {
    std::lock_guard lock(mu_);
    batches = addPodLocked(podUidOf(pod), *claims);
  }
  if (!batches) {
    return prefixed(prefix, batches.error());
  }
  for (const auto& [driver, keys] : *batches) {
    if (auto st = callPrepare(driver, keys); !st) {
      return prefixed(prefix, st.error());
    }
  }
  std::lock_guard lock(mu_);
  for (const auto& c : *claims) {
    if (auto it = cache_.find(claimKey(c.ns, c.name)); it != cache_.end()) {
      it->second.prepared = true;
    }
  }
  writeCheckpointLocked();
  return okStatus();
}

Status DraManager::unprepare(const std::string& podUid) {
  std::map<std::string, std::vector<ClaimInfo>> batches;  // driver -> claims
  std::vector<std::string> done;
  {
    std::lock_guard lock(mu_);
    bool changed = false;
    for (auto& [key, c] : cache_) {
      if (c.podUids.count(podUid) == 0) {
        continue;
      }
      if (c.podUids.size() > 1) {
        c.podUids.erase(podUid);  // another pod of the node still uses it
        changed = true;
        continue;
      }
      done.push_back(key);
      for (const auto& [driver, devices] : c.drivers) {
        batches[driver].push_back(c);
      }
    }
    if (changed) {
      writeCheckpointLocked();
    }
  }
  for (const auto& [driver, claims] : batches) {
    drav1::NodeUnprepareResourcesRequest req;
    std::map<std::string, std::string> sent;
    for (const auto& c : claims) {
      addClaim(req, c);
      sent[c.uid] = c.name;
    }
    auto resp = plugins_.unprepare(driver, req);
    Status st = resp ? checkClaimResults("NodeUnprepareResources", sent, *resp)
                     : Status(callFailed("NodeUnprepareResources", resp.error()));
    if (!st) {
      return prefixed("unprepare dynamic resources: ", st.error());
    }
  }
  std::lock_guard lock(mu_);
  for (const auto& key : done) {
    spdlog::info("DRA: claim {} unprepared", key);
    cache_.erase(key);
  }
  if (!done.empty()) {
    writeCheckpointLocked();
  }
  return okStatus();
}

// Runs one due unpreparation, else one due preparation. False when nothing was due.
bool DraManager::runOneDue() {
  std::string uid;
  PrepareWork work;
  bool isUnprepare = false;
  {
    std::lock_guard lock(mu_);
    const auto now = SteadyClock::now();
    auto u = std::find_if(toUnprepare_.begin(), toUnprepare_.end(),
                          [&](const auto& e) { return e.second <= now; });
    auto p = std::find_if(toPrepare_.begin(), toPrepare_.end(),
                          [&](const auto& e) { return e.second.due <= now; });
    if (u != toUnprepare_.end()) {
      uid = u->first;
      isUnprepare = true;
    } else if (p != toPrepare_.end()) {
      uid = p->first;
      work = p->second;
    } else {
      return false;
    }
  }
  if (isUnprepare) {
    auto st = unprepare(uid);
    std::lock_guard lock(mu_);
    if (st) {
      toUnprepare_.erase(uid);
    } else {
      ++unprepareFailures_;
      toUnprepare_[uid] = SteadyClock::now() + opts_.retryPeriod;
      spdlog::warn("DRA: pod {}: {}", uid, st.error().message);
    }
    return true;
  }
  auto st = prepare(work.pod);
  bool ended = false;
  {
    std::lock_guard lock(mu_);
    ended = toUnprepare_.count(uid) != 0 || toPrepare_.count(uid) == 0;
    if (!ended && st) {
      toPrepare_.erase(uid);
      preparedPods_.insert(uid);
    } else if (!ended) {
      ++prepareFailures_;
      toPrepare_[uid].due = SteadyClock::now() + opts_.retryPeriod;
    }
  }
  if (ended) {
    return true;
  }
  if (st) {
    spdlog::info("DRA: claims of pod {} prepared", work.key);
    callbacks_.prepared(work.key);
  } else {
    spdlog::warn("DRA: pod {}: {}", work.key, st.error().message);
    callbacks_.prepareFailed(work.pod, st.error().message);
  }
  return true;
}

void DraManager::run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    auto next = SteadyClock::time_point::max();
    for (const auto& [uid, due] : toUnprepare_) {
      next = std::min(next, due);
    }
    for (const auto& [uid, w] : toPrepare_) {
      next = std::min(next, w.due);
    }
    if (next > SteadyClock::now()) {
      if (next == SteadyClock::time_point::max()) {
        cv_.wait(lock);
      } else {
        cv_.wait_until(lock, next);
      }
      continue;
    }
    lock.unlock();
    runOneDue();
    lock.lock();
  }
}

json DraManager::debugState() const {
  json claims = json::array();
  json waiting = json::array();
  std::uint64_t prepareFailures = 0;
  std::uint64_t unprepareFailures = 0;
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, c] : cache_) {
      json drivers = json::object();
      for (const auto& [driver, devices] : c.drivers) {
        json list = json::array();
        for (const auto& d : devices) {
          list.push_back({{"pool", d.pool},
                          {"device", d.device},
                          {"requestNames", d.requestNames},
                          {"cdiDeviceIds", d.cdiDeviceIds}});
        }
        drivers[driver] = list;
      }
      claims.push_back({{"namespace", c.ns},
                        {"name", c.name},
                        {"uid", c.uid},
                        {"pods", c.podUids},
                        {"prepared", c.prepared},
                        {"drivers", drivers}});
    }
    for (const auto& [uid, w] : toPrepare_) {
      waiting.push_back(w.key);
    }
    prepareFailures = prepareFailures_;
    unprepareFailures = unprepareFailures_;
  }
  const auto calls = plugins_.stats();
  return {{"drivers", plugins_.debugState()},
          {"claims", claims},
          {"waitingPods", waiting},
          {"prepareCalls", calls.prepareCalls},
          {"unprepareCalls", calls.unprepareCalls},
          {"prepareFailures", prepareFailures},
          {"unprepareFailures", unprepareFailures}};
}

}  // namespace kc::kubelet
