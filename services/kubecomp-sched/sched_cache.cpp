#include "services/kubecomp-sched/sched_cache.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <thread>
#include <utility>

#include "libcore/alloc/node_filter.hpp"
#include "libcore/alloc/pod_fields.hpp"
#include "libcore/base/rfc3339.hpp"

namespace kc::sched {
namespace {

using nlohmann::json;

const std::string& stringAt(const json& obj, const char* a, const char* b) {
  static const std::string empty;
  auto ia = obj.find(a);
  if (ia == obj.end() || !ia->is_object()) {
    return empty;
  }
  auto ib = ia->find(b);
  return ib != ia->end() && ib->is_string() ? ib->get_ref<const std::string&>() : empty;
}

}  // namespace

// What the informer's store keeps of every object: its identity.
json detail::storeIdentity(const json& obj) {
  json meta = json::object();
  if (auto m = obj.find("metadata"); m != obj.end() && m->is_object()) {
    for (const char* k : {"name", "namespace", "uid", "resourceVersion"}) {
      if (auto v = m->find(k); v != m->end()) {
        meta[k] = *v;
      }
    }
  }
  return json{{"metadata", std::move(meta)}};
}

namespace {

std::int64_t gpuOf(const alloc::Resources& r) {
  return r.scalarOr0(alloc::kGpuResource);
}

// A Pod object as the cache reads it: what the API says (PodInfo's first fields, the
// scheduler's own state left default) and its status.startTime.
struct PodObject {
  PodInfo info;
  std::optional<std::chrono::system_clock::time_point> startTime;
};

PodObject readPod(const json& obj, const std::string& ns, const std::string& name) {
  PodObject out;
  PodInfo& p = out.info;
  p.key = ns + "/" + name;
  p.ns = ns;
  p.name = name;
  p.uid = stringAt(obj, "metadata", "uid");
  p.resourceVersion = stringAt(obj, "metadata", "resourceVersion");
  if (auto t = parseRfc3339(stringAt(obj, "metadata", "creationTimestamp")); t) {
    p.created = std::chrono::duration_cast<std::chrono::seconds>(t->time_since_epoch()).count();
  }
  if (auto t = parseRfc3339(stringAt(obj, "status", "startTime")); t) {
    out.startTime = *t;
  }
  p.deleting = obj.contains("metadata") && obj["metadata"].is_object() &&
               obj["metadata"].contains("deletionTimestamp") &&
               !obj["metadata"]["deletionTimestamp"].is_null();
  p.reconfig = api::reconfigRequestText(obj);
  p.gang = readGangRef(obj);
  auto parsed = alloc::parsePod(obj);
  if (parsed) {
    // A pod waiting for its scheduling gates is not considered at all (kube-scheduler's
    // SchedulingGates PreEnqueue): until the gates are removed it is no more ours to decide
    // than another scheduler's pod, so it is neither queued nor reserved nor reported on.
    p.ours = parsed->schedulerName == kSchedulerName && !alloc::schedulingGated(*parsed);
    p.pod = std::move(*parsed);
    p.request = alloc::podRequests(p.pod);
    p.gpus = gpuOf(p.request);
    if (p.pod.usesClaims) {
      auto refs = api::podClaimRefs(obj);
      if (refs) {
        p.claimRefs = std::move(*refs);
      } else {
        p.invalid = refs.error().message;
      }
    }
    return out;
  }
  // A pod the API server accepted but we cannot read: it is never placed, and holds nothing.
  if (auto spec = obj.find("spec"); spec != obj.end() && spec->is_object()) {
    const auto gates = spec->find("schedulingGates");
    const bool gated = gates != spec->end() && gates->is_array() && !gates->empty();
    p.ours =
        spec->value("schedulerName", std::string("default-scheduler")) == kSchedulerName && !gated;
  }
  p.invalid = parsed.error().message;
  p.pod.ns = ns;
  p.pod.name = name;
  p.pod.nodeName = stringAt(obj, "spec", "nodeName");
  return out;
}

// The API's fields of `from` into `to`; the scheduler's own state in `to` stays.
void takeApiFields(PodInfo& to, PodInfo&& from) {
  to.key = std::move(from.key);
  to.ns = std::move(from.ns);
  to.name = std::move(from.name);
  to.uid = std::move(from.uid);
  to.resourceVersion = std::move(from.resourceVersion);
  to.created = from.created;
  to.ours = from.ours;
  to.deleting = from.deleting;
  to.reconfig = std::move(from.reconfig);
  to.invalid = std::move(from.invalid);
  to.pod = std::move(from.pod);
  to.request = std::move(from.request);
  to.gpus = from.gpus;
  to.claimRefs = std::move(from.claimRefs);
  to.gang = std::move(from.gang);
}

}  // namespace

SchedCache::SchedCache(CacheOptions options)
    : opts_(std::move(options)),
      queue_(opts_.initialBackoff, opts_.maxBackoff),
      queuePass_(opts_.queue.discipline == alloc::QueueDiscipline::SlackBackfill
                     ? alloc::QueueDiscipline::SlackBackfill
                     : alloc::QueueDiscipline::EasyBackfill,
                 opts_.queue.discipline == alloc::QueueDiscipline::SlackBackfill
                     ? opts_.slackFactor
                     : alloc::kDefaultSlackFactor) {
  if (!opts_.placement.filter.rt) {
    opts_.placement.filter.rt = rt_.hook();
  }
  opts_.placement.filter.placed = &placed_;    // read under mu_, as every decision runs
  opts_.placement.filter.volumes = &volumes_;  // likewise
  // The Namespaces' labels (namespaceSelector), likewise.
  opts_.placement.filter.namespaces = &namespaces_;
  opts_.placement.filter.preferNoScheduleTaints = false;  // no node yet
  // One path per pool: a pod asking GPUs in its limits goes to device-plugin pools, one whose
  // claims ask them to DRA pools (docs/dra.md). Runs with mu_ held, as every decision does.
  opts_.placement.filter.rt = [this, rt = std::move(opts_.placement.filter.rt)](
                                  const alloc::SchedPod& pod, const alloc::Resources& request,
                                  const alloc::SchedNode& node,
                                  const alloc::NodeUsage& usage) -> alloc::FilterReasons {
    if (request.scalarOr0(alloc::kGpuResource) > 0 && model_.draNode(node.name) != pod.usesClaims) {
      return {pod.usesClaims ? "node's GPUs are offered by the device plugin, not through DRA"
                             : "node's GPUs are offered through DRA (ResourceClaims), not the "
                               "device plugin"};
    }
    return rt ? rt(pod, request, node, usage) : alloc::FilterReasons{};
  };
}

// ---------------------------------------------------------------- informer side

json SchedCache::ingestPod(const json& obj, Clock::time_point now) {
  json keep = detail::storeIdentity(obj);
  const std::string& name = stringAt(obj, "metadata", "name");
  if (name.empty()) {
    return keep;  // dropped by the informer (no key)
  }
  PodObject incoming = readPod(obj, stringAt(obj, "metadata", "namespace"), name);
  const auto startTime = incoming.startTime;
  const auto wall = startTime ? wallNow() : std::chrono::system_clock::time_point{};

  std::lock_guard<std::mutex> lock(mu_);
  const std::string key = incoming.info.key;
  auto& slot = pods_[key];
  const bool fresh = !slot;
  if (fresh) {
    slot = std::make_unique<PodInfo>();
    slot->seq = nextSeq_++;
    slot->firstSeen = now;
  }
  PodInfo& p = *slot;
  const std::string oldUid = p.uid;
  takeApiFields(p, std::move(incoming.info));
  gangs_.setMember(p.key, p.gang);
  applyClaimGpusLocked(p);
  if (!fresh && oldUid != p.uid) {
    // Same name, new object: whatever we did for the old one does not apply.
    forgetLocked(p);
    p.firstSeen = now;
    p.started.reset();
    p.ended.reset();
  }
  if (!p.ended && (p.pod.phase == "Succeeded" || p.pod.phase == "Failed")) {
    p.ended = now;
  }
  if (startTime) {
    // status.startTime on the steady clock (never in the future: clocks differ).
    p.started = now - std::max(std::chrono::duration_cast<Clock::duration>(wall - *startTime),
                               Clock::duration::zero());
  } else if (p.bound() && !p.started) {
    p.started = now;  // bound by someone else, seen now; ours got their bind time already
  }
  if (p.bound()) {
    // Bound (by us or anyone): nothing left to do but to count what it holds. The
    // containers are no longer read.
    forgetLocked(p);
    p.firstSeen.reset();
    p.pod.containers.clear();
    p.pod.containers.shrink_to_fit();
    p.pod.initContainers.clear();
    p.pod.initContainers.shrink_to_fit();
  } else if (p.deleting || !p.ours) {
    forgetLocked(p);
  } else if (leading_) {
    if (p.reserved()) {
      if (p.reconfig.dstNode) {
        p.reservation.requested = true;  // our own request came back through the watch
      } else if (p.reservation.requested) {
        // Someone removed the request: the reservation is cancelled, the pod goes back.
        setHoldLocked(p, PodInfo::Hold::kNone);
        enqueueLocked(p);
      }
    } else if (!p.assumed() && !queue_.waiting(key)) {
      enqueueLocked(p);
    }
    if (!p.reconfig.present() && !p.pod.usesClaims) {
      p.clearing = false;  // a DRA pod's clearing ends when its claims show no allocation
    }
  }
  refreshHoldingLocked(p);
  if (!reservedByOrder_.empty()) {
    reservationsDirty_ = true;
  }
  dirty_ = true;
  cv_.notify_all();
  return keep;
}

void SchedCache::removePod(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  PodInfo* p = findLocked(key);
  if (p != nullptr) {
    // A pod that held a node (bound, or assumed bound) frees it; a reservation's GPUs are not
    // a release (as when it is dropped, below).
    if (!p->reserved() && model_.dropHolding(key)) {
      released_ = true;
    }
    forgetLocked(*p);
    placed_.remove(key);
    gangs_.removeMember(key);
    rt_.removePod(p->ns, p->name);
    if (p->pod.usesClaims) {
      const auto now = clockOr(opts_.clock).now();
      std::erase_if(goneClaimPods_,
                    [&](const auto& g) { return now - g.second > opts_.draReleaseWait; });
      goneClaimPods_[p->uid] = p->ended.value_or(now);
    }
  }
  pods_.erase(key);
  reservationsDirty_ = !reservedByOrder_.empty();
  dirty_ = true;
  cv_.notify_all();
}

json SchedCache::ingestNode(const json& obj) {
  json keep = detail::storeIdentity(obj);
  auto parsed = alloc::parseNode(obj);
  const std::string& name = stringAt(obj, "metadata", "name");
  std::lock_guard<std::mutex> lock(mu_);
  if (!parsed) {
    // A node we cannot read is treated as absent: nothing is placed on it.
    spdlog::warn("node {}: {}; not scheduling onto it", name, parsed.error().message);
    rt_.removeNode(name);
    model_.removeNode(name);
  } else {
    rt_.setNode(*parsed);
    model_.setNode(name, std::move(*parsed));
  }
  opts_.placement.filter.preferNoScheduleTaints = model_.anyPreferNoScheduleTaint();
  reservationsDirty_ = !reservedByOrder_.empty();
  released_ = true;
  dirty_ = true;
  cv_.notify_all();
  return keep;
}

void SchedCache::removeNode(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  rt_.removeNode(name);
  model_.removeNode(name);
  opts_.placement.filter.preferNoScheduleTaints = model_.anyPreferNoScheduleTaint();
  reservationsDirty_ = !reservedByOrder_.empty();
  dirty_ = true;
  cv_.notify_all();
}

json SchedCache::ingestPool(const json& obj) {
  json keep = detail::storeIdentity(obj);
  const std::string& name = stringAt(obj, "metadata", "name");
  ModelPool entry;
  entry.dra = !api::servesDevicePlugin(obj);
  if (auto spec = obj.find("spec"); spec != obj.end() && spec->is_object()) {
    if (auto ns = spec->find("nodes"); ns != spec->end() && ns->is_array()) {
      for (const auto& n : *ns) {
        if (n.is_object() && n.contains("name") && n["name"].is_string()) {
          entry.nodes.push_back(n["name"].get<std::string>());
        }
      }
    }
  }
  api::PoolGpus parsed = api::parsePoolGpus(obj);
  for (const std::string& problem : parsed.problems) {
    spdlog::warn("{}", problem);
  }
  for (api::PoolGpu& g : parsed.gpus) {
    ModelGpu gpu;
    gpu.id = std::move(g.id);
    gpu.uuid = std::move(g.uuid);
    gpu.model = std::move(g.model);
    if (!gpu.model.empty() && !alloc::validGpuModelName(gpu.model)) {
      // Once per GPU and model: every status write of the pool comes through here.
      if (warnedModels_.insert(name + "/" + gpu.id + "/" + gpu.model).second) {
        spdlog::warn("GPUPool {}: GPU {} model '{}' is not a valid model name; counted as unknown",
                     name, gpu.id, gpu.model);
      }
      gpu.model.clear();
    }
    gpu.node = std::move(g.node);
    gpu.healthy = g.healthy;
    gpu.draining = g.draining;
    gpu.reportedInUse = !g.inUseBy.empty();
    gpu.chassis = std::move(g.chassis);
    entry.gpus.push_back(std::move(gpu));
  }
  std::lock_guard<std::mutex> lock(mu_);
  model_.setPool(name, std::move(entry));
  reservationsDirty_ = !reservedByOrder_.empty();
  released_ = true;
  dirty_ = true;
  cv_.notify_all();
  return keep;
}

void SchedCache::removePool(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  model_.removePool(name);
  reservationsDirty_ = !reservedByOrder_.empty();
  dirty_ = true;
  cv_.notify_all();
}

// ---------------------------------------------------------------- one pod's state

PodInfo* SchedCache::findLocked(const std::string& key) {
  auto p = pods_.find(key);
  return p == pods_.end() ? nullptr : p->second.get();
}

void SchedCache::setHoldLocked(PodInfo& pod, PodInfo::Hold to, const std::string& node,
                               const Reservation* r) {
  using Hold = PodInfo::Hold;
  if (to == Hold::kNone) {
    clearVolumeWaitLocked(pod);  // no node held: nothing asked for its claims stands
  }
  if (to == Hold::kNone && pod.hold == Hold::kNone) {
    return;
  }
  for (const std::string& k : pod.heldDevices) {
    if (auto it = draInflight_.find(k); it != draInflight_.end() && --it->second <= 0) {
      draInflight_.erase(it);
    }
  }
  pod.heldDevices.clear();
  if (to != Hold::kNone) {
    for (const DraPick& p : pod.draPicks) {
      pod.heldDevices.push_back(deviceKey(p.device.pool, p.device.device));
      ++draInflight_[pod.heldDevices.back()];
    }
  }
  if (pod.hold == Hold::kReserved) {
    reservedByOrder_.erase(pod.reservation.order);
  } else if (pod.hold == Hold::kAssumed) {
    --assumedCount_;
    pod.assumedNode.clear();
  }
  pod.hold = to;
  if (to == Hold::kAssumed) {
    pod.assumedNode = node;
    ++assumedCount_;
  } else if (to == Hold::kReserved) {
    pod.reservation = *r;
    reservedByOrder_.emplace(r->order, pod.key);
  }
  refreshHoldingLocked(pod);
}

void SchedCache::forgetLocked(PodInfo& pod) {
  queue_.forget(pod.key);
  preempt_.nominated.erase(pod.key);
  setHoldLocked(pod, PodInfo::Hold::kNone);
}

std::string SchedCache::effectiveNodeLocked(const PodInfo& pod) const {
  if (pod.bound()) {
    return alloc::holdsNodeResources(pod.pod) ? pod.pod.nodeName : std::string();
  }
  if (pod.deleting) {
    return {};
  }
  if (pod.assumed()) {
    return pod.assumedNode;
  }
  if (pod.reserved()) {
    return pod.reservation.node;
  }
  return {};
}

void SchedCache::refreshHoldingLocked(PodInfo& pod) {
  const std::string node = effectiveNodeLocked(pod);
  if (pod.pod.rt.realTime() && !node.empty()) {
    alloc::SchedPod held;  // what RT admission reads: identity, node, RT annotations
    held.ns = pod.ns;
    held.name = pod.name;
    held.nodeName = node;
    held.rt = pod.pod.rt;
    rt_.addPod(held);
  } else {
    rt_.removePod(pod.ns, pod.name);
  }
  placed_.place(pod.key, node, pod.pod);
  if (model_.setHolding(pod.key, node, pod.request)) {
    // A pod on a node stopped holding it. A dropped reservation is not a release: its own pod
    // must back off (a timed-out request is not asked again at once).
    released_ = released_ || pod.bound() || pod.assumed();
  }
}

void SchedCache::enqueueLocked(const PodInfo& pod) {
  queue_.push(pod.queueOrder());
}

void SchedCache::backoffLocked(const std::string& key, Clock::time_point now) {
  queue_.remove(key);
  const PodInfo* p = findLocked(key);
  if (p == nullptr || !p->pending()) {
    return;
  }
  queue_.backoff(key, now);
}

void SchedCache::backoff(const std::string& key, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  backoffLocked(key, now);
  dirty_ = true;
}

// ---------------------------------------------------------------- leadership

void SchedCache::resetQueue(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.clear();
  for (auto& [key, p] : pods_) {
    setHoldLocked(*p, PodInfo::Hold::kNone);
    p->clearing = false;
    p->invalidReported.clear();
    p->heldReported.clear();
  }
  leading_ = true;
  // Requests already on pods (ours before a restart, or the previous leader's) are adopted
  // before any decision, so no pod is placed on GPUs promised to a waiting one. A malformed
  // request is queued: its decision refuses it.
  for (auto& [key, p] : pods_) {
    if (!p->ours || p->bound() || p->deleting) {
      continue;
    }
    if (!p->firstSeen) {
      p->firstSeen = now;
    }
    if (p->invalid.empty() && p->reconfig.present()) {
      std::vector<Action> refused;
      adoptReservationLocked(*p, now, &refused);
      if (refused.empty()) {
        continue;
      }
      // Not adopted: undo what refusing did, the decision will refuse it again and say so.
      p->clearing = false;
      queue_.forget(key);
    }
    enqueueLocked(*p);
  }
  dirty_ = true;
  cv_.notify_all();
}

void SchedCache::stopLeading() {
  std::lock_guard<std::mutex> lock(mu_);
  leading_ = false;
  queue_.clear();
  for (auto& [key, p] : pods_) {
    setHoldLocked(*p, PodInfo::Hold::kNone);
  }
}

// ---------------------------------------------------------------- what the loop reads

QueueStats SchedCache::queueStats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queueStats_;
}

SchedCache::DecisionStats SchedCache::decisionStats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return decisions_;
}

CacheStats SchedCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  CacheStats s;
  s.pods = pods_.size();
  s.nodes = model_.nodeCount();
  s.pools = model_.poolCount();
  s.gpus = model_.gpuCount();
  s.active = queue_.activeCount();
  s.backoff = queue_.waitingCount();
  s.reservations = reservedByOrder_.size();
  s.assumed = assumedCount_;
  return s;
}

PendingGpuStats SchedCache::pendingGpuStats() const {
  std::lock_guard<std::mutex> lock(mu_);
  PendingGpuStats s;
  for (const auto& [key, p] : pods_) {
    if (!p->pending() || p->gpus <= 0) {
      continue;
    }
    ++s.pods;
    if (p->firstSeen && (!s.oldestFirstSeen || *p->firstSeen < *s.oldestFirstSeen)) {
      s.oldestFirstSeen = p->firstSeen;
    }
  }
  return s;
}

std::optional<Reservation> SchedCache::reservation(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto p = pods_.find(key);
  if (p == pods_.end() || !p->second->reserved()) {
    return std::nullopt;
  }
  return p->second->reservation;
}

std::optional<std::int64_t> SchedCache::freeGpus(const std::string& node) {
  std::lock_guard<std::mutex> lock(mu_);
  model_.refresh();
  auto n = model_.indexOf(node);
  if (!n) {
    return std::nullopt;
  }
  return model_.state().node(static_cast<alloc::NodeIndex>(*n)).freeGpus;
}

bool SchedCache::dirty() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dirty_;
}

void SchedCache::notifyAll() {
  std::lock_guard<std::mutex> lock(mu_);
  cv_.notify_all();
}

void SchedCache::waitForWork(Clock::time_point until, const std::atomic<bool>& stop) {
  std::unique_lock<std::mutex> lock(mu_);
  clockOr(opts_.clock).waitUntil(lock, cv_, until, [&] { return dirty_ || stop.load(); });
}

}  // namespace kc::sched
