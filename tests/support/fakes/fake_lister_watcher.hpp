#pragma once
// FakeListerWatcher: an in-memory kc::kube::ListerWatcher that a test drives by hand, so an
// Informer (and every daemon built on one) runs without the API server double.
//
// It keeps what a server keeps for one resource: the current objects, a resourceVersion counter
// and the history of watch events. upsert()/erase() change the objects and append ADDED /
// MODIFIED / DELETED to the history; a watch from version R replays history after R, then
// blocks for more. compact() forgets history (a watch from an older version gets HTTP 410, as
// the real server answers), expireWatches() sends the 410 ERROR event to open watches. Faults
// for the next call: failNextList / failNextWatch. Everything is counted, and a test waits for
// what the informer did (awaitWatches, awaitListCalls) instead of sleeping.
//
// Paging: honours limit / continue over a snapshot taken at the first page; dropSnapshots()
// makes the next continue token stale (410), like a compacted etcd snapshot.

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "libcore/kube/api_error.hpp"
#include "libcore/kube/lister_watcher.hpp"
#include "libcore/kube/store.hpp"
#include "libcore/net/http_client.hpp"

namespace kc::testing {

class FakeListerWatcher final : public kc::kube::ListerWatcher {
 public:
  using json = nlohmann::json;

  // ---- server state -------------------------------------------------------------------------
  // Creates or replaces the object (keyed by namespace/name), stamps the next resourceVersion
  // into it and records ADDED or MODIFIED. Returns the version.
  std::int64_t upsert(json obj) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::int64_t rv = ++rv_;
    obj["metadata"]["resourceVersion"] = std::to_string(rv);
    const std::string key = kc::kube::objectKey(obj);
    const bool known = objects_.count(key) > 0;
    objects_[key] = obj;
    history_.push_back({rv, known ? "MODIFIED" : "ADDED", std::move(obj)});
    changed_.notify_all();
    return rv;
  }
  // Deletes the object; records DELETED with its last state at a new version. false if absent.
  bool erase(const std::string& ns, const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = objects_.find(ns.empty() ? name : ns + "/" + name);
    if (it == objects_.end()) {
      return false;
    }
    json last = std::move(it->second);
    objects_.erase(it);
    const std::int64_t rv = ++rv_;
    last["metadata"]["resourceVersion"] = std::to_string(rv);
    history_.push_back({rv, "DELETED", std::move(last)});
    changed_.notify_all();
    return true;
  }
  // A raw event, delivered as is (no change to the objects): odd types, malformed objects.
  void pushRawEvent(std::string type, json object) {
    std::lock_guard<std::mutex> lock(mu_);
    history_.push_back({rv_, std::move(type), std::move(object), /*raw=*/true});
    changed_.notify_all();
  }
  // A BOOKMARK at the current version.
  void bookmark() {
    pushRawEvent("BOOKMARK",
                 json{{"metadata", {{"resourceVersion", std::to_string(currentVersion())}}}});
  }
  // Forgets the history up to the current version: watches from older versions get HTTP 410
  // (open watches go on).
  void compact() {
    std::lock_guard<std::mutex> lock(mu_);
    compactedTo_ = rv_;
  }
  // Compacts and sends an ERROR event (code 410, reason Expired) to every watch open now, after
  // the events recorded before it; then that watch ends (as the real server closes it).
  void expireWatches() {
    std::lock_guard<std::mutex> lock(mu_);
    compactedTo_ = rv_;
    Event ev{rv_, "ERROR",
             json{{"kind", "Status"},
                  {"apiVersion", "v1"},
                  {"status", "Failure"},
                  {"message", "too old resource version"},
                  {"reason", "Expired"},
                  {"code", 410}},
             /*raw=*/true};
    ev.forWatchesBefore = calls_.watches.size();
    history_.push_back(std::move(ev));
    changed_.notify_all();
  }
  // Ends every open watch cleanly (as timeoutSeconds does) after the events it has already seen.
  void closeWatches() {
    std::lock_guard<std::mutex> lock(mu_);
    ++closeGeneration_;
    changed_.notify_all();
  }
  // Holds back delivery to watches (they stay open) until resume(): lets a test queue events
  // first and release them at once.
  void pause() {
    std::lock_guard<std::mutex> lock(mu_);
    paused_ = true;
  }
  void resume() {
    std::lock_guard<std::mutex> lock(mu_);
    paused_ = false;
    changed_.notify_all();
  }
  void failNextList(kc::kube::ApiError e) {
    std::lock_guard<std::mutex> lock(mu_);
    listFaults_.push_back(std::move(e));
  }
  void failNextWatch(kc::kube::ApiError e) {
    std::lock_guard<std::mutex> lock(mu_);
    watchFaults_.push_back(std::move(e));
  }
  void dropSnapshots() {
    std::lock_guard<std::mutex> lock(mu_);
    snapshots_.clear();
  }
  std::int64_t currentVersion() const {
    std::lock_guard<std::mutex> lock(mu_);
    return rv_;
  }

  // ---- what the informer did ------------------------------------------------------------------
  struct Calls {
    std::vector<kc::kube::ListOptions> lists;
    std::vector<kc::kube::ListOptions> watches;
  };
  Calls calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  std::size_t openWatches() const {
    std::lock_guard<std::mutex> lock(mu_);
    return open_;
  }
  // Blocks until `n` watch calls have started and one is open, i.e. the informer is waiting
  // for events. `guard` is real time against a hanging test only.
  bool awaitWatches(std::size_t n,
                    std::chrono::milliseconds guard = std::chrono::seconds(30)) const {
    std::unique_lock<std::mutex> lock(mu_);
    return calledCv_.wait_for(lock, guard, [&] { return calls_.watches.size() >= n && open_ > 0; });
  }
  bool awaitListCalls(std::size_t n,
                      std::chrono::milliseconds guard = std::chrono::seconds(30)) const {
    std::unique_lock<std::mutex> lock(mu_);
    return calledCv_.wait_for(lock, guard, [&] { return calls_.lists.size() >= n; });
  }
  // Blocks until no open watch has history left to deliver (everything was handed over).
  bool awaitDelivered(std::chrono::milliseconds guard = std::chrono::seconds(30)) const {
    std::unique_lock<std::mutex> lock(mu_);
    return calledCv_.wait_for(lock, guard,
                              [&] { return open_ > 0 && deliveredTo_ >= historyEnd(); });
  }

  // ---- ListerWatcher ------------------------------------------------------------------------
  kc::kube::ApiResult<kc::kube::ListMeta> list(const kc::kube::ListOptions& opts,
                                               const std::function<void(json&&)>& onItem,
                                               net::CancelToken* /*cancel*/) override {
    std::vector<json> page;
    kc::kube::ListMeta meta;
    {
      std::lock_guard<std::mutex> lock(mu_);
      calls_.lists.push_back(opts);
      calledCv_.notify_all();
      if (!listFaults_.empty()) {
        auto e = std::move(listFaults_.front());
        listFaults_.erase(listFaults_.begin());
        return e;
      }
      std::size_t offset = 0;
      std::uint64_t snapId = 0;
      if (!opts.continueToken.empty()) {
        const auto colon = opts.continueToken.find(':');
        snapId = std::stoull(opts.continueToken.substr(0, colon));
        offset = std::stoull(opts.continueToken.substr(colon + 1));
        if (snapshots_.count(snapId) == 0) {
          kc::kube::ApiError e;
          e.httpCode = 410;
          e.reason = "Expired";
          e.message = "continue token too old";
          return e;
        }
      } else {
        snapId = nextSnapshot_++;
        Snapshot s;
        s.rv = rv_;
        for (const auto& [key, obj] : objects_) {
          s.items.push_back(obj);
        }
        snapshots_[snapId] = std::move(s);
      }
      const Snapshot& snap = snapshots_[snapId];
      const std::size_t end =
          opts.limit > 0
              ? std::min(snap.items.size(), offset + static_cast<std::size_t>(opts.limit))
              : snap.items.size();
      page.assign(snap.items.begin() + static_cast<std::ptrdiff_t>(offset),
                  snap.items.begin() + static_cast<std::ptrdiff_t>(end));
      meta.resourceVersion = std::to_string(snap.rv);
      if (end < snap.items.size()) {
        meta.continueToken = std::to_string(snapId) + ":" + std::to_string(end);
      } else {
        snapshots_.erase(snapId);
      }
    }
    meta.itemCount = page.size();
    for (auto& item : page) {
      onItem(std::move(item));
    }
    return meta;
  }

  kc::kube::ApiStatus watch(const kc::kube::ListOptions& opts,
                            const std::function<bool(kc::kube::WatchEvent&&)>& onEvent,
                            net::CancelToken* cancel,
                            std::chrono::milliseconds /*idleTimeout*/) override {
    bool cancelled = false;  // guarded by mu_
    if (cancel != nullptr) {
      // Set before taking mu_: the hook runs at once when the token is already cancelled.
      cancel->setHook([this, &cancelled] {
        std::lock_guard<std::mutex> hookLock(mu_);
        cancelled = true;
        changed_.notify_all();
      });
    }
    struct HookGuard {
      net::CancelToken* token;
      ~HookGuard() {
        if (token != nullptr) {
          token->clearHook();
        }
      }
    } hookGuard{cancel};
    std::unique_lock<std::mutex> lock(mu_);
    const std::size_t watchNo = calls_.watches.size();
    calls_.watches.push_back(opts);
    if (!watchFaults_.empty()) {
      auto e = std::move(watchFaults_.front());
      watchFaults_.erase(watchFaults_.begin());
      calledCv_.notify_all();
      return e;
    }
    std::int64_t from = 0;
    if (opts.resourceVersion && !opts.resourceVersion->empty()) {
      from = std::stoll(*opts.resourceVersion);
    }
    if (from < compactedTo_) {
      calledCv_.notify_all();
      kc::kube::ApiError e;
      e.httpCode = 410;
      e.reason = "Expired";
      e.message = "too old resource version: " + std::to_string(from) + " (" +
                  std::to_string(compactedTo_) + ")";
      return e;
    }
    ++open_;
    // Replays history after `from`: changes with a newer version, raw events pushed at `from`
    // or later (they carry the version current when they were pushed).
    auto wanted = [from, watchNo](const Event& ev) {
      if (ev.forWatchesBefore > 0) {
        return watchNo < ev.forWatchesBefore;
      }
      return ev.rv > from || (ev.raw && ev.rv >= from);
    };
    std::size_t pos = 0;
    while (pos < history_.size() && !wanted(history_[pos])) {
      ++pos;
    }
    const std::uint64_t closeGen = closeGeneration_;
    std::optional<kc::kube::ApiStatus> result;
    deliveredTo_ = pos;
    calledCv_.notify_all();
    while (!result) {
      changed_.wait(lock, [&] {
        return cancelled || closeGeneration_ != closeGen || (!paused_ && pos < history_.size());
      });
      if (cancelled) {
        result = kc::kube::ApiStatus(kc::kube::transportError("cancelled"));
        break;
      }
      while (!paused_ && pos < history_.size()) {
        const Event& ev = history_[pos++];
        deliveredTo_ = pos;
        if (!wanted(ev)) {
          continue;
        }
        kc::kube::WatchEvent we{ev.type, ev.object};
        const bool last = ev.forWatchesBefore > 0;  // the server closes after an ERROR
        lock.unlock();
        const bool more = onEvent(std::move(we));
        lock.lock();
        if (!more || last) {
          result = kc::kube::ApiStatus(kc::Ok{});
          break;
        }
      }
      calledCv_.notify_all();
      if (result) {
        break;
      }
      if (closeGeneration_ != closeGen && (paused_ || pos >= history_.size())) {
        result = kc::kube::ApiStatus(kc::Ok{});
      }
    }
    --open_;
    calledCv_.notify_all();
    lock.unlock();
    return *result;
  }

 private:
  struct Event {
    std::int64_t rv;
    std::string type;
    json object;
    bool raw = false;
    std::size_t forWatchesBefore = 0;  // > 0: only for watch calls numbered below (expiry)
  };
  struct Snapshot {
    std::int64_t rv = 0;
    std::vector<json> items;
  };
  std::size_t historyEnd() const { return history_.size(); }

  mutable std::mutex mu_;                     // guards everything below
  mutable std::condition_variable calledCv_;  // calls_, open_, deliveredTo_ changed
  std::condition_variable changed_;           // history, generations, pause or a cancel changed
  std::map<std::string, json> objects_;
  std::int64_t rv_ = 0;
  std::int64_t compactedTo_ = 0;
  std::deque<Event> history_;
  std::uint64_t closeGeneration_ = 0;
  bool paused_ = false;
  std::size_t open_ = 0;
  std::size_t deliveredTo_ = 0;
  std::vector<kc::kube::ApiError> listFaults_;
  std::vector<kc::kube::ApiError> watchFaults_;
  std::map<std::uint64_t, Snapshot> snapshots_;
  std::uint64_t nextSnapshot_ = 1;
  Calls calls_;
};

}  // namespace kc::testing
