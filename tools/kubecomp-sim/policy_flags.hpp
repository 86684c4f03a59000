#pragma once
// kubecomp-sim's "Behaviour" flag group: the policies by their libcore/alloc registry names
// (--list-policies prints them), the --policy presets (stock-dra), and the move time, parsed
// into the policy part of a SimConfig (kube-scheduler's options -> validated config pattern).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "libcore/alloc/policy_registry.hpp"
#include "libcore/base/result.hpp"
#include "tools/kubecomp-sim/engine.hpp"

namespace CLI {
class App;
class Validator;
}  // namespace CLI

namespace kc::sim {

struct PolicyFlags {
  std::string mode = "composable";
  std::string nodePolicy{alloc::kDefaultNodePolicy};
  std::string gpuPolicy{alloc::kDefaultGpuPolicy};
  std::uint64_t policySeed = 1;
  double moveTimeS = static_cast<double>(kDefaultMoveTime) / kMsPerSecond;
  // The move schedule (libcore/alloc/move_schedule.hpp): moves in flight at once per chassis
  // (1..1024) and per pool (0 = no pool limit; 1, the default, is the paper's serial fabric).
  std::int64_t movesPerChassis = 1;
  std::int64_t movesPerPool = 1;
  std::string queue = "fcfs";
  std::string recompose{alloc::kDefaultRecomposePolicy};
  double slackFactor = alloc::kDefaultSlackFactor;
  std::string preset;  // --policy
  std::string offer{alloc::kDefaultOfferPolicy};
  std::string idleReturn{alloc::kDefaultReturnPolicy};
  double idleTimeoutS = static_cast<double>(alloc::kDefaultIdleTimeoutMs) / kMsPerSecond;
  double returnTimeS = static_cast<double>(kDefaultReturnTime) / kMsPerSecond;
  bool listPolicies = false;
};

// The check of an unsigned 64-bit flag (--seed, --policy-seed): decimal digits, at most
// 2^64 - 1. CLI11's own conversion would take "-1" as 2^64 - 1 and clamp larger values.
CLI::Validator uint64Check();

// Adds the group's flags to `app`, bound to `f`.
void addPolicyFlags(CLI::App& app, PolicyFlags& f);

// Every registered policy and preset, one per line with its description (--list-policies).
std::string policyList();

// The parsed flags as a config (defaultSimConfig() with the group's fields set). A --policy
// preset fills each part not given by its own flag (so `f` is updated). Errors: "invalid" (a
// value out of range, a flag combination that does not apply), "not_found" (an unknown name;
// the message lists the known ones).
Result<SimConfig> buildPolicyConfig(const CLI::App& app, PolicyFlags& f);

// The summary's "config" entries of the group. Parameters at their default are left out when
// they were added after the first results (slack_factor, policy, the DRA-path settings), so
// earlier outputs stay byte-identical.
nlohmann::json policyConfigJson(const PolicyFlags& f, const SimConfig& config);

}  // namespace kc::sim
