// The Slurm codec's job outcomes (slurm_codec.hpp): wait statuses decoded, job_state strings
// mapped to BridgeJob statuses, and v0.0.40+ state arrays collapsed to the name squeue shows.

#include <algorithm>
#include <array>

#include "services/bridge-pod/slurm_codec.hpp"
#include "services/bridge-pod/slurm_codec_errors.hpp"

namespace kc::bridge::slurm {

namespace {
using detail::protocol;
}  // namespace

Result<ExitStatus> decodeExitCode(std::int64_t raw, std::string_view stateReason) {
  // A job that never started (e.g. reason JobLaunchFailure, exit_code 4021) carries a Slurm
  // error number, not a wait status.
  if (stateReason == "JobLaunchFailure") {
    return ExitStatus{ExitStatus::Kind::kLaunchFailed, static_cast<int>(raw), false};
  }
  if (raw < 0 || raw > 0xffff) {
    return protocol("exit_code " + std::to_string(raw) + " is not a wait status");
  }
  const int low = static_cast<int>(raw & 0x7f);
  if (low == 0) {
    return ExitStatus{ExitStatus::Kind::kExited, static_cast<int>((raw >> 8) & 0xff), false};
  }
  if (low == 0x7f) {  // stopped: never an exit_code of a job Slurm reports
    return protocol("exit_code " + std::to_string(raw) + " is a stopped status");
  }
  if ((raw >> 8) != 0) {
    return protocol("exit_code " + std::to_string(raw) + " is not a wait status");
  }
  return ExitStatus{ExitStatus::Kind::kSignaled, low, (raw & 0x80) != 0};
}

std::string describe(const ExitStatus& e) {
  switch (e.kind) {
    case ExitStatus::Kind::kExited:
      return "exited with code " + std::to_string(e.code);
    case ExitStatus::Kind::kSignaled:
      return "killed by signal " + std::to_string(e.code) + (e.coreDumped ? " (core dumped)" : "");
    case ExitStatus::Kind::kLaunchFailed:
      return e.code < 0 ? std::string("launch failed")
                        : "launch failed (Slurm error " + std::to_string(e.code) + ")";
    case ExitStatus::Kind::kUnknown:
      return "no exit status";
  }
  return "unknown";
}

namespace {
struct StateRow {
  const char* name;
  JobStatus status;
};
// Base states, then the flag states job_state_string() reports instead of the base state.
constexpr std::array<StateRow, 25> kStates{{
    {"PENDING", JobStatus::kSubmitted},
    {"RUNNING", JobStatus::kRunning},
    {"SUSPENDED", JobStatus::kRunning},  // started, paused; resumes
    {"COMPLETED", JobStatus::kDone},
    {"CANCELLED", JobStatus::kKilled},
    {"FAILED", JobStatus::kFailed},
    {"TIMEOUT", JobStatus::kFailed},
    {"NODE_FAIL", JobStatus::kFailed},
    {"PREEMPTED", JobStatus::kFailed},
    {"BOOT_FAIL", JobStatus::kFailed},
    {"DEADLINE", JobStatus::kFailed},
    {"OUT_OF_MEMORY", JobStatus::kFailed},
    {"COMPLETING", JobStatus::kRunning},  // not terminal yet (the original stopped here)
    {"CONFIGURING", JobStatus::kSubmitted},
    {"POWER_UP_NODE", JobStatus::kSubmitted},
    {"REQUEUED", JobStatus::kSubmitted},
    {"REQUEUE_FED", JobStatus::kSubmitted},
    {"REQUEUE_HOLD", JobStatus::kSubmitted},
    {"RESV_DEL_HOLD", JobStatus::kSubmitted},
    {"RESIZING", JobStatus::kRunning},
    {"SIGNALING", JobStatus::kRunning},
    {"STAGE_OUT", JobStatus::kRunning},
    {"STOPPED", JobStatus::kRunning},      // SIGSTOPped, keeps its resources
    {"SPECIAL_EXIT", JobStatus::kFailed},  // ended with the special exit code; held
    {"REVOKED", JobStatus::kUnknown},      // federation: runs on a sibling cluster now
}};
}  // namespace

std::optional<JobStatus> mapJobState(std::string_view jobState) {
  for (const StateRow& row : kStates) {
    if (jobState == row.name) {
      return row.status;
    }
  }
  return std::nullopt;
}

std::vector<std::string> jobStateNames() {
  std::vector<std::string> names;
  for (const StateRow& row : kStates) {
    names.emplace_back(row.name);
  }
  return names;
}

namespace {
// The base states (job_state_codes: one per job) and the flags in the order Slurm's
// job_state_string() prefers them over the base state; the last three are never shown.
constexpr std::array<const char*, 12> kBaseStates{
    "PENDING", "RUNNING",   "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED",
    "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE",  "OUT_OF_MEMORY"};
constexpr std::array<const char*, 16> kFlagOrder{
    "COMPLETING",    "STAGE_OUT",     "CONFIGURING",   "RESIZING", "REQUEUED",      "REQUEUE_FED",
    "REQUEUE_HOLD",  "SPECIAL_EXIT",  "STOPPED",       "REVOKED",  "RESV_DEL_HOLD", "SIGNALING",
    "POWER_UP_NODE", "LAUNCH_FAILED", "RECONFIG_FAIL", "UPDATE_DB"};
constexpr std::size_t kShownFlags = 13;
}  // namespace

Result<std::string> collapseJobState(const std::vector<std::string>& states) {
  std::string base;
  std::size_t flag = kFlagOrder.size();
  for (const std::string& s : states) {
    if (std::find(kBaseStates.begin(), kBaseStates.end(), s) != kBaseStates.end()) {
      if (!base.empty() && base != s) {
        return makeError(errc::kProtocol, "two base states, " + base + " and " + s);
      }
      base = s;
      continue;
    }
    auto f = std::find(kFlagOrder.begin(), kFlagOrder.end(), s);
    if (f == kFlagOrder.end()) {
      return makeError(errc::kProtocol, "\"" + s + "\" is not a Slurm job state or flag");
    }
    flag = std::min(flag, static_cast<std::size_t>(f - kFlagOrder.begin()));
  }
  if (base.empty()) {
    return makeError(errc::kProtocol, "no base state");
  }
  return flag < kShownFlags ? std::string(kFlagOrder[flag]) : base;
}

}  // namespace kc::bridge::slurm
