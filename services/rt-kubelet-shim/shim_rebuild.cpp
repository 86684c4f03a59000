// rt-kubelet-shim's rebuild after a restart (shim.hpp): the reservations the runtime's
// containers carry in their annotations, re-admitted, and their cgroups adopted.

#include <grpcpp/client_context.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include "cri/runtime/v1/api.grpc.pb.h"
#include "libcore/grpc/channel.hpp"
#include "services/rt-kubelet-shim/shim.hpp"
#include "services/rt-kubelet-shim/shim_annotations.hpp"

namespace kc::rtshim {
namespace {

namespace cri = runtime::v1;

bool dirExists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

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

}  // namespace kc::rtshim
