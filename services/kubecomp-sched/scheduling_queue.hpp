#pragma once
// kubecomp-sched's scheduling queue (kube-scheduler's backend/queue, in small): the pods of ours
// waiting for a decision, in the one queue order of libcore/alloc/pod_order.hpp (spec.priority
// highest first, then creationTimestamp: FCFS within a priority, then namespace and name), and the
// pods backing off after a failed attempt, each until its own time: initial backoff doubled per
// attempt up to the maximum (kube-scheduler's podInitialBackoffSeconds / podMaxBackoffSeconds).
// It knows pods by key only; what a pod is and whether it still wants a decision is the
// scheduler cache's to say.
//
// Not thread-safe: the scheduler cache's mutex guards it.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>

#include "libcore/alloc/pod_order.hpp"
#include "libcore/base/clock.hpp"

namespace kc::sched {

class SchedulingQueue {
 public:
  using Clock = kc::Clock;
  // A pod's place in the queue: alloc::podBefore (priority, created, namespace, name); the key
  // ("ns/name") identifies it.
  struct Order {
    std::int32_t priority = 0;
    std::int64_t created = 0;  // creationTimestamp (s)
    std::string ns;
    std::string name;
    std::string key;

    friend bool operator<(const Order& a, const Order& b) {
      const alloc::PodOrderKey ka{a.priority, a.created, a.ns, a.name};
      const alloc::PodOrderKey kb{b.priority, b.created, b.ns, b.name};
      if (alloc::podBefore(ka, kb) || alloc::podBefore(kb, ka)) {
        return alloc::podBefore(ka, kb);
      }
      return a.key < b.key;
    }
  };

  SchedulingQueue(std::chrono::milliseconds initialBackoff, std::chrono::milliseconds maxBackoff)
      : initialBackoff_(initialBackoff), maxBackoff_(maxBackoff) {}

  // Into the active queue (no-op if there already; a backing-off pod stays backing off too).
  void push(const Order& order);
  // Out of the active queue; its backoff, if any, stands.
  void remove(const std::string& key);
  // Out of the backoff wait only (the attempt count stays).
  void unwait(const std::string& key);
  // Out of both, and its attempt count forgotten: the pod is no longer ours to decide.
  void forget(const std::string& key);
  // Out of the active queue into the backoff wait, one more failed attempt counted.
  void backoff(const std::string& key, Clock::time_point now);
  void clear();

  bool queued(const std::string& key) const { return index_.contains(key); }
  bool waiting(const std::string& key) const { return waiting_.contains(key); }
  bool empty() const { return active_.empty(); }
  std::size_t activeCount() const { return active_.size(); }
  std::size_t waitingCount() const { return waiting_.size(); }

  // The head of the active queue, taken out of it.
  std::optional<std::string> pop();
  // Every pod of the active queue, taken out of it (a queue policy's pass decides them all).
  std::set<std::string> takeActive();
  const std::set<std::string>& waitingKeys() const { return waiting_; }

  // Backoffs that ran out by `now` (all of them if `all`: something was released) go back to
  // the active queue with the order `orderOf` gives; a key for which it gives nothing (the pod
  // no longer wants a decision) leaves the wait.
  void release(Clock::time_point now, bool all,
               const std::function<std::optional<Order>(const std::string&)>& orderOf);
  // The earliest backoff end, if before `bound`, else `bound`.
  Clock::time_point nextWake(Clock::time_point bound) const;

 private:
  struct Backoff {
    std::uint32_t attempts = 0;
    Clock::time_point until{};
  };

  std::chrono::milliseconds initialBackoff_;
  std::chrono::milliseconds maxBackoff_;
  std::set<Order> active_;
  std::unordered_map<std::string, Order> index_;      // key -> its entry in active_
  std::unordered_map<std::string, Backoff> backoff_;  // attempts, and until when it waits
  std::set<std::string> waiting_;                     // pods in backoff
};

}  // namespace kc::sched
