#include "services/kubecomp-sched/sched_cache.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <thread>
#include <utility>

#include "libcore/alloc/node_filter.hpp"
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

// What the informer's store keeps of every object: its identity.
json identity(const json& obj) {
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

std::int64_t gpuOf(const alloc::Resources& r) {
  return r.scalarOr0(alloc::kGpuResource);
}

}  // namespace

SchedCache::SchedCache(CacheOptions options)
    : opts_(std::move(options)),
      queuePass_(opts_.queue.discipline == alloc::QueueDiscipline::SlackBackfill
                     ? alloc::QueueDiscipline::SlackBackfill
                     : alloc::QueueDiscipline::EasyBackfill,
                 opts_.queue.discipline == alloc::QueueDiscipline::SlackBackfill
                     ? opts_.slackFactor
                     : alloc::kDefaultSlackFactor) {
  if (!opts_.placement.filter.rt) {
    opts_.placement.filter.rt = rt_.hook();
  }
}

// ---------------------------------------------------------------- informer side

json SchedCache::ingestPod(const json& obj, Clock::time_point now) {
  json keep = identity(obj);
  const std::string& name = stringAt(obj, "metadata", "name");
  const std::string& ns = stringAt(obj, "metadata", "namespace");
  if (name.empty()) {
    return keep;  // dropped by the informer (no key)
  }
  auto parsed = alloc::parsePod(obj);
  std::string schedulerName;
  if (parsed) {
    schedulerName = parsed->schedulerName;
  } else if (auto s = obj.find("spec"); s != obj.end() && s->is_object()) {
    schedulerName = s->value("schedulerName", std::string("default-scheduler"));
  }
  std::int64_t created = 0;
  if (auto t = parseRfc3339(stringAt(obj, "metadata", "creationTimestamp")); t) {
    created = std::chrono::duration_cast<std::chrono::seconds>(t->time_since_epoch()).count();
  }
  std::optional<std::chrono::system_clock::time_point> startTime;
  if (auto t = parseRfc3339(stringAt(obj, "status", "startTime")); t) {
    startTime = *t;
  }
  const auto wall = startTime ? wallNow() : std::chrono::system_clock::time_point{};
  const bool deleting = obj.contains("metadata") && obj["metadata"].is_object() &&
                        obj["metadata"].contains("deletionTimestamp") &&
                        !obj["metadata"]["deletionTimestamp"].is_null();

  std::lock_guard<std::mutex> lock(mu_);
  const std::string key = ns + "/" + name;
  auto& slot = pods_[key];
  const bool fresh = !slot;
  if (fresh) {
    slot = std::make_unique<PodInfo>();
    slot->seq = nextSeq_++;
    firstSeen_[key] = now;
  }
  PodInfo& p = *slot;
  const std::string oldUid = p.uid;
  p.key = key;
  p.ns = ns;
  p.name = name;
  p.uid = stringAt(obj, "metadata", "uid");
  p.resourceVersion = stringAt(obj, "metadata", "resourceVersion");
  p.created = created;
  p.ours = schedulerName == kSchedulerName;
  p.deleting = deleting;
  p.reconfig = api::reconfigRequestText(obj);
  if (parsed) {
    p.invalid.clear();
    p.pod = std::move(*parsed);
    p.request = alloc::podRequests(p.pod);
    p.gpus = gpuOf(p.request);
  } else {
    // A pod the API server accepted but we cannot read: it is never placed, and holds nothing.
    p.invalid = parsed.error().message;
    p.pod = alloc::SchedPod{};
    p.pod.ns = ns;
    p.pod.name = name;
    p.pod.nodeName = stringAt(obj, "spec", "nodeName");
    p.request = {};
    p.gpus = 0;
  }
  if (!fresh && oldUid != p.uid) {
    // Same name, new object: whatever we did for the old one does not apply.
    dequeueLocked(key);
    dropReservationLocked(key);
    assumed_.erase(key);
    backoff_.erase(key);
    waiting_.erase(key);
    firstSeen_[key] = now;
    p.started.reset();
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
    dequeueLocked(key);
    dropReservationLocked(key);
    assumed_.erase(key);
    backoff_.erase(key);
    waiting_.erase(key);
    firstSeen_.erase(key);
    p.pod.containers.clear();
    p.pod.containers.shrink_to_fit();
    p.pod.initContainers.clear();
    p.pod.initContainers.shrink_to_fit();
  } else if (p.deleting || !p.ours) {
    dequeueLocked(key);
    dropReservationLocked(key);
    backoff_.erase(key);
    waiting_.erase(key);
  } else if (leading_) {
    auto r = reservations_.find(key);
    if (r != reservations_.end()) {
      if (p.reconfig.dstNode) {
        r->second.requested = true;  // our own request came back through the watch
      } else if (r->second.requested) {
        // Someone removed the request: the reservation is cancelled, the pod goes back.
        dropReservationLocked(key);
        enqueueLocked(p);
      }
    } else if (!assumed_.contains(key) && !waiting_.contains(key)) {
      enqueueLocked(p);
    }
    if (!p.reconfig.present()) {
      clearing_.erase(key);
    }
  }
  refreshContributionLocked(p);
  if (!reservations_.empty()) {
    reservationsDirty_ = true;
  }
  dirty_ = true;
  cv_.notify_all();
  return keep;
}

void SchedCache::removePod(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  dequeueLocked(key);
  dropReservationLocked(key);
  assumed_.erase(key);
  backoff_.erase(key);
  waiting_.erase(key);
  firstSeen_.erase(key);
  clearing_.erase(key);
  invalidReported_.erase(key);
  heldReported_.erase(key);
  if (auto p = pods_.find(key); p != pods_.end() && p->second) {
    rt_.removePod(p->second->ns, p->second->name);
  }
  if (auto c = contributions_.find(key); c != contributions_.end()) {
    released_ = true;
    if (!structureDirty_) {
      if (auto n = nodeIndex_.find(c->second.node); n != nodeIndex_.end()) {
        alloc::removePodUsage(usage_[n->second], c->second.request);
        markPoolDirtyForNodeLocked(c->second.node);
      }
    }
    contributions_.erase(c);
  }
  pods_.erase(key);
  reservationsDirty_ = !reservations_.empty();
  dirty_ = true;
  cv_.notify_all();
}

json SchedCache::ingestNode(const json& obj) {
  json keep = identity(obj);
  auto parsed = alloc::parseNode(obj);
  const std::string& name = stringAt(obj, "metadata", "name");
  std::lock_guard<std::mutex> lock(mu_);
  if (!parsed) {
    // A node we cannot read is treated as absent: nothing is placed on it.
    spdlog::warn("node {}: {}; not scheduling onto it", name, parsed.error().message);
    rt_.removeNode(name);
    if (nodeMap_.erase(name) > 0) {
      structureDirty_ = true;
    }
  } else {
    rt_.setNode(*parsed);
    const std::int64_t gpus = gpuOf(parsed->allocatable);
    auto it = nodeMap_.find(name);
    if (it == nodeMap_.end()) {
      nodeMap_.emplace(name, NodeEntry{std::move(*parsed), gpus});
      structureDirty_ = true;
    } else {
      const bool gpusChanged = it->second.allocatableGpus != gpus;
      it->second.node = std::move(*parsed);
      it->second.allocatableGpus = gpus;
      if (!structureDirty_) {
        nodes_[nodeIndex_.at(name)] = it->second.node;
        if (gpusChanged) {
          markPoolDirtyForNodeLocked(name);
        }
      }
    }
  }
  reservationsDirty_ = !reservations_.empty();
  released_ = true;
  dirty_ = true;
  cv_.notify_all();
  return keep;
}

void SchedCache::removeNode(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  rt_.removeNode(name);
  if (nodeMap_.erase(name) > 0) {
    structureDirty_ = true;
  }
  reservationsDirty_ = !reservations_.empty();
  dirty_ = true;
  cv_.notify_all();
}

json SchedCache::ingestPool(const json& obj) {
  json keep = identity(obj);
  const std::string& name = stringAt(obj, "metadata", "name");
  PoolEntry entry;
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
    PoolGpu gpu;
    gpu.id = std::move(g.id);
    gpu.uuid = std::move(g.uuid);
    gpu.model = std::move(g.model);
    if (!gpu.model.empty() && !alloc::validGpuModelName(gpu.model)) {
      spdlog::warn("GPUPool {}: GPU {} model '{}' is not a valid model name; counted as unknown",
                   name, gpu.id, gpu.model);
      gpu.model.clear();
    }
    gpu.node = std::move(g.node);
    gpu.healthy = g.healthy;
    gpu.draining = g.draining;
    gpu.reportedInUse = !g.inUseBy.empty();
    entry.gpus.push_back(std::move(gpu));
  }
  std::lock_guard<std::mutex> lock(mu_);
  poolMap_[name] = std::move(entry);
  structureDirty_ = true;
  reservationsDirty_ = !reservations_.empty();
  released_ = true;
  dirty_ = true;
  cv_.notify_all();
  return keep;
}

void SchedCache::removePool(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (poolMap_.erase(name) > 0) {
    structureDirty_ = true;
  }
  reservationsDirty_ = !reservations_.empty();
  dirty_ = true;
  cv_.notify_all();
}

// ---------------------------------------------------------------- the model

void SchedCache::rebuildLocked() {
  nodes_.clear();
  nodeIndex_.clear();
  nodes_.reserve(nodeMap_.size());
  for (const auto& [name, e] : nodeMap_) {
    nodeIndex_.emplace(name, nodes_.size());
    nodes_.push_back(e.node);
  }
  state_ = alloc::ClusterState();
  poolNodes_.assign(poolMap_.size(), {});
  std::unordered_map<std::string, alloc::PoolIndex> poolOf;
  alloc::PoolIndex p = 0;
  for (const auto& [name, pool] : poolMap_) {
    (void)state_.addPool(name);
    for (const auto& n : pool.nodes) {
      if (!poolOf.emplace(n, p).second) {
        spdlog::warn("node {} is listed by two GPUPools; it belongs to the first by name", n);
      }
    }
    ++p;
  }
  for (const auto& [name, e] : nodeMap_) {
    auto it = poolOf.find(name);
    const alloc::PoolIndex pool = it == poolOf.end() ? alloc::kNoPool : it->second;
    auto idx = state_.addNode({name, pool, 0, 0});
    if (idx && pool != alloc::kNoPool) {
      poolNodes_[pool].push_back(*idx);
    }
  }
  gpuInvDraining_.clear();
  gpuReportedUse_.clear();
  gpuPromised_.clear();
  p = 0;
  for (const auto& [name, pool] : poolMap_) {
    for (const auto& g : pool.gpus) {
      alloc::GpuSpec spec{g.id, g.uuid, g.model, p, alloc::kNoNode, false, g.healthy, g.draining};
      bool unusable = false;
      if (!g.node.empty()) {
        auto n = nodeIndex_.find(g.node);
        auto owner = poolOf.find(g.node);
        if (n != nodeIndex_.end() && owner != poolOf.end() && owner->second == p) {
          spec.node = static_cast<alloc::NodeIndex>(n->second);
        } else {
          // Attached to a node we do not know (yet) or to one outside the pool: not usable.
          unusable = true;
          spec.draining = true;
        }
      }
      auto added = state_.addGpu(spec);
      if (!added) {
        spdlog::warn("GPUPool {}: GPU {}: {}", name, g.id, added.error().message);
        continue;
      }
      gpuInvDraining_.push_back(g.draining || unusable);
      gpuReportedUse_.push_back(g.reportedInUse);
      gpuPromised_.push_back(false);
    }
    ++p;
  }
  usage_.assign(nodes_.size(), alloc::NodeUsage{});
  visibleGpus_.assign(nodes_.size(), 0);
  for (const auto& [key, c] : contributions_) {
    if (auto n = nodeIndex_.find(c.node); n != nodeIndex_.end()) {
      alloc::addPodUsage(usage_[n->second], c.request);
    }
  }
  structureDirty_ = false;
  dirtyPools_.clear();
  for (alloc::PoolIndex q = 0; q < state_.poolCount(); ++q) {
    dirtyPools_.insert(q);
  }
  // Nodes in no pool: visible GPUs are what kubelet advertises (no pool can add any).
  for (std::size_t n = 0; n < nodes_.size(); ++n) {
    if (state_.node(static_cast<alloc::NodeIndex>(n)).pool == alloc::kNoPool) {
      visibleGpus_[n] = 0;
    }
  }
}

void SchedCache::ensureFreshLocked() {
  if (structureDirty_) {
    rebuildLocked();
  }
  for (alloc::PoolIndex p : dirtyPools_) {
    recomputePoolLocked(p);
  }
  dirtyPools_.clear();
}

void SchedCache::markPoolDirtyForNodeLocked(const std::string& node) {
  if (structureDirty_) {
    return;
  }
  auto n = nodeIndex_.find(node);
  if (n == nodeIndex_.end()) {
    return;
  }
  const alloc::PoolIndex p = state_.node(static_cast<alloc::NodeIndex>(n->second)).pool;
  if (p != alloc::kNoPool) {
    dirtyPools_.insert(p);
  }
}

void SchedCache::recomputePoolLocked(alloc::PoolIndex p) {
  // Back to the inventory's flags.
  for (alloc::GpuIndex g : state_.poolGpus(p)) {
    if (state_.gpu(g).inUse) {
      (void)state_.releaseGpu(g);
    }
    (void)state_.setGpuDraining(g, gpuInvDraining_[g]);
    gpuPromised_[g] = false;
  }
  std::uint64_t outstanding = 0;
  for (alloc::NodeIndex n : poolNodes_[p]) {
    auto& usable = gpuIndexScratch_;
    usable.clear();
    for (alloc::GpuIndex g : state_.nodeGpus(n)) {
      if (state_.gpu(g).free()) {
        usable.push_back(g);
      }
    }
    // Reported in use first (the device plugin knows which ones the pods have), then id order.
    std::sort(usable.begin(), usable.end(), [&](alloc::GpuIndex a, alloc::GpuIndex b) {
      if (gpuReportedUse_[a] != gpuReportedUse_[b]) {
        return static_cast<bool>(gpuReportedUse_[a]);
      }
      return a < b;
    });
    const std::int64_t allocatable =
        std::max<std::int64_t>(0, nodeMap_.find(nodes_[n].name)->second.allocatableGpus);
    const std::size_t visible =
        std::min<std::size_t>(usable.size(), static_cast<std::size_t>(allocatable));
    for (std::size_t i = visible; i < usable.size(); ++i) {
      (void)state_.setGpuDraining(usable[i], true);  // not advertised by kubelet yet
    }
    visibleGpus_[n] = static_cast<std::int64_t>(visible);
    const std::int64_t held = std::max<std::int64_t>(0, gpuOf(usage_[n].requested));
    const std::size_t take = std::min<std::size_t>(visible, static_cast<std::size_t>(held));
    for (std::size_t i = 0; i < take; ++i) {
      (void)state_.allocateGpu(usable[i]);
    }
    outstanding += static_cast<std::uint64_t>(held) - take;
  }
  // The reservations' deficits: GPUs reconfig-mgr will bring from elsewhere in the pool, the
  // unattached ones first. They are no longer free for anyone else.
  for (int pass = 0; pass < 2 && outstanding > 0; ++pass) {
    for (alloc::GpuIndex g : state_.poolGpus(p)) {
      if (outstanding == 0) {
        break;
      }
      const auto& gpu = state_.gpu(g);
      if (gpu.free() && (pass == 0) == !gpu.attached()) {
        (void)state_.setGpuDraining(g, true);
        gpuPromised_[g] = true;
        --outstanding;
      }
    }
  }
}

std::string SchedCache::effectiveNodeLocked(const PodInfo& pod) const {
  if (pod.bound()) {
    return alloc::holdsNodeResources(pod.pod) ? pod.pod.nodeName : std::string();
  }
  if (pod.deleting) {
    return {};
  }
  if (auto a = assumed_.find(pod.key); a != assumed_.end()) {
    return a->second;
  }
  if (auto r = reservations_.find(pod.key); r != reservations_.end()) {
    return r->second.node;
  }
  return {};
}

void SchedCache::refreshContributionLocked(PodInfo& pod) {
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
  auto it = contributions_.find(pod.key);
  if (it != contributions_.end() && it->second.node == node && it->second.request == pod.request) {
    return;
  }
  if (it != contributions_.end()) {
    if (!structureDirty_) {
      if (auto n = nodeIndex_.find(it->second.node); n != nodeIndex_.end()) {
        alloc::removePodUsage(usage_[n->second], it->second.request);
        markPoolDirtyForNodeLocked(it->second.node);
      }
    }
    contributions_.erase(it);
    // A pod on a node stopped holding it. A dropped reservation is not a release: its own pod
    // must back off (a timed-out request is not asked again at once).
    released_ = released_ || pod.bound() || assumed_.contains(pod.key);
  }
  if (node.empty()) {
    return;
  }
  contributions_.emplace(pod.key, Contribution{node, pod.request});
  if (!structureDirty_) {
    if (auto n = nodeIndex_.find(node); n != nodeIndex_.end()) {
      alloc::addPodUsage(usage_[n->second], pod.request);
      markPoolDirtyForNodeLocked(node);
    }
  }
}

// ---------------------------------------------------------------- the queue

void SchedCache::enqueueLocked(const PodInfo& pod) {
  if (queued_.contains(pod.key)) {
    return;
  }
  QueueKey k{pod.created, pod.seq, pod.key};
  active_.insert(k);
  queued_.emplace(pod.key, std::move(k));
}

void SchedCache::dequeueLocked(const std::string& key) {
  auto it = queued_.find(key);
  if (it == queued_.end()) {
    return;
  }
  active_.erase(it->second);
  queued_.erase(it);
}

void SchedCache::dropReservationLocked(const std::string& key) {
  if (reservations_.erase(key) == 0) {
    return;
  }
  if (auto p = pods_.find(key); p != pods_.end()) {
    refreshContributionLocked(*p->second);
  }
}

void SchedCache::backoffLocked(const std::string& key, Clock::time_point now) {
  dequeueLocked(key);
  auto p = pods_.find(key);
  if (p == pods_.end() || !p->second->pending()) {
    return;
  }
  Backoff& b = backoff_[key];
  ++b.attempts;
  const auto delay = std::min<std::chrono::milliseconds>(
      opts_.maxBackoff,
      opts_.initialBackoff * (1LL << std::min<std::uint32_t>(b.attempts - 1, 20)));
  b.until = now + delay;
  waiting_.insert(key);
}

void SchedCache::backoff(const std::string& key, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  backoffLocked(key, now);
  dirty_ = true;
}

void SchedCache::resetQueue(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  active_.clear();
  queued_.clear();
  backoff_.clear();
  waiting_.clear();
  assumed_.clear();
  std::vector<std::string> had;
  for (const auto& [k, r] : reservations_) {
    had.push_back(k);
  }
  reservations_.clear();
  for (const auto& k : had) {
    if (auto p = pods_.find(k); p != pods_.end()) {
      refreshContributionLocked(*p->second);
    }
  }
  clearing_.clear();
  invalidReported_.clear();
  heldReported_.clear();
  leading_ = true;
  // Requests already on pods (ours before a restart, or the previous leader's) are adopted
  // before any decision, so no pod is placed on GPUs promised to a waiting one. A malformed
  // request is queued: its decision refuses it.
  for (auto& [key, p] : pods_) {
    if (!p->ours || p->bound() || p->deleting) {
      continue;
    }
    firstSeen_.try_emplace(key, now);
    if (p->invalid.empty() && p->reconfig.present()) {
      std::vector<Action> refused;
      adoptReservationLocked(*p, now, &refused);
      if (refused.empty()) {
        continue;
      }
      // Not adopted: undo what refusing did, the decision will refuse it again and say so.
      clearing_.erase(key);
      backoff_.erase(key);
      waiting_.erase(key);
    }
    enqueueLocked(*p);
  }
  dirty_ = true;
  cv_.notify_all();
}

void SchedCache::stopLeading() {
  std::lock_guard<std::mutex> lock(mu_);
  leading_ = false;
  active_.clear();
  queued_.clear();
  backoff_.clear();
  waiting_.clear();
  std::vector<std::string> keys;
  for (const auto& [k, n] : assumed_) {
    keys.push_back(k);
  }
  for (const auto& [k, r] : reservations_) {
    keys.push_back(k);
  }
  assumed_.clear();
  reservations_.clear();
  for (const auto& k : keys) {
    if (auto p = pods_.find(k); p != pods_.end()) {
      refreshContributionLocked(*p->second);
    }
  }
}

Action SchedCache::baseAction(const PodInfo& pod, Action::Kind kind) const {
  Action a;
  a.kind = kind;
  a.key = pod.key;
  a.ns = pod.ns;
  a.name = pod.name;
  a.uid = pod.uid;
  a.gpus = static_cast<std::uint32_t>(std::max<std::int64_t>(0, pod.gpus));
  if (auto f = firstSeen_.find(pod.key); f != firstSeen_.end()) {
    a.firstSeen = f->second;
  }
  return a;
}

void SchedCache::adoptReservationLocked(PodInfo& pod, Clock::time_point now,
                                        std::vector<Action>* out) {
  auto request = api::parseReconfigRequest(pod.reconfig);
  if (!request) {
    Action a = baseAction(pod, Action::Kind::kInvalid);
    a.message = request.error().message +
                "; the reconfiguration request is removed and the pod scheduled again";
    a.clearAnnotations = true;
    out->push_back(std::move(a));
    clearing_.insert(pod.key);
    backoffLocked(pod.key, now);
    return;
  }
  Reservation r;
  r.node = request->dstNode;
  r.gpus = static_cast<std::uint32_t>(std::max<std::int64_t>(0, pod.gpus));
  r.deficit = request->demand;
  const auto wall = std::chrono::floor<std::chrono::milliseconds>(wallNow());
  r.reservedAt = wall;
  if (request->reservedAt) {
    r.reservedAt = *request->reservedAt;
    if (r.reservedAt > wall + kReservedAtSkew) {
      spdlog::warn(
          "pod {}: annotation {} {} is {} ms ahead of this clock (more than the {} s allowed for "
          "clock "
          "skew); its reservation's timeout starts now",
          pod.key, kReservedAtAnnotation, *pod.reconfig.reservedAt,
          std::chrono::duration_cast<std::chrono::milliseconds>(r.reservedAt - wall).count(),
          kReservedAtSkew.count());
      r.reservedAt = wall;
    }
  }
  // The timeout continues from the request's time: what is left of it on this clock (none, if it
  // has run out: the next pass cancels the request).
  r.deadline = now + std::chrono::duration_cast<Clock::duration>(opts_.reservationTimeout -
                                                                 (wall - r.reservedAt));
  r.requested = true;
  r.order = nextOrder_++;
  reservations_[pod.key] = r;
  refreshContributionLocked(pod);
  reservationsDirty_ = true;
}

std::optional<Action> SchedCache::checkReservationLocked(PodInfo& pod, Reservation& r,
                                                         Clock::time_point now) {
  auto cancel = [&](std::string message) {
    Action a = baseAction(pod, Action::Kind::kCancel);
    a.node = r.node;
    a.message = std::move(message);
    return a;
  };
  if (now >= r.deadline) {
    return cancel(
        "node " + r.node + " did not show the " + std::to_string(r.gpus) +
        " kubecomp.io/gpu the pod needs within " +
        std::to_string(
            std::chrono::duration_cast<std::chrono::seconds>(opts_.reservationTimeout).count()) +
        "s of the reconfiguration request; trying again");
  }
  auto n = nodeIndex_.find(r.node);
  if (n == nodeIndex_.end()) {
    return cancel("node " + r.node + " of the reconfiguration request is gone; trying again");
  }
  const std::size_t i = n->second;
  // The node without this pod's own reservation: does it still pass the filters?
  alloc::NodeUsage others = usage_[i];
  alloc::removePodUsage(others, pod.request);
  // Reservations on the node are served in the order they were made: a later one does not
  // hold GPUs (or CPU) against this one.
  for (const auto& [key, other] : reservations_) {
    if (other.node == r.node && other.order > r.order) {
      if (auto p = pods_.find(key); p != pods_.end()) {
        alloc::removePodUsage(others, p->second->request);
      }
    }
  }
  alloc::FilterOptions filter = opts_.placement.filter;
  filter.fit.ignoredResources.emplace(alloc::kGpuResource);
  auto result = alloc::filterNodes(pod.pod, std::span<const alloc::SchedNode>(&nodes_[i], 1),
                                   std::span<const alloc::NodeUsage>(&others, 1), filter);
  if (!result || result->feasible.empty()) {
    return cancel("node " + r.node + " can no longer run the pod (" +
                  (result ? (result->rejected.empty() ? std::string("?")
                                                      : result->rejected.front().reasons.front())
                          : result.error().message) +
                  "); trying again");
  }
  // GPUs: visible on the node minus what the others there hold, counted over accepted models.
  const std::int64_t othersHeld = gpuOf(others.requested);
  std::int64_t visible = visibleGpus_[i];
  if (!pod.pod.gpuModels.acceptsAny()) {
    std::int64_t accepted = 0;
    for (alloc::GpuIndex g : state_.nodeGpus(static_cast<alloc::NodeIndex>(i))) {
      const auto& gpu = state_.gpu(g);
      // Visible = healthy, not draining in the inventory, advertised (counted in visible).
      if (gpu.healthy && !gpuInvDraining_[g] && pod.pod.gpuModels.accepts(gpu.model)) {
        ++accepted;
      }
    }
    visible = std::min(visible, accepted);
  }
  if (visible - othersHeld < static_cast<std::int64_t>(r.gpus)) {
    return std::nullopt;  // still waiting for reconfig-mgr and kubelet
  }
  Action a = baseAction(pod, Action::Kind::kBind);
  a.node = r.node;
  return a;
}

std::optional<Action> SchedCache::decideLocked(PodInfo& pod, Clock::time_point now) {
  if (!pod.invalid.empty()) {
    // Reported once per distinct problem (our own status write comes back as an update).
    auto [it, added] = invalidReported_.try_emplace(pod.key, pod.invalid);
    if (!added && it->second == pod.invalid) {
      return std::nullopt;
    }
    it->second = pod.invalid;
    Action a = baseAction(pod, Action::Kind::kInvalid);
    a.message = "pod cannot be scheduled: " + pod.invalid;
    return a;
  }
  invalidReported_.erase(pod.key);
  if (pod.reconfig.present() && !clearing_.contains(pod.key)) {
    // A request made earlier (by us before a restart, or by the previous leader): adopt it,
    // send nothing again.
    std::vector<Action> out;
    adoptReservationLocked(pod, now, &out);
    if (!out.empty()) {
      return std::move(out.front());
    }
    return std::nullopt;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto placed = alloc::placePod(pod.pod, nodes_, usage_, state_, opts_.placement);
  decisions_.total += std::chrono::steady_clock::now() - t0;
  ++decisions_.decisions;
  if (!placed) {
    Action a = baseAction(pod, Action::Kind::kUnschedulable);
    a.message = placed.error().code == kc::errc::kUnschedulable
                    ? placed.error().message
                    : "scheduler error: " + placed.error().message;
    backoffLocked(pod.key, now);
    return a;
  }
  const std::string& node = nodes_[placed->node].name;
  if (placed->deficit == 0) {
    Action a = baseAction(pod, Action::Kind::kBind);
    a.node = node;
    assumed_[pod.key] = node;
    pod.started = now;
    refreshContributionLocked(pod);
    return a;
  }
  Reservation r;
  r.node = node;
  r.gpus = placed->gpus;
  r.deficit = placed->deficit;
  r.deadline = now + opts_.reservationTimeout;
  r.reservedAt = std::chrono::floor<std::chrono::milliseconds>(wallNow());
  r.requested = false;
  r.order = nextOrder_++;
  reservations_[pod.key] = r;
  refreshContributionLocked(pod);
  Action a = baseAction(pod, Action::Kind::kReserve);
  a.node = node;
  a.deficit = placed->deficit;
  a.reservedAt = r.reservedAt;
  return a;
}

std::vector<Action> SchedCache::next(Clock::time_point now, std::size_t max) {
  std::unique_lock<std::mutex> lock(mu_);
  dirty_ = false;
  std::vector<Action> out;
  if (!leading_) {
    return out;
  }
  ensureFreshLocked();
  // Backoffs that ran out go back to the queue; after a release, every backing-off pod does
  // (its attempt count stays, so a pod that still does not fit backs off longer).
  const bool released = std::exchange(released_, false);
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    auto b = backoff_.find(*it);
    auto p = pods_.find(*it);
    if (b == backoff_.end() || p == pods_.end() || !p->second->pending()) {
      it = waiting_.erase(it);
      continue;
    }
    if (released || b->second.until <= now) {
      enqueueLocked(*p->second);
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  // Reservations, oldest first.
  bool deadlinePassed = false;
  for (const auto& [k, r] : reservations_) {
    deadlinePassed = deadlinePassed || r.deadline <= now;
  }
  bool reservationBound = false;
  if (reservationsDirty_ || deadlinePassed) {
    reservationsDirty_ = false;
    std::vector<std::pair<std::uint64_t, std::string>> order;
    for (const auto& [k, r] : reservations_) {
      order.emplace_back(r.order, k);
    }
    std::sort(order.begin(), order.end());
    for (const auto& [o, key] : order) {
      auto p = pods_.find(key);
      auto r = reservations_.find(key);
      if (p == pods_.end() || r == reservations_.end()) {
        continue;
      }
      ensureFreshLocked();
      auto a = checkReservationLocked(*p->second, r->second, now);
      if (!a) {
        continue;
      }
      if (a->kind == Action::Kind::kBind) {
        reservations_.erase(r);
        assumed_[key] = a->node;
        p->second->started = now;
        reservationBound = true;
        refreshContributionLocked(*p->second);
      } else {
        dropReservationLocked(key);
        backoffLocked(key, now);
        clearing_.insert(key);
      }
      out.push_back(std::move(*a));
    }
  }
  if (opts_.queue.discipline != alloc::QueueDiscipline::Backfill) {
    // A head that waited for its GPUs has started: the pods held behind it are retried now.
    if (reservationBound) {
      for (const auto& k : waiting_) {
        if (auto p = pods_.find(k); p != pods_.end()) {
          enqueueLocked(*p->second);
        }
      }
      waiting_.clear();
    }
    if (!active_.empty()) {
      queuePassLocked(now, out);
    }
    if (reservationsDirty_) {
      dirty_ = true;
    }
    return out;
  }
  // Then the queue, in FCFS order. The lock is let go between two decisions so that the
  // informers' updates are not held up behind a whole batch.
  for (bool first = true; out.size() < max && !active_.empty(); first = false) {
    if (!first) {
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
      if (!leading_ || active_.empty()) {
        break;
      }
    }
    const std::string key = std::get<2>(*active_.begin());
    dequeueLocked(key);
    auto p = pods_.find(key);
    if (p == pods_.end()) {
      continue;
    }
    PodInfo& pod = *p->second;
    if (!pod.ours || pod.bound() || pod.deleting || reservations_.contains(key) ||
        assumed_.contains(key)) {
      continue;
    }
    ensureFreshLocked();
    if (auto a = decideLocked(pod, now)) {
      out.push_back(std::move(*a));
    }
  }
  if (!active_.empty() || reservationsDirty_) {
    dirty_ = true;
  }
  return out;
}

Clock::time_point SchedCache::nextWake(Clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mu_);
  Clock::time_point wake = now + std::chrono::seconds(1);
  for (const auto& k : waiting_) {
    if (auto b = backoff_.find(k); b != backoff_.end()) {
      wake = std::min(wake, b->second.until);
    }
  }
  for (const auto& [k, r] : reservations_) {
    wake = std::min(wake, r.deadline);
  }
  return wake;
}

bool SchedCache::dirty() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dirty_;
}

void SchedCache::bindDone(const std::string& key, bool ok, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ok) {
    return;  // the assumption stands until the watch shows the pod bound
  }
  if (assumed_.erase(key) > 0) {
    if (auto p = pods_.find(key); p != pods_.end()) {
      refreshContributionLocked(*p->second);
    }
  }
  backoffLocked(key, now);
  dirty_ = true;
  cv_.notify_all();
}

void SchedCache::reserveDone(const std::string& key, bool ok, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  auto r = reservations_.find(key);
  if (r == reservations_.end()) {
    return;
  }
  if (ok) {
    r->second.requested = true;
    return;
  }
  dropReservationLocked(key);
  backoffLocked(key, now);
  dirty_ = true;
  cv_.notify_all();
}

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
  s.nodes = nodeMap_.size();
  s.pools = poolMap_.size();
  for (const auto& [n, p] : poolMap_) {
    s.gpus += p.gpus.size();
  }
  s.active = active_.size();
  s.backoff = waiting_.size();
  s.reservations = reservations_.size();
  s.assumed = assumed_.size();
  return s;
}

std::optional<Reservation> SchedCache::reservation(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto r = reservations_.find(key);
  if (r == reservations_.end()) {
    return std::nullopt;
  }
  return r->second;
}

std::optional<std::int64_t> SchedCache::freeGpus(const std::string& node) {
  std::lock_guard<std::mutex> lock(mu_);
  ensureFreshLocked();
  auto n = nodeIndex_.find(node);
  if (n == nodeIndex_.end()) {
    return std::nullopt;
  }
  return state_.node(static_cast<alloc::NodeIndex>(n->second)).freeGpus;
}

void SchedCache::notifyAll() {
  std::lock_guard<std::mutex> lock(mu_);
  cv_.notify_all();
}

void SchedCache::waitForWork(Clock::time_point until, const std::atomic<bool>& stop) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_until(lock, until, [&] { return dirty_ || stop.load(); });
}

}  // namespace kc::sched
