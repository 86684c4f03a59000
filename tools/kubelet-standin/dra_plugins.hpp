#pragma once
// The registered DRA drivers' plugins (kubelet's DRAPluginManager, v1.34): the plugin watcher's
// handler for type "DRAPlugin", and the client of each plugin's DRAPlugin service. A driver may
// have several plugins (a new socket of the same driver during a rolling update); the newest
// one is used, and deregistering one falls back to the one before. Each plugin is spoken to in
// the service kubelet chose at registration (v1 or v1beta1); callers see v1 messages only.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dra/v1/api.pb.h"
#include "libcore/base/result.hpp"
#include "tools/kubelet-standin/dra_rules.hpp"
#include "tools/kubelet-standin/plugin_watcher.hpp"

namespace kc::kubelet {

namespace drav1 = k8s::io::kubelet::pkg::apis::dra::v1;

class DraPlugins final : public PluginHandler {
 public:
  // `callTimeout`: deadline of each NodePrepareResources / NodeUnprepareResources (kubelet:
  // 45 s).
  explicit DraPlugins(std::chrono::milliseconds callTimeout);
  ~DraPlugins() override;
  DraPlugins(const DraPlugins&) = delete;
  DraPlugins& operator=(const DraPlugins&) = delete;

  Status validatePlugin(const PluginInfo& info) override;
  Status registerPlugin(const PluginInfo& info) override;
  void deregisterPlugin(const std::string& name, const std::string& endpoint) override;

  bool registered(const std::string& driver) const;

  // Error texts as kubelet's: "DRA driver <d> is not registered", or the call's error as Go
  // prints a gRPC status ("rpc error: code = ... desc = ..."), code "unavailable".
  Result<drav1::NodePrepareResourcesResponse> prepare(
      const std::string& driver, const drav1::NodePrepareResourcesRequest& request);
  Result<drav1::NodeUnprepareResourcesResponse> unprepare(
      const std::string& driver, const drav1::NodeUnprepareResourcesRequest& request);

  // [{"driver", "endpoint", "service"}] newest last, for GET /debug/pods.
  nlohmann::json debugState() const;

  struct Stats {
    std::uint64_t prepareCalls = 0;
    std::uint64_t unprepareCalls = 0;
  };
  Stats stats() const;

 private:
  struct Plugin;
  Result<std::shared_ptr<Plugin>> newest(const std::string& driver) const;

  std::chrono::milliseconds callTimeout_;
  mutable std::mutex mu_;  // guards plugins_ and stats_
  std::map<std::string, std::vector<std::shared_ptr<Plugin>>> plugins_;  // in registration order
  Stats stats_;
};

}  // namespace kc::kubelet
