#pragma once
// Client side of a unix-socket gRPC API (kubelet's Registration and PodResources sockets, a
// device plugin's socket, a CRI runtime's socket).

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include <chrono>
#include <memory>
#include <string>

#include "libcore/base/result.hpp"

namespace kc::grpcx {

// A channel to "unix:<path>" (absolute path). It connects lazily; use waitConnected() to
// fail fast when nothing listens. Message size limit applies to replies.
std::shared_ptr<grpc::Channel> dialUnix(const std::string& path, int maxReceiveBytes = 16 << 20);

// Blocks until the channel is READY or `timeout` passes. Error "unavailable" names the path.
Status waitConnected(grpc::Channel& channel, std::chrono::milliseconds timeout,
                     const std::string& what);

// Every call has a deadline: sets it `timeout` from now on `ctx`.
void setTimeout(grpc::ClientContext& ctx, std::chrono::milliseconds timeout);

}  // namespace kc::grpcx
