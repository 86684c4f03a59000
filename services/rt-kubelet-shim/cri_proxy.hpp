#pragma once
// A transparent gRPC proxy for the CRI: every method (unary or streaming, known to us or newer
// than our .proto) is forwarded byte-level to the runtime's socket with gRPC's generic callback
// API, messages in both directions, the caller's deadline and metadata kept, the runtime's
// status returned unchanged. The shim hooks into the calls it acts on through CallHooks.

#include <grpcpp/channel.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace kc::rtshim {

// Per-call hook (created for the methods the shim acts on). Called on gRPC's callback
// threads; must not block for long.
class CallHook {
 public:
  virtual ~CallHook() = default;
  // The caller's first request message, before it is forwarded; may rewrite it. A non-OK
  // status ends the call with that status and forwards nothing.
  virtual grpc::Status onRequest(grpc::ByteBuffer& request) = 0;
  // Each response message of the runtime, before it is passed on.
  virtual void onResponse(const grpc::ByteBuffer& response) = 0;
  // The runtime's final status (not called when onRequest refused the call).
  virtual void onFinish(const grpc::Status& status) = 0;
};

class CallHooks {
 public:
  virtual ~CallHooks() = default;
  // nullptr: pass the call through untouched. `method` is the full path
  // ("/runtime.v1.RuntimeService/CreateContainer").
  virtual std::unique_ptr<CallHook> hookFor(std::string_view method) = 0;
};

// Called once per finished call: method, status code, seconds from arrival to the end.
using CallObserver =
    std::function<void(const std::string& method, grpc::StatusCode code, double seconds)>;

class CriProxy final : public grpc::CallbackGenericService {
 public:
  CriProxy(std::shared_ptr<grpc::Channel> upstream, CallHooks* hooks, CallObserver observer);
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override;

 private:
  std::shared_ptr<grpc::Channel> channel_;
  grpc::GenericStub stub_;
  CallHooks* hooks_;
  CallObserver observer_;
};

}  // namespace kc::rtshim
