#pragma once
// The Slurm REST (slurmrestd, OpenAPI v0.0.38 as in Slurm 22.05) codec of the bridge pod's Slurm
// backend: request bodies and paths out, replies in. Pure: no I/O, no clock.
//
// Bodies are built with nlohmann::json, never by string formatting (the original's Sprintf body
// broke on a quote or newline in the script). Replies are read strictly: a missing or mistyped
// field is an error (code "protocol"), never a default; a non-empty `errors` array is a failure
// even with HTTP 200.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/result.hpp"
#include "services/bridge-operator/bridge_job.hpp"

namespace kc::bridge::slurm {

// The API prefix the codec speaks (slurmrestd 22.05 offers v0.0.36..v0.0.38).
inline constexpr const char* kApiVersion = "v0.0.38";

// What the bridge pod submits.
struct SubmitInput {
  std::string script;         // the batch script, verbatim (its #SBATCH lines are ignored)
  std::string jobProperties;  // JSON object text: Slurm job fields (see kJobFields)
  std::string bridgeJobUid;   // tags the job (comment) so a restarted pod can adopt it
  std::string defaultName;    // the job name when jobProperties has none
};

// The `comment` a job carries: "bridgejob-uid=<uid>".
std::string uidTag(std::string_view bridgeJobUid);

// The body of POST /slurm/v0.0.38/job/submit: {"job": {...}, "script": "..."}.
// Errors (code "invalid") name the property: unknown keys, wrong types, out-of-range values,
// a missing or empty `environment` or `current_working_directory`, a `comment` (reserved for
// the tag), an empty script or uid.
Result<nlohmann::json> buildSubmitBody(const SubmitInput& in);

// The property keys accepted in jobProperties (the Slurm v0.0.38 job field names), for docs.
std::vector<std::string> jobFieldNames();

// `<resourceURL>/job/<id>` etc., joined with exactly one '/' (the original's cancel URL lost it).
std::string joinUrl(std::string_view base, std::string_view path);
std::string jobPath(std::string_view resourceUrl, std::int64_t jobId);
std::string submitPath(std::string_view resourceUrl);
std::string jobsPath(std::string_view resourceUrl);

// A raw wait status (Slurm's exit_code in v0.0.38) decoded.
struct ExitStatus {
  enum class Kind { kExited, kSignaled, kLaunchFailed };
  Kind kind = Kind::kExited;
  int code = 0;  // kExited: exit code; kSignaled: signal number; kLaunchFailed: Slurm error
  bool coreDumped = false;
  friend bool operator==(const ExitStatus&, const ExitStatus&) = default;
};
// Errors (code "protocol") when the value cannot be a wait status.
Result<ExitStatus> decodeExitCode(std::int64_t raw, std::string_view stateReason);
std::string describe(const ExitStatus& e);  // "exited with code 3", "killed by signal 15"

// Every Slurm job_state string (base states and the flag states v0.0.38 reports instead)
// mapped to a BridgeJob status; nullopt for a string Slurm does not define.
std::optional<JobStatus> mapJobState(std::string_view jobState);
std::vector<std::string> jobStateNames();  // every string mapJobState knows

// One job of GET /job/{id} or GET /jobs.
struct JobInfo {
  std::int64_t jobId = 0;
  std::string name;
  std::string comment;
  std::string jobState;  // as Slurm spells it
  std::string stateReason;
  JobStatus status = JobStatus::kUnknown;
  ExitStatus exit;
  std::optional<std::int64_t> submitTime;  // epoch seconds; nullopt when Slurm says 0
  std::optional<std::int64_t> startTime;
  std::optional<std::int64_t> endTime;  // while running: the expected end
};

// POST /job/submit reply -> the job id (> 0). A non-empty errors array, a non-2xx status or
// a missing/zero job_id is an error (the original recorded id 0 on failure).
Result<std::int64_t> parseSubmitResponse(int httpStatus, std::string_view body);

// GET /job/{id} reply. `gone` when slurmrestd answers 500 with error 2017 ("Invalid job id
// specified"): the job was purged (MinJobAge) or never existed; other failures are errors.
struct JobQuery {
  bool gone = false;
  std::optional<JobInfo> job;  // set when !gone
};
Result<JobQuery> parseJobResponse(int httpStatus, std::string_view body, std::int64_t jobId);

// DELETE /job/{id} reply: cancelled (true) or already gone (false, error 2017).
Result<bool> parseCancelResponse(int httpStatus, std::string_view body);

// GET /jobs reply -> the job tagged with this BridgeJob uid, if any (adoption after a crash).
// More than one tagged job is an error (code "conflict") naming the ids: never pick one.
Result<std::optional<JobInfo>> findTaggedJob(int httpStatus, std::string_view body,
                                             std::string_view bridgeJobUid);

}  // namespace kc::bridge::slurm
