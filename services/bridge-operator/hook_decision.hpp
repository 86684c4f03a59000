#pragma once
// The pure half of bridge-operator: a Metacontroller CompositeController hook request (sync or
// finalize, hook version v1 or v2) parsed into the observed BridgeJob and its children, and the
// decision observed -> desired children + BridgeJob status. No I/O, no clock (`now` is passed
// in), no globals.
//
// Children of BridgeJob <job> (all in its namespace):
//   ConfigMap <job>-bridge          parameters + kill (ours), remote id + status (the pod's)
//   Pod <job>-bridge-<attempt>      one bridge pod per attempt, restartPolicy Never
//   ServiceAccount/Role/RoleBinding <job>-bridge
//                                   get/watch/update/patch on that one ConfigMap only
// A pod that stopped before the ConfigMap shows a terminal state is replaced by attempt + 1
// (the new pod adopts the remote job through the ConfigMap's id, or finds it by the uid tag),
// up to `maxPodRestarts`; then the job is FAILED. Stopped pods are kept for their logs.

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "libcore/api/bridge_job.hpp"
#include "libcore/base/result.hpp"
#include "libcore/metacontroller/hook_body.hpp"

namespace kc::bridge {

using metacontroller::HookVersion;

enum class HookKind { kSync, kFinalize };
const char* hookName(HookKind kind);

inline constexpr std::string_view kJobLabel = api::kBridgeJobLabel;
inline constexpr std::string_view kJobUidLabel = api::kBridgeJobUidLabel;
inline constexpr std::string_view kAttemptLabel = api::kBridgeAttemptLabel;
inline constexpr const char* kContainerName = "bridge";
inline constexpr const char* kCredentialsDir = "/credentials";
inline constexpr const char* kS3CredentialsDir = "/s3credentials";
// Longest BridgeJob name: "<name>-bridge-<attempt>" must stay a valid object name.
inline constexpr std::size_t kMaxJobName = 230;

struct ObservedJob {
  std::string name;
  std::string ns;
  std::string uid;
  nlohmann::json spec;    // as observed (validated by the decision, not the parser)
  nlohmann::json status;  // what the last sync returned (object or null)
  bool deleting = false;  // metadata.deletionTimestamp set
};

struct ObservedPod {
  std::string name;
  std::int32_t attempt = 0;
  std::string phase;  // Pending, Running, Succeeded, Failed, Unknown, or ""
  bool terminating = false;
  bool stopped() const { return phase == "Succeeded" || phase == "Failed"; }
};

struct HookRequest {
  HookKind kind = HookKind::kSync;
  HookVersion version = HookVersion::kV1;
  ObservedJob job;
  std::optional<std::map<std::string, std::string>> configMap;  // data of <job>-bridge
  std::vector<ObservedPod> pods;  // <job>-bridge-<n>, ordered by attempt
};

// Errors (code "invalid"): body not a JSON object, unknown hook version, the parent not a
// bridge.kubecomp.io/v1alpha1 BridgeJob with name, namespace and uid, a name longer than
// kMaxJobName, malformed children maps. A sync request with finalizing=true is a finalize.
Result<HookRequest> parseHookRequest(HookKind kind, const std::string& body);

struct DecisionConfig {
  std::int32_t maxPodRestarts = 3;  // replacement pods after the first one
  double finalizeResyncSec = 5;     // while a finalize waits for the remote job
  std::string podCpuRequest = "50m";
  std::string podMemoryRequest = "64Mi";
  std::string podMemoryLimit = "128Mi";
  std::int64_t podRunAsUser = 65532;
};

struct Desired {
  std::vector<nlohmann::json> children;
  nlohmann::json status;  // the BridgeJob's whole .status
  double resyncAfterSeconds = 0;
  std::optional<bool> finalized;  // finalize only
  // Set when no safe answer exists (the job started but neither its ConfigMap nor its spec
  // can be read): the handler answers an error, so Metacontroller changes nothing and retries.
  std::optional<Error> refusal;
};

// The decision. `now` only stamps condition transitions.
Desired decide(const HookRequest& request, const DecisionConfig& config,
               std::chrono::system_clock::time_point now);

// Metacontroller's CompositeHookResponse: exactly status, children, resyncAfterSeconds and
// (finalize only) finalized, so v2's strict parsing accepts it.
nlohmann::json renderResponse(const Desired& desired);

std::string configMapName(const std::string& job);
std::string podName(const std::string& job, std::int32_t attempt);
std::string rbacName(const std::string& job);

}  // namespace kc::bridge
