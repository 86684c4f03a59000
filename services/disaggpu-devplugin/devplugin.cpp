#include "services/disaggpu-devplugin/devplugin.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>

#include "libcore/obs/health.hpp"

namespace kc::devplugin {

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
  service_ = std::make_unique<DevicePluginService>(std::move(hooks));

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

void DevPlugin::recompute() {
  std::vector<nlohmann::json> pools;
  for (const kube::ObjectPtr& p : informer_->store().list()) {
    pools.push_back(*p);
  }
  NodeInventory inv = nodeInventory(pools, opts_.nodeName);
  for (const std::string& problem : inv.problems) {
    spdlog::warn("{}", problem);
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
}

}  // namespace kc::devplugin
