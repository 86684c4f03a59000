#pragma once
// A deliberately dumb blocking TCP client for tests that must send what no well-behaved HTTP
// client sends (garbage, half a header, nothing at all). Every receive is bounded by
// SO_RCVTIMEO so a broken server fails the test instead of hanging it.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>

namespace kc::net::test {

class RawSocket {
 public:
  explicit RawSocket(std::uint16_t port, int recvTimeoutMs = 5000) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{recvTimeoutMs / 1000, (recvTimeoutMs % 1000) * 1000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawSocket() { close(); }
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;

  bool connected() const { return connected_; }

  bool send(const std::string& data) {
    std::size_t off = 0;
    while (off < data.size()) {
      const auto n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) {
        return false;
      }
      off += static_cast<std::size_t>(n);
    }
    return true;
  }

  // Reads until the peer closes (or the receive timeout / an error). `closedByPeer` tells
  // whether it ended with EOF/reset rather than the timeout.
  std::string readAll(bool* closedByPeer = nullptr) {
    std::string out;
    char buf[4096];
    for (;;) {
      const auto n = ::recv(fd_, buf, sizeof buf, 0);
      if (n > 0) {
        out.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      if (closedByPeer != nullptr) {
        *closedByPeer = n == 0 || errno == ECONNRESET;
      }
      return out;
    }
  }

  // Reads until `marker` has been seen (or EOF/timeout).
  std::string readUntil(const std::string& marker) {
    std::string out;
    char c = 0;
    while (out.find(marker) == std::string::npos) {
      const auto n = ::recv(fd_, &c, 1, 0);
      if (n <= 0) {
        break;
      }
      out.push_back(c);
    }
    return out;
  }

  void close() {
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

}  // namespace kc::net::test
