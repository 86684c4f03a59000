#include "tools/kubelet-standin/standin.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>

#include "libcore/base/rfc3339.hpp"
#include "libcore/grpc/unix_server.hpp"
#include "libcore/kube/client.hpp"
#include "libcore/kube/events.hpp"
#include "libcore/kube/informer.hpp"
#include "libcore/obs/health.hpp"
#include "tools/kubelet-standin/status_builders.hpp"

namespace kc::kubelet {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct KubeletStandin::Counters {
  std::shared_ptr<prometheus::Registry> registry;
  prometheus::Counter* admitted;
  prometheus::Family<prometheus::Counter>* rejected;
  prometheus::Counter* completed;
  prometheus::Counter* stopped;
  prometheus::Counter* nodeStatusPosts;
  prometheus::Counter* nodeStatusErrors;
  prometheus::Counter* leaseRenewals;
  prometheus::Counter* leaseErrors;
  prometheus::Counter* restarts;
  prometheus::Family<prometheus::Gauge>* devices;

  explicit Counters(std::shared_ptr<prometheus::Registry> r) : registry(std::move(r)) {
    auto counter = [this](const char* name, const char* help) {
      return &prometheus::BuildCounter().Name(name).Help(help).Register(*registry).Add({});
    };
    admitted = counter("kubelet_standin_pods_admitted_total", "Pods admitted and started");
    rejected = &prometheus::BuildCounter()
                    .Name("kubelet_standin_pods_rejected_total")
                    .Help("Pods rejected at admission, by kubelet's reason")
                    .Register(*registry);
    completed = counter("kubelet_standin_pods_completed_total",
                        "Pods that ran their kubecomp.io/run-seconds");
    stopped = counter("kubelet_standin_pods_stopped_total",
                      "Running pods stopped because they were deleted");
    nodeStatusPosts =
        counter("kubelet_standin_node_status_updates_total", "Node status updates posted");
    nodeStatusErrors = counter("kubelet_standin_node_status_update_errors_total",
                               "Node status updates that failed");
    leaseRenewals = counter("kubelet_standin_lease_renewals_total", "Node Lease renewals");
    leaseErrors =
        counter("kubelet_standin_lease_renewal_errors_total", "Node Lease renewals that failed");
    restarts = counter("kubelet_standin_simulated_restarts_total", "Simulated kubelet restarts");
    devices = &prometheus::BuildGauge()
                   .Name("kubelet_standin_devices")
                   .Help(
                       "Devices per resource as of the last node status sync (state: "
                       "capacity|allocatable)")
                   .Register(*registry);
  }
};

namespace {

std::string nowTime() {
  return formatRfc3339(std::chrono::system_clock::now());
}

const nlohmann::json& field(const nlohmann::json& obj, const char* name) {
  static const nlohmann::json kEmpty = nlohmann::json::object();
  if (obj.is_object() && obj.contains(name) && obj[name].is_object()) {
    return obj[name];
  }
  return kEmpty;
}

std::string str(const nlohmann::json& obj, const char* name) {
  if (obj.is_object() && obj.contains(name) && obj[name].is_string()) {
    return obj[name].get<std::string>();
  }
  return {};
}

std::string podKey(const nlohmann::json& pod) {
  const auto& meta = field(pod, "metadata");
  return str(meta, "namespace") + "/" + str(meta, "name");
}

// The containers PodResources reports for a pod, as kubelet v1.29 does: sidecars (init
// containers with restartPolicy Always) and the app containers; ordinary init containers
// have finished by the time the pod runs and are not listed.
std::vector<std::string> listedContainers(const nlohmann::json& pod) {
  std::vector<std::string> out;
  const auto& spec = field(pod, "spec");
  if (spec.contains("initContainers") && spec["initContainers"].is_array()) {
    for (const auto& c : spec["initContainers"]) {
      if (str(c, "restartPolicy") == "Always") {
        out.push_back(str(c, "name"));
      }
    }
  }
  if (spec.contains("containers") && spec["containers"].is_array()) {
    for (const auto& c : spec["containers"]) {
      out.push_back(str(c, "name"));
    }
  }
  return out;
}

// A stable address per pod in 10.88.0.0/16 (no CNI: the address is a label, nothing routes).
std::string podIpFor(const std::string& uid) {
  const std::size_t h = std::hash<std::string>{}(uid);
  return "10.88." + std::to_string((h >> 8) % 256) + "." + std::to_string(1 + h % 254);
}

nlohmann::json withoutHeartbeats(nlohmann::json status) {
  if (status.contains("conditions")) {
    for (auto& c : status["conditions"]) {
      c.erase("lastHeartbeatTime");
    }
  }
  return status;
}

Clock::duration scaled(double seconds, double timeScale) {
  const double s = seconds / timeScale;
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

std::string checkpointPath(const StandinOptions& o) {
  return (fs::path(o.rootDir) / "kubelet-standin-device-checkpoint.json").string();
}

std::string draCheckpointPath(const StandinOptions& o) {
  return (fs::path(o.rootDir) / "dra_manager_state").string();
}

KubeletStandin::KubeletStandin(kube::KubeClient& client, StandinOptions options,
                               obs::Metrics* metrics)
    : client_(client), opts_(std::move(options)), metrics_(metrics) {
  DeviceManagerOptions d;
  d.pluginDir = opts_.devicePluginDir;
  d.checkpointPath = checkpointPath(opts_);
  d.stopGrace = opts_.endpointStopGrace;
  devices_ = std::make_unique<DeviceManager>(d);
  dra_ = makeDraSide();
  counters_ = std::make_unique<Counters>(metrics_ ? metrics_->sharedRegistry()
                                                  : std::make_shared<prometheus::Registry>());
  events_ = std::make_unique<kube::EventRecorder>(client_, "kubelet", opts_.nodeName);
}

KubeletStandin::~KubeletStandin() {
  stop();
  dra_->stop();  // also after a start() that failed half-way: its worker calls back into us
}

std::string KubeletStandin::registrationSocket() const {
  return (fs::path(opts_.devicePluginDir) / "kubelet.sock").string();
}

void KubeletStandin::removePluginSockets() {
  std::error_code ec;
  std::size_t removed = 0;
  for (const auto& entry : fs::directory_iterator(opts_.devicePluginDir, ec)) {
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) == 0 && S_ISSOCK(st.st_mode) &&
        ::unlink(entry.path().c_str()) == 0) {
      ++removed;
    }
  }
  spdlog::info("removed {} socket(s) from {}", removed, opts_.devicePluginDir);
}

Status KubeletStandin::serveRegistration() {
  registration_ = std::make_unique<RegistrationService>(*devices_);
  grpcx::UnixServerOptions o;
  o.path = registrationSocket();
  registrationServer_ = std::make_unique<grpcx::UnixServer>(o);
  registrationServer_->addService(registration_.get());
  return registrationServer_->start();
}

Status KubeletStandin::start() {
  std::error_code ec;
  for (const auto& dir : {fs::path(opts_.rootDir), fs::path(opts_.devicePluginDir),
                          fs::path(opts_.podResourcesSocket).parent_path()}) {
    fs::create_directories(dir, ec);
    if (ec) {
      return makeError(kc::errc::kInvalid, "cannot create " + dir.string() + ": " + ec.message());
    }
  }
  if (auto st = devices_->restore(); !st) {
    return st;
  }
  if (auto st = dra_->restore(); !st) {
    return st;
  }
  removePluginSockets();  // kubelet on start: plugins see their socket go and re-register
  {
    std::lock_guard lock(restartMu_);
    if (auto st = serveRegistration(); !st) {
      return st;
    }
  }
  podResources_ = std::make_unique<PodResourcesService>(
      *devices_, [this] { return activePods(); }, &dra_->manager());
  grpcx::UnixServerOptions pr;
  pr.path = opts_.podResourcesSocket;
  podResourcesServer_ = std::make_unique<grpcx::UnixServer>(pr);
  podResourcesServer_->addService(podResources_.get());
  if (auto st = podResourcesServer_->start(); !st) {
    return st;
  }

  kube::InformerOptions po;
  po.resource = kube::gvr::pods();
  po.fieldSelector = "spec.nodeName=" + opts_.nodeName;
  podInformer_ = std::make_unique<kube::Informer>(client_, po);
  podInformer_->addHandler(
      {[this](const kube::ObjectPtr& o) { enqueue(podKey(*o)); },
       [this](const kube::ObjectPtr&, const kube::ObjectPtr& o) { enqueue(podKey(*o)); },
       [this](const kube::ObjectPtr& o) { enqueue(podKey(*o)); }});
  kube::InformerOptions no;
  no.resource = kube::gvr::nodes();
  no.fieldSelector = "metadata.name=" + opts_.nodeName;
  nodeInformer_ = std::make_unique<kube::Informer>(client_, no);
  nodeInformer_->start();
  podInformer_->start();
  if (auto st = dra_->start(); !st) {
    return st;
  }
  {
    std::lock_guard lock(mu_);
    started_ = true;
    stopping_ = false;
  }
  sync_ = std::thread([this] { runSync(); });
  return okStatus();
}

void KubeletStandin::stop() {
  {
    std::lock_guard lock(mu_);
    if (!started_) {
      return;
    }
    started_ = false;
    stopping_ = true;
  }
  cv_.notify_all();
  if (sync_.joinable()) {
    sync_.join();
  }
  if (podInformer_) {
    podInformer_->stop();
  }
  if (nodeInformer_) {
    nodeInformer_->stop();
  }
  {
    std::lock_guard lock(restartMu_);
    if (registrationServer_) {
      registrationServer_->stop(std::chrono::milliseconds(500));
    }
  }
  if (podResourcesServer_) {
    podResourcesServer_->stop(std::chrono::milliseconds(500));
  }
  devices_->forgetPlugins();
  dra_->stop();
}

Status KubeletStandin::simulateRestart() {
  std::lock_guard lock(restartMu_);
  spdlog::info("simulated kubelet restart: forgetting device plugins, deleting their sockets");
  if (registrationServer_) {
    registrationServer_->stop(std::chrono::milliseconds(0));
  }
  devices_->forgetPlugins();
  removePluginSockets();
  dra_->simulateRestart();  // DRA plugins are asked again (their sockets stay)
  counters_->restarts->Increment();
  return serveRegistration();
}

bool KubeletStandin::ready() const {
  std::lock_guard lock(mu_);
  return nodeRegistered_ && podInformer_ && podInformer_->hasSynced();
}

void KubeletStandin::requestNodeStatusSync() {
  {
    std::lock_guard lock(mu_);
    syncRequested_ = true;
  }
  cv_.notify_all();
}

void KubeletStandin::enqueue(const std::string& key) {
  {
    std::lock_guard lock(mu_);
    queue_.insert(key);
  }
  cv_.notify_all();
}

std::vector<ActivePod> KubeletStandin::activePods() const {
  std::lock_guard lock(mu_);
  std::vector<ActivePod> out;
  for (const auto& [key, r] : pods_) {
    if (r.phase == PodPhase::kRunning) {
      out.push_back({r.ns, r.name, r.uid, r.containers, r.claimsByContainer});
    }
  }
  return out;
}

nlohmann::json KubeletStandin::debugState() const {
  nlohmann::json pods = nlohmann::json::array();
  std::vector<PodRecord> records;
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, r] : pods_) {
      records.push_back(r);
    }
  }
  for (const auto& r : records) {
    nlohmann::json devs = nlohmann::json::array();
    for (const auto& cd : devices_->podDevices(r.uid)) {
      devs.push_back({{"container", cd.container},
                      {"resource", cd.resource},
                      {"ids", cd.ids},
                      {"envs", cd.envs}});
    }
    pods.push_back({{"namespace", r.ns},
                    {"name", r.name},
                    {"uid", r.uid},
                    {"state", r.phase == PodPhase::kRunning ? "running" : "terminated"},
                    {"devices", devs}});
  }
  nlohmann::json resources = nlohmann::json::object();
  for (const auto& [name, c] : devices_->counts()) {
    resources[name] = {{"capacity", c.capacity}, {"allocatable", c.allocatable}};
  }
  const DeviceManager::Stats st = devices_->stats();
  return {{"node", opts_.nodeName},
          {"pods", pods},
          {"resources", resources},
          {"connectedPlugins", devices_->connectedResources()},
          {"deviceManager",
           {{"registrations", st.registrations},
            {"registrationsRefused", st.registrationsRefused},
            {"listUpdates", st.listUpdates},
            {"allocateCalls", st.allocateCalls},
            {"allocateFailures", st.allocateFailures}}},
          {"dra", dra_->debugState()}};
}

nlohmann::json KubeletStandin::currentNode() const {
  if (!nodeInformer_) {
    return nullptr;
  }
  auto obj = nodeInformer_->store().get("", opts_.nodeName);
  return obj ? *obj : nlohmann::json();
}

ResourceList KubeletStandin::admissionAllocatable() const {
  // kubelet admits against the Node as its informer last saw it (getNodeAnyWay), which lags
  // its own status posts.
  const nlohmann::json node = currentNode();
  if (node.is_object()) {
    return parseResourceMap(field(field(node, "status"), "allocatable"));
  }
  std::lock_guard lock(mu_);
  return postedAllocatable_.empty() ? opts_.capacity : postedAllocatable_;
}

void KubeletStandin::runSync() {
  auto nextStatus = Clock::now();
  auto nextLease = Clock::now();
  auto nextRegister = Clock::now();
  bool registered = false;
  bool retained = false;
  while (true) {
    std::set<std::string> keys;
    {
      std::unique_lock lock(mu_);
      auto wake = std::min(nextStatus, nextLease);
      if (!registered) {
        wake = std::min(wake, nextRegister);
      }
      for (const auto& [key, r] : pods_) {
        if (r.phase == PodPhase::kRunning && r.finishAt) {
          wake = std::min(wake, *r.finishAt);
        }
      }
      cv_.wait_until(lock, wake, [&] {
        return stopping_ || (registered && (!queue_.empty() || syncRequested_));
      });
      if (stopping_) {
        return;
      }
      if (registered) {
        keys.swap(queue_);
        if (syncRequested_) {
          syncRequested_ = false;
          nextStatus = Clock::now();
        }
      }
    }
    const auto now = Clock::now();
    if (!registered) {
      if (now < nextRegister) {
        continue;
      }
      if (auto st = registerNode(); !st) {
        spdlog::warn("cannot register node {}: {}", opts_.nodeName, st.error().message);
        nextRegister = now + std::chrono::seconds(1);
        continue;
      }
      registered = true;
      nextStatus = now + opts_.nodeStatusUpdateFrequency;
      continue;
    }
    if (!retained && podInformer_->hasSynced()) {
      // Devices checkpointed for pods that no longer exist (deleted while we were down).
      std::set<std::string> uids;
      for (const auto& p : podInformer_->store().list()) {
        const std::string phase = str(field(*p, "status"), "phase");
        if (phase != "Succeeded" && phase != "Failed") {
          uids.insert(str(field(*p, "metadata"), "uid"));
        }
      }
      devices_->retainOnly(uids);
      dra_->manager().retainOnly(uids);
      retained = true;
    }
    // Admit in creation order, as kubelet sorts its pod additions.
    std::vector<std::pair<std::string, std::string>> ordered;
    for (const auto& key : keys) {
      const auto slash = key.find('/');
      auto obj = podInformer_->store().get(key.substr(0, slash), key.substr(slash + 1));
      ordered.emplace_back(obj ? str(field(*obj, "metadata"), "creationTimestamp") : std::string(),
                           key);
    }
    std::sort(ordered.begin(), ordered.end());
    for (const auto& [created, key] : ordered) {
      syncPod(key);
    }
    completeDue();
    if (Clock::now() >= nextStatus) {
      syncNodeStatus();
      nextStatus = Clock::now() + opts_.nodeStatusUpdateFrequency;
    }
    if (Clock::now() >= nextLease) {
      renewLease();
      nextLease = Clock::now() + opts_.leaseRenewInterval;
    }
  }
}

void KubeletStandin::syncPod(const std::string& key) {
  const auto slash = key.find('/');
  auto objPtr = podInformer_->store().get(key.substr(0, slash), key.substr(slash + 1));
  std::optional<PodRecord> rec;
  {
    std::lock_guard lock(mu_);
    if (auto it = pods_.find(key); it != pods_.end()) {
      rec = it->second;
    }
  }
  if (!objPtr) {
    if (rec) {
      // Gone from the API (deleted at once): the pod stops, its devices are freed.
      releasePod(rec->uid);
      std::lock_guard lock(mu_);
      pods_.erase(key);
      spdlog::info("pod {} deleted; {}", key,
                   rec->phase == PodPhase::kRunning ? "stopped" : "forgotten");
    }
    return;
  }
  const nlohmann::json& pod = *objPtr;
  const auto& meta = field(pod, "metadata");
  const std::string uid = str(meta, "uid");
  if (rec && rec->uid != uid) {
    releasePod(rec->uid);  // a new pod under an old name: the old one is gone
    std::lock_guard lock(mu_);
    pods_.erase(key);
    rec.reset();
  }
  const bool deleting = meta.contains("deletionTimestamp") && !meta["deletionTimestamp"].is_null();
  const std::string phase = str(field(pod, "status"), "phase");
  if (rec) {
    if (deleting) {
      stopPod(key, pod, true);
    } else if (rec->phase == PodPhase::kPreparing) {
      syncPreparing(key, pod);
    }
    return;
  }
  if (phase == "Succeeded" || phase == "Failed" || deleting) {
    PodRecord r;
    r.ns = str(meta, "namespace");
    r.name = str(meta, "name");
    r.uid = uid;
    r.phase = PodPhase::kTerminated;
    releasePod(uid);
    {
      std::lock_guard lock(mu_);
      pods_[key] = r;
    }
    if (deleting) {
      stopPod(key, pod, true);
    }
    return;
  }
  if (phase == "Running") {
    resume(pod);
    return;
  }
  admit(pod);
}

Status KubeletStandin::patchPodStatus(const nlohmann::json& pod, const nlohmann::json& status) {
  const auto& meta = field(pod, "metadata");
  auto res = client_.patch(kube::gvr::pods(), str(meta, "namespace"), str(meta, "name"),
                           kube::PatchType::kMerge, {{"status", status}}, "status");
  if (!res) {
    return makeError(kc::errc::kUnavailable, res.error().describe());
  }
  return okStatus();
}

void KubeletStandin::reject(const nlohmann::json& pod, const Rejection& rejection) {
  const std::string key = podKey(pod);
  spdlog::info("pod {} rejected: {} {}", key, rejection.reason, rejection.message);
  counters_->rejected->Add({{"reason", rejection.reason}}).Increment();
  PodRecord r;
  r.ns = str(field(pod, "metadata"), "namespace");
  r.name = str(field(pod, "metadata"), "name");
  r.uid = str(field(pod, "metadata"), "uid");
  r.phase = PodPhase::kTerminated;
  {
    std::lock_guard lock(mu_);
    pods_[key] = r;
  }
  if (auto st = patchPodStatus(pod, rejectedStatus(rejection)); !st) {
    spdlog::warn("pod {}: cannot write the rejection: {}", key, st.error().message);
  }
  if (auto ev = events_->record(kube::ObjectReference::of(pod, "Pod", "v1"), "Warning",
                                rejection.reason, rejection.message);
      !ev) {
    spdlog::debug("pod {}: event not written: {}", key, ev.error().describe());
  }
}

void KubeletStandin::admit(const nlohmann::json& pod) {
  const std::string key = podKey(pod);
  const auto& meta = field(pod, "metadata");
  auto requests = podRequests(pod);
  if (!requests) {
    reject(pod, {"UnexpectedAdmissionError", requests.error().message});
    return;
  }
  auto run = runSeconds(pod);
  if (!run) {
    reject(pod, {"InvalidRunSeconds", run.error().message});
    return;
  }
  // Device allocation comes first (kubelet's resource allocator admit handler), then the
  // resource fit.
  auto devs = devices_->allocate(pod);
  if (!devs) {
    reject(pod, {"UnexpectedAdmissionError",
                 "Allocate failed due to " + devs.error().message + ", which is unexpected"});
    return;
  }
  ResourceList allocatable = admissionAllocatable();
  if (!devs->empty()) {
    // sanitizeNodeAllocatable: allocatable is at least what the device manager handed out.
    for (const auto& cd : *devs) {
      const std::int64_t held = devices_->allocatedCount(cd.resource);
      if (allocatable[cd.resource] < held) {
        allocatable[cd.resource] = held;
      }
    }
  }
  ResourceList used;
  std::int64_t active = 0;
  {
    std::lock_guard lock(mu_);
    for (const auto& [k, r] : pods_) {
      if (r.phase == PodPhase::kRunning) {
        ++active;
        for (const auto& [name, amount] : r.requests) {
          used[name] += amount;
        }
      }
    }
  }
  if (auto rejection = checkFit(*requests, allocatable, used, active)) {
    devices_->release(str(meta, "uid"));
    reject(pod, *rejection);
    return;
  }
  PodRecord r;
  r.ns = str(meta, "namespace");
  r.name = str(meta, "name");
  r.uid = str(meta, "uid");
  r.requests = *requests;
  r.containers = listedContainers(pod);
  r.startTime = nowTime();
  r.podIp = field(pod, "spec").value("hostNetwork", false) ? opts_.nodeIp : podIpFor(r.uid);
  // Pods with ResourceClaims start only once the DRA plugins prepared them (standin_dra.cpp).
  r.phase = usesResourceClaims(pod) ? PodPhase::kPreparing : PodPhase::kRunning;
  {
    std::lock_guard lock(mu_);
    pods_[key] = r;
  }
  counters_->admitted->Increment();
  if (r.phase == PodPhase::kPreparing) {
    waitForClaims(key, pod);
    return;
  }
  startContainers(key, pod);
}

void KubeletStandin::startContainers(const std::string& key, const nlohmann::json& pod) {
  PodRecord r;
  {
    std::lock_guard lock(mu_);
    auto it = pods_.find(key);
    if (it == pods_.end()) {
      return;
    }
    it->second.phase = PodPhase::kRunning;
    it->second.claimsByContainer = containerClaims(pod);
    r = it->second;
  }
  const auto run = runSeconds(pod).valueOr(std::nullopt);  // checked at admission
  PodRunTimes t;
  t.now = nowTime();
  t.startTime = r.startTime;
  if (auto st = patchPodStatus(pod, creatingStatus(pod, opts_.nodeIp, r.podIp, t)); !st) {
    spdlog::warn("pod {}: cannot write status: {}", key, st.error().message);
  }
  t.now = nowTime();
  t.startedAt = t.now;
  std::optional<Clock::time_point> finishAt;
  if (run) {
    finishAt = Clock::now() + scaled(*run, opts_.timeScale);
  }
  {
    std::lock_guard lock(mu_);
    auto& stored = pods_[key];
    stored.startedAt = t.startedAt;
    stored.finishAt = finishAt;
  }
  if (auto st = patchPodStatus(pod, runningStatus(pod, opts_.nodeIp, r.podIp, t)); !st) {
    spdlog::warn("pod {}: cannot write status: {}", key, st.error().message);
  }
  spdlog::info("pod {} admitted and running{}", key,
               run ? " for " + std::to_string(*run / opts_.timeScale) + " s"
                   : std::string(" until deleted"));
}

void KubeletStandin::resume(const nlohmann::json& pod) {
  // Running before this stand-in (re)started: containers keep running, devices come from the
  // checkpoint, the remaining run time from the container's startedAt.
  const std::string key = podKey(pod);
  const auto& meta = field(pod, "metadata");
  PodRecord r;
  r.ns = str(meta, "namespace");
  r.name = str(meta, "name");
  r.uid = str(meta, "uid");
  r.requests = podRequests(pod).valueOr({});
  r.containers = listedContainers(pod);
  r.claimsByContainer = containerClaims(pod);  // prepared before the restart (checkpoint)
  const auto& status = field(pod, "status");
  r.startTime = str(status, "startTime");
  r.podIp = str(status, "podIP");
  if (status.contains("containerStatuses") && status["containerStatuses"].is_array() &&
      !status["containerStatuses"].empty()) {
    r.startedAt =
        str(field(field(status["containerStatuses"][0], "state"), "running"), "startedAt");
  }
  auto run = runSeconds(pod);
  if (run && *run) {
    auto started = parseRfc3339(r.startedAt);
    const auto elapsed = started ? std::chrono::system_clock::now() - *started
                                 : std::chrono::system_clock::duration(0);
    const auto total = scaled(**run, opts_.timeScale);
    const auto left = total - std::chrono::duration_cast<Clock::duration>(elapsed);
    r.finishAt = Clock::now() + std::max(left, Clock::duration(0));
  }
  {
    std::lock_guard lock(mu_);
    pods_[key] = r;
  }
  spdlog::info("pod {} was running before this start; resumed with {} device assignment(s)", key,
               devices_->podDevices(r.uid).size());
}

void KubeletStandin::completeDue() {
  std::vector<std::string> due;
  {
    std::lock_guard lock(mu_);
    const auto now = Clock::now();
    for (const auto& [key, r] : pods_) {
      if (r.phase == PodPhase::kRunning && r.finishAt && *r.finishAt <= now) {
        due.push_back(key);
      }
    }
  }
  for (const auto& key : due) {
    const auto slash = key.find('/');
    auto obj = podInformer_->store().get(key.substr(0, slash), key.substr(slash + 1));
    PodRecord r;
    {
      std::lock_guard lock(mu_);
      auto it = pods_.find(key);
      if (it == pods_.end()) {
        continue;
      }
      it->second.phase = PodPhase::kTerminated;
      r = it->second;
    }
    releasePod(r.uid);
    counters_->completed->Increment();
    if (!obj) {
      continue;
    }
    PodRunTimes t;
    t.now = nowTime();
    t.startTime = r.startTime;
    t.startedAt = r.startedAt;
    t.finishedAt = t.now;
    if (auto st =
            patchPodStatus(*obj, terminatedStatus(*obj, opts_.nodeIp, r.podIp, t, 0, "Completed"));
        !st) {
      spdlog::warn("pod {}: cannot write status: {}", key, st.error().message);
    }
    spdlog::info("pod {} completed", key);
  }
}

void KubeletStandin::stopPod(const std::string& key, const nlohmann::json& pod, bool deleteAfter) {
  PodRecord r;
  bool wasRunning = false;
  {
    std::lock_guard lock(mu_);
    auto it = pods_.find(key);
    if (it == pods_.end()) {
      return;
    }
    wasRunning = it->second.phase == PodPhase::kRunning;
    it->second.phase = PodPhase::kTerminated;
    r = it->second;
  }
  releasePod(r.uid);
  if (wasRunning) {
    // The simulated workload exits on SIGTERM at once, with the shell's status for it.
    counters_->stopped->Increment();
    PodRunTimes t;
    t.now = nowTime();
    t.startTime = r.startTime;
    t.startedAt = r.startedAt;
    t.finishedAt = t.now;
    if (auto st =
            patchPodStatus(pod, terminatedStatus(pod, opts_.nodeIp, r.podIp, t, 143, "Error"));
        !st) {
      spdlog::warn("pod {}: cannot write status: {}", key, st.error().message);
    }
  }
  if (deleteAfter) {
    kube::DeleteOptions d;
    d.gracePeriodSeconds = 0;  // kubelet's final delete once the containers are gone
    d.preconditionUid = r.uid;
    auto res = client_.remove(kube::gvr::pods(), r.ns, r.name, d);
    if (!res && !res.error().isNotFound() && !res.error().isConflict()) {
      spdlog::warn("pod {}: final delete failed: {}", key, res.error().describe());
    }
  }
}

Status KubeletStandin::registerNode() {
  nlohmann::json labels = {{"kubernetes.io/hostname", opts_.nodeName},
                           {"kubernetes.io/os", "linux"},
                           {"kubernetes.io/arch", "amd64"},
                           {"beta.kubernetes.io/os", "linux"},
                           {"beta.kubernetes.io/arch", "amd64"}};
  for (const auto& [k, v] : opts_.labels) {
    labels[k] = v;
  }
  nlohmann::json node = {{"apiVersion", "v1"},
                         {"kind", "Node"},
                         {"metadata", {{"name", opts_.nodeName}, {"labels", labels}}},
                         {"spec", nlohmann::json::object()}};
  if (!opts_.taints.empty()) {
    node["spec"]["taints"] = opts_.taints;
  }
  auto created = client_.create(kube::gvr::nodes(), "", node);
  std::string uid;
  if (created) {
    uid = str(field(*created, "metadata"), "uid");
    spdlog::info("node {} registered", opts_.nodeName);
  } else if (created.error().isAlreadyExists()) {
    // Re-registration after a restart: labels and taints reconciled, status posted below
    // (extended resources start at 0 until their plugins register again).
    nlohmann::json patch = {{"metadata", {{"labels", labels}}}};
    if (!opts_.taints.empty()) {
      patch["spec"] = {{"taints", opts_.taints}};
    }
    auto patched =
        client_.patch(kube::gvr::nodes(), "", opts_.nodeName, kube::PatchType::kMerge, patch);
    if (!patched) {
      return makeError(kc::errc::kUnavailable, patched.error().describe());
    }
    uid = str(field(*patched, "metadata"), "uid");
    spdlog::info("node {} already registered; labels reconciled", opts_.nodeName);
  } else {
    return makeError(kc::errc::kUnavailable, created.error().describe());
  }
  {
    std::lock_guard lock(mu_);
    nodeUid_ = uid;
    lastPostedStatus_ = nullptr;
  }
  syncNodeStatus();
  renewLease();
  std::lock_guard lock(mu_);
  nodeRegistered_ = true;
  return okStatus();
}

void KubeletStandin::syncNodeStatus() {
  const nlohmann::json node = currentNode();
  const auto& nodeStatus = field(node, "status");
  ResourceList capacity = opts_.capacity;
  ResourceList allocatable = opts_.capacity;
  const auto counts = devices_->counts();
  for (const auto& [name, c] : counts) {
    capacity[name] = c.capacity;
    allocatable[name] = c.allocatable;
    counters_->devices->Add({{"resource", name}, {"state", "capacity"}})
        .Set(static_cast<double>(c.capacity));
    counters_->devices->Add({{"resource", name}, {"state", "allocatable"}})
        .Set(static_cast<double>(c.allocatable));
  }
  // Extended resources someone else advertised on the Node (not from a device plugin):
  // kubelet keeps them and makes allocatable equal to capacity.
  for (const auto& [name, amount] : parseResourceMap(field(nodeStatus, "capacity"))) {
    if (isExtendedResourceName(name) && counts.count(name) == 0) {
      capacity[name] = amount;
      allocatable[name] = amount;
    }
  }
  const std::string now = nowTime();
  nlohmann::json status = {
      {"capacity", resourceMapJson(capacity)},
      {"allocatable", resourceMapJson(allocatable)},
      {"conditions", nodeConditions(nodeStatus.value("conditions", nlohmann::json::array()), now)},
      {"addresses",
       {{{"type", "InternalIP"}, {"address", opts_.nodeIp}},
        {{"type", "Hostname"}, {"address", opts_.nodeName}}}},
      {"daemonEndpoints", {{"kubeletEndpoint", {{"Port", 10250}}}}},
      {"nodeInfo",
       {{"machineID", opts_.nodeName},
        {"systemUUID", opts_.nodeName},
        {"bootID", ""},
        {"kernelVersion", ""},
        {"osImage", "kubelet-standin (test double)"},
        {"containerRuntimeVersion", "none://kubelet-standin"},
        {"kubeletVersion", opts_.kubeletVersion},
        {"kubeProxyVersion", opts_.kubeletVersion},
        {"operatingSystem", "linux"},
        {"architecture", "amd64"}}}};
  const nlohmann::json comparable = withoutHeartbeats(status);
  {
    std::lock_guard lock(mu_);
    if (comparable == lastPostedStatus_ &&
        Clock::now() - lastPosted_ < opts_.nodeStatusReportFrequency) {
      return;  // nothing changed: the Lease is the heartbeat
    }
  }
  auto res = client_.patch(kube::gvr::nodes(), "", opts_.nodeName, kube::PatchType::kMerge,
                           {{"status", status}}, "status");
  if (!res) {
    counters_->nodeStatusErrors->Increment();
    spdlog::warn("node status update failed: {}", res.error().describe());
    return;
  }
  counters_->nodeStatusPosts->Increment();
  std::lock_guard lock(mu_);
  postedAllocatable_ = allocatable;
  lastPostedStatus_ = comparable;
  lastPosted_ = Clock::now();
}

void KubeletStandin::renewLease() {
  const std::string ns = "kube-node-lease";
  std::string uid;
  {
    std::lock_guard lock(mu_);
    uid = nodeUid_;
  }
  const std::string renew =
      formatRfc3339(std::chrono::system_clock::now(), Rfc3339Precision::kMicros);
  auto current = client_.get(kube::gvr::leases(), ns, opts_.nodeName);
  kube::ApiResult<nlohmann::json> res = kube::ApiError{};
  if (!current && current.error().isNotFound()) {
    nlohmann::json lease = {
        {"apiVersion", "coordination.k8s.io/v1"},
        {"kind", "Lease"},
        {"metadata",
         {{"name", opts_.nodeName},
          {"namespace", ns},
          {"ownerReferences",
           {{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", opts_.nodeName}, {"uid", uid}}}}}},
        {"spec",
         {{"holderIdentity", opts_.nodeName},
          {"leaseDurationSeconds", opts_.leaseDurationSeconds},
          {"renewTime", renew}}}};
    res = client_.create(kube::gvr::leases(), ns, lease);
  } else if (current) {
    nlohmann::json lease = *current;
    lease["spec"]["holderIdentity"] = opts_.nodeName;
    lease["spec"]["leaseDurationSeconds"] = opts_.leaseDurationSeconds;
    lease["spec"]["renewTime"] = renew;
    res = client_.update(kube::gvr::leases(), ns, lease);
  } else {
    res = current.error();
  }
  if (!res) {
    counters_->leaseErrors->Increment();
    spdlog::warn("node lease renewal failed: {}", res.error().describe());
    return;
  }
  counters_->leaseRenewals->Increment();
}

}  // namespace kc::kubelet
