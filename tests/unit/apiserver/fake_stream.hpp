#pragma once
// A kc::net::ResponseStream that records what the double's API layer does with it: the
// status it began with, the streamed body (watch events), or the one response it sent.

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "libcore/net/http_server.hpp"

namespace kc::apiserver::testing {

class FakeStream : public kc::net::ResponseStream {
 public:
  bool begin(unsigned status, kc::net::Headers) override {
    begunStatus = status;
    return true;
  }
  bool write(std::string_view data) override {
    body.append(data);
    return !ended;
  }
  void end() override { ended = true; }
  bool send(kc::net::Response r) override {
    sent = std::move(r);
    return true;
  }
  bool closed() const override { return ended; }
  std::size_t pendingBytes() const override { return 0; }
  void onClose(std::function<void()>) override {}

  unsigned begunStatus = 0;
  std::string body;
  bool ended = false;
  std::optional<kc::net::Response> sent;
};

}  // namespace kc::apiserver::testing
