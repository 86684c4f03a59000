#include "libcore/net/http_server_stream.hpp"

#include <shared_mutex>

namespace kc::net::detail {

// Calls `f` with the session (whose post* members hop onto its strand), unless the exchange
// is over (session released) or the server has shut its gate (stopping).
template <class F>
bool StreamState::post(F&& f) {
  std::shared_lock gate(server_->gateMutex);
  if (!server_->gateOpen) {
    return false;
  }
  std::shared_ptr<SessionBase> s;
  {
    std::lock_guard lock(mutex_);
    s = session_;
  }
  if (!s) {
    return false;
  }
  f(*s);
  return true;
}

bool StreamState::begin(unsigned status, Headers headers) {
  int expected = kFresh;
  if (closed_ || !phase_.compare_exchange_strong(expected, kBegun)) {
    return false;
  }
  return post([&](SessionBase& s) { s.postStreamBegin(status, std::move(headers)); });
}

bool StreamState::write(std::string_view data) {
  if (closed_ || phase_.load() != kBegun) {
    return false;
  }
  if (data.empty()) {
    return true;
  }
  const std::size_t queued = pending_.fetch_add(data.size()) + data.size();
  if (queued > limit_) {
    // Slow consumer: give up on it rather than buffer without bound.
    pending_.fetch_sub(data.size());
    closed_ = true;
    post([](SessionBase& s) { s.forceClose(); });
    return false;
  }
  auto chunk = std::make_shared<const std::string>(data);
  if (!post([&](SessionBase& s) { s.postStreamWrite(std::move(chunk)); })) {
    pending_.fetch_sub(data.size());
    return false;
  }
  return true;
}

void StreamState::end() {
  int expected = kBegun;
  if (phase_.compare_exchange_strong(expected, kDone)) {
    post([](SessionBase& s) { s.postStreamEnd(); });
  }
}

bool StreamState::send(Response response) {
  int expected = kFresh;
  if (closed_ || !phase_.compare_exchange_strong(expected, kDone)) {
    return false;
  }
  return post([&](SessionBase& s) { s.postSend(std::move(response)); });
}

void StreamState::onClose(std::function<void()> callback) {
  {
    std::lock_guard lock(mutex_);
    if (!closeDelivered_) {
      onClose_ = std::move(callback);
      return;
    }
  }
  if (callback) {
    callback();
  }
}

void StreamState::markClosed() {
  closed_ = true;
  std::function<void()> cb;
  std::shared_ptr<SessionBase> session;  // released after the lock, outside it
  {
    std::lock_guard lock(mutex_);
    if (closeDelivered_) {
      return;
    }
    closeDelivered_ = true;
    cb = std::move(onClose_);
    session = std::move(session_);
  }
  if (cb) {
    try {
      cb();
    } catch (...) {  // a throwing callback must not take an io thread down
    }
  }
}

void StreamState::abandoned() {
  const int phase = phase_.exchange(kDone);
  if (phase == kDone) {
    return;
  }
  post([phase](SessionBase& s) { s.postAbandoned(phase == kBegun); });
}

}  // namespace kc::net::detail
