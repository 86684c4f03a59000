#pragma once
// kubelet's plugin watcher (pkg/kubelet/pluginmanager, v1.34) for one directory, kubelet's
// plugins_registry: a plugin announces itself by creating a unix socket there that serves
// pluginregistration.Registration. For every new socket the watcher asks GetInfo, hands the
// answer to the handler of its type (validate, then register) and reports the outcome to the
// plugin with NotifyRegistrationStatus; a socket that disappears (or is replaced by a new one
// at the same path) deregisters the plugin. Refused or failed registrations are tried again
// with kubelet's backoff (500 ms doubling to about 2 min) while the socket stays.
//
// Like kubelet: names starting with "." are ignored, an empty endpoint means the registration
// socket itself, every refusal is worded as kubelet words it ("RegisterPlugin error -- ...").
// Unlike kubelet: only the directory itself is watched (not its subdirectories), and one
// thread does every registration in turn (kubelet runs them in parallel).
//
// The directory is watched with inotify, or, where inotify is not available, rescanned every
// pollInterval. A socket is the same socket while its file (device, inode) stays and no delete
// of its name was seen in between (inotify; a re-created socket may reuse the inode). Without
// inotify a socket re-created with the same inode between two scans goes unnoticed.
// Threads: one watcher thread; the handlers are called from it.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "libcore/base/backoff.hpp"
#include "libcore/base/result.hpp"

namespace kc::kubelet {

// What a plugin answered to GetInfo (endpoint already defaulted to the socket path).
struct PluginInfo {
  std::string type;
  std::string name;
  std::string endpoint;
  std::vector<std::string> versions;
  std::string socketPath;  // the registration socket
};

// kubelet's cache.PluginHandler: one per plugin type.
class PluginHandler {
 public:
  virtual ~PluginHandler() = default;
  // The error is what kubelet puts after "plugin validation failed with err: ".
  virtual Status validatePlugin(const PluginInfo& info) = 0;
  // The error is what kubelet puts after "plugin registration failed with err: ".
  virtual Status registerPlugin(const PluginInfo& info) = 0;
  virtual void deregisterPlugin(const std::string& name, const std::string& endpoint) = 0;
};

struct PluginWatcherOptions {
  std::string dir;
  bool useInotify = true;
  std::chrono::milliseconds pollInterval{200};  // rescan period without inotify
  std::chrono::milliseconds getInfoTimeout{1000};
  std::chrono::milliseconds notifyTimeout{5000};
  BackoffParams retry{std::chrono::milliseconds(500), std::chrono::milliseconds(122000), 2.0, 0.0};
};

class PluginWatcher {
 public:
  // `handlers`: plugin type -> handler (not owned; must outlive the watcher).
  PluginWatcher(PluginWatcherOptions options, std::map<std::string, PluginHandler*> handlers);
  ~PluginWatcher();
  PluginWatcher(const PluginWatcher&) = delete;
  PluginWatcher& operator=(const PluginWatcher&) = delete;

  // Creates the directory and starts watching. Error "invalid" when it cannot be created.
  Status start();
  // Stops the thread; registered plugins are deregistered. Idempotent.
  void stop();
  // A simulated kubelet restart: every plugin is deregistered and forgotten; the sockets still
  // there are registered again (GetInfo, NotifyRegistrationStatus) at the next scan.
  void forgetAll();

  struct Registered {
    std::string socketPath;
    std::string type;
    std::string name;
    std::string endpoint;
  };
  std::vector<Registered> registered() const;

  struct Stats {
    std::uint64_t registrations = 0;
    std::uint64_t refusals = 0;  // refused or failed attempts
    std::uint64_t deregistrations = 0;
  };
  Stats stats() const;

 private:
  struct Identity {
    dev_t dev = 0;
    ino_t ino = 0;
    std::uint64_t deletions = 0;  // deletes of the name seen so far (inotify)
    friend bool operator==(const Identity&, const Identity&) = default;
  };
  struct Failed {
    Identity id;
    Backoff backoff;
    std::chrono::steady_clock::time_point retryAt;
  };
  struct Entry {
    Identity id;
    Registered plugin;
    PluginHandler* handler = nullptr;
  };

  void run();
  std::map<std::string, Identity> scan() const;
  void reconcile();
  Result<Entry> registerSocket(const std::string& path, const Identity& id);
  void deregister(const Entry& e);
  void waitForChange(std::chrono::milliseconds timeout);
  void readEvents();

  PluginWatcherOptions opts_;
  std::map<std::string, PluginHandler*> handlers_;
  int inotifyFd_ = -1;
  int wakeFd_ = -1;
  std::thread thread_;
  std::map<std::string, std::uint64_t> deletions_;  // socket path -> deletes seen (watcher thread)

  mutable std::mutex mu_;  // guards everything below
  bool stopping_ = false;
  bool forget_ = false;
  std::map<std::string, Entry> registered_;  // socket path -> registered plugin
  std::map<std::string, Failed> failed_;     // socket path -> when to try again
  Stats stats_;
};

}  // namespace kc::kubelet
