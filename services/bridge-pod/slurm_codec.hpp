#pragma once
// The Slurm REST (slurmrestd) codec of the bridge pod's Slurm backend: request bodies and paths
// out, replies in, for the OpenAPI versions v0.0.38 (Slurm 22.05), v0.0.39 (23.02), v0.0.40
// (23.11) and v0.0.41 (24.05). Pure: no I/O, no clock.
//
// Bodies are built with nlohmann::json, never by string formatting (the original's Sprintf body
// broke on a quote or newline in the script). Replies are read strictly: a missing or mistyped
// field is an error (code "protocol"), never a default; a non-empty `errors` array is a failure
// even with HTTP 200.
//
// What differs between the versions (docs/bridge.md, "Slurm API versions"):
//  - submit: v0.0.38 takes {"job": {...}, "script": "..."} with `environment` an object of
//    strings and `nodes` [min, max]; v0.0.39+ take the script inside the job
//    ({"job": {"script": ...}}), `environment` as an array of "NAME=value" strings, `nodes` as
//    a "min-max" string, `mail_type` as an array of flags and no `gres` (it is `tres_per_node`
//    "gres/<name>");
//  - numbers in replies: plain integers in v0.0.38; v0.0.39+ may send {"set", "infinite",
//    "number"} objects (times from v0.0.40, exit_code in v0.0.39); both shapes are read;
//  - job_state: one string up to v0.0.39, an array of the base state and its flags from
//    v0.0.40 (collapsed to the one name squeue shows, then mapped with the same table);
//  - exit_code: a raw wait status up to v0.0.39, {"status": [...], "return_code",
//    "signal": {"id", "name"}} from v0.0.40.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/api/bridge_job.hpp"
#include "libcore/base/result.hpp"

namespace kc::bridge::slurm {

// The slurmrestd OpenAPI versions the codec speaks.
enum class ApiVersion : int { kV0038 = 38, kV0039 = 39, kV0040 = 40, kV0041 = 41 };

// Every version the codec implements, newest first.
std::vector<ApiVersion> implementedVersions();
std::string versionName(ApiVersion v);                          // "v0.0.40"
std::optional<ApiVersion> parseVersion(std::string_view name);  // "v0.0.40" -> kV0040

// A resourceURL split at its `/slurm/v0.0.NN/` part: root is everything before `/slurm`
// (scheme, host, port and any proxy prefix, no trailing '/'), version the named version
// (any "v<a>.<b>.<c>", implemented or not) or empty when the URL names none. Errors (code
// "invalid"): a `/slurm/` path without a version, anything after the version.
struct ResourceUrl {
  std::string root;
  std::string version;
};
Result<ResourceUrl> splitResourceUrl(std::string_view url);

// The `/slurm/v0.0.NN/` versions an OpenAPI document (GET /openapi/v3 or /openapi) lists in
// its `paths`, sorted oldest first, without duplicates. Errors (code "protocol"): a body that
// is not an OpenAPI object with a `paths` object.
Result<std::vector<std::string>> offeredVersions(std::string_view openapiBody);
// The newest version in `offered` the codec implements, if any.
std::optional<ApiVersion> newestImplemented(const std::vector<std::string>& offered);

// What the bridge pod submits.
struct SubmitInput {
  std::string script;         // the batch script, verbatim (its #SBATCH lines are ignored)
  std::string jobProperties;  // JSON object text: Slurm job fields (see kJobFields)
  std::string bridgeJobUid;   // tags the job (comment) so a restarted pod can adopt it
  std::string defaultName;    // the job name when jobProperties has none
};

// The `comment` a job carries: "bridgejob-uid=<uid>".
std::string uidTag(std::string_view bridgeJobUid);

// The body of POST /slurm/<version>/job/submit: {"job": {...}, "script": "..."} (v0.0.38) or
// {"job": {..., "script": "..."}} (v0.0.39+), the job fields in the version's shapes.
// Errors (code "invalid") name the property: unknown keys, wrong types, out-of-range values,
// a missing or empty `environment` or `current_working_directory`, a `comment` (reserved for
// the tag), an empty script or uid.
Result<nlohmann::json> buildSubmitBody(const SubmitInput& in,
                                       ApiVersion version = ApiVersion::kV0038);

// The property keys accepted in jobProperties (v0.0.38 job field names, translated for newer
// versions), for docs.
std::vector<std::string> jobFieldNames();

// `<resourceURL>/job/<id>` etc., joined with exactly one '/' (the original's cancel URL lost it).
std::string joinUrl(std::string_view base, std::string_view path);
std::string jobPath(std::string_view resourceUrl, std::int64_t jobId);
std::string submitPath(std::string_view resourceUrl);
std::string jobsPath(std::string_view resourceUrl);

// A raw wait status (Slurm's exit_code in v0.0.38) decoded.
struct ExitStatus {
  // kUnknown: Slurm has no exit status (v0.0.39+ "set": false, v0.0.40+ status INVALID).
  enum class Kind { kExited, kSignaled, kLaunchFailed, kUnknown };
  Kind kind = Kind::kExited;
  int code = 0;  // kExited: exit code; kSignaled: signal number; kLaunchFailed: Slurm error
                 // (-1 when the version reports none)
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

// A v0.0.40+ job_state array (one base state plus flags) as the one name squeue shows: the
// first flag present in Slurm's display order (COMPLETING, STAGE_OUT, CONFIGURING, RESIZING,
// REQUEUED, REQUEUE_FED, REQUEUE_HOLD, SPECIAL_EXIT, STOPPED, REVOKED, RESV_DEL_HOLD,
// SIGNALING, POWER_UP_NODE), else the base state; LAUNCH_FAILED, RECONFIG_FAIL and UPDATE_DB
// are not shown. Errors (code "protocol"): no or two base states, an unknown string.
Result<std::string> collapseJobState(const std::vector<std::string>& states);

// One job of GET /job/{id} or GET /jobs.
struct JobInfo {
  std::int64_t jobId = 0;
  std::string name;
  std::string comment;
  std::string jobState;                    // as Slurm spells it (v0.0.40+: the collapsed array)
  std::vector<std::string> jobStateFlags;  // v0.0.40+: the array as sent
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

// The replies below are read in the shapes of `version` (see the top of this file).

// GET /job/{id} reply. `gone` when slurmrestd answers a failure status (500 in every version
// we know) with error 2017 ("Invalid job id specified"): the job was purged (MinJobAge) or
// never existed; other failures are errors.
struct JobQuery {
  bool gone = false;
  std::optional<JobInfo> job;  // set when !gone
};
Result<JobQuery> parseJobResponse(int httpStatus, std::string_view body, std::int64_t jobId,
                                  ApiVersion version = ApiVersion::kV0038);

// DELETE /job/{id} reply: cancelled (true) or already gone (false, error 2017).
Result<bool> parseCancelResponse(int httpStatus, std::string_view body);

// GET /jobs reply -> the job tagged with this BridgeJob uid, if any (adoption after a crash).
// More than one tagged job is an error (code "conflict") naming the ids: never pick one.
Result<std::optional<JobInfo>> findTaggedJob(int httpStatus, std::string_view body,
                                             std::string_view bridgeJobUid,
                                             ApiVersion version = ApiVersion::kV0038);

}  // namespace kc::bridge::slurm
