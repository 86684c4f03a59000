#pragma once
// The BridgeJob resource (bridge.kubecomp.io/v1alpha1) as the operator reads it, and the
// ConfigMap contract between the operator and its bridge pods. Pure: no I/O. Part of the
// contract package (libcore/api); kept in namespace kc::bridge, which both sides use.
//
// The ConfigMap `<job>-bridge` is the only channel between the two:
//  - the operator owns the parameter keys (written once, when the job starts: later spec edits
//    do not change a running job), the identity keys and `kill`;
//  - the bridge pod owns `id` and the `status.*` keys, which the operator never writes (so
//    Metacontroller's three-way merge of the ConfigMap keeps them) and copies into the
//    BridgeJob status.
// One spelling per key, shared by both sides through the constants below (the original had
// `updateInterval` vs `updateinterval` and `status.jobStatus` vs `jobStatus`, so neither
// the poll interval nor the status ever arrived).

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "libcore/api/names.hpp"
#include "libcore/base/result.hpp"

namespace kc::bridge {

// The job states a bridge pod reports (the CRD's status.jobStatus enum, same spelling).
enum class JobStatus { kSubmitted, kRunning, kDone, kFailed, kKilled, kUnknown };
const char* jobStatusName(JobStatus status);
// Exact enum spelling only ("KILL", the original's value, is not a status).
std::optional<JobStatus> parseJobStatus(std::string_view text);
// DONE, FAILED, KILLED, and UNKNOWN (the backend lost track of the job: it will not change).
bool isTerminal(JobStatus status);

namespace cmkey {
// Identity (operator).
inline constexpr const char* kJobName = "bridgeJob.name";
inline constexpr const char* kJobNamespace = "bridgeJob.namespace";
inline constexpr const char* kJobUid = "bridgeJob.uid";  // the tag remote jobs carry
// Parameters (operator, frozen at the first sync).
inline constexpr const char* kImage = "image";
inline constexpr const char* kImagePullPolicy = "imagePullPolicy";
inline constexpr const char* kResourceUrl = "resourceURL";
inline constexpr const char* kResourceSecret = "resourceSecret";
inline constexpr const char* kUpdateInterval = "updateInterval";  // decimal seconds
inline constexpr const char* kJobProperties = "jobProperties";
inline constexpr const char* kJobScript = "jobData.jobScript";
inline constexpr const char* kScriptLocation = "jobData.scriptLocation";
inline constexpr const char* kScriptMetadata = "jobData.scriptMetadata";
inline constexpr const char* kJobParameters = "jobData.jobParameters";
inline constexpr const char* kScriptExtraLocation = "jobData.scriptExtraLocation";
inline constexpr const char* kAdditionalData = "jobData.additionalData";
inline constexpr const char* kS3Secret = "s3.secret";
inline constexpr const char* kS3Endpoint = "s3.endpoint";
inline constexpr const char* kS3Secure = "s3.secure";  // "true" / "false"
inline constexpr const char* kS3UploadBucket = "s3upload.bucket";
inline constexpr const char* kS3UploadFiles = "s3upload.files";
// Kill request (operator): "true" / "false".
inline constexpr const char* kKill = "kill";
// Written by the bridge pod only.
inline constexpr const char* kRemoteId = "id";
inline constexpr const char* kStatus = "status.jobStatus";
inline constexpr const char* kSubmitTime = "status.submitTime";
inline constexpr const char* kStartTime = "status.startTime";
inline constexpr const char* kCompletionTime = "status.completionTime";
inline constexpr const char* kMessage = "status.message";
}  // namespace cmkey

// What a job runs with. Built from the BridgeJob spec (validated as the CRD schema says, plus
// what a schema cannot say) before the job starts, and from the ConfigMap afterwards.
struct JobParameters {
  std::string image;
  std::string imagePullPolicy = "IfNotPresent";
  std::string resourceUrl;
  std::string resourceSecret;
  std::int64_t updateIntervalSec = 20;
  std::string jobProperties;  // JSON object text, or empty
  std::string jobScript;
  std::string scriptLocation = "remote";  // remote | inline | s3
  std::string scriptMetadata;
  std::string jobParameters;
  std::string scriptExtraLocation = "inline";  // inline | s3
  std::string additionalData;                  // comma-separated bucket:object
  std::string s3Secret;
  std::string s3Endpoint;
  bool s3Secure = true;
  std::string s3UploadBucket;
  std::string s3UploadFiles;

  bool usesS3() const;
  friend bool operator==(const JobParameters&, const JobParameters&) = default;
};

// spec -> parameters. Errors (code "invalid") name the field: missing required fields, wrong
// types, values outside an enum or range, jobproperties that is not a JSON object, S3 used
// without s3storage.s3secret, malformed bucket:object references. Unknown fields are ignored
// (the API server prunes them).
// The name an additionaldata object gets in the job's directory: the part of its key after the
// last '/'. Refused (invalid): empty (a key ending in '/'), "." or "..", control characters,
// longer than 255 bytes. parseSpec also refuses two objects with the same name.
Result<std::string> stagedFileName(const std::string& objectKey);

Result<JobParameters> parseSpec(const nlohmann::json& spec);

// The parameter keys of the ConfigMap (identity and kill are added by the caller).
std::map<std::string, std::string> parameterData(const JobParameters& p);
// The inverse, for a job that already started. Errors when a key is missing or malformed
// (someone edited the ConfigMap by hand).
Result<JobParameters> parametersFromData(const std::map<std::string, std::string>& data);

// The field `spec.kill`, false when absent or not a boolean.
bool killRequested(const nlohmann::json& spec);

}  // namespace kc::bridge
