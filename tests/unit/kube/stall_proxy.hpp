#pragma once
// A TCP relay between one client and the API server double that the test can stall: while
// stalled, bytes in both directions are held back (connections stay open), as when a node
// loses its network path to the API server. TLS passes through untouched.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace kc::kube::testing {

class StallProxy {
 public:
  explicit StallProxy(int upstreamPort) : upstreamPort_(upstreamPort) {
    listenFd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (listenFd_ < 0 || ::bind(listenFd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listenFd_, 16) != 0) {
      throw std::runtime_error("stall proxy: cannot listen");
    }
    socklen_t len = sizeof a;
    ::getsockname(listenFd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { acceptLoop(); });
  }
  ~StallProxy() {
    done_ = true;
    acceptor_.join();
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& t : pumps_) {
      t.join();
    }
    for (int fd : fds_) {
      ::close(fd);
    }
    ::close(listenFd_);
  }
  StallProxy(const StallProxy&) = delete;
  StallProxy& operator=(const StallProxy&) = delete;

  int port() const { return port_; }
  void stall(bool on) { stalled_ = on; }

 private:
  bool waitReadable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 20) > 0;
  }
  void acceptLoop() {
    while (!done_) {
      if (!waitReadable(listenFd_)) {
        continue;
      }
      int down = ::accept(listenFd_, nullptr, nullptr);
      if (down < 0) {
        continue;
      }
      int up = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<std::uint16_t>(upstreamPort_));
      if (::connect(up, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(up);
        ::close(down);
        continue;
      }
      std::lock_guard<std::mutex> lock(mu_);
      fds_.push_back(down);
      fds_.push_back(up);
      pumps_.emplace_back([this, down, up] { pump(down, up); });
      pumps_.emplace_back([this, down, up] { pump(up, down); });
    }
  }
  void pump(int from, int to) {
    char buf[16384];
    while (!done_) {
      if (stalled_ || !waitReadable(from)) {
        if (stalled_) {
          pollfd p{-1, 0, 0};
          ::poll(&p, 0, 20);  // bounded wait for the stall to end or the proxy to close
        }
        continue;
      }
      ssize_t n = ::recv(from, buf, sizeof buf, 0);
      if (n <= 0) {
        ::shutdown(to, SHUT_WR);
        return;
      }
      for (ssize_t off = 0; off < n;) {
        ssize_t w = ::send(to, buf + off, static_cast<std::size_t>(n - off), MSG_NOSIGNAL);
        if (w <= 0) {
          return;
        }
        off += w;
      }
    }
  }

  int upstreamPort_;
  int listenFd_ = -1;
  int port_ = 0;
  std::atomic<bool> done_{false};
  std::atomic<bool> stalled_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> pumps_;
  std::vector<int> fds_;
};

}  // namespace kc::kube::testing
