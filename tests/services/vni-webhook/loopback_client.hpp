#pragma once
// A small blocking HTTP/1.1 client over one raw keep-alive TCP socket, for the tests and the
// load generator (bench_vni) that drive vni-webhook from outside its process: the concurrency,
// crash and drain tests. Test code, not part of the service. One instance per thread.
// Reconnects when the server closed the connection.

#include <chrono>
#include <cstdint>
#include <string>

#include "libcore/base/result.hpp"

namespace kc::vni::testing {

struct LoopbackReply {
  unsigned status = 0;
  std::string body;
};

class LoopbackClient {
 public:
  LoopbackClient(std::string host, std::uint16_t port,
                 std::chrono::milliseconds timeout = std::chrono::seconds(10));
  ~LoopbackClient();
  LoopbackClient(const LoopbackClient&) = delete;
  LoopbackClient& operator=(const LoopbackClient&) = delete;

  // Error "unavailable" on connect/transport failure or timeout (the connection is dropped).
  Result<LoopbackReply> request(const std::string& method, const std::string& path,
                                const std::string& body,
                                const std::string& contentType = "application/json");
  void setPort(std::uint16_t port);

 private:
  Status connect();
  void close();

  std::string host_;
  std::uint16_t port_;
  std::chrono::milliseconds timeout_;
  int fd_ = -1;
  std::string buffer_;
};

}  // namespace kc::vni::testing
