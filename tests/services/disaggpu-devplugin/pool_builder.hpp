#pragma once
// Builder for GPUPool objects as reconfig-mgr writes them (tests only):
//   PoolBuilder("pool-a").gpu("c0.1", "n1").gpu("c0.2", "n1", {.draining = true}).json()

#include <nlohmann/json.hpp>
#include <string>

namespace kc::testing {

struct GpuOpts {
  bool draining = false;
  std::string health = "Healthy";
  std::string chassis;  // default: the id's part before the first '.'
  std::string uuid;     // default: "GPU-" + id
};

class PoolBuilder {
 public:
  explicit PoolBuilder(std::string name) {
    obj_ = {{"apiVersion", "kubecomp.io/v1alpha1"},
            {"kind", "GPUPool"},
            {"metadata", {{"name", std::move(name)}}},
            {"spec",
             {{"chassis", {{{"name", "c0"}, {"driver", "h3"}, {"endpoint", "http://127.0.0.1:1"}}}},
              {"nodes", {{{"name", "n1"}, {"hostPort", "1"}}}}}},
            {"status", {{"gpus", nlohmann::json::array()}}}};
  }
  PoolBuilder& gpu(const std::string& id, const std::string& node, GpuOpts o = {}) {
    nlohmann::json g = {{"id", id},
                        {"uuid", o.uuid.empty() ? "GPU-" + id : o.uuid},
                        {"chassis", o.chassis.empty() ? id.substr(0, id.find('.')) : o.chassis},
                        {"node", node},
                        {"health", o.health},
                        {"draining", o.draining}};
    obj_["status"]["gpus"].push_back(std::move(g));
    return *this;
  }
  PoolBuilder& rawGpu(nlohmann::json g) {
    obj_["status"]["gpus"].push_back(std::move(g));
    return *this;
  }
  nlohmann::json json() const { return obj_; }

 private:
  nlohmann::json obj_;
};

}  // namespace kc::testing
