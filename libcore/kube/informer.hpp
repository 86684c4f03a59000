#pragma once
// Informer: keeps a Store equal to the server's view of one resource (optionally filtered by
// namespace / label / field selector) and tells handlers what changed.
//
// Loop (one thread): LIST (paged, RV unset = consistent read) → replace the store, emitting
// the add/update/delete diff → WATCH from the list's resourceVersion with bookmarks and a
// randomized timeoutSeconds → apply events, tracking the last seen resourceVersion (bookmarks
// move it too). When the stream ends or breaks: watch again from the last seen version.
// When the version is too old (HTTP 410, or an ERROR event with code 410 / Expired / Gone):
// LIST again and resync. Errors back off 0.8 s → 30 s (jittered), reset after a healthy
// watch. Handlers run on the informer thread, in order, outside the store lock.
//
// The informer reads the server through a ListerWatcher (lister_watcher.hpp): the KubeClient
// constructor builds the real one; tests pass kc::testing::FakeListerWatcher. A transform
// (client-go's SetTransform) sees every object before it enters the store, so a daemon keeps
// only the fields it reads (kube/transform.hpp: keepFields). Time (backoff waits, how long a
// watch lived) comes from the injected kc::Clock.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "libcore/base/clock.hpp"
#include "libcore/kube/backoff.hpp"
#include "libcore/kube/client.hpp"
#include "libcore/kube/lister_watcher.hpp"
#include "libcore/kube/store.hpp"

namespace kc::kube {

struct ResourceEventHandler {
  std::function<void(const ObjectPtr&)> onAdd;
  std::function<void(const ObjectPtr& oldObj, const ObjectPtr& newObj)> onUpdate;
  std::function<void(const ObjectPtr&)> onDelete;  // the last state seen
};

// Applied to every object (LIST items, watch ADDED/MODIFIED/DELETED) before the store sees
// it. It must keep metadata.name, metadata.namespace and metadata.resourceVersion (the store
// keys and diffs by them); an object without a name afterwards is dropped and counted in
// Stats::dropped. Runs on the informer thread.
using ObjectTransform = std::function<nlohmann::json(nlohmann::json&&)>;

struct InformerOptions {
  // Used by the KubeClient constructor only (a ListerWatcher is already bound to both).
  GroupVersionResource resource = gvr::pods();
  std::string ns;  // "" = all namespaces
  std::string labelSelector;
  std::string fieldSelector;
  std::int64_t pageSize = 500;  // LIST limit; 0 = one unpaged LIST
  // Watch timeoutSeconds is drawn from [minWatchTimeout, 2*minWatchTimeout] (client-go: 5 min).
  std::chrono::seconds minWatchTimeout{300};
  BackoffParams backoff;  // 0.8 s → 30 s
  // A watch that delivered events or lived this long counts as healthy (backoff reset).
  std::chrono::milliseconds healthyWatch{2000};
  std::function<double()> rand01;  // injectable randomness (timeouts, jitter)
  ObjectTransform transform;       // optional, see ObjectTransform
  kc::Clock* clock = nullptr;      // not owned; null = the client's clock, or kc::systemClock()
};

class Informer {
 public:
  // LIST/WATCH of options.resource in options.ns through `client`.
  Informer(KubeClient& client, InformerOptions options);
  // LIST/WATCH through `source` (not owned, must outlive the informer).
  Informer(ListerWatcher& source, InformerOptions options);
  ~Informer();
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // Register before start().
  void addHandler(ResourceEventHandler handler);
  // Replaces options.transform. Before start().
  void setTransform(ObjectTransform transform);
  void start();
  // Cancels the watch and joins the thread. Idempotent.
  void stop();

  bool hasSynced() const { return synced_.load(); }
  // Waits until the first LIST has been applied (or stop/timeout). Returns hasSynced().
  bool waitForSync(std::chrono::milliseconds timeout);
  const Store& store() const { return store_; }
  std::string lastResourceVersion() const;

  struct Stats {
    std::uint64_t lists = 0;          // completed LISTs (1 + relists)
    std::uint64_t expired = 0;        // 410s seen (HTTP or ERROR event)
    std::uint64_t watches = 0;        // watch requests started
    std::uint64_t watchErrors = 0;    // watches ended by an error
    std::uint64_t eventsApplied = 0;  // ADDED/MODIFIED/DELETED applied to the store
    std::uint64_t bookmarks = 0;
    std::uint64_t dropped = 0;  // objects without a name after the transform
  };
  Stats stats() const;

 private:
  // What one watch delivered, for deciding what comes next.
  struct WatchOutcome {
    std::uint64_t applied = 0;           // ADDED/MODIFIED/DELETED events
    bool expired = false;                // 410 (HTTP or ERROR event): LIST again
    std::optional<ApiError> eventError;  // any other ERROR event
  };

  void run();
  bool watchOnce(bool& needList);  // false: stopping
  ListOptions watchOptions() const;
  bool onWatchEvent(WatchEvent&& ev, WatchOutcome& outcome);  // false: end the watch
  // Relist and backoff once a watch ended (`failed`: it ended with an error). False: stopping.
  bool afterWatch(const WatchOutcome& outcome, bool failed, bool healthy, bool& needList);
  ObjectPtr admit(nlohmann::json&& obj);  // transform + share; null if dropped
  bool relist();                          // false: stopping or failed (caller backs off)
  void dispatch(const Notification& n);
  bool sleepFor(std::chrono::milliseconds d);  // false if stopping
  void setResourceVersion(std::string rv);

  std::unique_ptr<ListerWatcher> ownedSource_;  // the KubeClient constructor's
  ListerWatcher& source_;
  InformerOptions opts_;
  kc::Clock& clock_;
  Store store_;
  std::vector<ResourceEventHandler> handlers_;
  Backoff backoff_;
  std::atomic<bool> synced_{false};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  std::unique_ptr<net::CancelToken> cancel_;  // the current request's token
  mutable std::mutex mu_;                     // guards rv_, cancel_ swaps, stats_ and the stop wait
  std::condition_variable cv_;
  std::string rv_;
  Stats stats_;
};

}  // namespace kc::kube
