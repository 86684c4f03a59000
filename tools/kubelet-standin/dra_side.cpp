#include "tools/kubelet-standin/dra_side.hpp"

#include <spdlog/spdlog.h>

namespace kc::kubelet {

DraSide::DraSide(DraSideOptions options, DraCallbacks callbacks) : opts_(std::move(options)) {
  plugins_ = std::make_unique<DraPlugins>(opts_.callTimeout);
  DraManagerOptions m;
  m.checkpointPath = opts_.checkpointPath;
  m.retryPeriod = opts_.retryPeriod;
  manager_ = std::make_unique<DraManager>(m, *plugins_, std::move(callbacks));
  PluginWatcherOptions w;
  w.dir = opts_.pluginsRegistryDir;
  watcher_ = std::make_unique<PluginWatcher>(
      w, std::map<std::string, PluginHandler*>{{std::string(kDraPluginType), plugins_.get()}});
}

DraSide::~DraSide() {
  stop();
}

Status DraSide::restore() {
  return manager_->restore();
}

Status DraSide::start() {
  manager_->start();
  if (auto st = watcher_->start(); !st) {
    // kubelet logs this and runs on without a plugin watcher: no DRA plugin can register.
    spdlog::error("the plugin watcher did not start: {}", st.error().message);
  }
  return okStatus();
}

void DraSide::stop() {
  watcher_->stop();
  manager_->stop();
}

void DraSide::simulateRestart() {
  watcher_->forgetAll();
}

nlohmann::json DraSide::debugState() const {
  nlohmann::json out = manager_->debugState();
  const auto st = watcher_->stats();
  out["pluginWatcher"] = {{"dir", opts_.pluginsRegistryDir},
                          {"registrations", st.registrations},
                          {"refusals", st.refusals},
                          {"deregistrations", st.deregistrations}};
  return out;
}

}  // namespace kc::kubelet
