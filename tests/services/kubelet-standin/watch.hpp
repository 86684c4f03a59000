#pragma once
// Waiting on observed state in the stand-in's tests: Watcher wakes on every informer change
// of one resource and re-checks a predicate over its store; eventually() polls state that has
// no watch (the stand-in's /debug/pods, files). Both take a deadline that is only a failure
// timeout, never the oracle.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "libcore/kube/client.hpp"
#include "libcore/kube/informer.hpp"
#include "tests/support/wait.hpp"

namespace kc::kubelet::testing {

class Watcher {
 public:
  Watcher(kube::KubeClient& client, kube::GroupVersionResource r, std::string fieldSelector = {})
      : informer_(client, options(std::move(r), std::move(fieldSelector))) {
    // Taking mu_ before notifying: a predicate checked under mu_ cannot miss a change.
    auto wake = [this] {
      { std::lock_guard lock(mu_); }
      cv_.notify_all();
    };
    informer_.addHandler({[wake](const kube::ObjectPtr&) { wake(); },
                          [wake](const kube::ObjectPtr&, const kube::ObjectPtr&) { wake(); },
                          [wake](const kube::ObjectPtr&) { wake(); }});
    informer_.start();
    informer_.waitForSync(std::chrono::seconds(10));
  }
  ~Watcher() { informer_.stop(); }
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

  bool until(const std::function<bool(const kube::Store&)>& pred,
             std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(informer_.store()); });
  }
  kube::ObjectPtr get(const std::string& ns, const std::string& name) {
    return informer_.store().get(ns, name);
  }

 private:
  static kube::InformerOptions options(kube::GroupVersionResource r, std::string fieldSelector) {
    kube::InformerOptions o;
    o.resource = std::move(r);
    o.fieldSelector = std::move(fieldSelector);
    return o;
  }
  kube::Informer informer_;
  std::mutex mu_;  // held by predicates and by the wake-up
  std::condition_variable cv_;
};

// The suite's one wait helper (tests/support/wait.hpp).
using kc::testing::eventually;

}  // namespace kc::kubelet::testing
