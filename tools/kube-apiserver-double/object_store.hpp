#pragma once
// ObjectStore: the in-memory storage engine of the API test double.
//
// One store holds every object of every resource under one mutex, stamped with ONE
// global, monotonically increasing resourceVersion (as etcd revisions are). Each stored
// object version is immutable and serialised once; LIST, GET and every watcher share that
// serialisation. A bounded window of recent changes serves WATCH from an old
// resourceVersion and exact-resourceVersion LISTs; anything older answers 410 Expired.
//
// Semantics follow kube-apiserver's generic registry where our daemons and kubectl
// depend on them (see docs/apiserver-double.md for what is and is not modelled). Failures
// are thrown as ApiError and turned into Status bodies by ApiServer.
//
// One class, several translation units by concern: object_store.cpp (reads, LIST, commit,
// create/update), store_watch.cpp (WATCH), store_delete.cpp (DELETE, finalizers, GC,
// namespaces), store_crd.cpp (CRDs), store_pods.cpp (pods/binding), store_disruption.cpp
// (PodDisruptionBudget status, pods/eviction), store_resourceclaims.cpp (the resourceclaim
// controller); object_defaults.cpp and dra_validation.hpp hold per-kind validation and
// defaulting.

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "tools/kube-apiserver-double/api_error.hpp"
#include "tools/kube-apiserver-double/resource_registry.hpp"
#include "tools/kube-apiserver-double/selectors.hpp"

namespace kc::apiserver {

namespace claimctl {
struct ClaimWorld;
}

// One immutable version of an object.
struct StoredObject {
  nlohmann::json object;  // the full object as stored (kind/apiVersion of its storage version)
  std::string itemJson;   // the serialisation WITHOUT kind/apiVersion (a LIST item)
  std::uint64_t resourceVersion = 0;
  std::string ns;
  std::string name;
  std::string uid;

  // {"apiVersion":..,"kind":..,<itemJson>} for a single GET / watch event.
  std::string fullJson(const std::string& apiVersion, const std::string& kind) const;
};
using ObjectPtr = std::shared_ptr<const StoredObject>;

// Where a watcher's events go (the HTTP adapter wraps kc::net::ResponseStream). write()
// must not block: it is called with the store's lock held.
class WatchSink {
 public:
  virtual ~WatchSink() = default;
  virtual bool write(const std::string& data) = 0;  // false once the client is gone
  virtual void end() = 0;
  virtual bool closed() const = 0;
};

struct StoreOptions {
  std::size_t historyWindow = 10'000;  // changes kept for WATCH / exact LIST
  std::uint64_t seed = 1;              // uid, generateName and fault randomness
  std::function<std::chrono::system_clock::time_point()> clock = [] {
    return std::chrono::system_clock::now();
  };
  // Faults for client tests.
  bool expiredAsEvent = true;              // old watch RV: HTTP 200 + ERROR event (else HTTP 410)
  std::uint64_t dropWatchAfterEvents = 0;  // 0 = never
  double dropWatchProbability = 0.0;       // per delivered event
  std::chrono::milliseconds bookmarkInterval{1000};
};

struct ListOptions {
  std::string ns;  // "" = all namespaces / cluster scope
  std::string labelSelector;
  std::string fieldSelector;
  std::optional<std::string> resourceVersion;  // nullopt = unset
  std::string resourceVersionMatch;            // "", "Exact", "NotOlderThan"
  std::int64_t limit = 0;
  std::string continueToken;
};

struct ListResult {
  std::vector<ObjectPtr> items;
  std::uint64_t resourceVersion = 0;
  std::string continueToken;
  std::optional<std::int64_t> remainingItemCount;
};

struct WatchOptions {
  std::string ns;
  std::string labelSelector;
  std::string fieldSelector;
  std::optional<std::string> resourceVersion;
  bool allowBookmarks = false;
  bool sendInitialEvents = false;
  std::optional<std::chrono::steady_clock::time_point> deadline;
  // Renders an event's object for this watcher instead of the stored serialisation (another
  // view of the same storage, e.g. events.k8s.io/v1 of core events, or a Table row). Called
  // with the store's lock held: it must not call back into the store. `first` is true for
  // the watcher's first event.
  std::function<std::string(const StoredObject& object, bool first)> render;
};

struct DeleteOptions {
  std::optional<std::string> preconditionUid;
  std::optional<std::string> preconditionResourceVersion;
  std::string propagationPolicy;  // "", "Background", "Foreground", "Orphan"
  std::optional<std::int64_t> gracePeriodSeconds;
};

struct DeleteResult {
  ObjectPtr object;  // the final (deleted) or pending (deletionTimestamp set) state
  bool deletedNow = false;
};

enum class Subresource { kNone, kStatus };

class ObjectStore {
 public:
  explicit ObjectStore(StoreOptions options = {});
  ~ObjectStore();
  ObjectStore(const ObjectStore&) = delete;
  ObjectStore& operator=(const ObjectStore&) = delete;

  // Resource lookup (a copy: CRD removal may drop the entry at any time).
  std::optional<ResourceInfo> findResource(const std::string& group, const std::string& version,
                                           const std::string& resource) const;
  nlohmann::json apiVersions() const;
  nlohmann::json apiGroupList() const;
  std::optional<nlohmann::json> apiGroup(const std::string& group) const;
  std::optional<nlohmann::json> resourceList(const std::string& group,
                                             const std::string& version) const;

  nlohmann::json openApiV3Root() const;
  std::optional<nlohmann::json> openApiV3(const std::string& group,
                                          const std::string& version) const;

  ObjectPtr get(const ResourceInfo& res, const std::string& ns, const std::string& name) const;
  ListResult list(const ResourceInfo& res, const ListOptions& options) const;
  ObjectPtr create(const ResourceInfo& res, const std::string& ns, nlohmann::json body);
  // PUT. Subresource kStatus changes only .status.
  ObjectPtr update(const ResourceInfo& res, const std::string& ns, const std::string& name,
                   nlohmann::json body, Subresource sub);
  // Read-modify-write under the lock: `patchFn` maps the current object to the desired one
  // (it may throw ApiError). A metadata.resourceVersion the patch set must match.
  ObjectPtr patch(const ResourceInfo& res, const std::string& ns, const std::string& name,
                  const std::function<nlohmann::json(const nlohmann::json&)>& patchFn,
                  Subresource sub);
  DeleteResult remove(const ResourceInfo& res, const std::string& ns, const std::string& name,
                      const DeleteOptions& options);
  // POST pods/<name>/binding.
  void bindPod(const std::string& ns, const std::string& name, const nlohmann::json& binding);
  // POST pods/<name>/eviction (policy/v1 Eviction): deletes the pod with `options` unless a
  // PodDisruptionBudget forbids it (429 TooManyRequests with the budget as the cause).
  void evictPod(const std::string& ns, const std::string& name, const nlohmann::json& eviction,
                const DeleteOptions& options);

  // Starts a watch. Throws 410 ApiError for an expired RV unless expiredAsEvent, in which
  // case the ERROR event is written and the sink ended. Returns the watcher id.
  std::uint64_t watch(const ResourceInfo& res, const WatchOptions& options,
                      std::shared_ptr<WatchSink> sink);
  // Checks (without registering) whether a watch from `rv` would be expired; throws the 410.
  void checkWatchable(const std::optional<std::string>& rv) const;
  void stopWatch(std::uint64_t id);

  // Periodic work: ends watches past their deadline, sends bookmarks, drops closed sinks.
  void tick(std::chrono::steady_clock::time_point now);
  // Forgets the whole change history (every older RV becomes 410). For fault tests.
  void compact();

  std::uint64_t currentResourceVersion() const;
  // The store's (injectable) wall clock: creation timestamps, Table ages.
  std::chrono::system_clock::time_point now() const;
  std::function<std::chrono::system_clock::time_point()> clock() const;
  std::size_t watcherCount() const;
  std::size_t objectCount(const ResourceInfo& res) const;

  // Runtime-adjustable faults.
  void setWatchFaults(bool expiredAsEvent, std::uint64_t dropAfter, double dropProbability);

 private:
  struct Watcher;
  struct Table;
  struct Event;

  // All members below are guarded by mu_.
  mutable std::mutex mu_;
  StoreOptions options_;
  ResourceRegistry registry_;
  std::unordered_map<std::string, Table> tables_;
  std::deque<std::shared_ptr<Event>> history_;
  std::uint64_t compactedRv_ = 0;  // events with rv <= this are forgotten
  std::uint64_t rv_ = 0;
  std::uint64_t nextWatcherId_ = 1;
  std::map<std::uint64_t, std::shared_ptr<Watcher>> watchers_;
  // uid -> (table, key) of live objects; owner uid -> dependents (table, key).
  std::unordered_map<std::string, std::pair<std::string, std::string>> uids_;
  std::unordered_map<std::string, std::set<std::pair<std::string, std::string>>> dependents_;
  std::mt19937_64 rng_;
  bool reconcilingBudgets_ = false;  // reconcileBudgetsLocked is writing budget statuses
  bool reconcilingClaims_ = false;   // the resourceclaim controller is writing

  Table& table(const std::string& key);
  const Table* findTable(const std::string& key) const;
  std::string newUid();
  std::string timestamp() const;
  std::uint64_t parseRv(const std::string& rv) const;
  ObjectPtr getLocked(const ResourceInfo& res, const std::string& ns,
                      const std::string& name) const;
  ObjectPtr createLocked(const ResourceInfo& res, const std::string& ns, nlohmann::json body);
  ObjectPtr updateLocked(const ResourceInfo& res, ObjectPtr current, nlohmann::json desired,
                         Subresource sub, bool requireRv);
  DeleteResult removeLocked(const ResourceInfo& res, ObjectPtr current,
                            const DeleteOptions& options);
  // Commits a new version (or a deletion when object is null) and notifies watchers.
  ObjectPtr commit(const ResourceInfo& res, const std::string& key, ObjectPtr previous,
                   std::optional<nlohmann::json> object);
  ObjectPtr finalRemove(const ResourceInfo& res, ObjectPtr current);
  void collectGarbage(const std::string& ownerUid,
                      std::vector<std::pair<std::string, std::string>> dependents);
  void collectIfOwnersMissing(const ResourceInfo& res, const ObjectPtr& obj);
  void acceptCrdLocked(const ResourceInfo& res, const std::string& name, nlohmann::json& body);
  void onCrdChanged(const nlohmann::json* crd, const nlohmann::json* previous);
  // Recomputes the status of every PodDisruptionBudget in `ns` (after a pod or budget
  // write there), committing the ones that changed.
  void reconcileBudgetsLocked(const std::string& ns);
  // The Priority admission plugin on a new Pod or PriorityClass (priority_admission.hpp),
  // reading the stored PriorityClasses.
  void admitPriorityLocked(const ResourceInfo& res, const std::string& name,
                           nlohmann::json& body) const;
  std::vector<ObjectPtr> inNamespaceLocked(const std::string& tableKey,
                                           const std::string& ns) const;
  // The resourceclaim controller (store_resourceclaims.cpp), run after a write of a pod,
  // ResourceClaim or ResourceClaimTemplate (`changed`, its final state when `deleted`).
  void reconcileResourceClaimsLocked(const std::string& tableKey, const ObjectPtr& changed,
                                     bool deleted);
  claimctl::ClaimWorld claimWorldLocked(const std::string& ns) const;
  void syncPodClaimsLocked(const std::string& ns, const std::string& podName);
  void syncClaimLocked(const std::string& ns, const std::string& name);
  void recordClaimEventLocked(const ObjectPtr& pod, const std::string& message);
  void onNamespaceTerminating(const std::string& ns);
  void maybeFinishNamespace(const std::string& ns);
  void maybeFinishForeground(ObjectPtr removed);
  void deliver(Watcher& w, const Event& e);
  void writeTo(Watcher& w, const std::string& line, bool countsAsEvent);
  void endWatcher(Watcher& w);
  std::string bookmarkLine(const Watcher& w) const;
  void seedDefaults();
};

// Key of an object in its table: "<ns>/<name>" (namespaced) or "<name>".
std::string objectKey(const ResourceInfo& res, const std::string& ns, const std::string& name);

}  // namespace kc::apiserver
