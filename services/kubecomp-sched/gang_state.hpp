#pragma once
// kubecomp-sched's gangs (docs/sched.md "Gangs"): which pods belong together and how many must
// start at once. Two sources, both read as the object shapes their projects document:
//
//   - scheduler-plugins' PodGroup (scheduling.x-k8s.io/v1alpha1, the object Kubeflow's training
//     operators create): pods join it with the label scheduling.x-k8s.io/pod-group=<name> (same
//     namespace); spec.minMember pods must be placed together; spec.scheduleTimeoutSeconds
//     bounds how long the placed members wait for the rest.
//   - Kueue's plain pod groups: the label kueue.x-k8s.io/pod-group-name=<name> and the
//     annotation kueue.x-k8s.io/pod-group-total-count=<n> on every pod; all n start together
//     (Kueue admits the group as one workload and removes every pod's scheduling gate).
//
// The decision itself is libcore/alloc/gang.hpp; this is the index the cache keeps (guarded by
// the cache's mutex, as everything in it).

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "libcore/base/result.hpp"

namespace kc::sched {

inline constexpr std::string_view kPodGroupLabel = "scheduling.x-k8s.io/pod-group";
inline constexpr std::string_view kKueuePodGroupNameLabel = "kueue.x-k8s.io/pod-group-name";
inline constexpr std::string_view kKueuePodGroupTotalCountAnnotation =
    "kueue.x-k8s.io/pod-group-total-count";
// The PodScheduled=False reason of a gang member waiting for its gang (siblings missing, the
// gang not fitting yet, or its GPUs moving) and the Event reason of a gang released on timeout.
inline constexpr std::string_view kReasonWaitingForGang = "WaitingForGang";
// The Warning Event reason on a gang member that uses ResourceClaims: gang scheduling does not
// cover the DRA path yet, the pod is scheduled on its own (gangDraNotice says so).
inline constexpr std::string_view kReasonGangNotCovered = "GangNotCovered";

// Which gang a pod names, as its labels and annotations say.
struct GangRef {
  enum class Kind : std::uint8_t { kNone, kPodGroup, kKueue };
  Kind kind = Kind::kNone;
  std::string key;               // "pg:<ns>/<name>" or "kueue:<ns>/<name>"; "" for kNone
  std::string name;              // the group's own name
  std::uint32_t kueueTotal = 0;  // Kueue: pod-group-total-count
  std::string invalid;           // a malformed reference ("" valid)
  bool member() const { return kind != Kind::kNone; }
  friend bool operator==(const GangRef&, const GangRef&) = default;
};

// The gang a Pod object names (a PodGroup label wins over Kueue's labels when both are set).
// A Kueue group without a valid total count is invalid (the pod is refused, naming the field).
GangRef readGangRef(const nlohmann::json& pod);

// The GangNotCovered text for a pod in namespace `ns` naming the gang `ref` whose GPUs come
// through ResourceClaims.
std::string gangDraNotice(const GangRef& ref, const std::string& ns);

// One PodGroup as read.
struct PodGroupSpec {
  std::uint32_t minMember = 1;
  std::optional<std::chrono::seconds> scheduleTimeout;  // nullopt: the reservation timeout
  std::int64_t created = 0;                             // creationTimestamp (s)
  std::string invalid;                                  // a malformed spec ("" valid)
};

// A PodGroup object (scheduling.x-k8s.io/v1alpha1). Errors: "invalid" without a name.
Result<std::pair<std::string, PodGroupSpec>> readPodGroup(const nlohmann::json& obj);

// What the cache knows of every gang: the PodGroups and the pods of ours naming each gang.
class GangState {
 public:
  void setPodGroup(const std::string& key, PodGroupSpec spec);  // key "pg:<ns>/<name>"
  void removePodGroup(const std::string& key);
  // Pod `podKey` now names `ref` (kNone: no gang); the old membership goes.
  void setMember(const std::string& podKey, const GangRef& ref);
  void removeMember(const std::string& podKey);

  // How many must start together, and the timeout, for the gang `ref`; nullopt when the gang's
  // PodGroup is not known (yet).
  struct Rule {
    std::uint32_t minMember = 1;
    std::optional<std::chrono::seconds> timeout;
    std::string invalid;  // the PodGroup's spec is malformed
  };
  std::optional<Rule> rule(const GangRef& ref) const;
  // The pods naming the gang (keys), in no particular order.
  const std::set<std::string>& members(const std::string& gangKey) const;
  std::size_t podGroupCount() const { return groups_.size(); }

 private:
  std::map<std::string, PodGroupSpec> groups_;
  std::map<std::string, std::set<std::string>> members_;  // gang key -> pod keys
  std::map<std::string, std::string> gangOf_;             // pod key -> gang key
  std::set<std::string> none_;                            // members() of an unknown gang
};

}  // namespace kc::sched
