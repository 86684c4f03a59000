// rt-kubelet-shim's CRI hooks (shim.hpp, call by call): the hook of each intercepted method
// and what RtShim does before a call is forwarded and once the runtime answered.

#include <spdlog/spdlog.h>

#include "cri/runtime/v1/api.grpc.pb.h"
#include "services/rt-kubelet-shim/shim.hpp"
#include "services/rt-kubelet-shim/shim_annotations.hpp"
#include "services/rt-kubelet-shim/shim_metrics.hpp"

namespace kc::rtshim {
namespace {

namespace cri = runtime::v1;
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

}  // namespace kc::rtshim
