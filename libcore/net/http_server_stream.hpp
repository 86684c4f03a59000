#pragma once
// Private to the HttpServer units: the ResponseStream handed to stream handlers (StreamState,
// behind the StreamHandle the handler holds). The Session that owns the exchange calls the
// "session side" members on its strand.

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>

#include "libcore/net/http_server_internal.hpp"

namespace kc::net::detail {

// The ResponseStream given to stream handlers. Thread-safe; forwards to the session strand.
class StreamState final : public ResponseStream {
 public:
  StreamState(std::shared_ptr<SessionBase> session, HttpServer::Impl* server, std::size_t limit)
      : session_(std::move(session)), server_(server), limit_(limit) {}

  bool begin(unsigned status, Headers headers) override;
  bool write(std::string_view data) override;
  void end() override;
  bool send(Response response) override;
  bool closed() const override { return closed_.load() || phase_.load() == kDone; }
  std::size_t pendingBytes() const override { return pending_.load(); }
  void onClose(std::function<void()> callback) override;

  // Session side (strand) -------------------------------------------------------------------
  void wrote(std::size_t n) { pending_.fetch_sub(n); }
  // Runs the close callback once. Called on the strand when the exchange is over for any reason.
  void markClosed();
  // The last user reference went away (see StreamHandle).
  void abandoned();

 private:
  static constexpr int kFresh = 0;
  static constexpr int kBegun = 1;
  static constexpr int kDone = 2;

  template <class F>
  bool post(F&& f);

  // Strong while the exchange is open: a handler may answer long after it returned, when no
  // I/O operation keeps the session alive. Released in markClosed() (breaking the cycle).
  std::shared_ptr<SessionBase> session_;  // guarded by mutex_
  HttpServer::Impl* server_;
  const std::size_t limit_;
  std::atomic<int> phase_{kFresh};
  std::atomic<bool> closed_{false};
  std::atomic<std::size_t> pending_{0};
  std::mutex mutex_;
  std::function<void()> onClose_;  // guarded by mutex_
  bool closeDelivered_ = false;    // guarded by mutex_
};

// What the handler holds: forwards to the StreamState and reports abandonment when the last
// shared_ptr copy is dropped.
class StreamHandle final : public ResponseStream {
 public:
  explicit StreamHandle(std::shared_ptr<StreamState> s) : s_(std::move(s)) {}
  ~StreamHandle() override { s_->abandoned(); }
  bool begin(unsigned status, Headers headers) override {
    return s_->begin(status, std::move(headers));
  }
  bool write(std::string_view data) override { return s_->write(data); }
  void end() override { s_->end(); }
  bool send(Response response) override { return s_->send(std::move(response)); }
  bool closed() const override { return s_->closed(); }
  std::size_t pendingBytes() const override { return s_->pendingBytes(); }
  void onClose(std::function<void()> callback) override { s_->onClose(std::move(callback)); }

 private:
  std::shared_ptr<StreamState> s_;
};

}  // namespace kc::net::detail
