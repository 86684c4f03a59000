#include "services/rt-kubelet-shim/shim_server.hpp"

#include <spdlog/spdlog.h>

#include "libcore/grpc/channel.hpp"

namespace kc::rtshim {
namespace {

grpcx::UnixServerOptions serverOptions(const std::string& socket) {
  grpcx::UnixServerOptions so;
  so.path = socket;
  so.maxReceiveBytes = 16 << 20;
  return so;
}

}  // namespace

ShimServer::ShimServer(Token, const CommandLine& c, RtSupport support, kube::KubeClient* client,
                       obs::Metrics* metrics)
    : socket_(c.socket),
      runtime_(c.runtime),
      shim_(c.shim, std::move(support), c.cgroups, client, metrics),
      channel_(grpcx::dialUnix(c.runtime)),
      proxy_(channel_, &shim_,
             [this](const std::string& m, grpc::StatusCode code, double s) {
               shim_.observeCall(m, code, s);
             }),
      server_(serverOptions(c.socket)) {
  server_.setGenericService(&proxy_);
}

Result<std::unique_ptr<ShimServer>> ShimServer::create(const CommandLine& c,
                                                       kube::KubeClient* client,
                                                       obs::Metrics* metrics,
                                                       obs::HealthChecks& health) {
  RtSupport support = detectRtSupport(c.cgroups);
  if (support.capable) {
    spdlog::info("RT support: {}", support.reason);
  } else {
    spdlog::warn("no RT support, real-time pods will be refused: {}", support.reason);
  }
  auto s = std::make_unique<ShimServer>(Token{}, c, std::move(support), client, metrics);
  if (auto st = grpcx::waitConnected(*s->channel_, c.runtimeConnect, "runtime " + c.runtime); !st) {
    return st.error();
  }
  if (auto st = s->shim_.rebuild(*s->channel_); !st) {
    return st.error();
  }
  ShimServer* self = s.get();
  health.addLivenessCheck("cri-socket", [self]() -> Status {
    if (!self->server_.socketPresent()) {
      return makeError(errc::kUnavailable, "our socket " + self->socket_ + " is gone");
    }
    return okStatus();
  });
  health.addReadinessCheck("runtime", [self]() -> Status {
    const auto st = self->channel_->GetState(true);
    if (st == GRPC_CHANNEL_TRANSIENT_FAILURE || st == GRPC_CHANNEL_SHUTDOWN) {
      return makeError(errc::kUnavailable, "runtime " + self->runtime_ + " unreachable");
    }
    return okStatus();
  });
  health.addReadinessCheck("rebuilt", [self]() -> Status {
    return self->shim_.ready() ? okStatus() : makeError(errc::kUnavailable, "rebuilding");
  });
  return s;
}

Status ShimServer::start() {
  return server_.start();
}

void ShimServer::stop(std::chrono::milliseconds grace) {
  server_.stop(grace);
  shim_.stop();
}

}  // namespace kc::rtshim
