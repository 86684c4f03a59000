#include "tests/services/vni-webhook/loopback_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

namespace kc::vni::testing {

namespace {

Error transport(const std::string& what) {
  return makeError("unavailable", what + ": " + std::strerror(errno));
}

bool iequalsPrefix(std::string_view line, std::string_view name) {
  if (line.size() < name.size()) {
    return false;
  }
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(line[i])) !=
        std::tolower(static_cast<unsigned char>(name[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

LoopbackClient::LoopbackClient(std::string host, std::uint16_t port,
                               std::chrono::milliseconds timeout)
    : host_(std::move(host)), port_(port), timeout_(timeout) {}

LoopbackClient::~LoopbackClient() {
  close();
}

void LoopbackClient::setPort(std::uint16_t port) {
  close();
  port_ = port;
}

void LoopbackClient::close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  buffer_.clear();
}

Status LoopbackClient::connect() {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    return transport("socket");
  }
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port_);
  if (::inet_pton(AF_INET, host_.c_str(), &addr.sin_addr) != 1) {
    close();
    return makeError("invalid", "not an IPv4 address: " + host_);
  }
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    Error e = transport("connect " + host_ + ":" + std::to_string(port_));
    close();
    return e;
  }
  return okStatus();
}

Result<LoopbackReply> LoopbackClient::request(const std::string& method, const std::string& path,
                                              const std::string& body,
                                              const std::string& contentType) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool reused = fd_ >= 0;
    if (!reused) {
      if (Status s = connect(); !s) {
        return s.error();
      }
    }
    std::string out;
    out.reserve(body.size() + 200);
    out.append(method).append(" ").append(path).append(" HTTP/1.1\r\nHost: ").append(host_);
    out.append("\r\nContent-Type: ").append(contentType);
    out.append("\r\nContent-Length: ").append(std::to_string(body.size())).append("\r\n\r\n");
    out.append(body);
    std::size_t sent = 0;
    bool failed = false;
    while (sent < out.size()) {
      const ssize_t n = ::send(fd_, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) {
        failed = true;
        break;
      }
      sent += static_cast<std::size_t>(n);
    }
    // Read the status line + headers, then Content-Length bytes.
    std::size_t headerEnd = std::string::npos;
    std::size_t contentLength = 0;
    unsigned status = 0;
    bool closeAfter = false;
    while (!failed) {
      headerEnd = buffer_.find("\r\n\r\n");
      if (headerEnd != std::string::npos) {
        const std::string_view head(buffer_.data(), headerEnd);
        if (head.size() < 12 || head.substr(0, 5) != "HTTP/") {
          close();
          return makeError("invalid", "malformed HTTP response");
        }
        status = static_cast<unsigned>(std::stoul(std::string(head.substr(9, 3))));
        std::size_t pos = head.find("\r\n");
        while (pos != std::string_view::npos && pos < head.size()) {
          const std::size_t next = head.find("\r\n", pos + 2);
          const std::string_view line =
              head.substr(pos + 2, (next == std::string_view::npos ? head.size() : next) - pos - 2);
          if (iequalsPrefix(line, "content-length:")) {
            contentLength = std::stoul(std::string(line.substr(15)));
          } else if (iequalsPrefix(line, "connection:") &&
                     line.find("close") != std::string_view::npos) {
            closeAfter = true;
          }
          pos = next;
        }
        if (buffer_.size() >= headerEnd + 4 + contentLength) {
          break;
        }
      }
      pollfd p{fd_, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(timeout_.count()));
      if (ready <= 0) {
        close();
        return makeError("unavailable", "timeout waiting for " + method + " " + path);
      }
      char chunk[16384];
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) {
        failed = true;
        break;
      }
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
    if (failed) {
      const bool nothingReceived = buffer_.empty();
      close();
      if (reused && nothingReceived) {
        continue;  // the server closed an idle keep-alive connection: retry once, fresh
      }
      return makeError("unavailable", "connection lost during " + method + " " + path);
    }
    LoopbackReply reply{status, buffer_.substr(headerEnd + 4, contentLength)};
    buffer_.erase(0, headerEnd + 4 + contentLength);
    if (closeAfter) {
      close();
    }
    return reply;
  }
  return makeError("unavailable", "connection lost during " + method + " " + path);
}

}  // namespace kc::vni::testing
