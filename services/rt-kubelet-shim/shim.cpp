#include "services/rt-kubelet-shim/shim.hpp"

#include <grpcpp/client_context.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include "cri/runtime/v1/api.grpc.pb.h"
#include "libcore/grpc/channel.hpp"
#include "libcore/kube/client.hpp"
#include "libcore/kube/resource.hpp"
#include "libcore/obs/health.hpp"

namespace kc::rtshim {
namespace {

namespace cri = runtime::v1;
using alloc::RtReservation;
using alloc::RtStringMap;

constexpr std::string_view kService = "/runtime.v1.RuntimeService/";

template <typename M>
bool parse(const grpc::ByteBuffer& buf, M& msg) {
  std::vector<grpc::Slice> slices;
  if (!buf.Dump(&slices).ok()) {
    return false;
  }
  std::string bytes;
  for (const auto& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return msg.ParseFromString(bytes);
}

template <typename M>
grpc::ByteBuffer serialize(const M& msg) {
  const std::string bytes = msg.SerializeAsString();  // unknown fields kept
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

RtStringMap toMap(const google::protobuf::Map<std::string, std::string>& m) {
  return RtStringMap(m.begin(), m.end());
}

grpc::Status toStatus(const Error& e) {
  grpc::StatusCode code = grpc::StatusCode::INTERNAL;
  if (e.code == kc::errc::kInvalid) {
    code = grpc::StatusCode::INVALID_ARGUMENT;
  } else if (e.code == kc::errc::kInsufficient) {
    code = grpc::StatusCode::RESOURCE_EXHAUSTED;
  } else if (e.code == kc::errc::kFailedPrecondition || e.code == kc::errc::kConflict) {
    code = grpc::StatusCode::FAILED_PRECONDITION;
  }
  return grpc::Status(code, "rt-kubelet-shim: " + e.message);
}

std::string formatReservation(const RtReservation& r) {
  return std::to_string(r.runtimeUs) + "/" + std::to_string(r.periodUs) + "/" +
         std::to_string(r.cpus);
}

std::optional<RtReservation> parseReservation(const std::string& s) {
  RtReservation r;
  unsigned long long a = 0, b = 0, c = 0;
  char tail = 0;
  if (std::sscanf(s.c_str(), "%llu/%llu/%llu%c", &a, &b, &c, &tail) != 3) {
    return std::nullopt;
  }
  r.runtimeUs = a;
  r.periodUs = b;
  r.cpus = static_cast<std::uint32_t>(c);
  if (c > alloc::kMaxRtCpus || !alloc::validateReservation(r)) {
    return std::nullopt;
  }
  return r;
}

bool dirExists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// ---- hooks ----

class SandboxHook final : public CallHook {
 public:
  explicit SandboxHook(RtShim& s) : s_(s) {}
  grpc::Status onRequest(grpc::ByteBuffer& req) override { return s_.sandboxRequest(req); }
  void onResponse(const grpc::ByteBuffer&) override {}
  void onFinish(const grpc::Status&) override {}

 private:
  RtShim& s_;
};

class CreateHook final : public CallHook {
 public:
  explicit CreateHook(RtShim& s) : s_(s) {}
  grpc::Status onRequest(grpc::ByteBuffer& req) override {
    return s_.createRequest(req, pending_, replaced_);
  }
  void onResponse(const grpc::ByteBuffer& resp) override {
    cri::CreateContainerResponse r;
    if (parse(resp, r)) {
      id_ = r.container_id();
    }
  }
  void onFinish(const grpc::Status& st) override {
    s_.createDone(pending_, replaced_, id_, st.ok() && !id_.empty());
  }

 private:
  RtShim& s_;
  std::optional<RtShim::Entry> pending_;
  std::optional<std::string> replaced_;
  std::string id_;
};

class StartHook final : public CallHook {
 public:
  explicit StartHook(RtShim& s) : s_(s) {}
  grpc::Status onRequest(grpc::ByteBuffer& req) override {
    cri::StartContainerRequest r;
    if (!parse(req, r)) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "rt-kubelet-shim: malformed StartContainerRequest");
    }
    return s_.startRequest(r.container_id());
  }
  void onResponse(const grpc::ByteBuffer&) override {}
  void onFinish(const grpc::Status&) override {}

 private:
  RtShim& s_;
};

class UpdateHook final : public CallHook {
 public:
  explicit UpdateHook(RtShim& s) : s_(s) {}
  grpc::Status onRequest(grpc::ByteBuffer& req) override { return s_.updateRequest(req); }
  void onResponse(const grpc::ByteBuffer&) override {}
  void onFinish(const grpc::Status&) override {}

 private:
  RtShim& s_;
};

// RemoveContainer / RemovePodSandbox: release once the runtime removed it.
class RemoveHook final : public CallHook {
 public:
  RemoveHook(RtShim& s, bool sandbox) : s_(s), sandbox_(sandbox) {}
  grpc::Status onRequest(grpc::ByteBuffer& req) override {
    if (sandbox_) {
      cri::RemovePodSandboxRequest r;
      if (parse(req, r)) {
        id_ = r.pod_sandbox_id();
      }
    } else {
      cri::RemoveContainerRequest r;
      if (parse(req, r)) {
        id_ = r.container_id();
      }
    }
    return grpc::Status::OK;
  }
  void onResponse(const grpc::ByteBuffer&) override {}
  void onFinish(const grpc::Status& st) override {
    if (!st.ok() || id_.empty()) {
      return;
    }
    if (sandbox_) {
      s_.sandboxRemoved(id_);
    } else {
      s_.removed(id_);
    }
  }

 private:
  RtShim& s_;
  bool sandbox_;
  std::string id_;
};

}  // namespace

struct RtShim::Metrics {
  explicit Metrics(prometheus::Registry& reg)
      : reservations(prometheus::BuildGauge()
                         .Name("kubecomp_rtshim_reservations")
                         .Help("Real-time containers holding a reservation on this node")
                         .Register(reg)
                         .Add({})),
        coreUsed(prometheus::BuildGauge()
                     .Name("kubecomp_rtshim_core_utilization")
                     .Help("Reserved RT bandwidth per core (runtime/period summed over servers)")
                     .Register(reg)),
        groupUsed(prometheus::BuildGauge()
                      .Name("kubecomp_rtshim_group_utilization")
                      .Help("Sum of runtime/period over all RT containers (cgroup v1 group limit)")
                      .Register(reg)
                      .Add({})),
        bound(prometheus::BuildGauge()
                  .Name("kubecomp_rtshim_core_bound")
                  .Help("Per-core RT bound (sched_rt_runtime_us/sched_rt_period_us); 0 = not "
                        "RT-capable")
                  .Register(reg)
                  .Add({})),
        refused(prometheus::BuildCounter()
                    .Name("kubecomp_rtshim_refused_total")
                    .Help("CRI calls the shim refused, by reason")
                    .Register(reg)),
        calls(prometheus::BuildHistogram()
                  .Name("kubecomp_rtshim_cri_call_seconds")
                  .Help("CRI calls through the proxy, arrival to end, by method and code")
                  .Register(reg)) {}
  prometheus::Gauge& reservations;
  prometheus::Family<prometheus::Gauge>& coreUsed;
  prometheus::Gauge& groupUsed;
  prometheus::Gauge& bound;
  prometheus::Family<prometheus::Counter>& refused;
  prometheus::Family<prometheus::Histogram>& calls;
};

RtShim::RtShim(ShimOptions options, RtSupport support, RtCgroupOptions cgroups,
               kube::KubeClient* client, obs::Metrics* metrics)
    : o_(std::move(options)),
      support_(std::move(support)),
      tree_(std::move(cgroups)),
      client_(client) {
  auto p = alloc::findRtPacking(o_.packing);
  packing_ = p ? *p : alloc::rtPackings()[0];
  if (support_.capable) {
    auto n = alloc::RtNodeState::create(support_.info);
    if (n) {
      node_ = std::move(*n);
    } else {
      support_.capable = false;
      support_.reason = n.error().message;
    }
  }
  if (metrics != nullptr) {
    metrics_ = std::make_unique<Metrics>(metrics->registry());
    metrics_->bound.Set(support_.capable ? static_cast<double>(node_->cores().boundPpb()) / 1e9
                                         : 0.0);
  }
  if (client_ != nullptr) {
    publisher_ = std::thread([this] { publisherLoop(); });
  }
}

RtShim::~RtShim() {
  stop();
}

Status RtShim::validate(const ShimOptions& o) {
  if (auto p = alloc::findRtPacking(o.packing); !p) {
    return makeError(kc::errc::kInvalid, "--packing: " + p.error().message);
  }
  return okStatus();
}

void RtShim::stop() {
  {
    std::lock_guard lock(pubMu_);
    pubStop_ = true;
  }
  pubCv_.notify_all();
  if (publisher_.joinable()) {
    publisher_.join();
  }
}

std::unique_ptr<CallHook> RtShim::hookFor(std::string_view method) {
  if (!method.starts_with(kService)) {
    return nullptr;
  }
  const std::string_view m = method.substr(kService.size());
  if (m == "RunPodSandbox") {
    return std::make_unique<SandboxHook>(*this);
  }
  if (m == "CreateContainer") {
    return std::make_unique<CreateHook>(*this);
  }
  if (m == "StartContainer") {
    return std::make_unique<StartHook>(*this);
  }
  if (m == "UpdateContainerResources") {
    return std::make_unique<UpdateHook>(*this);
  }
  if (m == "RemoveContainer") {
    return std::make_unique<RemoveHook>(*this, false);
  }
  if (m == "RemovePodSandbox") {
    return std::make_unique<RemoveHook>(*this, true);
  }
  return nullptr;
}

void RtShim::observeCall(const std::string& method, grpc::StatusCode code, double seconds) {
  if (!metrics_) {
    return;
  }
  static const prometheus::Histogram::BucketBoundaries kBuckets{
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5};
  metrics_->calls
      .Add({{"method", method}, {"code", std::to_string(static_cast<int>(code))}}, kBuckets)
      .Observe(seconds);
}

grpc::Status RtShim::sandboxRequest(grpc::ByteBuffer& request) {
  cri::RunPodSandboxRequest r;
  if (!parse(request, r)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "rt-kubelet-shim: malformed RunPodSandboxRequest");
  }
  const RtStringMap ann = toMap(r.config().annotations());
  const bool rt = std::any_of(ann.begin(), ann.end(), [](const auto& kv) {
    return kv.first.starts_with(alloc::kRtAnnotationPrefix) &&
           kv.first != alloc::kRtAssignedAnnotation;
  });
  if (!rt) {
    return grpc::Status::OK;
  }
  if (auto s = alloc::validateRtAnnotations(ann); !s) {
    if (metrics_) {
      metrics_->refused.Add({{"reason", "invalid"}}).Increment();
    }
    return toStatus(s.error());
  }
  if (!node_) {
    if (metrics_) {
      metrics_->refused.Add({{"reason", "not_capable"}}).Increment();
    }
    return grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        "rt-kubelet-shim: pod asks for real-time but this node has no RT support: " +
            support_.reason);
  }
  return grpc::Status::OK;
}

grpc::Status RtShim::createRequest(grpc::ByteBuffer& request, std::optional<Entry>& pending,
                                   std::optional<std::string>& replaced) {
  cri::CreateContainerRequest r;
  if (!parse(request, r)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "rt-kubelet-shim: malformed CreateContainerRequest");
  }
  const RtStringMap ann = toMap(r.sandbox_config().annotations());
  const std::string name = r.config().metadata().name();
  auto res = alloc::rtReservationFor(ann, name);
  if (!res) {
    if (metrics_) {
      metrics_->refused.Add({{"reason", "invalid"}}).Increment();
    }
    return toStatus(res.error());
  }
  if (!*res) {
    return grpc::Status::OK;  // not real-time: forwarded byte for byte
  }
  auto refuse = [&](const char* reason, grpc::Status st) {
    if (metrics_) {
      metrics_->refused.Add({{"reason", reason}}).Increment();
    }
    return st;
  };
  if (!node_) {
    return refuse("not_capable", grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                              "rt-kubelet-shim: container '" + name +
                                                  "' asks for real-time but this node has no RT "
                                                  "support: " +
                                                  support_.reason));
  }
  const std::string parent = r.sandbox_config().linux().cgroup_parent();
  if (auto p = containerCgroupPath(parent, "probe"); !p) {
    return refuse("cgroup", toStatus(p.error()));
  }
  Entry e;
  e.sandboxId = r.pod_sandbox_id();
  e.container = name;
  e.pod = r.sandbox_config().metadata().namespace_() + "/" + r.sandbox_config().metadata().name();
  e.cgroupParent = parent;
  e.reservation = **res;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, old] : entries_) {
      if (old.sandboxId == e.sandboxId && old.container == name &&
          old.reservation == e.reservation) {
        replaced = id;  // a new attempt takes over its predecessor's cores
        e.cpus = old.cpus;
        break;
      }
    }
    if (!replaced) {
      auto cpus = node_->place(e.reservation, packing_);
      if (!cpus) {
        return refuse("insufficient",
                      grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                   "rt-kubelet-shim: container '" + name + "' of pod " + e.pod +
                                       " does not fit: " + cpus.error().message));
      }
      if (auto s = node_->admit(e.reservation, *cpus); !s) {
        return refuse("insufficient", toStatus(s.error()));
      }
      e.cpus = std::move(*cpus);
    }
  }
  auto* res2 = r.mutable_config()->mutable_linux()->mutable_resources();
  res2->set_cpuset_cpus(alloc::formatCpuList(e.cpus));
  auto* ca = r.mutable_config()->mutable_annotations();
  (*ca)[std::string(kShimReservationAnnotation)] = formatReservation(e.reservation);
  (*ca)[std::string(kShimCoresAnnotation)] = alloc::formatCpuList(e.cpus);
  (*ca)[std::string(kShimCgroupParentAnnotation)] = parent;
  (*ca)[std::string(kShimPodAnnotation)] = e.pod;
  request = serialize(r);
  pending = std::move(e);
  return grpc::Status::OK;
}

void RtShim::createDone(const std::optional<Entry>& pending,
                        const std::optional<std::string>& replaced, const std::string& containerId,
                        bool ok) {
  if (!pending) {
    return;
  }
  std::unique_lock lock(mu_);
  if (!ok) {
    if (!replaced) {
      (void)node_->release(pending->reservation, pending->cpus);
    }
    return;
  }
  if (replaced) {
    if (auto it = entries_.find(*replaced); it != entries_.end()) {
      const Entry old = it->second;
      entries_.erase(it);
      lock.unlock();
      if (auto p = containerCgroupPath(old.cgroupParent, *replaced)) {
        if (auto s = tree_.release(*p); !s) {
          spdlog::warn("releasing the cgroup of replaced container {}: {}", *replaced,
                       s.error().message);
        }
      }
      lock.lock();
    }
  }
  entries_[containerId] = *pending;
  spdlog::info("RT container {} ({} of {}): runtime {} us / period {} us on cores {}", containerId,
               pending->container, pending->pod, pending->reservation.runtimeUs,
               pending->reservation.periodUs, alloc::formatCpuList(pending->cpus));
  lock.unlock();
  updateGauges();
  queuePodPublish(pending->pod);
}

grpc::Status RtShim::startRequest(const std::string& containerId) {
  Entry e;
  {
    std::lock_guard lock(mu_);
    const auto it = entries_.find(containerId);
    if (it == entries_.end()) {
      return grpc::Status::OK;
    }
    e = it->second;
  }
  auto path = containerCgroupPath(e.cgroupParent, containerId);
  if (!path) {
    return toStatus(path.error());
  }
  if (auto s = tree_.apply(*path, e.reservation); !s) {
    if (metrics_) {
      metrics_->refused.Add({{"reason", "cgroup"}}).Increment();
    }
    return toStatus(s.error());
  }
  return grpc::Status::OK;
}

grpc::Status RtShim::updateRequest(grpc::ByteBuffer& request) {
  cri::UpdateContainerResourcesRequest r;
  if (!parse(request, r)) {
    return grpc::Status::OK;  // not ours to judge: the runtime answers
  }
  std::string cores;
  {
    std::lock_guard lock(mu_);
    const auto it = entries_.find(r.container_id());
    if (it == entries_.end()) {
      return grpc::Status::OK;
    }
    cores = alloc::formatCpuList(it->second.cpus);
  }
  if (r.has_linux() && !r.linux().cpuset_cpus().empty() && r.linux().cpuset_cpus() != cores) {
    r.mutable_linux()->set_cpuset_cpus(cores);
    request = serialize(r);
  }
  return grpc::Status::OK;
}

Status RtShim::releaseEntry(const std::string& id, const Entry& e) {
  if (auto p = containerCgroupPath(e.cgroupParent, id)) {
    if (auto s = tree_.release(*p); !s) {
      return s;
    }
  }
  std::lock_guard lock(mu_);
  return node_->release(e.reservation, e.cpus);
}

void RtShim::removed(const std::string& containerId) {
  Entry e;
  {
    std::lock_guard lock(mu_);
    const auto it = entries_.find(containerId);
    if (it == entries_.end()) {
      return;
    }
    e = it->second;
    entries_.erase(it);
  }
  if (auto s = releaseEntry(containerId, e); !s) {
    spdlog::error("releasing RT container {}: {}", containerId, s.error().message);
  } else {
    spdlog::info("released RT container {} ({} of {})", containerId, e.container, e.pod);
  }
  updateGauges();
  queuePodPublish(e.pod);
}

void RtShim::sandboxRemoved(const std::string& sandboxId) {
  std::vector<std::string> ids;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, e] : entries_) {
      if (e.sandboxId == sandboxId) {
        ids.push_back(id);
      }
    }
  }
  for (const auto& id : ids) {
    removed(id);
  }
}

Status RtShim::rebuild(grpc::Channel& runtime) {
  if (!node_) {
    spdlog::warn("node not RT-capable: {}", support_.reason);
    publishNode();
    ready_ = true;
    return okStatus();
  }
  cri::RuntimeService::Stub stub(std::shared_ptr<grpc::ChannelInterface>(&runtime, [](auto*) {}));
  grpc::ClientContext ctx;
  grpcx::setTimeout(ctx, std::chrono::seconds(30));
  cri::ListContainersRequest req;
  cri::ListContainersResponse resp;
  if (auto st = stub.ListContainers(&ctx, req, &resp); !st.ok()) {
    return makeError(kc::errc::kUnavailable,
                     "ListContainers on the runtime: " + st.error_message());
  }
  std::size_t adopted = 0;
  for (const auto& c : resp.containers()) {
    const auto& a = c.annotations();
    const auto rit = a.find(std::string(kShimReservationAnnotation));
    if (rit == a.end()) {
      continue;
    }
    const auto cit = a.find(std::string(kShimCoresAnnotation));
    const auto pit = a.find(std::string(kShimCgroupParentAnnotation));
    const auto podIt = a.find(std::string(kShimPodAnnotation));
    auto r = parseReservation(rit->second);
    auto cpus = cit == a.end()
                    ? Result<std::vector<std::uint32_t>>(makeError(kc::errc::kInvalid, "no cores"))
                    : alloc::parseCpuList(cit->second);
    if (!r || !cpus || pit == a.end() || cpus->size() != r->cpus) {
      spdlog::error("container {}: unreadable RT annotations, not adopted", c.id());
      continue;
    }
    Entry e{c.pod_sandbox_id(),
            c.metadata().name(),
            podIt == a.end() ? "" : podIt->second,
            pit->second,
            *r,
            *cpus};
    {
      std::lock_guard lock(mu_);
      if (auto s = node_->admit(e.reservation, e.cpus); !s) {
        spdlog::error("container {}: cannot re-admit its reservation: {}", c.id(),
                      s.error().message);
        continue;
      }
      entries_[c.id()] = e;
    }
    auto path = containerCgroupPath(e.cgroupParent, c.id());
    if (path) {
      const bool leaf = dirExists(tree_.options().cpuRoot + *path);
      if (leaf || c.state() == cri::CONTAINER_RUNNING || c.state() == cri::CONTAINER_EXITED) {
        tree_.adopt(*path, e.reservation, leaf);
      }
    }
    ++adopted;
    queuePodPublish(e.pod);
  }
  spdlog::info("rebuilt {} RT reservation(s) from the runtime's containers", adopted);
  updateGauges();
  publishNode();
  ready_ = true;
  return okStatus();
}

std::vector<RtShim::Held> RtShim::held() const {
  std::lock_guard lock(mu_);
  std::vector<Held> out;
  for (const auto& [id, e] : entries_) {
    auto p = containerCgroupPath(e.cgroupParent, id);
    out.push_back(Held{id, e.sandboxId, e.container, e.pod, p ? *p : "", e.reservation, e.cpus});
  }
  return out;
}

void RtShim::updateGauges() {
  if (!metrics_ || !node_) {
    return;
  }
  std::lock_guard lock(mu_);
  metrics_->reservations.Set(static_cast<double>(entries_.size()));
  metrics_->groupUsed.Set(static_cast<double>(node_->groupUsedPpb()) / 1e9);
  const auto& cores = node_->cores();
  for (std::size_t i = 0; i < cores.coreCount(); ++i) {
    metrics_->coreUsed.Add({{"cpu", std::to_string(cores.cpuId(i))}})
        .Set(static_cast<double>(cores.usedPpb(i)) / 1e9);
  }
}

void RtShim::publishNode() {
  if (client_ == nullptr || o_.nodeName.empty()) {
    return;
  }
  nlohmann::json labels, annotations;
  if (support_.capable) {
    labels[std::string(alloc::kRtCapableLabel)] = "true";
    for (const auto& [k, v] : alloc::formatRtNodeAnnotations(support_.info)) {
      annotations[k] = v;
    }
  } else {
    labels[std::string(alloc::kRtCapableLabel)] = nullptr;  // never advertise without support
    for (const auto k :
         {alloc::kRtCoresAnnotation, alloc::kRtBoundAnnotation, alloc::kRtKernelAnnotation}) {
      annotations[std::string(k)] = nullptr;
    }
  }
  const nlohmann::json patch = {{"metadata", {{"labels", labels}, {"annotations", annotations}}}};
  auto r = client_->patch(kube::gvr::nodes(), "", o_.nodeName, kube::PatchType::kMerge, patch);
  if (!r) {
    spdlog::error("publishing RT capability on Node {}: {}", o_.nodeName, r.error().describe());
  } else {
    spdlog::info("Node {}: {}", o_.nodeName,
                 support_.capable ? "advertised RT-capable (" + support_.reason + ")"
                                  : "not advertised RT-capable: " + support_.reason);
  }
}

void RtShim::queuePodPublish(const std::string& pod) {
  if (client_ == nullptr || pod.find('/') == std::string::npos) {
    return;
  }
  {
    std::lock_guard lock(pubMu_);
    pubQueue_.insert(pod);
  }
  pubCv_.notify_all();
}

void RtShim::publisherLoop() {
  std::unique_lock lock(pubMu_);
  while (true) {
    pubCv_.wait(lock, [&] { return pubStop_ || !pubQueue_.empty(); });
    if (pubQueue_.empty()) {
      return;  // stopping
    }
    const std::string pod = *pubQueue_.begin();
    pubQueue_.erase(pubQueue_.begin());
    lock.unlock();
    alloc::RtAssignment a;
    {
      std::lock_guard g(mu_);
      for (const auto& [id, e] : entries_) {
        if (e.pod == pod) {
          a[e.container] = e.cpus;
        }
      }
    }
    const auto slash = pod.find('/');
    nlohmann::json value =
        a.empty() ? nlohmann::json(nullptr) : nlohmann::json(alloc::formatRtAssignment(a));
    const nlohmann::json patch = {
        {"metadata", {{"annotations", {{std::string(alloc::kRtAssignedAnnotation), value}}}}}};
    auto r = client_->patch(kube::gvr::pods(), pod.substr(0, slash), pod.substr(slash + 1),
                            kube::PatchType::kMerge, patch);
    if (!r && !r.error().isNotFound()) {
      spdlog::warn("annotating pod {} with its RT cores: {}", pod, r.error().describe());
    }
    lock.lock();
    if (!r && r.error().isRetryable() && !pubStop_) {
      // The API server is unreachable or busy: try again in a second (the scheduler places the
      // pod's containers first-fit meanwhile, which is where this node put them by default).
      pubCv_.wait_for(lock, std::chrono::seconds(1), [&] { return pubStop_; });
      if (!pubStop_) {
        pubQueue_.insert(pod);
      }
    }
  }
}

}  // namespace kc::rtshim
