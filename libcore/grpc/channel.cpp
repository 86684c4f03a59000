#include "libcore/grpc/channel.hpp"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

namespace kc::grpcx {

std::shared_ptr<grpc::Channel> dialUnix(const std::string& path, int maxReceiveBytes) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(maxReceiveBytes);
  // Reconnect quickly after the peer restarts (kubelet, a plugin): the default backoff
  // grows to two minutes, far longer than a node daemon restart takes.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Each dial gets its own connection: a fresh socket file after a restart is a new peer.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel("unix:" + path, grpc::InsecureChannelCredentials(), args);
}

Status waitConnected(grpc::Channel& channel, std::chrono::milliseconds timeout,
                     const std::string& what) {
  const auto deadline = std::chrono::system_clock::now() + timeout;
  if (channel.WaitForConnected(deadline)) {
    return okStatus();
  }
  return makeError(kc::errc::kUnavailable,
                   what + ": not connected within " + std::to_string(timeout.count()) + " ms");
}

void setTimeout(grpc::ClientContext& ctx, std::chrono::milliseconds timeout) {
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
}

}  // namespace kc::grpcx
