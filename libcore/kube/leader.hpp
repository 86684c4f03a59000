#pragma once
// Leader election on a coordination.k8s.io/v1 Lease, following client-go's algorithm:
// a candidate takes the lease only when it is free or its holder has not renewed it for
// leaseDuration as measured by THIS process's clock since it last saw the record change
// (renewTime values from other hosts are never compared with the local clock). The leader
// renews every retryPeriod; if it cannot renew for renewDeadline it steps down and calls
// onStoppedLeading at once, so a daemon stops acting before anyone else can take over
// (renewDeadline < leaseDuration). All writes are optimistic (resourceVersion → 409).
//
// Time bounds: every lease request of the elector bypasses the client's QPS bucket, is not
// retried inside the client, and carries a deadline (CallOptions) of lastRenew +
// renewDeadline, where lastRenew is the START of the last successful renew attempt. A stalled
// or failing API server therefore cannot hold the elector past that point: leader_ turns false
// and onStoppedLeading runs at most renewDeadline (+ the HTTP client's timer and scheduling
// latency) after lastRenew, while another candidate can take over only leaseDuration after it
// last saw the record change, which is no earlier than lastRenew.
// Like client-go this is not fencing: a process paused (SIGSTOP, swap) may act until it notices.
//
// Callbacks: onStartedLeading runs on its own thread, so it may run the daemon's main loop; it
// must return once onStoppedLeading (or stop()) told it to, because the next term waits for it
// and stop()/the destructor join it. It must not call stop() itself. onStoppedLeading and
// onNewLeader run on the elector thread and must return promptly.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "libcore/kube/client.hpp"

namespace kc::kube {

struct LeaderElectionConfig {
  std::string ns = "kube-system";
  std::string name;      // Lease name
  std::string identity;  // unique per candidate, e.g. "<host>_<uuid>"
  std::chrono::milliseconds leaseDuration{15'000};
  std::chrono::milliseconds renewDeadline{10'000};
  std::chrono::milliseconds retryPeriod{2'000};
  double jitterFactor = 1.2;  // candidates wait retryPeriod * (1 + U[0, jitter-1])
  bool releaseOnStop = true;  // on stop(): empty holderIdentity so a successor need not wait
  std::function<void()> onStartedLeading;
  std::function<void()> onStoppedLeading;
  std::function<void(const std::string& holder)> onNewLeader;
  // Time of the election (lease expiry by the local clock, waits, renewTime stamps). Not
  // owned; null = the client's clock.
  kc::Clock* clock = nullptr;
  std::function<double()> rand01;  // injectable jitter
};

class LeaderElector {
 public:
  // Errors on an inconsistent config (leaseDuration > renewDeadline > jitter*retryPeriod).
  static kc::Result<std::unique_ptr<LeaderElector>> create(KubeClient& client,
                                                           LeaderElectionConfig config);
  ~LeaderElector();
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  void start();
  // Stops campaigning; a leader steps down (onStoppedLeading) and releases if configured.
  void stop();
  bool isLeader() const { return leader_.load(); }
  std::string observedHolder() const;

  // One attempt (exposed for tests): true if this candidate holds the lease afterwards.
  bool tryAcquireOrRenew();

 private:
  LeaderElector(KubeClient& client, LeaderElectionConfig config);
  void run();
  bool sleepFor(std::chrono::milliseconds d);
  void release();
  bool tryAcquireOrRenew(std::chrono::steady_clock::time_point deadline);
  void noteFailure(std::string_view what, const std::string& message);
  CallOptions bounded(std::chrono::steady_clock::time_point deadline) const;
  void joinStarted();
  std::chrono::milliseconds jittered(std::chrono::milliseconds d);

  KubeClient& client_;
  LeaderElectionConfig cfg_;
  kc::Clock& clock_;
  std::atomic<bool> leader_{false};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  std::thread started_;    // runs onStartedLeading of the current/last term
  mutable std::mutex mu_;  // guards observed*, and the stop wait
  std::condition_variable cv_;
  nlohmann::json observedLease_;  // last lease object seen (with resourceVersion)
  std::string observedSpec_;      // its spec dumped, to detect changes
  std::chrono::steady_clock::time_point observedTime_{};
  std::string observedHolder_;
  std::string lastFailure_;  // the last failure logged, so a repeat is not logged again
};

}  // namespace kc::kube
