#include "services/disaggpu-devplugin/devplugin.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>

#include <set>

#include "libcore/cdi/cdi_spec.hpp"
#include "libcore/obs/health.hpp"
#include "services/disaggpu-devplugin/host_check.hpp"

namespace kc::devplugin {

namespace {

// The tag of the node's CDI spec file (kubecomp.io-gpu_node.json).
constexpr std::string_view kNodeCdiTag = "node";

// The withdrawn GPUs nothing uses (the report lists withdrawn GPUs in use too: reconfig-mgr
// reads both).
std::set<std::string> withdrawable(const UsageReport& report) {
  std::set<std::string> out;
  for (const std::string& id : report.withdrawn) {
    auto it = report.inUse.find(id);
    if (it == report.inUse.end() || it->second.empty()) {
      out.insert(id);
    }
  }
  return out;
}

nlohmann::json nodeSpecWithoutEnv(nlohmann::json spec) {
  for (auto& d : spec["devices"]) {
    d["containerEdits"].erase("env");
  }
  return spec;
}

}  // namespace

Status NodeAnnotationPublisher::publish(const UsageReport& report) {
  const nlohmann::json patch = {
      {"metadata",
       {{"annotations", {{std::string(api::kUsageAnnotation), api::serialize(report)}}}}}};
  auto r = client_.patch(kube::gvr::nodes(), "", node_, kube::PatchType::kMerge, patch);
  if (!r) {
    // The API's own reason (not_found for a missing Node, unauthorized, conflict, ...).
    kc::Error e = r.error().toError();
    e.message = "patch Node " + node_ + ": " + e.message;
    return e;
  }
  return okStatus();
}

struct DevPlugin::Metrics {
  explicit Metrics(prometheus::Registry& reg)
      : devices(prometheus::BuildGauge()
                    .Name("kubecomp_devplugin_devices")
                    .Help("GPUs attached to this node, by state as kubelet sees them")
                    .Register(reg)),
        healthy(devices.Add({{"state", "healthy"}})),
        unhealthy(devices.Add({{"state", "unhealthy"}})),
        withdrawn(devices.Add({{"state", "withdrawn"}})),
        listUpdates(prometheus::BuildCounter()
                        .Name("kubecomp_devplugin_list_updates_total")
                        .Help("ListAndWatch responses written to kubelet")
                        .Register(reg)
                        .Add({})),
        allocations(prometheus::BuildCounter()
                        .Name("kubecomp_devplugin_allocate_total")
                        .Help("Allocate calls answered, by result")
                        .Register(reg)),
        allocOk(allocations.Add({{"result", "ok"}})),
        allocRefused(allocations.Add({{"result", "refused"}})),
        registrations(prometheus::BuildCounter()
                          .Name("kubecomp_devplugin_registrations_total")
                          .Help("Successful registrations with kubelet")
                          .Register(reg)
                          .Add({})),
        registerFailures(prometheus::BuildCounter()
                             .Name("kubecomp_devplugin_register_failures_total")
                             .Help("Failed registration attempts")
                             .Register(reg)
                             .Add({})),
        streams(prometheus::BuildGauge()
                    .Name("kubecomp_devplugin_listandwatch_streams")
                    .Help("Open ListAndWatch streams")
                    .Register(reg)
                    .Add({})),
        poolProblems(prometheus::BuildGauge()
                         .Name("kubecomp_devplugin_pool_status_problems")
                         .Help("Malformed or conflicting GPUPool status entries for this node")
                         .Register(reg)
                         .Add({})) {}

  prometheus::Family<prometheus::Gauge>& devices;
  prometheus::Gauge& healthy;
  prometheus::Gauge& unhealthy;
  prometheus::Gauge& withdrawn;
  prometheus::Counter& listUpdates;
  prometheus::Family<prometheus::Counter>& allocations;
  prometheus::Counter& allocOk;
  prometheus::Counter& allocRefused;
  prometheus::Counter& registrations;
  prometheus::Counter& registerFailures;
  prometheus::Gauge& streams;
  prometheus::Gauge& poolProblems;
};

DevPlugin::DevPlugin(DevPluginOptions options, kube::KubeClient& client, obs::Metrics* metrics,
                     obs::HealthChecks* health)
    : opts_(std::move(options)), client_(client), health_(health) {
  if (metrics != nullptr) {
    metrics_ = std::make_unique<Metrics>(metrics->registry());
  }
  Metrics* m = metrics_.get();
  ServiceHooks hooks;
  if (m != nullptr) {
    hooks.onListSent = [m] { m->listUpdates.Increment(); };
    hooks.onAllocate = [m](bool ok) { (ok ? m->allocOk : m->allocRefused).Increment(); };
    hooks.onStreamOpened = [m] { m->streams.Increment(); };
    hooks.onStreamClosed = [m] { m->streams.Decrement(); };
  }
  service_ = std::make_unique<DevicePluginService>(std::move(hooks), opts_.strategy);
  if (opts_.hostCheck) {
    host_ = std::make_unique<HostMonitor>(opts_.host, [this] { recompute(); });
  }
  if (opts_.strategy == DeviceListStrategy::kCdiCri) {
    cdiDir_ = std::make_unique<cdi::SpecDir>(opts_.cdiDir);
  }

  kube::InformerOptions io;
  io.resource = api::gvr::gpuPools();
  informer_ = std::make_unique<kube::Informer>(client_, io);
  kube::ResourceEventHandler h;
  h.onAdd = [this](const kube::ObjectPtr&) { recompute(); };
  h.onUpdate = [this](const kube::ObjectPtr&, const kube::ObjectPtr&) { recompute(); };
  h.onDelete = [this](const kube::ObjectPtr&) { recompute(); };
  informer_->addHandler(std::move(h));

  RegistrarHooks rh;
  rh.beforeServerStop = [this] { service_->finishAll(); };
  if (m != nullptr) {
    rh.onRegistered = [m] { m->registrations.Increment(); };
    rh.onRegisterFailed = [m](const Error&) { m->registerFailures.Increment(); };
  }
  registrar_ = std::make_unique<Registrar>(opts_.registrar, *service_, std::move(rh));
  podResources_ = makePodResourcesClient(opts_.podResourcesSocket, opts_.podResourcesTimeout);
  publisher_ = std::make_unique<NodeAnnotationPublisher>(client_, opts_.nodeName);
  opts_.usage.resourceName = opts_.registrar.resourceName;
  if (host_) {
    actions_ = std::make_unique<HostActions>(
        opts_.hostActions, opts_.host.roots,
        opts_.usage.clock != nullptr ? *opts_.usage.clock : kc::systemClock());
    opts_.usage.adjust = [this](UsageReport& report, const NodeInventory& inventory) {
      actions_->rescanIfDue(inventory);
      if (actions_->hotRemove()) {
        applyHotRemove(report, inventory, actions_->removeDrained(inventory, withdrawable(report)));
      }
    };
  }
  reporter_ = std::make_unique<UsageReporter>(opts_.usage, *service_, *podResources_, *publisher_,
                                              [this] { return registrar_->registered(); });

  if (health_ != nullptr) {
    health_->addReadinessCheck("gpupool-informer", [this]() -> Status {
      if (informer_->hasSynced()) {
        return okStatus();
      }
      return makeError(kc::errc::kUnavailable, "GPUPool list not received yet");
    });
    health_->addReadinessCheck("kubelet-registration", [this]() -> Status {
      if (registrar_->registered()) {
        return okStatus();
      }
      const std::string why = registrar_->lastError();
      return makeError(kc::errc::kUnavailable,
                       "not registered with kubelet" + (why.empty() ? "" : ": " + why));
    });
  }
}

DevPlugin::~DevPlugin() {
  stop();
}

bool DevPlugin::synced() const {
  return informer_->hasSynced();
}

void DevPlugin::writeNodeCdiSpec(const NodeInventory& inventory) {
  // One spec for every GPU the host sees usable here; kubelet passes the names Allocate gave to
  // the runtime, which reads the spec when the container is created. The env stays in the
  // Allocate answer (per container: a per-device env of one name would keep only one GPU).
  std::vector<cdi::CdiGpu> gpus;
  for (const NodeGpu& g : inventory.gpus) {
    if (g.hostVisible && g.minor) {
      gpus.push_back(cdi::CdiGpu{nodeCdiName(g.id), g.id, g.uuid, *g.minor});
    }
  }
  Status s = okStatus();
  if (gpus.empty()) {
    s = cdiDir_->remove(kNodeCdiTag);
  } else {
    cdi::SpecOptions so;
    // The runtime reads hostPath on the host: always /dev there, wherever this container sees
    // the host's /dev (--dev-root) to tell which control nodes it has.
    so.devRoot = "/dev";
    so.controlNodes = cdi::presentControlNodes(opts_.host.roots.dev);
    s = cdiDir_->write(kNodeCdiTag, nodeSpecWithoutEnv(cdi::buildSpec(gpus, so, false)));
  }
  const std::string err = s ? std::string() : s.error().message;
  if (err != lastCdiError_ && !err.empty()) {
    spdlog::error("CDI spec in {}: {}", cdiDir_->dir(), err);
  }
  lastCdiError_ = err;
}

void DevPlugin::recompute() {
  std::lock_guard lock(recomputeMu_);
  std::vector<nlohmann::json> pools;
  for (const kube::ObjectPtr& p : informer_->store().list()) {
    pools.push_back(*p);
  }
  NodeInventory inv = nodeInventory(pools, opts_.nodeName);
  for (const std::string& problem : inv.problems) {
    spdlog::warn("{}", problem);
  }
  if (host_) {
    std::set<std::string> before;
    for (const Advertised& a : service_->advertised()) {
      before.insert(a.id);
    }
    applyHostView(inv, host_->view(), before);
  }
  if (cdiDir_) {
    writeNodeCdiSpec(inv);
  }
  if (metrics_) {
    double healthy = 0;
    double unhealthy = 0;
    double withdrawn = 0;
    for (const NodeGpu& g : inv.gpus) {
      if (g.draining) {
        ++withdrawn;
      } else if (g.healthy) {
        ++healthy;
      } else {
        ++unhealthy;
      }
    }
    metrics_->healthy.Set(healthy);
    metrics_->unhealthy.Set(unhealthy);
    metrics_->withdrawn.Set(withdrawn);
    metrics_->poolProblems.Set(static_cast<double>(inv.problems.size()));
  }
  service_->setInventory(std::move(inv));
}

Status DevPlugin::start() {
  if (started_) {
    return okStatus();
  }
  if (opts_.nodeName.empty()) {
    return makeError(kc::errc::kInvalid, "the node name is empty (--node-name or NODE_NAME)");
  }
  if (auto s = validate(opts_.registrar); !s) {
    return s;
  }
  started_ = true;
  if (host_) {
    host_->start();
  }
  informer_->start();
  if (!informer_->waitForSync(opts_.initialSyncWait)) {
    spdlog::warn("no GPUPool list within {} ms; registering with no devices for now",
                 opts_.initialSyncWait.count());
  }
  if (auto s = registrar_->start(); !s) {
    informer_->stop();
    return s;
  }
  reporter_->start();
  return okStatus();
}

void DevPlugin::stop() {
  if (!started_ || stopped_) {
    return;
  }
  stopped_ = true;
  reporter_->stop();
  registrar_->stop();  // ends the streams first (beforeServerStop), then the server
  informer_->stop();
  if (host_) {
    host_->stop();
  }
}

}  // namespace kc::devplugin
