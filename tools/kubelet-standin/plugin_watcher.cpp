#include "tools/kubelet-standin/plugin_watcher.hpp"

#include <grpcpp/client_context.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include "libcore/grpc/channel.hpp"
#include "pluginregistration/v1/api.grpc.pb.h"
#include "tools/kubelet-standin/device_manager.hpp"

namespace kc::kubelet {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

namespace {

// The registration client of one socket, with kubelet's timeouts and error texts.
class RegistrationClient {
 public:
  explicit RegistrationClient(const std::string& path)
      : path_(path), stub_(pluginregistration::Registration::NewStub(grpcx::dialUnix(path))) {}

  Result<pluginregistration::PluginInfo> getInfo(std::chrono::milliseconds timeout) {
    grpc::ClientContext ctx;
    grpcx::setTimeout(ctx, timeout);
    pluginregistration::InfoRequest req;
    pluginregistration::PluginInfo info;
    const grpc::Status st = stub_->GetInfo(&ctx, req, &info);
    if (!st.ok()) {
      return makeError(errc::kUnavailable,
                       "RegisterPlugin error -- failed to get plugin info using RPC GetInfo at "
                       "socket " +
                           path_ +
                           ", err: " + goGrpcErrorText(st.error_code(), st.error_message()));
    }
    return info;
  }

  // kubelet's notifyPlugin: the error is the refusal itself, or why it could not be sent.
  Status notify(bool registered, const std::string& error, std::chrono::milliseconds timeout) {
    grpc::ClientContext ctx;
    grpcx::setTimeout(ctx, timeout);
    pluginregistration::RegistrationStatus req;
    req.set_plugin_registered(registered);
    req.set_error(error);
    pluginregistration::RegistrationStatusResponse resp;
    const grpc::Status st = stub_->NotifyRegistrationStatus(&ctx, req, &resp);
    if (!st.ok()) {
      return makeError(errc::kUnavailable,
                       (error.empty() ? "RegisterPlugin error -- failed to send registration "
                                        "status at socket " +
                                            path_ + ", err"
                                      : error) +
                           ": " + goGrpcErrorText(st.error_code(), st.error_message()));
    }
    if (!error.empty()) {
      return makeError(errc::kInvalid, error);
    }
    return okStatus();
  }

 private:
  std::string path_;
  std::unique_ptr<pluginregistration::Registration::Stub> stub_;
};

}  // namespace

PluginWatcher::PluginWatcher(PluginWatcherOptions options,
                             std::map<std::string, PluginHandler*> handlers)
    : opts_(std::move(options)), handlers_(std::move(handlers)) {}

PluginWatcher::~PluginWatcher() {
  stop();
}

Status PluginWatcher::start() {
  std::error_code ec;
  fs::create_directories(opts_.dir, ec);
  if (ec) {
    return makeError(errc::kInvalid, "error (re-)creating root " + opts_.dir + ": " + ec.message());
  }
  {
    std::lock_guard lock(mu_);
    stopping_ = false;
  }
  wakeFd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (opts_.useInotify) {
    inotifyFd_ = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (inotifyFd_ >= 0 &&
        ::inotify_add_watch(inotifyFd_, opts_.dir.c_str(),
                            IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO) < 0) {
      ::close(inotifyFd_);
      inotifyFd_ = -1;
    }
    if (inotifyFd_ < 0) {
      spdlog::warn("inotify on {} unavailable; rescanning it every {} ms", opts_.dir,
                   opts_.pollInterval.count());
    }
  }
  spdlog::info("plugin watcher: watching {} for plugin registration sockets", opts_.dir);
  thread_ = std::thread([this] { run(); });
  return okStatus();
}

void PluginWatcher::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || !thread_.joinable()) {
      return;
    }
    stopping_ = true;
  }
  if (wakeFd_ >= 0) {
    const std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wakeFd_, &one, sizeof one);
  }
  thread_.join();
  std::map<std::string, Entry> left;
  {
    std::lock_guard lock(mu_);
    left.swap(registered_);
    failed_.clear();
  }
  for (const auto& [path, e] : left) {
    deregister(e);
  }
  for (int* fd : {&inotifyFd_, &wakeFd_}) {
    if (*fd >= 0) {
      ::close(*fd);
      *fd = -1;
    }
  }
}

void PluginWatcher::forgetAll() {
  {
    std::lock_guard lock(mu_);
    forget_ = true;
  }
  if (wakeFd_ >= 0) {
    const std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wakeFd_, &one, sizeof one);
  }
}

std::vector<PluginWatcher::Registered> PluginWatcher::registered() const {
  std::lock_guard lock(mu_);
  std::vector<Registered> out;
  for (const auto& [path, e] : registered_) {
    out.push_back(e.plugin);
  }
  return out;
}

PluginWatcher::Stats PluginWatcher::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::map<std::string, PluginWatcher::Identity> PluginWatcher::scan() const {
  std::map<std::string, Identity> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(opts_.dir, ec)) {
    const std::string name = entry.path().filename().string();
    struct stat st {};
    if (name.empty() || name.front() == '.' || ::lstat(entry.path().c_str(), &st) != 0 ||
        !S_ISSOCK(st.st_mode)) {
      continue;
    }
    const std::string path = entry.path().string();
    auto deleted = deletions_.find(path);
    out[path] = {st.st_dev, st.st_ino, deleted == deletions_.end() ? 0 : deleted->second};
  }
  return out;
}

void PluginWatcher::deregister(const Entry& e) {
  spdlog::info("plugin watcher: deregistering {} plugin {} (socket {})", e.plugin.type,
               e.plugin.name, e.plugin.socketPath);
  e.handler->deregisterPlugin(e.plugin.name, e.plugin.endpoint);
  std::lock_guard lock(mu_);
  ++stats_.deregistrations;
}

// kubelet's GenerateRegisterPluginFunc: GetInfo, the handler by type, validate, register,
// then tell the plugin. Every refusal is also sent to the plugin.
Result<PluginWatcher::Entry> PluginWatcher::registerSocket(const std::string& path,
                                                           const Identity& id) {
  RegistrationClient client(path);
  auto info = client.getInfo(opts_.getInfoTimeout);
  if (!info) {
    return info.error();
  }
  PluginInfo p{info->type(), info->name(), info->endpoint(),
               std::vector<std::string>(info->supported_versions().begin(),
                                        info->supported_versions().end()),
               path};
  auto h = handlers_.find(p.type);
  if (h == handlers_.end()) {
    auto st =
        client.notify(false,
                      "RegisterPlugin error -- no handler registered for plugin type: " + p.type +
                          " at socket " + path,
                      opts_.notifyTimeout);
    return st.error();
  }
  if (p.endpoint.empty()) {
    p.endpoint = path;
  }
  if (auto v = h->second->validatePlugin(p); !v) {
    auto st = client.notify(
        false, "RegisterPlugin error -- plugin validation failed with err: " + v.error().message,
        opts_.notifyTimeout);
    return st.error();
  }
  if (auto r = h->second->registerPlugin(p); !r) {
    auto st = client.notify(
        false, "RegisterPlugin error -- plugin registration failed with err: " + r.error().message,
        opts_.notifyTimeout);
    return st.error();
  }
  Entry e{id, {path, p.type, p.name, p.endpoint}, h->second};
  if (auto st = client.notify(true, "", opts_.notifyTimeout); !st) {
    // Registered all the same: kubelet has added the plugin before it notifies.
    spdlog::warn("plugin watcher: {}", st.error().message);
  }
  return e;
}

void PluginWatcher::reconcile() {
  std::vector<Entry> gone;
  {
    std::lock_guard lock(mu_);
    if (forget_) {
      forget_ = false;
      for (auto& [path, e] : registered_) {
        gone.push_back(std::move(e));
      }
      registered_.clear();
      failed_.clear();
    }
  }
  readEvents();  // deletes seen before the scan count for it
  const auto present = scan();
  {
    std::lock_guard lock(mu_);
    for (auto it = registered_.begin(); it != registered_.end();) {
      auto p = present.find(it->first);
      if (p == present.end() || !(p->second == it->second.id)) {
        gone.push_back(std::move(it->second));
        it = registered_.erase(it);
      } else {
        ++it;
      }
    }
    std::erase_if(failed_, [&](const auto& f) {
      auto p = present.find(f.first);
      return p == present.end() || !(p->second == f.second.id);
    });
  }
  for (const auto& e : gone) {
    deregister(e);  // before registering: a re-created socket replaces its old registration
  }
  for (const auto& [path, id] : present) {
    {
      std::lock_guard lock(mu_);
      if (stopping_ || registered_.count(path) != 0) {
        continue;
      }
      if (auto f = failed_.find(path);
          f != failed_.end() && SteadyClock::now() < f->second.retryAt) {
        continue;
      }
    }
    auto e = registerSocket(path, id);
    std::lock_guard lock(mu_);
    if (e) {
      spdlog::info("plugin watcher: registered {} plugin {} (socket {}, endpoint {})",
                   e->plugin.type, e->plugin.name, path, e->plugin.endpoint);
      registered_[path] = std::move(*e);
      failed_.erase(path);
      ++stats_.registrations;
      continue;
    }
    ++stats_.refusals;
    auto [f, fresh] = failed_.try_emplace(path, Failed{id, Backoff(opts_.retry), {}});
    f->second.retryAt = SteadyClock::now() + f->second.backoff.next();
    spdlog::warn("{}", e.error().message);
  }
}

void PluginWatcher::readEvents() {
  if (inotifyFd_ < 0) {
    return;
  }
  alignas(inotify_event) char buf[4096];
  ssize_t n = 0;
  while ((n = ::read(inotifyFd_, buf, sizeof buf)) > 0) {
    for (ssize_t off = 0; off < n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
      if (ev->len > 0 && (ev->mask & (IN_DELETE | IN_MOVED_FROM)) != 0) {
        ++deletions_[(fs::path(opts_.dir) / ev->name).string()];
      }
      off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
    }
  }
}

void PluginWatcher::waitForChange(std::chrono::milliseconds timeout) {
  pollfd fds[2] = {{wakeFd_, POLLIN, 0}, {inotifyFd_, POLLIN, 0}};
  const nfds_t n = inotifyFd_ >= 0 ? 2 : 1;
  if (::poll(fds, n, static_cast<int>(timeout.count())) <= 0) {
    return;
  }
  if ((fds[0].revents & POLLIN) != 0) {
    std::uint64_t count = 0;
    [[maybe_unused]] auto r = ::read(wakeFd_, &count, sizeof count);
  }
  readEvents();
}

void PluginWatcher::run() {
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) {
        return;
      }
    }
    reconcile();
    // Next wake: a change in the directory, or the next retry, or (without inotify) the next
    // rescan; kubelet's reconciler also runs at least every second.
    auto timeout = inotifyFd_ >= 0 ? std::chrono::milliseconds(1000) : opts_.pollInterval;
    {
      std::lock_guard lock(mu_);
      for (const auto& [path, f] : failed_) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(f.retryAt - SteadyClock::now());
        timeout = std::clamp(left, std::chrono::milliseconds(1), timeout);
      }
    }
    waitForChange(timeout);
  }
}

}  // namespace kc::kubelet
