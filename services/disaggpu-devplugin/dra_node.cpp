#include "services/disaggpu-devplugin/dra_node.hpp"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <set>

#include "libcore/api/dra_binding.hpp"
#include "libcore/api/names.hpp"
#include "libcore/base/error_codes.hpp"
#include "libcore/obs/health.hpp"
#include "services/disaggpu-devplugin/devplugin.hpp"
#include "services/disaggpu-devplugin/host_check.hpp"

namespace kc::devplugin {

class DraNode::ApiClaims final : public ClaimSource {
 public:
  explicit ApiClaims(kube::KubeClient& client) : client_(client) {}
  Result<nlohmann::json> getClaim(const std::string& ns, const std::string& name) override {
    auto r = client_.get(api::gvr::resourceClaims(), ns, name);
    if (!r) {
      return r.error().toError();
    }
    return std::move(*r);
  }

 private:
  kube::KubeClient& client_;
};

Status validate(const DraNodeOptions& o) {
  for (const auto& [flag, dir] : {std::pair{"--plugins-registry-dir", o.registryDir},
                                  std::pair{"--dra-plugin-dir", o.pluginDir}}) {
    std::error_code ec;
    if (dir.empty() || dir.front() != '/' || !std::filesystem::is_directory(dir, ec)) {
      return makeError(kc::errc::kInvalid,
                       std::string(flag) + " " + dir + ": not an absolute path to a directory");
    }
  }
  return okStatus();
}

api::UsageReport draUsageReport(const NodeInventory& inventory, const PreparedClaims& prepared,
                                bool registered) {
  api::UsageReport r;
  std::set<std::string> pools;
  for (const NodeGpu& g : inventory.gpus) {
    pools.insert(g.pool);
    if (!g.draining && g.healthy && !g.hidden) {
      r.advertised.push_back(g.id);
    }
  }
  if (pools.size() == 1) {
    r.pool = *pools.begin();
  }
  for (const auto& [uid, c] : prepared) {
    for (const PreparedDevice& d : c.devices) {
      r.inUse[d.gpuId].push_back(api::claimHolder(c.ns, c.name));
    }
  }
  // A draining GPU no prepared claim holds is free to go: kubelet prepares a claim only after
  // the scheduler allocated it, and the slices withheld the GPU when the drain began.
  for (const std::string& id : drainingIds(inventory)) {
    if (r.inUse.count(id) == 0) {
      r.withdrawn.push_back(id);
    }
  }
  r.registered = registered;
  if (inventory.hostChecked) {
    HostVerdicts v = hostVerdicts(inventory);
    r.hostChecked = true;
    r.hostVisible = std::move(v.visible);
    r.notVisible = std::move(v.notVisible);
  }
  return r;
}

DraNode::DraNode(DraNodeOptions options, kube::KubeClient& client, obs::Metrics* /*metrics*/,
                 obs::HealthChecks* health)
    : opts_(std::move(options)), client_(client), claims_(std::make_unique<ApiClaims>(client)) {
  kube::InformerOptions io;
  io.resource = api::gvr::gpuPools();
  informer_ = std::make_unique<kube::Informer>(client_, io);
  kube::ResourceEventHandler h;
  h.onAdd = [this](const kube::ObjectPtr&) { recompute(); };
  h.onUpdate = [this](const kube::ObjectPtr&, const kube::ObjectPtr&) { recompute(); };
  h.onDelete = [this](const kube::ObjectPtr&) { recompute(); };
  informer_->addHandler(std::move(h));
  host_ = std::make_unique<HostMonitor>(opts_.host, [this] { recompute(); });
  actions_ = std::make_unique<HostActions>(opts_.hostActions, opts_.host.roots, kc::systemClock());

  DraDriverOptions d;
  d.nodeName = opts_.nodeName;
  d.checkpointPath = opts_.pluginDir + "/checkpoint.json";
  d.cdiDir = opts_.cdiDir;
  d.devRoot = opts_.host.roots.dev;
  driver_ = std::make_unique<DraDriver>(d, *claims_, [this] { return inventory(); });
  v1_ = std::make_unique<DraServiceV1>(*driver_);
  v1beta1_ = std::make_unique<DraServiceV1beta1>(*driver_);
  registration_ =
      std::make_unique<DraRegistrationService>(std::string(api::kDraDriverName), draSocket());
  pluginServer_ = std::make_unique<grpcx::UnixServer>(grpcx::UnixServerOptions{draSocket()});
  pluginServer_->addService(v1_.get());
  pluginServer_->addService(v1beta1_.get());
  registryServer_ =
      std::make_unique<grpcx::UnixServer>(grpcx::UnixServerOptions{registrationSocket()});
  registryServer_->addService(registration_.get());
  publisher_ = std::make_unique<NodeAnnotationPublisher>(client_, opts_.nodeName);

  if (health != nullptr) {
    health->addReadinessCheck("gpupool-informer", [this]() -> Status {
      if (informer_->hasSynced()) {
        return okStatus();
      }
      return makeError(kc::errc::kUnavailable, "GPUPool list not received yet");
    });
    health->addReadinessCheck("kubelet-registration", [this]() -> Status {
      if (registration_->registered()) {
        return okStatus();
      }
      const std::string why = registration_->lastError();
      return makeError(kc::errc::kUnavailable, "kubelet has not registered DRA driver " +
                                                   std::string(api::kDraDriverName) +
                                                   (why.empty() ? "" : ": " + why));
    });
  }
}

DraNode::~DraNode() {
  stop();
}

std::string DraNode::registrationSocket() const {
  return opts_.registryDir + "/" + std::string(api::kDraDriverName) + "-reg.sock";
}

NodeInventory DraNode::inventory() const {
  std::lock_guard lock(mu_);
  return inventory_;
}

void DraNode::recompute() {
  std::vector<nlohmann::json> pools;
  for (const kube::ObjectPtr& p : informer_->store().list()) {
    pools.push_back(*p);
  }
  NodeInventory inv = nodeInventory(pools, opts_.nodeName, PoolPath::kDra);
  {
    std::lock_guard lock(mu_);
    std::set<std::string> before;
    for (const NodeGpu& g : inventory_.gpus) {
      if (!g.hidden) {
        before.insert(g.id);
      }
    }
    applyHostView(inv, host_->view(), before);
    inventory_ = std::move(inv);
    dirty_ = true;
  }
  wake_.notify_all();
}

Status DraNode::start() {
  if (started_) {
    return okStatus();
  }
  if (auto s = validate(opts_); !s) {
    return s;
  }
  started_ = true;
  host_->start();
  informer_->start();
  if (!informer_->waitForSync(opts_.initialSyncWait)) {
    spdlog::warn("no GPUPool list within {} ms; serving kubelet anyway",
                 opts_.initialSyncWait.count());
  }
  if (auto s = driver_->start(); !s) {
    return s;
  }
  // The DRAPlugin endpoint first: kubelet calls it as soon as it has our registration.
  if (auto s = pluginServer_->start(); !s) {
    return s;
  }
  if (auto s = registryServer_->start(); !s) {
    pluginServer_->stop(opts_.stopGrace);
    return s;
  }
  thread_ = std::thread([this] { loop(); });
  return okStatus();
}

void DraNode::superviseSockets() {
  if (!pluginServer_->socketPresent()) {
    spdlog::warn("DRA plugin socket {} is gone; serving it again", draSocket());
    pluginServer_->stop(std::chrono::milliseconds(0));
    if (auto s = pluginServer_->start(); !s) {
      spdlog::error("{}", s.error().message);
    }
  }
  if (!registryServer_->socketPresent()) {
    spdlog::warn("registration socket {} is gone; serving it again", registrationSocket());
    registryServer_->stop(std::chrono::milliseconds(0));
    registration_->reset();
    if (auto s = registryServer_->start(); !s) {
      spdlog::error("{}", s.error().message);
    }
  }
}

void DraNode::publishIfChanged() {
  const NodeInventory inv = inventory();
  api::UsageReport report = draUsageReport(inv, driver_->prepared(), registration_->registered());
  actions_->rescanIfDue(inv);
  if (actions_->hotRemove()) {
    // draUsageReport lists in `withdrawn` only the draining GPUs no prepared claim holds.
    const std::set<std::string> free(report.withdrawn.begin(), report.withdrawn.end());
    applyHotRemove(report, inv, actions_->removeDrained(inv, free));
  }
  {
    std::lock_guard lock(mu_);
    if (published_ && *published_ == report) {
      return;
    }
  }
  if (Status s = publisher_->publish(report); !s) {
    spdlog::warn("usage report: {}", s.error().message);
    return;  // tried again on the next round
  }
  std::lock_guard lock(mu_);
  published_ = std::move(report);
}

void DraNode::loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    dirty_ = false;
    lock.unlock();
    superviseSockets();
    publishIfChanged();
    lock.lock();
    wake_.wait_for(lock, opts_.checkInterval, [this] { return stopping_ || dirty_; });
  }
}

void DraNode::stop() {
  if (!started_ || stopped_) {
    return;
  }
  stopped_ = true;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
  registryServer_->stop(opts_.stopGrace);
  pluginServer_->stop(opts_.stopGrace);
  informer_->stop();
  host_->stop();
}

}  // namespace kc::devplugin
