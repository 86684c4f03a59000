#pragma once
// The pure half of vni-webhook: Metacontroller DecoratorController hook requests (sync,
// finalize, customize; hook versions v1 and v2) parsed into an observed state, the decision
// what the allocation store must do (plan), and the desired response rendered from the plan
// and the store's outcome. No I/O, no clock (the caller passes `now`), no globals.
//
// Flow of one request (VniService): parseHookRequest -> planHook -> store executes the
// StoreOp in one transaction -> renderHookResponse.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "libcore/alloc/vni_range.hpp"
#include "libcore/api/names.hpp"
#include "libcore/api/vni.hpp"
#include "libcore/base/result.hpp"
#include "libcore/metacontroller/hook_body.hpp"

namespace kc::vni {

using alloc::Vni;

// The names this hook shares with its objects' other readers (libcore/api/names.hpp; string
// literals there, so data() is NUL-terminated).
inline constexpr const char* kOptInAnnotation = api::kVniOptInAnnotation.data();
inline constexpr const char* kVniLabel = api::kVniLabel.data();
inline constexpr const char* kJobControllerUidLabel = "batch.kubernetes.io/controller-uid";

enum class HookKind { kSync, kFinalize, kCustomize };
using HookVersion = metacontroller::HookVersion;  // hook body format (v1 default)

const char* hookName(HookKind kind);

// An owner of an allocation: the (uid, namespace) primary key of vni_allocs.
struct OwnerKey {
  std::string uid;
  std::string ns;
  friend bool operator==(const OwnerKey&, const OwnerKey&) = default;
  friend auto operator<=>(const OwnerKey&, const OwnerKey&) = default;
};

struct OwnerRef {
  std::string apiVersion;
  std::string kind;
  std::string name;
  std::string uid;
  bool controller = false;
};

struct ObservedParent {
  std::string apiVersion;
  std::string kind;
  std::string name;
  std::string ns;
  std::string uid;
  std::map<std::string, std::string> annotations;
  std::vector<OwnerRef> ownerReferences;
  std::optional<std::int64_t> deletionTimestampSec;  // Unix seconds
  nlohmann::json selector;  // spec.selector, null when absent (Jobs use their uid label)
};

// One of our VNI objects as Metacontroller observed it among the attachments.
struct ObservedVni {
  std::string name;
  std::string ns;
  std::optional<Vni> vni;  // spec.vni when it is a valid 16-bit VNI
};

struct ObservedPod {
  std::string name;
  std::string phase;
  bool terminating = false;
  std::vector<std::string> ownerUids;  // controller ownerReference uids
};

struct HookRequest {
  HookKind kind = HookKind::kSync;
  HookVersion version = HookVersion::kV1;
  std::string controllerName;
  ObservedParent parent;
  std::vector<ObservedVni> vnis;  // attachments of kind VNI.kubecomp.io/v1
  std::vector<ObservedPod> pods;  // related Pod.v1 (from the customize hook)
  bool finalizing = false;
};

// Errors (code "invalid", message for the caller): not JSON, not an object, missing or
// mistyped parent fields, unknown hook version in controller.spec.hooks.<hook>.version.
// `kind` is the endpoint called; a sync request with finalizing=true is treated as finalize.
Result<HookRequest> parseHookRequest(HookKind kind, const std::string& body);

struct DecisionConfig {
  // A finalize waits while the parent's pods remain, at most this long after the parent's
  // deletionTimestamp (then the VNI is released anyway, logged; the cooldown still protects
  // stragglers). A live parent that lost its opt-in annotation is never timed out.
  std::int64_t podWaitTimeoutSec = 300;
  double finalizeResyncSec = 5;  // resyncAfterSeconds while waiting for pods
  double releasedResyncSec = 1;  // after releasing, until the VNI object is observed gone
};

// What the store must do, in one transaction.
struct StoreOp {
  enum class Kind {
    kNone,     // nothing to read or write (customize)
    kAcquire,  // owner's VNI, allocating one if it has none (adopting `adopt` if free)
    kLookup,   // owner's VNI if any; never allocates, never frees
    kRelease,  // frees the owner's VNI (idempotent: no row, nothing to do)
  };
  Kind kind = Kind::kNone;
  OwnerKey owner;
  std::string ownerKind;  // for the admin listing
  std::string ownerName;
  std::optional<Vni> adopt;
  // kAcquire only: if this owner (the ReplicaSet's Deployment) holds a VNI, acquire nothing
  // and report the deferred owner's VNI instead.
  std::optional<OwnerKey> deferTo;
};

struct StoreOutcome {
  std::optional<Error> error;  // "exhausted", "unavailable", "internal"
  std::optional<Vni> vni;      // the owner's VNI after the op (released value for kRelease)
  std::optional<Vni> deferredVni;
  bool created = false;
  bool adopted = false;
  bool released = false;
};

struct HookPlan {
  HookKind kind = HookKind::kSync;
  StoreOp op;
  bool optedIn = false;
  std::size_t podsRemaining = 0;
  bool podWaitTimedOut = false;  // releasing although pods remain (log it)
  bool ownVniObserved = false;   // our VNI object still exists
};

// The decision. `nowSec`: Unix seconds (compared with the deletionTimestamp).
HookPlan planHook(const HookRequest& request, const DecisionConfig& config, std::int64_t nowSec);

// The desired response for Metacontroller (only the fields of its DecoratorHookResponse, so
// v2's strict parsing accepts it). Precondition: !outcome.error.
nlohmann::json renderHookResponse(const HookRequest& request, const HookPlan& plan,
                                  const StoreOutcome& outcome, const DecisionConfig& config);

// The customize response: relate the parent's pods.
nlohmann::json renderCustomizeResponse(const HookRequest& request);

using api::vniObjectName;
bool isOptedIn(const ObservedParent& parent);

}  // namespace kc::vni
