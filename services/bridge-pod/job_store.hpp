#pragma once
// Where a bridge pod reads its parameters and writes the job's id and status: its ConfigMap
// (`<job>-bridge`, the only object its Role lets it read and update).

#include <map>
#include <memory>
#include <string>

#include "libcore/base/result.hpp"
#include "libcore/kube/client.hpp"

namespace kc::bridge::pod {

using Data = std::map<std::string, std::string>;

class JobStore {
 public:
  virtual ~JobStore() = default;
  virtual Result<Data> read() = 0;
  // Sets `keys` (other keys untouched). Conflicts (someone else updated the object in between)
  // are resolved here by reading again and re-applying; other errors go back to the caller.
  virtual Status write(const Data& keys) = 0;
};

// The ConfigMap through the API server: GET, then PUT with the resourceVersion read (409 ->
// read again, up to `maxConflicts` times).
class ConfigMapStore final : public JobStore {
 public:
  ConfigMapStore(kc::kube::KubeClient& kube, std::string ns, std::string name,
                 int maxConflicts = 10)
      : kube_(kube), ns_(std::move(ns)), name_(std::move(name)), maxConflicts_(maxConflicts) {}
  Result<Data> read() override;
  Status write(const Data& keys) override;
  int conflicts() const { return conflicts_; }

 private:
  kc::kube::KubeClient& kube_;
  std::string ns_;
  std::string name_;
  int maxConflicts_;
  int conflicts_ = 0;
};

}  // namespace kc::bridge::pod
