#include "libcore/obs/shutdown.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <mutex>
#include <thread>

#include "libcore/obs/health.hpp"

namespace kc::obs {
namespace {

// The only process-wide state, because a signal handler can reach nothing else:
// the write end of the installed handler's self-pipe (-1 = none installed) and how many
// signals arrived since install (a second one exits at once).
std::atomic<int> gPipeWrite{-1};
std::atomic<int> gSignalsSeen{0};

// Bytes on the pipe: a signal number (1..64), kWake for trigger(), kQuit from the destructor.
constexpr unsigned char kWake = 0xFE;
constexpr unsigned char kQuit = 0xFF;

extern "C" void onShutdownSignal(int sig) {
  const int savedErrno = errno;
  if (gSignalsSeen.fetch_add(1) >= 1) {
    _exit(128 + sig);  // second signal: the operator insists
  }
  const int fd = gPipeWrite.load();
  if (fd >= 0) {
    const auto b = static_cast<unsigned char>(sig);
    [[maybe_unused]] const auto n = ::write(fd, &b, 1);
  }
  errno = savedErrno;
}

std::string signalName(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    case SIGQUIT:
      return "SIGQUIT";
    default:
      return "signal " + std::to_string(sig);
  }
}

}  // namespace

class ShutdownHandler::Impl {
 public:
  explicit Impl(Steps s) : steps(std::move(s)) {
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      throw std::runtime_error(std::string("ShutdownHandler: pipe2 failed: ") +
                               std::strerror(errno));
    }
    watcher = std::thread([this] { watch(); });
  }

  ~Impl() {
    uninstall();
    writeByte(kQuit);
    watcher.join();
    ::close(fds[0]);
    ::close(fds[1]);
  }

  void writeByte(unsigned char b) {
    while (::write(fds[1], &b, 1) < 0 && errno == EINTR) {
    }
  }

  Status install(std::vector<int> signals) {
    if (signals.empty()) {
      signals = {SIGTERM, SIGINT};
    }
    int expected = -1;
    if (!gPipeWrite.compare_exchange_strong(expected, fds[1])) {
      return makeError(kc::errc::kUnavailable,
                       "another ShutdownHandler is already installed in this process");
    }
    gSignalsSeen = 0;
    struct sigaction sa {};
    sa.sa_handler = onShutdownSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int sig : signals) {
      struct sigaction previous {};
      if (::sigaction(sig, &sa, &previous) != 0) {
        const std::string why = std::strerror(errno);
        uninstall();
        return makeError(kc::errc::kInvalid,
                         "cannot install a handler for " + signalName(sig) + ": " + why);
      }
      saved.emplace_back(sig, previous);
    }
    return okStatus();
  }

  void uninstall() {
    for (auto& [sig, previous] : saved) {
      ::sigaction(sig, &previous, nullptr);
    }
    saved.clear();
    int mine = fds[1];
    gPipeWrite.compare_exchange_strong(mine, -1);
  }

  // Marks the sequence as started at once (so triggered() and reason() answer as soon as
  // trigger() returns) and wakes the watcher, which runs it.
  void trigger(std::string why) {
    {
      std::lock_guard lock(mutex);
      if (started) {
        return;
      }
      started = true;
      reason = std::move(why);
    }
    writeByte(kWake);
  }

  void watch() {
    for (;;) {
      unsigned char b = 0;
      const auto n = ::read(fds[0], &b, 1);
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0 || b == kQuit) {
        return;
      }
      {
        std::lock_guard lock(mutex);
        if (ran) {
          continue;
        }
        ran = true;
        if (!started) {  // a signal (trigger() sets started and the reason itself)
          started = true;
          reason = "signal " + signalName(b);
        }
      }
      runSequence();
    }
  }

  void runSequence() {
    const std::string why = currentReason();
    spdlog::info("shutdown: {} — failing readiness, draining, stopping", why);
    if (steps.health != nullptr) {
      steps.health->failReadiness("shutting down (" + why + ")");
    }
    runStep("drain", steps.drain);
    runStep("stop", steps.stop);
    spdlog::info("shutdown: complete");
    {
      std::lock_guard lock(mutex);
      done = true;
    }
    doneCv.notify_all();
  }

  static void runStep(const char* name, const std::function<void()>& step) {
    if (!step) {
      return;
    }
    try {
      step();
    } catch (const std::exception& e) {
      spdlog::error("shutdown: {} step failed: {}", name, e.what());
    }
  }

  std::string currentReason() {
    std::lock_guard lock(mutex);
    return reason;
  }

  Steps steps;
  int fds[2] = {-1, -1};
  std::vector<std::pair<int, struct sigaction>> saved;  // touched by install/uninstall only
  std::thread watcher;

  mutable std::mutex mutex;
  std::condition_variable doneCv;
  std::string reason;    // guarded by mutex
  bool started = false;  // guarded by mutex; set by trigger() or the watcher on a signal
  bool ran = false;      // guarded by mutex; the watcher took the sequence on
  bool done = false;     // guarded by mutex
};

ShutdownHandler::ShutdownHandler(Steps steps) : impl_(std::make_unique<Impl>(std::move(steps))) {}
ShutdownHandler::~ShutdownHandler() = default;

Status ShutdownHandler::install(std::vector<int> signals) {
  return impl_->install(std::move(signals));
}

void ShutdownHandler::trigger(std::string reason) {
  impl_->trigger(reason.empty() ? std::string("requested") : std::move(reason));
}

void ShutdownHandler::wait() {
  std::unique_lock lock(impl_->mutex);
  impl_->doneCv.wait(lock, [&] { return impl_->done; });
}

bool ShutdownHandler::waitFor(std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->mutex);
  return impl_->doneCv.wait_for(lock, timeout, [&] { return impl_->done; });
}

bool ShutdownHandler::triggered() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->started;
}

std::string ShutdownHandler::reason() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->started ? impl_->reason : std::string();
}

}  // namespace kc::obs
