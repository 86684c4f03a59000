#pragma once
// kubelet's DRA side as one unit for the stand-in: the plugin watcher on plugins_registry
// (plugin_watcher.hpp), the registered DRA drivers (dra_plugins.hpp) and the DRA manager with
// its claim cache (dra_manager.hpp). See docs/kubelet-standin.md, "DRA".

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "libcore/base/result.hpp"
#include "tools/kubelet-standin/dra_manager.hpp"
#include "tools/kubelet-standin/dra_plugins.hpp"
#include "tools/kubelet-standin/plugin_watcher.hpp"

namespace kc::kubelet {

struct DraSideOptions {
  std::string pluginsRegistryDir = "/var/lib/kubelet/plugins_registry";  // as resolved
  std::string checkpointPath;  // <root-dir>/dra_manager_state
  std::chrono::milliseconds callTimeout{std::chrono::seconds(45)};
  std::chrono::milliseconds retryPeriod{std::chrono::seconds(10)};
};

class DraSide {
 public:
  DraSide(DraSideOptions options, DraCallbacks callbacks);
  ~DraSide();
  DraSide(const DraSide&) = delete;
  DraSide& operator=(const DraSide&) = delete;

  // The claim checkpoint; error "invalid" when it is corrupt (the stand-in does not start).
  Status restore();
  // Watches plugins_registry and starts the manager's worker. A directory that cannot be
  // created is logged, not fatal (kubelet runs on without its plugin watcher).
  Status start();
  void stop();
  // A simulated kubelet restart: every DRA plugin is deregistered and registered again from
  // the sockets still in plugins_registry; the claim cache is kept.
  void simulateRestart();

  DraManager& manager() { return *manager_; }
  const DraManager& manager() const { return *manager_; }
  // The manager's state, the registered drivers and the watcher's counters (GET /debug/pods).
  nlohmann::json debugState() const;

 private:
  DraSideOptions opts_;
  std::unique_ptr<DraPlugins> plugins_;
  std::unique_ptr<DraManager> manager_;
  std::unique_ptr<PluginWatcher> watcher_;
};

}  // namespace kc::kubelet
