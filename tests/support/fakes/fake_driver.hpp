#pragma once
// FakeDriver: an in-memory kc::fabric::FabricDriver for one chassis, so code built on the
// fabric interface (the pool, reconfig-mgr, the device plugin) is unit-tested without the
// chassis simulator. It keeps the FabricDriver contract (docs/fabric.md): pool-wide GPU ids
// "<chassis>.<local id>", idempotent attach/detach (changed == false, attempts == 0), conflict
// when attached elsewhere, not_found for unknown GPUs and hosts, invalid for ids of another
// chassis, unhealthy GPUs never attached. Faults: failNext() makes the next calls of one
// operation fail with a given error, and nothing changes.
//
// FabricCallTracker, shared by several fakes, observes concurrency: how many calls are in
// flight at once, per chassis and over distinct chassis. With setBarrier(n) every call waits
// inside the driver until n calls are inside together (a generation barrier: the n-th arrival
// releases the other n-1). A test proves parallelism with it, not with timing: if the code
// under test never lets n calls overlap, the barrier is not met, the waiting call gives up
// after the guard time, records the miss (barrierMisses()) and the barrier is switched off so
// the test ends with a failure instead of hanging.

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "libcore/base/result.hpp"
#include "libcore/fabric/driver.hpp"
#include "libcore/fabric/types.hpp"

namespace kc::testing {

class FabricCallTracker {
 public:
  // Every call waits until `parties` calls are inside at once; 0 switches it off. `guard` only
  // bounds a wait that would otherwise hang; it is never what a test checks.
  void setBarrier(int parties, std::chrono::milliseconds guard = std::chrono::seconds(10)) {
    std::lock_guard<std::mutex> lock(mu_);
    parties_ = parties;
    guard_ = guard;
    arrived_ = 0;
  }

  int maxInFlight() const {
    std::lock_guard<std::mutex> lock(mu_);
    return maxInFlight_;
  }
  int maxInFlight(const std::string& chassis) const {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = maxPerChassis_.find(chassis);
    return it == maxPerChassis_.end() ? 0 : it->second;
  }
  // Most distinct chassis that had a call in flight at the same moment.
  int maxChassisInFlight() const {
    std::lock_guard<std::mutex> lock(mu_);
    return maxChassis_;
  }
  // Barrier generations completed, and waits that gave up because the barrier was not met.
  int barriersMet() const {
    std::lock_guard<std::mutex> lock(mu_);
    return generation_;
  }
  int barrierMisses() const {
    std::lock_guard<std::mutex> lock(mu_);
    return misses_;
  }
  int calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

  // Called by FakeDriver around every operation.
  void enter(const std::string& chassis) {
    std::unique_lock<std::mutex> lock(mu_);
    ++calls_;
    ++inFlight_;
    maxInFlight_ = std::max(maxInFlight_, inFlight_);
    const int here = ++perChassis_[chassis];
    maxPerChassis_[chassis] = std::max(maxPerChassis_[chassis], here);
    int busy = 0;
    for (const auto& [name, n] : perChassis_) {
      busy += n > 0 ? 1 : 0;
    }
    maxChassis_ = std::max(maxChassis_, busy);
    if (parties_ <= 0) {
      return;
    }
    const int myGeneration = generation_;
    if (++arrived_ >= parties_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    if (!cv_.wait_for(lock, guard_, [&] { return generation_ != myGeneration || parties_ <= 0; })) {
      ++misses_;
      parties_ = 0;  // switched off: the other calls of a failing test must not wait too
      arrived_ = 0;
      cv_.notify_all();
    }
  }
  void leave(const std::string& chassis) {
    std::lock_guard<std::mutex> lock(mu_);
    --inFlight_;
    --perChassis_[chassis];
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int calls_ = 0;
  int inFlight_ = 0;
  int maxInFlight_ = 0;
  int maxChassis_ = 0;
  std::map<std::string, int> perChassis_;
  std::map<std::string, int> maxPerChassis_;
  int parties_ = 0;
  std::chrono::milliseconds guard_{10000};
  int arrived_ = 0;
  int generation_ = 0;
  int misses_ = 0;
};

class FakeDriver final : public fabric::FabricDriver {
 public:
  // A chassis with the given hosts and no GPUs; `tracker` (optional) must outlive the driver.
  explicit FakeDriver(std::string chassis, std::vector<std::string> hosts = {"0", "48"},
                      FabricCallTracker* tracker = nullptr)
      : name_(std::move(chassis)), hosts_(std::move(hosts)), tracker_(tracker) {}

  // Adds GPU <chassis>.<localId> with UUID "GPU-<chassis>-<localId>".
  FakeDriver& addGpu(const std::string& localId, std::optional<std::string> host = std::nullopt,
                     std::string model = "Tesla V100-PCIE-32GB") {
    std::lock_guard<std::mutex> lock(mu_);
    gpus_.push_back(fabric::GpuInfo{fabric::makeGpuId(name_, localId), name_, localId,
                                    "GPU-" + name_ + "-" + localId, std::move(model),
                                    std::move(host), fabric::GpuHealth::kOk, ""});
    return *this;
  }
  void setHealth(const std::string& localId, fabric::GpuHealth health, std::string detail = {}) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& g : gpus_) {
      if (g.localId == localId) {
        g.health = health;
        g.healthDetail = std::move(detail);
      }
    }
  }
  // The next `times` calls of `op` ("inventory", "attach", "detach") fail with `error` and
  // change nothing; times < 0: until clearFaults().
  void failNext(const std::string& op, Error error, int times = 1) {
    std::lock_guard<std::mutex> lock(mu_);
    faults_[op] = {std::move(error), times};
  }
  void clearFaults() {
    std::lock_guard<std::mutex> lock(mu_);
    faults_.clear();
  }
  // Every call as "inventory", "attach <gpu> <host>", "detach <gpu>", in order.
  std::vector<std::string> callLog() const {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }

  std::string_view dialect() const override { return "fake"; }
  const std::string& name() const override { return name_; }

  Result<fabric::Inventory> inventory() override {
    Visit visit(*this, "inventory");
    if (auto fault = takeFault("inventory")) {
      return *fault;
    }
    std::lock_guard<std::mutex> lock(mu_);
    fabric::Inventory inv{gpus_, hosts_, {}};
    std::sort(inv.gpus.begin(), inv.gpus.end(),
              [](const fabric::GpuInfo& a, const fabric::GpuInfo& b) { return a.id < b.id; });
    std::sort(inv.hosts.begin(), inv.hosts.end());
    return inv;
  }

  Result<fabric::MoveReport> attach(const std::string& gpuId, const std::string& host) override {
    Visit visit(*this, "attach " + gpuId + " " + host);
    if (host.empty()) {
      return makeError(fabric::errc::kInvalid, "attach " + gpuId + ": empty host");
    }
    auto gpu = find(gpuId);
    if (!gpu) {
      return gpu.error();
    }
    if (auto fault = takeFault("attach")) {
      return *fault;
    }
    std::lock_guard<std::mutex> lock(mu_);
    fabric::GpuInfo& g = gpus_[*gpu];
    if (std::find(hosts_.begin(), hosts_.end(), host) == hosts_.end()) {
      return makeError(fabric::errc::kNotFound, "chassis " + name_ + " has no host " + host);
    }
    fabric::MoveReport report{gpuId, g.hostPort, host, false, 0, {}};
    if (g.hostPort == host) {
      return report;
    }
    if (g.hostPort) {
      return makeError(fabric::errc::kConflict,
                       "GPU " + gpuId + " is attached to " + *g.hostPort + "; detach it first");
    }
    if (g.health != fabric::GpuHealth::kOk) {
      return makeError(fabric::errc::kUnhealthy, "GPU " + gpuId + " is unhealthy; not attaching");
    }
    g.hostPort = host;
    report.changed = true;
    report.attempts = 1;
    return report;
  }

  Result<fabric::MoveReport> detach(const std::string& gpuId) override {
    Visit visit(*this, "detach " + gpuId);
    auto gpu = find(gpuId);
    if (!gpu) {
      return gpu.error();
    }
    if (auto fault = takeFault("detach")) {
      return *fault;
    }
    std::lock_guard<std::mutex> lock(mu_);
    fabric::GpuInfo& g = gpus_[*gpu];
    fabric::MoveReport report{gpuId, g.hostPort, std::nullopt, false, 0, {}};
    if (g.hostPort) {
      g.hostPort.reset();
      report.changed = true;
      report.attempts = 1;
    }
    return report;
  }

 private:
  // Logs the call and tells the tracker it is in flight for the whole call.
  class Visit {
   public:
    Visit(FakeDriver& d, std::string what) : d_(d) {
      {
        std::lock_guard<std::mutex> lock(d_.mu_);
        d_.log_.push_back(std::move(what));
      }
      if (d_.tracker_) {
        d_.tracker_->enter(d_.name_);
      }
    }
    ~Visit() {
      if (d_.tracker_) {
        d_.tracker_->leave(d_.name_);
      }
    }
    Visit(const Visit&) = delete;
    Visit& operator=(const Visit&) = delete;

   private:
    FakeDriver& d_;
  };

  Result<std::size_t> find(const std::string& gpuId) const {
    const auto parts = fabric::splitGpuId(gpuId);
    if (!parts || parts->chassis != name_) {
      return makeError(fabric::errc::kInvalid,
                       "\"" + gpuId + "\" is not a GPU id of chassis " + name_);
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
      if (gpus_[i].id == gpuId) {
        return i;
      }
    }
    return makeError(fabric::errc::kNotFound, "chassis " + name_ + " has no GPU " + parts->localId);
  }

  std::optional<Error> takeFault(const std::string& op) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = faults_.find(op);
    if (it == faults_.end()) {
      return std::nullopt;
    }
    Error e = it->second.first;
    if (it->second.second > 0 && --it->second.second == 0) {
      faults_.erase(it);
    }
    return e;
  }

  const std::string name_;
  const std::vector<std::string> hosts_;
  FabricCallTracker* const tracker_;
  mutable std::mutex mu_;  // guards the members below
  std::vector<fabric::GpuInfo> gpus_;
  std::map<std::string, std::pair<Error, int>> faults_;
  std::vector<std::string> log_;
};

}  // namespace kc::testing
