#include "services/reconfig-mgr/reconfig.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>

#include <set>

#include "libcore/alloc/policy_registry.hpp"
#include "libcore/alloc/sched_objects.hpp"
#include "libcore/base/base64.hpp"
#include "libcore/base/rfc3339.hpp"
#include "libcore/fabric/h3_driver.hpp"
#include "libcore/fabric/pool.hpp"
#include "libcore/fabric/redfish_driver.hpp"
#include "libcore/obs/health.hpp"
#include "services/reconfig-mgr/idle_planner.hpp"
#include "services/reconfig-mgr/move_planner.hpp"
#include "services/reconfig-mgr/moves_gate.hpp"
#include "services/reconfig-mgr/pool_view.hpp"

namespace kc::reconfig {

using nlohmann::json;
using SteadyTime = std::chrono::steady_clock::time_point;

namespace {

const prometheus::Histogram::BucketBoundaries& secondsBuckets() {
  static const prometheus::Histogram::BucketBoundaries b = {
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
      2.5,   5,      10,    25,   50,    100,  250, 500,  1000};
  return b;
}

std::string gpusLabel(std::int64_t n) {
  return n >= 8 ? std::string("8+") : std::to_string(n);
}

double secondsSince(SteadyTime t, SteadyTime now) {
  return std::chrono::duration<double>(now - t).count();
}

}  // namespace

struct ReconfigManager::Metrics {
  explicit Metrics(prometheus::Registry& reg)
      : phases(prometheus::BuildHistogram()
                   .Name("kubecomp_reconfig_phase_seconds")
                   .Help("Duration of the paper's reconfiguration phases per pod request "
                         "(node_selection, "
                         "gpu_availability_update, allocation_retrieval, reallocation, "
                         "detection_and_binding), "
                         "by GPUs moved for the pod")
                   .Register(reg)),
        movePhases(prometheus::BuildHistogram()
                       .Name("kubecomp_reconfig_move_phase_seconds")
                       .Help("Duration of each phase of one GPU move (Draining, Detaching, "
                             "Attaching, Verifying, "
                             "RollingBack)")
                       .Register(reg)),
        moves(prometheus::BuildCounter()
                  .Name("kubecomp_reconfig_moves_total")
                  .Help("GPU moves finished, by result")
                  .Register(reg)),
        movesOk(moves.Add({{"result", "succeeded"}})),
        movesFailed(moves.Add({{"result", "failed"}})),
        background(prometheus::BuildCounter()
                       .Name("kubecomp_reconfig_background_moves_total")
                       .Help("Background moves of idle-time recomposition (--recompose-policy) "
                             "finished, by result (succeeded, failed, cancelled: a real request "
                             "needed the fabric while it was still draining); they count in "
                             "kubecomp_reconfig_moves_total too")
                       .Register(reg)),
        backgroundOk(background.Add({{"result", "succeeded"}})),
        backgroundFailed(background.Add({{"result", "failed"}})),
        backgroundCancelled(background.Add({{"result", "cancelled"}})),
        failures(prometheus::BuildCounter()
                     .Name("kubecomp_reconfig_failures_total")
                     .Help("Failures, by kind (inventory, move, status_write, unsupported, "
                           "quarantine, insufficient)")
                     .Register(reg)),
        inventoryReads(prometheus::BuildCounter()
                           .Name("kubecomp_reconfig_inventory_reads_total")
                           .Help("Fabric inventory reads, by result")
                           .Register(reg)),
        readsOk(inventoryReads.Add({{"result", "ok"}})),
        readsFailed(inventoryReads.Add({{"result", "error"}})),
        leader(prometheus::BuildGauge()
                   .Name("kubecomp_reconfig_is_leader")
                   .Help("1 while this replica holds the lease and acts")
                   .Register(reg)
                   .Add({})),
        pools(prometheus::BuildGauge()
                  .Name("kubecomp_reconfig_pools")
                  .Help("GPUPools with a worker")
                  .Register(reg)
                  .Add({})) {}

  void phase(const std::string& name, std::int64_t gpus, double seconds) {
    phases.Add({{"phase", name}, {"gpus", gpusLabel(gpus)}}, secondsBuckets()).Observe(seconds);
  }
  void failure(const std::string& kind) { failures.Add({{"kind", kind}}).Increment(); }

  prometheus::Family<prometheus::Histogram>& phases;
  prometheus::Family<prometheus::Histogram>& movePhases;
  prometheus::Family<prometheus::Counter>& moves;
  prometheus::Counter& movesOk;
  prometheus::Counter& movesFailed;
  prometheus::Family<prometheus::Counter>& background;
  prometheus::Counter& backgroundOk;
  prometheus::Counter& backgroundFailed;
  prometheus::Counter& backgroundCancelled;
  prometheus::Family<prometheus::Counter>& failures;
  prometheus::Family<prometheus::Counter>& inventoryReads;
  prometheus::Counter& readsOk;
  prometheus::Counter& readsFailed;
  prometheus::Gauge& leader;
  prometheus::Gauge& pools;
};

// What every worker reads: the client, the informers' stores, the recorder, the options.
struct ReconfigManager::Shared {
  ReconfigOptions opts;
  kube::KubeClient* client = nullptr;
  Metrics* metrics = nullptr;
  alloc::GpuPolicy policy{};
  alloc::RecomposeKind recompose = alloc::RecomposeKind::None;
  std::unique_ptr<kube::EventRecorder> recorder;
  const kube::Store* pools = nullptr;
  const kube::Store* nodes = nullptr;
  const kube::Store* pods = nullptr;
};

// One GPUPool: its driver, inventory, journal and the thread that runs them.
class PoolWorker final : public MoveEnv {
 public:
  PoolWorker(std::string name, ReconfigManager::Shared& shared)
      : name_(std::move(name)),
        sh_(shared),
        clock_(sh_.client->clock()),
        runner_(*this, clock_, sh_.opts.runner),
        rng_(sh_.opts.seed),
        movesGate_(std::chrono::seconds(sh_.opts.movesReprobeSeconds)) {}
  ~PoolWorker() override { stop(); }

  void start() {
    thread_ = std::thread([this] { run(); });
  }
  void stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) {
      thread_.join();
    }
  }
  void wake() {
    {
      std::lock_guard lock(mu_);
      dirty_ = true;
    }
    cv_.notify_all();
  }
  bool exited() const { return exited_.load(); }

  // MoveEnv
  fabric::FabricDriver& fabric() override { return *driver_; }
  std::optional<api::UsageReport> usage(const std::string& node) override {
    auto n = sh_.nodes->get("", node);
    if (!n) {
      return std::nullopt;
    }
    const json& meta = (*n)["metadata"];
    const auto a = meta.find("annotations");
    if (a == meta.end() || !a->is_object()) {
      return std::nullopt;
    }
    const auto u = a->find(std::string(api::kUsageAnnotation));
    if (u == a->end() || !u->is_string()) {
      return std::nullopt;
    }
    auto r = api::parseUsageReport(u->get<std::string>());
    if (!r) {
      return std::nullopt;
    }
    return *r;
  }
  bool podWaiting(const Move& m) override {
    auto obj = sh_.pods->get(m.podNamespace, m.podName);
    if (!obj) {
      return false;
    }
    auto p = parsePodInfo(*obj);
    return p && (m.podUid.empty() || p->uid == m.podUid) && p->waiting() && p->dstNode == m.toNode;
  }
  std::optional<std::string> cancelBackground(const Move& m) override {
    const auto pods = kubecompPods();
    const auto view = currentView();
    if (!view || !spec_) {
      return std::nullopt;
    }
    return backgroundCancelReason(demandPlan(*view, pods), *view, pods, m);
  }
  Status persist(const Journal& journal) override {
    journal_ = journal;
    return writeStatus(true);
  }
  void event(const Move& m, bool warning, const std::string& reason,
             const std::string& message) override {
    if (m.background()) {
      poolEvent(warning, reason,
                reason == "GPUMoveStarted" ? message + " (background: " + m.reason + ")" : message);
      return;
    }
    podEvent(m.podNamespace, m.podName, m.podUid, warning, reason, message);
  }
  void inventoryRead(const fabric::Inventory& inventory) override {
    inventory_ = inventory;
    lastRead_ = clock_.now();
    lastInventoryTime_ = formatRfc3339(clock_.wallNow());
    inventoryError_.reset();
  }
  void quarantine(const std::string& gpu, const std::string& reason) override {
    quarantine_[gpu] = reason;
    spdlog::warn("pool {}: GPU {} quarantined: {}", name_, gpu, reason);
    if (sh_.metrics) {
      sh_.metrics->failure("quarantine");
    }
  }
  void unsupported(const std::string& message) override {
    if (sh_.metrics) {
      sh_.metrics->failure("unsupported");
    }
    const auto reprobe = movesGate_.reprobeInterval();
    const std::string next =
        reprobe.count() > 0
            ? "the next move is tried after " + std::to_string(reprobe.count()) + " s"
            : "no move is tried again until the pool's chassis list changes";
    if (movesGate_.refused(message, clock_.now()) == MovesGate::Transition::kNone) {
      // A re-probe that found the same: the condition stays, no second Event.
      spdlog::warn("pool {}: the fabric still cannot move GPUs: {}; {}", name_, message, next);
      return;
    }
    spdlog::error("pool {}: the fabric cannot move GPUs: {}; {}", name_, message, next);
    poolEvent(true, "MovesUnsupported", "the fabric cannot move GPUs: " + message + "; " + next);
  }
  void phaseEnded(const Move& m, MovePhase phase, double seconds) override {
    if (sh_.metrics) {
      sh_.metrics->movePhases.Add({{"phase", std::string(toString(phase))}}, secondsBuckets())
          .Observe(seconds);
    }
    if (m.background()) {
      return;  // no pod request to time
    }
    auto& t = timing(m.podKey());
    if (phase != MovePhase::kSucceeded && phase != MovePhase::kFailed) {
      t.reallocation += seconds;
    }
  }
  void moveFinished(const Move& m) override {
    const bool ok = m.phase == MovePhase::kSucceeded;
    const bool cancelledInBackground = m.background() && m.cancelled;
    if (sh_.metrics) {
      (ok ? sh_.metrics->movesOk : sh_.metrics->movesFailed).Increment();
      if (!ok && !cancelledInBackground) {
        sh_.metrics->failure("move");
      }
      if (m.background()) {
        (ok                      ? sh_.metrics->backgroundOk
         : cancelledInBackground ? sh_.metrics->backgroundCancelled
                                 : sh_.metrics->backgroundFailed)
            .Increment();
      }
    }
    spdlog::info("pool {}: move of GPU {} to {} for {}: {} ({})", name_, m.gpu, m.toNode,
                 m.background() ? std::string("the background") : m.podKey(), toString(m.phase),
                 m.message);
    if (ok && movesGate_.moved() == MovesGate::Transition::kSupported) {
      spdlog::info("pool {}: the fabric moved GPU {} after a refusal: moves are supported again",
                   name_, m.gpu);
      poolEvent(false, "MovesSupported",
                "the fabric moved GPU " + m.gpu + " to " + m.toNode +
                    " after refusing moves as unsupported; moves go on");
    }
    if (m.background()) {
      if (!ok && !cancelledInBackground && spec_) {
        // A background move that failed is not tried again at once (no retry storm on a
        // sick chassis): the next one waits for a poll interval.
        idlePauseUntil_ = clock_.now() + std::chrono::seconds(spec_->pollIntervalSeconds);
      }
      return;
    }
    if (ok) {
      auto& t = timing(m.podKey());
      t.gpusMoved += 1;
      t.lastMoveDone = clock_.now();
    }
  }

 private:
  // Per pod request, for the paper's phase histograms (in memory; a restart loses them).
  struct RequestTiming {
    SteadyTime firstSeen{};
    double nodeSelection = 0;
    double availability = 0;
    double retrieval = 0;
    double reallocation = 0;
    std::int64_t gpusMoved = 0;
    bool planned = false;
    SteadyTime lastMoveDone{};
    std::string node;
  };
  RequestTiming& timing(const std::string& pod) { return timings_[pod]; }

  void podEvent(const std::string& ns, const std::string& name, const std::string& uid,
                bool warning, const std::string& reason, const std::string& message) {
    kube::ObjectReference ref;
    ref.kind = "Pod";
    ref.apiVersion = "v1";
    ref.ns = ns;
    ref.name = name;
    ref.uid = uid;
    auto r = sh_.recorder->record(ref, warning ? "Warning" : "Normal", reason, message);
    if (!r) {
      spdlog::debug("event {} on {}/{}: {}", reason, ns, name, r.error().toError().message);
    }
  }

  // Events of background moves (no pod) go on the GPUPool.
  void poolEvent(bool warning, const std::string& reason, const std::string& message) {
    kube::ObjectReference ref;
    ref.kind = std::string(api::kGpuPoolKind);
    ref.apiVersion = std::string(api::kGpuPoolApiVersion);
    ref.name = name_;
    if (auto obj = poolObject()) {
      ref.uid = (*obj)["metadata"].value("uid", "");
    }
    auto r = sh_.recorder->record(ref, warning ? "Warning" : "Normal", reason, message);
    if (!r) {
      spdlog::debug("event {} on GPUPool {}: {}", reason, name_, r.error().toError().message);
    }
  }

  // The pool object as the informer has it (null when deleted).
  kube::ObjectPtr poolObject() const { return sh_.pools->get("", name_); }

  // Loads journal and quarantine from the object: at start, and when someone else wrote them.
  void loadFromObject(const json& obj) {
    auto parsed = parseJournal(obj);
    for (const auto& p : parsed.problems) {
      spdlog::warn("pool {}: {}", name_, p);
    }
    journal_ = std::move(parsed.journal);
    quarantine_ = parseQuarantine(obj);
    lastWrittenMoves_ = journal_.toJson();
    previousStatus_ = obj.value("status", json::object());
    if (journal_.active) {
      spdlog::info("pool {}: resuming move of GPU {} to {} for {} in phase {}", name_,
                   journal_.active->gpu, journal_.active->toNode, journal_.active->podKey(),
                   toString(journal_.active->phase));
    }
  }

  Status buildDriver() {
    std::vector<std::unique_ptr<fabric::FabricDriver>> drivers;
    for (const ChassisSpec& c : spec_->chassis) {
      std::optional<fabric::Credentials> creds;
      if (!c.secretName.empty()) {
        auto secret = sh_.client->get(kube::GroupVersionResource{"", "v1", "secrets", true},
                                      c.secretNamespace, c.secretName);
        if (!secret) {
          return makeError(errc::kUnavailable, "chassis " + c.name + ": Secret " +
                                                   c.secretNamespace + "/" + c.secretName + ": " +
                                                   secret.error().toError().message);
        }
        const json data = secret->value("data", json::object());
        auto user = base64Decode(data.value("username", std::string()));
        auto pass = base64Decode(data.value("password", std::string()));
        if (!user || !pass || user->empty()) {
          return makeError(errc::kInvalid, "chassis " + c.name + ": Secret " + c.secretNamespace +
                                               "/" + c.secretName +
                                               " lacks base64 keys username and password");
        }
        creds = fabric::Credentials{*user, *pass};
      }
      if (c.driver == "h3") {
        fabric::H3Options o;
        o.chassis = c.name;
        o.baseUrl = c.endpoint;
        o.gep = c.gep;
        o.gpuModel = c.gpuModel;
        o.policy = sh_.opts.callPolicy;
        o.credentials = creds;
        auto d = fabric::H3Driver::create(std::move(o));
        if (!d) {
          return d.error();
        }
        drivers.push_back(std::move(*d));
      } else {
        fabric::RedfishOptions o;
        o.chassis = c.name;
        o.baseUrl = c.endpoint;
        o.auth = c.auth == "basic"  ? fabric::RedfishAuth::kBasic
                 : c.auth == "none" ? fabric::RedfishAuth::kNone
                                    : fabric::RedfishAuth::kSession;
        o.credentials = creds;
        o.policy = sh_.opts.callPolicy;
        auto d = fabric::RedfishDriver::create(std::move(o));
        if (!d) {
          return d.error();
        }
        drivers.push_back(std::move(*d));
      }
    }
    auto pool = fabric::FabricPool::create(name_, std::move(drivers));
    if (!pool) {
      return pool.error();
    }
    driver_ = std::move(*pool);
    driverSpec_ = *spec_;
    return okStatus();
  }

  void readInventory() {
    const SteadyTime t0 = clock_.now();
    auto inv = driver_->inventory();
    lastRead_ = clock_.now();
    if (inv) {
      inventoryRead(*inv);
      if (sh_.metrics) {
        sh_.metrics->readsOk.Increment();
      }
    } else {
      inventoryError_ = inv.error().message;
      spdlog::warn("pool {}: inventory: {}", name_, inv.error().message);
      if (sh_.metrics) {
        sh_.metrics->readsFailed.Increment();
        sh_.metrics->failure("inventory");
      }
    }
    lastReadSeconds_ = secondsSince(t0, lastRead_);
  }

  UsageByNode usageByNode() {
    UsageByNode out;
    for (const NodeSpec& n : spec_->nodes) {
      if (auto u = usage(n.name)) {
        out.emplace(n.name, std::move(*u));
      }
    }
    return out;
  }

  std::optional<PoolView> currentView() {
    if (!inventory_ || !spec_) {
      return std::nullopt;
    }
    return buildView(*spec_, *inventory_, usageByNode(), journal_, quarantine_);
  }

  // Renders and writes the status when it changed. `journalChange`: the write records a
  // journal step and must land (optimistic concurrency on the object's resourceVersion).
  Status writeStatus(bool journalChange) {
    auto obj = poolObject();
    if (!obj) {
      return makeError(errc::kNotFound, "GPUPool " + name_ + " is gone");
    }
    const auto view = currentView();
    StatusInputs in;
    in.spec = spec_ ? &*spec_ : nullptr;
    PoolSpec empty;
    empty.name = name_;
    if (!spec_) {
      in.spec = &empty;
    }
    in.view = view ? &*view : nullptr;
    in.inventoryError = inventoryError_;
    in.movesUnsupported = movesGate_.unsupported();
    in.specError = specError_;
    in.journal = &journal_;
    in.quarantine = &quarantine_;
    in.now = clock_.wallNow();
    in.lastInventoryTime = lastInventoryTime_;
    in.previousStatus = previousStatus_;
    json status = renderStatus(in);
    if (!journalChange && status == previousStatus_) {
      return okStatus();
    }
    json body = *obj;
    if (!resourceVersion_.empty() &&
        lastWriteGeneration_ == body["metadata"].value("generation", 0)) {
      // Our own last write may not have reached the informer yet.
      body["metadata"]["resourceVersion"] = resourceVersion_;
    }
    body["status"] = status;
    for (int attempt = 0; attempt < 3; ++attempt) {
      auto r = sh_.client->updateStatus(api::gvr::gpuPools(), "", body);
      if (r) {
        previousStatus_ = status;
        lastWrittenMoves_ = status["moves"];
        resourceVersion_ = (*r)["metadata"].value("resourceVersion", "");
        lastWriteGeneration_ = (*r)["metadata"].value("generation", 0);
        return okStatus();
      }
      if (!r.error().isConflict()) {
        if (sh_.metrics) {
          sh_.metrics->failure("status_write");
        }
        return r.error().toError();
      }
      // Someone changed the object. If the journal there is still ours (a spec edit), write
      // again on the new version; otherwise another writer acts on this pool: stand back.
      auto fresh = sh_.client->get(api::gvr::gpuPools(), "", name_);
      if (!fresh) {
        return fresh.error().toError();
      }
      const json theirs = fresh->value("status", json::object()).value("moves", json::array());
      if (theirs != lastWrittenMoves_) {
        spdlog::warn("pool {}: the move journal was changed by another writer; reloading it",
                     name_);
        loadFromObject(*fresh);
        reload_ = true;
        return makeError(errc::kConflict,
                         "GPUPool " + name_ + ": journal changed by another writer");
      }
      body = *fresh;
      body["status"] = status;
    }
    return makeError(errc::kConflict, "GPUPool " + name_ + ": status kept conflicting");
  }

  // Every kubecomp-sched pod, parsed once per resourceVersion (the loop runs on every change
  // of any pod, node or pool; re-parsing thousands of pods each time would dominate).
  std::vector<PodInfo> kubecompPods() {
    std::vector<PodInfo> out;
    std::map<std::string, ParsedPod> next;
    for (const auto& obj : sh_.pods->list()) {
      const json& meta = (*obj)["metadata"];
      const std::string key = meta.value("namespace", "") + "/" + meta.value("name", "");
      const std::string rv = meta.value("resourceVersion", "");
      auto cached = podCache_.find(key);
      if (cached != podCache_.end() && !rv.empty() && cached->second.resourceVersion == rv) {
        next.emplace(key, std::move(cached->second));
      } else {
        ParsedPod parsed;
        parsed.resourceVersion = rv;
        auto p = parsePodInfo(*obj);
        if (p) {
          parsed.info = std::move(*p);
        } else if (badPods_.size() < 4096 && badPods_.insert(key + "@" + rv).second) {
          spdlog::warn("pod {}: {}", key, p.error().message);
        }
        next.emplace(key, std::move(parsed));
      }
      if (next.at(key).info) {
        out.push_back(*next.at(key).info);
      }
    }
    podCache_ = std::move(next);
    return out;
  }

  // The paper's phase timings of each request, observed when its pod is bound.
  void trackRequests(const std::vector<PodInfo>& pods) {
    const SteadyTime now = clock_.now();
    std::set<std::string> seen;
    for (const PodInfo& p : pods) {
      if (p.dstNode.empty() || !spec_->hasNode(p.dstNode)) {
        continue;
      }
      seen.insert(p.key());
      auto it = timings_.find(p.key());
      if (p.waiting()) {
        if (it == timings_.end() || it->second.firstSeen == SteadyTime{}) {
          auto& t = timings_[p.key()];
          t.firstSeen = now;
          t.node = p.dstNode;
          if (p.created != std::chrono::system_clock::time_point{}) {
            t.nodeSelection =
                std::max(0.0, std::chrono::duration<double>(clock_.wallNow() - p.created).count());
          }
        }
      } else if (it != timings_.end() && p.nodeName == it->second.node &&
                 it->second.gpusMoved > 0) {
        const RequestTiming& t = it->second;
        if (sh_.metrics) {
          sh_.metrics->phase("node_selection", t.gpusMoved, t.nodeSelection);
          sh_.metrics->phase("gpu_availability_update", t.gpusMoved, t.availability);
          sh_.metrics->phase("allocation_retrieval", t.gpusMoved, t.retrieval);
          sh_.metrics->phase("reallocation", t.gpusMoved, t.reallocation);
          sh_.metrics->phase("detection_and_binding", t.gpusMoved,
                             secondsSince(t.lastMoveDone, now));
        }
        timings_.erase(it);
      }
    }
    for (auto it = timings_.begin(); it != timings_.end();) {
      it = seen.count(it->first) ? std::next(it) : timings_.erase(it);
    }
  }

  // Plans and starts the next move when none is in flight.
  void planAndStart(const std::vector<PodInfo>& pods) {
    bool anyWaiting = false;
    for (const PodInfo& p : pods) {
      anyWaiting = anyWaiting || (p.waiting() && spec_->hasNode(p.dstNode));
    }
    if (!movesGate_.allows(clock_.now())) {
      return;  // refused as unsupported; tried again at movesGate_.reprobeAt()
    }
    if (!anyWaiting) {
      startBackground(pods);
      return;
    }
    const SteadyTime t0 = clock_.now();
    bool freshRead = false;
    if (!inventory_ || clock_.now() - lastRead_ > sh_.opts.planInventoryMaxAge) {
      readInventory();
      freshRead = true;
    }
    if (!inventory_ || inventoryError_) {
      return;
    }
    const SteadyTime t1 = clock_.now();
    const auto view = currentView();
    PlanResult plan = demandPlan(*view, pods);
    const SteadyTime t2 = clock_.now();
    for (const PodPlan& pp : plan.pods) {
      auto& t = timing(pp.pod);
      if (pp.verdict == PodPlan::Verdict::kMoving) {
        // The inventory read (and usage merge) the request's first plan stood on, whether read
        // for the plan or by the poll just before it; later plans reuse the verify reads.
        if (!t.planned) {
          t.availability = freshRead ? secondsSince(t0, t1) : lastReadSeconds_;
          t.planned = true;
        }
        t.retrieval += secondsSince(t1, t2);
      }
      const auto slash = pp.pod.find('/');
      if (pp.verdict == PodPlan::Verdict::kInsufficient) {
        if (insufficient_[pp.pod] != pp.reason) {
          insufficient_[pp.pod] = pp.reason;
          spdlog::info("pool {}: {}: {}", name_, pp.pod, pp.reason);
          podEvent(pp.pod.substr(0, slash), pp.pod.substr(slash + 1), pp.uid, true,
                   "ReconfigInsufficient", pp.reason);
          if (sh_.metrics) {
            sh_.metrics->failure("insufficient");
          }
        }
      } else {
        insufficient_.erase(pp.pod);
      }
    }
    if (plan.next) {
      if (auto s = runner_.start(journal_, *plan.next); !s) {
        spdlog::warn("pool {}: cannot start the move of GPU {}: {}", name_, plan.next->gpu,
                     s.error().message);
      }
      return;
    }
    if (!demandWaits(plan)) {
      startBackground(pods);
    }
  }

  // The waiting pods' plan (move_planner.hpp) on `view`, with the move in flight.
  PlanResult demandPlan(const PoolView& view, const std::vector<PodInfo>& pods) {
    PlanInputs in;
    in.spec = &*spec_;
    in.view = &view;
    in.pods = &pods;
    in.active = &journal_.active;
    in.policy = sh_.policy;
    in.rng = &rng_;
    return planMoves(in);
  }

  // CPU and memory of the pool's nodes from their Node objects (idle_planner.hpp).
  std::map<std::string, NodeCapacity> nodeCapacities() {
    std::map<std::string, NodeCapacity> out;
    for (const NodeSpec& n : spec_->nodes) {
      auto obj = sh_.nodes->get("", n.name);
      if (!obj) {
        continue;
      }
      auto node = alloc::parseNode(*obj);
      if (!node) {
        continue;  // nothing fits on a node we cannot read
      }
      NodeCapacity c;
      c.cpuMilli =
          static_cast<std::uint64_t>(std::max<std::int64_t>(0, node->allocatable.milliCpu));
      c.memoryMiB =
          static_cast<std::uint64_t>(std::max<std::int64_t>(0, node->allocatable.memory)) >> 20;
      c.unschedulable = node->unschedulable;
      out.emplace(n.name, c);
    }
    return out;
  }

  Result<IdlePlan> idlePlan(const std::vector<PodInfo>& pods) {
    const auto view = currentView();
    if (!view) {
      return IdlePlan{};
    }
    const PlanResult demand = demandPlan(*view, pods);
    const auto nodes = nodeCapacities();
    IdleInputs in;
    in.spec = &*spec_;
    in.view = &*view;
    in.pods = &pods;
    in.demand = &demand;
    in.nodes = &nodes;
    in.journal = &journal_;
    in.kind = sh_.recompose;
    in.gpuPolicy = sh_.policy;
    in.now = clock_.wallNow();
    in.defaultRuntime = sh_.opts.defaultRuntime;
    in.cooldown = sh_.opts.recomposeCooldown;
    return planIdle(in);
  }

  // Idle-time recomposition: no move in flight and no real request waiting for this pool
  // (the caller checked): start the background move the policy plans, if any. The plan is made
  // again after every landing and every change of pods, nodes or inventory (each wake).
  void startBackground(const std::vector<PodInfo>& pods) {
    if (sh_.recompose == alloc::RecomposeKind::None || !movesGate_.allows(clock_.now()) ||
        journal_.active || !spec_ || clock_.now() < idlePauseUntil_) {
      return;
    }
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (!inventory_ || inventoryError_) {
        return;
      }
      auto plan = idlePlan(pods);
      if (!plan) {
        if (idleError_ != plan.error().message) {
          idleError_ = plan.error().message;
          spdlog::warn("pool {}: idle-time plan: {}", name_, idleError_);
        }
        return;
      }
      idleError_.clear();
      if (!plan->next) {
        return;
      }
      // Moves are planned on a fresh inventory, as the demand planner's are.
      if (attempt == 0 && clock_.now() - lastRead_ > sh_.opts.planInventoryMaxAge) {
        readInventory();
        continue;
      }
      spdlog::info("pool {}: background move of GPU {} to {}: {} (plan: {} moves)", name_,
                   plan->next->gpu, plan->next->toNode, plan->next->reason, plan->planned.size());
      if (auto s = runner_.start(journal_, *plan->next); !s) {
        spdlog::warn("pool {}: cannot start the background move of GPU {}: {}", name_,
                     plan->next->gpu, s.error().message);
      }
      return;
    }
  }

  void run() {
    const std::string where = "pool " + name_;
    bool loaded = false;
    while (true) {
      {
        std::unique_lock lock(mu_);
        if (stopping_) {
          break;
        }
        dirty_ = false;
      }
      auto obj = poolObject();
      if (!obj) {
        break;  // the GPUPool is gone
      }
      if (!loaded || reload_) {
        auto fresh = sh_.client->get(api::gvr::gpuPools(), "", name_);
        if (!fresh) {
          if (fresh.error().isNotFound()) {
            break;
          }
          waitFor(std::chrono::seconds(1));
          continue;
        }
        loadFromObject(*fresh);
        resourceVersion_ = (*fresh)["metadata"].value("resourceVersion", "");
        lastWriteGeneration_ = (*fresh)["metadata"].value("generation", 0);
        loaded = true;
        reload_ = false;
      }
      auto spec = parsePoolSpec(*obj, sh_.opts.secretNamespace);
      if (!spec) {
        specError_ = spec.error().message;
        spec_.reset();
        (void)writeStatus(false);
        waitFor(std::chrono::seconds(30));
        continue;
      }
      specError_.reset();
      spec_ = *spec;
      if (!driver_ || !driverSpec_.sameFabric(*spec_)) {
        if (auto s = buildDriver(); !s) {
          inventoryError_ = s.error().message;
          spdlog::warn("{}: {}", where, s.error().message);
          (void)writeStatus(false);
          waitFor(std::chrono::seconds(5));
          continue;
        }
        if (movesGate_.reset() == MovesGate::Transition::kSupported) {
          poolEvent(false, "MovesSupported", "the pool's chassis changed; moves are tried again");
        }
        inventory_.reset();
      }
      const auto poll = std::chrono::seconds(spec_->pollIntervalSeconds);
      if (!inventory_ || clock_.now() - lastRead_ >= poll) {
        readInventory();
      }
      SteadyTime wakeAt = lastRead_ + poll;
      // The move in flight, as far as it can go now.
      for (int i = 0; i < 64 && !stoppingNow(); ++i) {
        auto out = runner_.step(journal_);
        if (out.kind == MoveRunner::Outcome::Kind::kProgressed) {
          continue;
        }
        if (out.kind == MoveRunner::Outcome::Kind::kWaiting) {
          wakeAt = std::min(wakeAt, out.wakeAt);
          break;
        }
        // Idle: plan the next move, and run it if one started.
        const auto pods = kubecompPods();
        trackRequests(pods);
        planAndStart(pods);
        if (!journal_.active) {
          break;
        }
      }
      if (const auto reprobe = movesGate_.reprobeAt(); reprobe && *reprobe > clock_.now()) {
        wakeAt = std::min(wakeAt, *reprobe);  // moves refused as unsupported: plan again then
      }
      (void)writeStatus(false);
      waitUntil(wakeAt);
    }
    exited_ = true;
  }

  bool stoppingNow() {
    std::lock_guard lock(mu_);
    return stopping_;
  }
  void waitFor(std::chrono::milliseconds d) { waitUntil(clock_.now() + d); }
  void waitUntil(SteadyTime t) {
    std::unique_lock lock(mu_);
    clock_.waitUntil(lock, cv_, t, [this] { return stopping_ || dirty_; });
  }

  const std::string name_;
  ReconfigManager::Shared& sh_;
  kc::Clock& clock_;
  MoveRunner runner_;
  alloc::SplitMix64 rng_;
  std::thread thread_;
  std::atomic<bool> exited_{false};
  std::mutex mu_;  // guards stopping_ and dirty_
  std::condition_variable cv_;
  bool stopping_ = false;
  bool dirty_ = false;

  // Worker-thread state.
  std::optional<PoolSpec> spec_;
  std::optional<std::string> specError_;
  PoolSpec driverSpec_;
  std::unique_ptr<fabric::FabricDriver> driver_;
  std::optional<fabric::Inventory> inventory_;
  std::optional<std::string> inventoryError_;
  MovesGate movesGate_;  // a refusal as unsupported stops moves until the re-probe
  SteadyTime lastRead_{};
  double lastReadSeconds_ = 0;
  std::string lastInventoryTime_;
  Journal journal_;
  Quarantine quarantine_;
  json previousStatus_ = json::object();
  json lastWrittenMoves_ = json::array();
  std::string resourceVersion_;
  std::int64_t lastWriteGeneration_ = 0;
  bool reload_ = false;
  std::map<std::string, RequestTiming> timings_;
  std::map<std::string, std::string> insufficient_;
  SteadyTime idlePauseUntil_{};    // no background move before (after one failed)
  std::string idleError_;          // last idle-time planning error, logged once
  std::set<std::string> badPods_;  // "ns/name@rv" already warned about
  struct ParsedPod {
    std::string resourceVersion;
    std::optional<PodInfo> info;  // nullopt: unreadable
  };
  std::map<std::string, ParsedPod> podCache_;
};

Status validate(const ReconfigOptions& o) {
  if (auto p = alloc::findGpuPolicy(o.gpuPolicy); !p) {
    return makeError(errc::kInvalid, "--gpu-policy: " + p.error().message);
  }
  if (auto p = alloc::findRecomposePolicy(o.recomposePolicy); !p) {
    return makeError(errc::kInvalid, "--recompose-policy: " + p.error().message);
  }
  if (o.defaultRuntime.count() < 1 ||
      o.defaultRuntime.count() > alloc::kMaxExpectedRuntimeSeconds) {
    return makeError(errc::kInvalid, "--default-runtime-seconds must be 1.." +
                                         std::to_string(alloc::kMaxExpectedRuntimeSeconds));
  }
  if (o.movesReprobeSeconds < 0 || o.movesReprobeSeconds > 7 * 86400) {
    return makeError(errc::kInvalid, "--moves-reprobe-seconds must be 0 (never) to 604800");
  }
  if (o.recomposeCooldown.count() < 0) {
    return makeError(errc::kInvalid, "--recompose-cooldown-seconds must not be negative");
  }
  if (o.identity.empty()) {
    return makeError(errc::kInvalid, "identity must not be empty");
  }
  if (o.schedulerName.empty()) {
    return makeError(errc::kInvalid, "--scheduler-name must not be empty");
  }
  if (o.runner.maxAttempts < 1) {
    return makeError(errc::kInvalid, "--max-attempts must be at least 1");
  }
  if (o.leaderElect && !(o.leaseDuration > o.renewDeadline && o.renewDeadline > o.retryPeriod)) {
    return makeError(errc::kInvalid,
                     "lease durations must satisfy lease > renew deadline > retry period");
  }
  return okStatus();
}

ReconfigManager::ReconfigManager(ReconfigOptions options, kube::KubeClient& client,
                                 obs::Metrics* metrics, obs::HealthChecks* health)
    : opts_(std::move(options)),
      client_(client),
      health_(health),
      shared_(std::make_unique<Shared>()) {
  if (metrics != nullptr) {
    metrics_ = std::make_unique<Metrics>(metrics->registry());
  }
  shared_->opts = opts_;
  shared_->client = &client_;
  shared_->metrics = metrics_.get();
  auto policy = alloc::findGpuPolicy(opts_.gpuPolicy);
  shared_->policy = policy ? *policy : *alloc::findGpuPolicy(alloc::kDefaultGpuPolicy);
  if (auto r = alloc::findRecomposePolicy(opts_.recomposePolicy)) {
    shared_->recompose = r->kind;
  }
  shared_->recorder =
      std::make_unique<kube::EventRecorder>(client_, "reconfig-mgr", opts_.identity);

  auto informer = [&](kube::GroupVersionResource r, std::string fieldSelector) {
    kube::InformerOptions io;
    io.resource = std::move(r);
    io.fieldSelector = std::move(fieldSelector);
    auto inf = std::make_unique<kube::Informer>(client_, io);
    kube::ResourceEventHandler h;
    h.onAdd = [this](const kube::ObjectPtr&) { wakeAll(); };
    h.onUpdate = [this](const kube::ObjectPtr&, const kube::ObjectPtr&) { wakeAll(); };
    h.onDelete = [this](const kube::ObjectPtr&) { wakeAll(); };
    inf->addHandler(std::move(h));
    return inf;
  };
  pools_ = informer(api::gvr::gpuPools(), "");
  nodes_ = informer(kube::gvr::nodes(), "");
  pods_ = informer(kube::gvr::pods(), "spec.schedulerName=" + opts_.schedulerName);
  shared_->pools = &pools_->store();
  shared_->nodes = &nodes_->store();
  shared_->pods = &pods_->store();

  if (health_ != nullptr) {
    health_->addReadinessCheck("informers", [this]() -> Status {
      if (pools_->hasSynced() && nodes_->hasSynced() && pods_->hasSynced()) {
        return okStatus();
      }
      return makeError(errc::kUnavailable,
                       "waiting for the first LIST of GPUPools, Nodes and Pods");
    });
  }
}

ReconfigManager::~ReconfigManager() {
  stop();
}

void ReconfigManager::wakeAll() {
  std::lock_guard lock(mu_);
  changed_ = true;
  for (auto& [name, w] : workers_) {
    w->wake();
  }
  cv_.notify_all();
}

void ReconfigManager::lead() {
  leading_ = true;
  if (metrics_) {
    metrics_->leader.Set(1);
  }
  spdlog::info("reconfig-mgr {} is leading", opts_.identity);
  pools_->waitForSync(std::chrono::seconds(30));
  nodes_->waitForSync(std::chrono::seconds(30));
  pods_->waitForSync(std::chrono::seconds(30));
  std::unique_lock lock(mu_);
  while (!stopLeading_) {
    changed_ = false;
    std::set<std::string> names;
    for (const auto& obj : pools_->store().list()) {
      names.insert((*obj)["metadata"].value("name", ""));
    }
    for (auto it = workers_.begin(); it != workers_.end();) {
      if (names.count(it->first) == 0 || it->second->exited()) {
        auto w = std::move(it->second);
        it = workers_.erase(it);
        lock.unlock();
        w->stop();
        lock.lock();
      } else {
        ++it;
      }
    }
    for (const auto& name : names) {
      if (!name.empty() && workers_.count(name) == 0) {
        auto w = std::make_unique<PoolWorker>(name, *shared_);
        w->start();
        workers_.emplace(name, std::move(w));
      }
    }
    if (metrics_) {
      metrics_->pools.Set(static_cast<double>(workers_.size()));
    }
    cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stopLeading_ || changed_; });
  }
  auto workers = std::move(workers_);
  workers_.clear();
  lock.unlock();
  for (auto& [name, w] : workers) {
    w->stop();
  }
  leading_ = false;
  if (metrics_) {
    metrics_->leader.Set(0);
  }
  spdlog::info("reconfig-mgr {} stopped leading", opts_.identity);
}

Status ReconfigManager::start() {
  if (started_) {
    return okStatus();
  }
  if (auto s = validate(opts_); !s) {
    return s;
  }
  started_ = true;
  pools_->start();
  nodes_->start();
  pods_->start();
  if (!opts_.leaderElect) {
    direct_ = std::thread([this] { lead(); });
    return okStatus();
  }
  kube::LeaderElectionConfig lc;
  lc.ns = opts_.leaseNamespace;
  lc.name = opts_.leaseName;
  lc.identity = opts_.identity;
  lc.leaseDuration = opts_.leaseDuration;
  lc.renewDeadline = opts_.renewDeadline;
  lc.retryPeriod = opts_.retryPeriod;
  lc.onStartedLeading = [this] {
    {
      std::lock_guard lock(mu_);
      if (stopped_) {
        return;
      }
      stopLeading_ = false;
    }
    lead();
  };
  lc.onStoppedLeading = [this] {
    std::lock_guard lock(mu_);
    stopLeading_ = true;
    cv_.notify_all();
  };
  lc.onNewLeader = [](const std::string& holder) {
    spdlog::info("reconfig-mgr leader: {}", holder);
  };
  auto e = kube::LeaderElector::create(client_, lc);
  if (!e) {
    return e.error();
  }
  elector_ = std::move(*e);
  elector_->start();
  return okStatus();
}

void ReconfigManager::stop() {
  {
    std::lock_guard lock(mu_);
    if (!started_ || stopped_) {
      return;
    }
    stopped_ = true;
    stopLeading_ = true;
  }
  cv_.notify_all();
  if (elector_) {
    elector_->stop();
  }
  if (direct_.joinable()) {
    direct_.join();
  }
  pools_->stop();
  nodes_->stop();
  pods_->stop();
}

}  // namespace kc::reconfig
