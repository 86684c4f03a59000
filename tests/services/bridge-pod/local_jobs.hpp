#pragma once
// The "cluster" behind the bridge pod's test doubles (Ray, LSF, Quantum): each remote job is a
// real shell process in its own session and directory, with its output in a log file, so that
// running, finishing, failing with an exit code and being killed really happen.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "libcore/net/http_server.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/manifests.hpp"

namespace kc::bridge::testing {

inline sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// A loopback TCP port nobody listens on right now (bound and released), for a server of the
// test to bind - below the kernel's ephemeral range (ip_local_port_range). Inside that range, a
// connect() to a port with nobody listening may be given that very port as its source and
// connect to itself (TCP simultaneous open; about once in 20,000 attempts here): the client
// then reads its own request as the answer, and while that socket lives the server cannot
// bind the port. Clients retrying against a service that is down (or not up yet) make such
// attempts by the hundred; a source port is never below the range, so these ports are safe.
inline std::uint16_t freePort() {
  int low = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low;
  if (low <= 10001) {
    throw std::runtime_error("ip_local_port_range starts at " + std::to_string(low) +
                             ": no room below it for the tests' servers");
  }
  static std::mt19937 gen(std::random_device{}());
  for (int i = 0; i < 200; ++i) {
    const auto port =
        static_cast<std::uint16_t>(std::uniform_int_distribution<int>(10000, low - 1)(gen));
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    const sockaddr_in a = loopback(port);
    const bool ok = ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    if (ok) {
      return port;
    }
  }
  throw std::runtime_error("no free port");
}

class LocalJob {
 public:
  // Runs `command` with /bin/sh -c in `dir` (created), stdout and stderr to dir/output.log,
  // `env` added ("NAME=value"), `python` on PATH (Debian only has python3).
  LocalJob(const std::string& dir, const std::string& command, std::vector<std::string> env)
      : dir_(dir) {
    std::filesystem::create_directories(dir + "/.bin");
    std::error_code ec;
    std::filesystem::create_symlink("/usr/bin/python3", dir + "/.bin/python", ec);
    env.push_back("PATH=" + dir + "/.bin:/usr/bin:/bin");
    started_ = std::chrono::system_clock::now();
    // setsid: the job is its own process group, so a kill reaches whatever it started.
    child_ = std::make_unique<kc::testing::ChildProcess>(
        std::vector<std::string>{"/usr/bin/setsid", "/bin/sh", "-c",
                                 "cd \"$1\" && /bin/sh -c \"$2\" >output.log 2>&1", "job", dir,
                                 command},
        kc::testing::ChildOutput::kInherit, env);
  }
  ~LocalJob() { kill(); }

  bool running() {
    std::lock_guard lock(mu_);
    return poll();
  }
  // Exit status as ChildProcess reports it (128 + signal when killed); nullopt while running.
  std::optional<int> exitStatus() {
    std::lock_guard lock(mu_);
    poll();
    return exit_;
  }
  bool killed() const { return killed_; }
  void kill() {
    std::lock_guard lock(mu_);
    if (poll()) {
      killed_ = true;
      ::kill(-child_->pid(), SIGKILL);
      exit_ = child_->wait();
      ended_ = std::chrono::system_clock::now();
    }
  }
  std::string log() const {
    const std::string p = dir_ + "/output.log";
    return std::filesystem::exists(p) ? kc::testing::readFile(p) : std::string();
  }
  std::string file(const std::string& name) const {
    const std::string p = dir_ + "/" + name;
    return std::filesystem::exists(p) ? kc::testing::readFile(p) : std::string("<absent>");
  }
  std::chrono::system_clock::time_point started() const { return started_; }
  std::optional<std::chrono::system_clock::time_point> ended() {
    std::lock_guard lock(mu_);
    poll();
    return ended_;
  }

 private:
  bool poll() {  // with mu_ held
    if (exit_) {
      return false;
    }
    if (child_->running()) {
      return true;
    }
    exit_ = child_->wait();
    ended_ = std::chrono::system_clock::now();
    return false;
  }
  std::string dir_;
  std::mutex mu_;
  std::unique_ptr<kc::testing::ChildProcess> child_;
  std::optional<int> exit_;
  bool killed_ = false;
  std::chrono::system_clock::time_point started_;
  std::optional<std::chrono::system_clock::time_point> ended_;
};

inline std::int64_t millis(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

}  // namespace kc::bridge::testing

namespace kc::bridge::testing {

// A test double's listener that can go away and come back on the same port (the service "down
// for a while"); `routes` registers the handlers on each new server. State lives in the double.
// The port is one of freePort()'s, never an ephemeral one: the pod keeps reconnecting while
// the service is down, and must neither reach itself nor hold the port against up().
class RestartableServer {
 public:
  explicit RestartableServer(std::function<void(kc::net::HttpServer&)> routes)
      : routes_(std::move(routes)) {}
  ~RestartableServer() { down(); }
  void up() {
    const bool first = port_ == 0;
    for (int attempt = 0;; ++attempt) {
      kc::net::ServerOptions o;
      o.port = first ? freePort() : port_;
      server_ = std::make_unique<kc::net::HttpServer>(o);
      routes_(*server_);
      auto port = server_->start();
      if (port.ok()) {
        port_ = *port;
        return;
      }
      server_.reset();
      if (!first || attempt == 4) {  // a first port may be taken between freePort() and here
        throw std::runtime_error("test double listener: " + port.error().message);
      }
    }
  }
  void down() {
    if (server_) {
      server_->stop(std::chrono::milliseconds(200));
      server_.reset();
    }
  }
  std::string base() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  std::function<void(kc::net::HttpServer&)> routes_;
  std::uint16_t port_ = 0;
  std::unique_ptr<kc::net::HttpServer> server_;
};

}  // namespace kc::bridge::testing
