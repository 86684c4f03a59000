#pragma once
// Signal tests run in forked children so the test process keeps its own dispositions.

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

namespace kc::obs::testing {

// Runs `body` in a forked child; returns the child's exit status (128 + signal when killed)
// and what it wrote to `fd` (the pipe's write end, passed to body).
struct ChildResult {
  int status = -1;
  std::string output;
};

template <typename Body, typename Parent>
ChildResult inChild(Body body, Parent parent) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    body(fds[1]);
    ::_exit(0);
  }
  ::close(fds[1]);
  ChildResult result;
  parent(pid, fds[0], result.output);
  char buf[256];
  for (;;) {
    const auto n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) {
      break;
    }
    result.output.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

inline void say(int fd, const std::string& s) {
  [[maybe_unused]] auto n = ::write(fd, s.data(), s.size());
}

// Reads from fd until `marker` was seen (appending to out) or the pipe closes.
inline void readUntil(int fd, std::string& out, const std::string& marker) {
  char c;
  while (out.find(marker) == std::string::npos && ::read(fd, &c, 1) == 1) {
    out.push_back(c);
  }
}

}  // namespace kc::obs::testing
