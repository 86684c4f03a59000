#include "services/rt-kubelet-shim/cri_proxy.hpp"

#include <grpcpp/client_context.h>
#include <grpcpp/support/client_callback.h>

#include <deque>
#include <mutex>
#include <optional>

namespace kc::rtshim {
namespace {

bool forwardableMetadata(std::string_view key) {
  return !key.empty() && key.front() != ':' && !key.starts_with("grpc-") && key != "user-agent" &&
         key != "te" && key != "content-type" && key != "authority";
}

// One proxied call: the server side (the caller, kubelet) and the client side (the runtime)
// pumped into each other. Deleted when both sides are done.
//
// gRPC destroys the client stream just before it calls the client reactor's OnDone, so no
// operation may be started on the upstream once it can finish. Two rules keep that true:
// the upstream always has a read outstanding until its stream ends (messages are queued for the
// caller instead of waiting to read the next), and a hold keeps it open until the caller's side
// has half-closed (or broken), so StartWritesDone is never late.
class ForwardCall final : public grpc::ServerGenericBidiReactor {
 public:
  ForwardCall(grpc::GenericCallbackServerContext* ctx, grpc::GenericStub& stub,
              std::unique_ptr<CallHook> hook, const CallObserver& observer)
      : ctx_(ctx),
        stub_(stub),
        hook_(std::move(hook)),
        observer_(observer),
        start_(std::chrono::steady_clock::now()),
        upstream_(this) {
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    std::unique_lock lock(mu_);
    if (!started_) {
      if (ok && hook_) {
        lock.unlock();
        grpc::Status refused = hook_->onRequest(in_);
        lock.lock();
        if (!refused.ok()) {
          finishLocked(refused, /*observe=*/true);
          return;
        }
      }
      startUpstreamLocked();
      if (ok) {
        upstream_.StartWrite(&in_);
      } else {
        upstream_.StartWritesDone();
        releaseHoldLocked();
      }
      upstream_.StartCall();
      return;
    }
    if (holdReleased_) {
      return;  // the upstream failed a write: nothing more goes to it
    }
    if (ok) {
      upstream_.StartWrite(&in_);
    } else {
      upstream_.StartWritesDone();
      releaseHoldLocked();
    }
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock lock(mu_);
    writing_ = false;
    if (!ok) {
      ctxUp_.TryCancel();  // the caller is gone
    } else if (!queue_.empty()) {
      queue_.pop_front();
    }
    if (ok && !queue_.empty() && !finished_) {
      writing_ = true;
      StartWrite(&queue_.front());
      return;
    }
    if (!ok) {
      queue_.clear();
    }
    if (pendingFinish_ && queue_.empty()) {
      finishLocked(*pendingFinish_, false);
    }
  }

  void OnCancel() override { ctxUp_.TryCancel(); }

  void OnDone() override {
    std::unique_lock lock(mu_);
    serverDone_ = true;
    maybeDeleteLocked(lock);
  }

 private:
  class Upstream final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
   public:
    explicit Upstream(ForwardCall* call) : call_(call) {}
    void OnWriteDone(bool ok) override { call_->upWriteDone(ok); }
    void OnReadDone(bool ok) override { call_->upReadDone(ok); }
    void OnDone(const grpc::Status& s) override { call_->upDone(s); }

   private:
    ForwardCall* call_;
  };

  void startUpstreamLocked() {
    started_ = true;
    ctxUp_.set_deadline(ctx_->deadline());
    for (const auto& [k, v] : ctx_->client_metadata()) {
      const std::string key(k.data(), k.size());
      if (forwardableMetadata(key)) {
        ctxUp_.AddMetadata(key, std::string(v.data(), v.size()));
      }
    }
    stub_.PrepareBidiStreamingCall(&ctxUp_, ctx_->method(), grpc::StubOptions(), &upstream_);
    upstream_.AddHold();
    upstream_.StartRead(&up_);
  }

  void releaseHoldLocked() {
    if (!holdReleased_) {
      holdReleased_ = true;
      upstream_.RemoveHold();
    }
  }

  void upWriteDone(bool ok) {
    std::unique_lock lock(mu_);
    if (!ok) {
      releaseHoldLocked();  // the stream is failing: let its status through
      return;
    }
    if (!finished_) {
      StartRead(&in_);  // the caller's next message (or its half-close)
    }
  }

  void upReadDone(bool ok) {
    if (!ok) {
      return;  // the runtime's stream ended; its status arrives in upDone
    }
    if (hook_) {
      hook_->onResponse(up_);
    }
    std::unique_lock lock(mu_);
    if (!finished_) {
      queue_.push_back(up_);
      if (!writing_) {
        writing_ = true;
        StartWrite(&queue_.front());
      }
    }
    upstream_.StartRead(&up_);  // always one read outstanding until the stream ends
  }

  void upDone(const grpc::Status& s) {
    if (hook_) {
      hook_->onFinish(s);
    }
    std::unique_lock lock(mu_);
    upstreamDone_ = true;
    if (writing_ || !queue_.empty()) {
      pendingFinish_ = s;
      if (observer_) {
        observer_(ctx_->method(), s.error_code(), seconds());
      }
    } else {
      finishLocked(s, true);
    }
    maybeDeleteLocked(lock);
  }

  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

  void finishLocked(const grpc::Status& s, bool observe) {
    if (finished_) {
      return;
    }
    finished_ = true;
    pendingFinish_.reset();
    if (observe && observer_) {
      observer_(ctx_->method(), s.error_code(), seconds());
    }
    Finish(s);
  }

  void maybeDeleteLocked(std::unique_lock<std::mutex>& lock) {
    if (serverDone_ && (!started_ || upstreamDone_)) {
      lock.unlock();
      delete this;
    }
  }

  grpc::GenericCallbackServerContext* ctx_;
  grpc::GenericStub& stub_;
  std::unique_ptr<CallHook> hook_;
  const CallObserver& observer_;
  std::chrono::steady_clock::time_point start_;
  grpc::ClientContext ctxUp_;
  Upstream upstream_;
  grpc::ByteBuffer in_, up_;
  std::deque<grpc::ByteBuffer> queue_;  // runtime -> caller, front is being written
  std::mutex mu_;
  bool started_ = false, finished_ = false, writing_ = false, holdReleased_ = false;
  bool serverDone_ = false, upstreamDone_ = false;
  std::optional<grpc::Status> pendingFinish_;
};

}  // namespace

CriProxy::CriProxy(std::shared_ptr<grpc::Channel> upstream, CallHooks* hooks, CallObserver observer)
    : channel_(upstream),
      stub_(std::move(upstream)),
      hooks_(hooks),
      observer_(std::move(observer)) {}

grpc::ServerGenericBidiReactor* CriProxy::CreateReactor(grpc::GenericCallbackServerContext* ctx) {
  std::unique_ptr<CallHook> hook = hooks_ != nullptr ? hooks_->hookFor(ctx->method()) : nullptr;
  return new ForwardCall(ctx, stub_, std::move(hook), observer_);
}

}  // namespace kc::rtshim
