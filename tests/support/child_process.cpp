#include "tests/support/child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <thread>
#include <utility>

extern char** environ;

namespace kc::testing {

namespace {

constexpr auto kPollStep = std::chrono::milliseconds(5);

int exitStatus(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string envName(const std::string& entry) {
  return entry.substr(0, entry.find('='));
}

// ::environ with `changes` applied: "NAME=value" sets NAME, "NAME" removes it.
std::vector<std::string> childEnvironment(const std::vector<std::string>& changes) {
  std::vector<std::string> out;
  for (char** e = ::environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = envName(entry);
    const bool replaced = std::any_of(changes.begin(), changes.end(),
                                      [&](const std::string& c) { return envName(c) == name; });
    if (!replaced) {
      out.push_back(entry);
    }
  }
  for (const auto& c : changes) {
    if (c.find('=') != std::string::npos) {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

ChildProcess::ChildProcess(std::vector<std::string> argv, ChildOutput output,
                           const std::vector<std::string>& env) {
  if (argv.empty()) {
    throw std::runtime_error("ChildProcess: empty argv");
  }
  program_ = argv.front();
  int fds[2] = {-1, -1};
  if (output != ChildOutput::kInherit && ::pipe2(fds, O_CLOEXEC) != 0) {
    throw std::runtime_error("ChildProcess: pipe failed for " + program_);
  }
  // argv and envp are built before fork: the child may only call async-signal-safe functions.
  std::vector<char*> args;
  for (auto& a : argv) {
    args.push_back(a.data());
  }
  args.push_back(nullptr);
  std::vector<std::string> environment = childEnvironment(env);
  std::vector<char*> envp;
  for (auto& e : environment) {
    envp.push_back(e.data());
  }
  envp.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ < 0) {
    if (fds[0] >= 0) {
      ::close(fds[0]);
      ::close(fds[1]);
    }
    throw std::runtime_error("ChildProcess: fork failed for " + program_);
  }
  if (pid_ == 0) {
    if (output != ChildOutput::kInherit) {
      ::dup2(fds[1], STDOUT_FILENO);  // dup2 clears O_CLOEXEC on the copy
      if (output == ChildOutput::kCaptureMerged) {
        ::dup2(fds[1], STDERR_FILENO);
      }
    }
    ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  if (output != ChildOutput::kInherit) {
    ::close(fds[1]);
    outFd_ = fds[0];
  }
}

ChildProcess::~ChildProcess() {
  if (!reap(false)) {
    ::kill(pid_, SIGKILL);
    reap(true);
  }
  if (outFd_ >= 0) {
    ::close(outFd_);
  }
}

bool ChildProcess::reap(bool block) {
  if (status_) {
    return true;
  }
  int status = 0;
  rusage ru{};
  for (;;) {
    const pid_t r = ::wait4(pid_, &status, block ? 0 : WNOHANG, &ru);
    if (r == pid_) {
      status_ = exitStatus(status);
      usage_ = ru;
      return true;
    }
    if (r < 0 && errno == EINTR) {
      continue;
    }
    return false;
  }
}

bool ChildProcess::running() {
  return !reap(false);
}

void ChildProcess::signal(int signal) {
  if (!status_) {
    ::kill(pid_, signal);
  }
}

std::optional<int> ChildProcess::waitExit(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!reap(false)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return std::nullopt;
    }
    std::this_thread::sleep_for(kPollStep);
  }
  return status_;
}

int ChildProcess::wait() {
  reap(true);
  return *status_;
}

int ChildProcess::kill(int signal) {
  this->signal(signal);
  reap(true);
  return *status_;
}

int ChildProcess::terminate(std::chrono::milliseconds grace) {
  signal(SIGTERM);
  if (auto status = waitExit(grace)) {
    return *status;
  }
  return kill(SIGKILL);
}

void ChildProcess::waitUntil(const std::function<bool()>& ready, std::chrono::milliseconds limit,
                             const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (ready()) {
      return;
    }
    if (reap(false)) {
      throw std::runtime_error(program_ + " exited with status " + std::to_string(*status_) +
                               " before " + what);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(SIGKILL);
      throw std::runtime_error(program_ + ": no " + what + " within " +
                               std::to_string(limit.count()) + " ms");
    }
    std::this_thread::sleep_for(kPollStep);
  }
}

bool ChildProcess::fill(std::chrono::milliseconds limit) {
  if (outFd_ < 0) {
    throw std::logic_error("ChildProcess: output of " + program_ + " is not captured");
  }
  if (eof_) {
    return false;
  }
  pollfd p{outFd_, POLLIN, 0};
  const int ready = ::poll(&p, 1, static_cast<int>(limit.count()));
  if (ready <= 0) {
    return true;  // timeout (or EINTR): nothing new, not at end
  }
  char buf[4096];
  const ssize_t n = ::read(outFd_, buf, sizeof buf);
  if (n > 0) {
    buffered_.append(buf, static_cast<std::size_t>(n));
    return true;
  }
  if (n < 0 && errno == EINTR) {
    return true;
  }
  eof_ = true;
  return false;
}

std::optional<std::string> ChildProcess::readLine(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (const auto nl = buffered_.find('\n'); nl != std::string::npos) {
      std::string line = buffered_.substr(0, nl);
      buffered_.erase(0, nl + 1);
      return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !fill(left)) {
      return std::nullopt;
    }
  }
}

std::string ChildProcess::readAll() {
  while (fill(std::chrono::milliseconds(1000))) {
  }
  return std::exchange(buffered_, {});
}

std::optional<std::uint16_t> readPortFile(const std::string& path) {
  std::ifstream in(path);
  unsigned port = 0;
  if (in >> port && port != 0 && port <= 65535) {
    return static_cast<std::uint16_t>(port);
  }
  return std::nullopt;
}

}  // namespace kc::testing
