#include "services/disaggpu-devplugin/registrar.hpp"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "libcore/base/backoff.hpp"
#include "libcore/grpc/channel.hpp"
#include "libcore/grpc/status.hpp"
#include "services/disaggpu-devplugin/plugin_service.hpp"

namespace kc::devplugin {
namespace {

std::string kubeletSocketOf(const RegistrarOptions& o) {
  return o.kubeletSocket.empty() ? o.pluginDir + "/kubelet.sock" : o.kubeletSocket;
}

// Extended resource names: "<domain>/<name>", a DNS subdomain and a qualified name, and not in
// the kubernetes.io domain (kubelet refuses those from plugins).
bool isExtendedResourceName(std::string_view name) {
  const auto slash = name.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 >= name.size() ||
      name.find('/', slash + 1) != std::string_view::npos) {
    return false;
  }
  const std::string_view domain = name.substr(0, slash);
  const std::string_view local = name.substr(slash + 1);
  if (domain.size() > 253 || local.size() > 63) {
    return false;
  }
  if (domain == "kubernetes.io" || domain.ends_with(".kubernetes.io") || domain == "k8s.io" ||
      domain.ends_with(".k8s.io")) {
    return false;
  }
  const auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  for (char c : domain) {
    if (!alnum(c) && c != '-' && c != '.') {
      return false;
    }
  }
  if (!alnum(domain.front()) || !alnum(domain.back())) {
    return false;
  }
  const auto alnumMixed = [&](char c) { return alnum(c) || (c >= 'A' && c <= 'Z'); };
  for (char c : local) {
    if (!alnumMixed(c) && c != '-' && c != '_' && c != '.') {
      return false;
    }
  }
  return alnumMixed(local.front()) && alnumMixed(local.back());
}

}  // namespace

Status validate(const RegistrarOptions& o) {
  if (o.pluginDir.empty() || o.pluginDir.front() != '/') {
    return makeError(kc::errc::kInvalid,
                     "--device-plugin-dir '" + o.pluginDir + "' is not an absolute path");
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(o.pluginDir, ec)) {
    return makeError(kc::errc::kInvalid,
                     "--device-plugin-dir '" + o.pluginDir + "' is not a directory");
  }
  if (o.socketName.empty() || o.socketName.find('/') != std::string::npos || o.socketName == "." ||
      o.socketName == ".." || o.socketName == "kubelet.sock") {
    return makeError(kc::errc::kInvalid, "--socket-name '" + o.socketName +
                                             "' must be a plain file name other than kubelet.sock");
  }
  if (!isExtendedResourceName(o.resourceName)) {
    return makeError(kc::errc::kInvalid,
                     "--resource-name '" + o.resourceName +
                         "' is not an extended resource name (domain/name, not in "
                         "kubernetes.io)");
  }
  if (o.registerTimeout.count() <= 0 || o.checkInterval.count() <= 0 || o.retryMin.count() <= 0 ||
      o.retryMax < o.retryMin) {
    return makeError(kc::errc::kInvalid, "registrar timings must be positive (retry max >= min)");
  }
  return okStatus();
}

Registrar::Registrar(RegistrarOptions options, grpc::Service& service, RegistrarHooks hooks)
    : opts_(std::move(options)),
      clock_(kc::clockOr(opts_.clock)),
      service_(service),
      hooks_(std::move(hooks)),
      server_(grpcx::UnixServerOptions{opts_.pluginDir + "/" + opts_.socketName}) {
  server_.addService(&service_);
}

Registrar::~Registrar() {
  stop();
}

std::string Registrar::socketPath() const {
  return server_.path();
}

std::string Registrar::lastError() const {
  std::lock_guard lock(mu_);
  return lastError_;
}

Status Registrar::start() {
  if (auto s = validate(opts_); !s) {
    return s;
  }
  if (auto s = server_.start(); !s) {
    return s;
  }
  if (opts_.useInotify) {
    wakeFd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    inotifyFd_ = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (wakeFd_ < 0 || inotifyFd_ < 0 ||
        ::inotify_add_watch(inotifyFd_, opts_.pluginDir.c_str(),
                            IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF) <
            0) {
      spdlog::warn("inotify on {} unavailable; checking the sockets every {} ms", opts_.pluginDir,
                   opts_.checkInterval.count());
      for (int* fd : {&inotifyFd_, &wakeFd_}) {
        if (*fd >= 0) {
          ::close(*fd);
          *fd = -1;
        }
      }
    }
  }
  if (inotifyFd_ >= 0) {
    watcher_ = std::thread([this] { watchDirectory(); });
  }
  thread_ = std::thread([this] { loop(); });
  return okStatus();
}

void Registrar::stop() {
  {
    std::lock_guard lock(waitMu_);
    if (stopping_.exchange(true)) {
      return;
    }
  }
  wake_.notify_all();
  if (wakeFd_ >= 0) {
    const std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wakeFd_, &one, sizeof one);
  }
  if (watcher_.joinable()) {
    watcher_.join();
  }
  if (thread_.joinable()) {
    thread_.join();
  }
  if (hooks_.beforeServerStop) {
    hooks_.beforeServerStop();
  }
  server_.stop(opts_.stopGrace);
  registered_ = false;
  if (inotifyFd_ >= 0) {
    ::close(inotifyFd_);
    inotifyFd_ = -1;
  }
  if (wakeFd_ >= 0) {
    ::close(wakeFd_);
    wakeFd_ = -1;
  }
}

bool Registrar::kubeletSocketIdentity(dev_t& dev, ino_t& ino) const {
  struct stat st {};
  if (::stat(kubeletSocketOf(opts_).c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
    return false;
  }
  dev = st.st_dev;
  ino = st.st_ino;
  return true;
}

Status Registrar::registerOnce() {
  const std::string kubelet = kubeletSocketOf(opts_);
  auto channel = grpcx::dialUnix(kubelet);
  if (auto s = grpcx::waitConnected(*channel, opts_.registerTimeout, "kubelet at " + kubelet); !s) {
    return s;
  }
  auto stub = v1beta1::Registration::NewStub(channel);
  v1beta1::RegisterRequest req;
  req.set_version("v1beta1");
  req.set_endpoint(opts_.socketName);
  req.set_resource_name(opts_.resourceName);
  *req.mutable_options() = DevicePluginService::pluginOptions();
  grpc::ClientContext ctx;
  grpcx::setTimeout(ctx, opts_.registerTimeout);
  v1beta1::Empty reply;
  return grpcx::toResult(stub->Register(&ctx, req, &reply), "Register with kubelet");
}

// Blocks in poll() with no timeout (the clock owns every deadline); stop() ends it through
// the eventfd.
void Registrar::watchDirectory() {
  pollfd fds[2] = {{wakeFd_, POLLIN, 0}, {inotifyFd_, POLLIN, 0}};
  while (!stopping_) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) {
        continue;
      }
      spdlog::warn("poll on the inotify descriptor failed; checking the sockets every {} ms",
                   opts_.checkInterval.count());
      return;
    }
    if ((fds[0].revents & POLLIN) != 0) {
      return;
    }
    if ((fds[1].revents & POLLIN) != 0) {
      // Which file changed does not matter: the loop re-checks both sockets by stat.
      char buf[4096];
      while (::read(inotifyFd_, buf, sizeof buf) > 0) {
      }
      {
        std::lock_guard lock(waitMu_);
        dirChanged_ = true;
      }
      wake_.notify_all();
    }
  }
}

void Registrar::waitForChange(kc::Clock::time_point deadline) {
  std::unique_lock lock(waitMu_);
  clock_.waitUntil(lock, wake_, deadline, [this] { return stopping_.load() || dirChanged_; });
  dirChanged_ = false;
}

void Registrar::loop() {
  dev_t kubeletDev = 0;
  ino_t kubeletIno = 0;
  // Refused or failed registrations back off with the one kc::Backoff (doubling from
  // retryMin to retryMax, 20% jitter so a node's plugins do not retry in step).
  kc::Backoff backoff(kc::BackoffParams{opts_.retryMin, opts_.retryMax, 2.0, 0.2});
  auto nextAttempt = clock_.now();
  while (!stopping_) {
    // 1. Our socket deleted (kubelet restart) or replaced: serve on a fresh one.
    if (!server_.socketPresent()) {
      spdlog::info("device plugin socket {} is gone; serving on a new one", server_.path());
      registered_ = false;
      server_.stop(std::chrono::milliseconds(0));  // cancels the streams of the old socket
      if (auto s = server_.start(); !s) {
        spdlog::error("cannot serve the device plugin again: {}", s.error().message);
      } else {
        ++restarts_;
        if (hooks_.onServerRestarted) {
          hooks_.onServerRestarted();
        }
      }
      nextAttempt = clock_.now();
      backoff.reset();
    }
    // 2. A new kubelet.sock (kubelet restarted, perhaps without deleting ours): register again.
    dev_t dev = 0;
    ino_t ino = 0;
    const bool kubeletUp = kubeletSocketIdentity(dev, ino);
    if (registered_ && (!kubeletUp || dev != kubeletDev || ino != kubeletIno)) {
      spdlog::info("kubelet socket changed; registering again");
      registered_ = false;
      nextAttempt = clock_.now();
      backoff.reset();
    }
    // 3. Register when needed and due.
    if (!registered_ && server_.running() && kubeletUp && clock_.now() >= nextAttempt) {
      if (auto s = registerOnce(); s) {
        registered_ = true;
        ++registrations_;
        kubeletDev = dev;
        kubeletIno = ino;
        backoff.reset();
        {
          std::lock_guard lock(mu_);
          lastError_.clear();
        }
        spdlog::info("registered {} with kubelet (endpoint {})", opts_.resourceName,
                     opts_.socketName);
        if (hooks_.onRegistered) {
          hooks_.onRegistered();
        }
      } else {
        {
          std::lock_guard lock(mu_);
          lastError_ = s.error().message;
        }
        const auto retry = backoff.next();
        spdlog::warn("{}; retrying in {} ms", s.error().message, retry.count());
        if (hooks_.onRegisterFailed) {
          hooks_.onRegisterFailed(s.error());
        }
        nextAttempt = clock_.now() + retry;
      }
    }
    const auto now = clock_.now();
    auto deadline = now + opts_.checkInterval;
    if (!registered_ && kubeletUp) {
      // At least 1 ms: a retry that is due while the server cannot serve must not spin.
      deadline = std::clamp<kc::Clock::time_point>(nextAttempt, now + std::chrono::milliseconds(1),
                                                   deadline);
    }
    waitForChange(deadline);
  }
}

}  // namespace kc::devplugin
