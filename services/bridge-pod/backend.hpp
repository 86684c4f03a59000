#pragma once
// The bridge pod's view of a remote workload manager: one Backend per kind (Slurm, ...). The
// runner (runner.hpp) owns the job's life; a backend only speaks its API. Every call is one
// bounded exchange; retrying and pacing are the runner's job.
//
// Error codes a backend returns and what the runner does with them:
//  - unavailable, timeout, server_error, throttled, unauthorized (a token may be re-minted or
//    the mounted Secret rotated): transient, retried with backoff;
//  - anything else (invalid, forbidden, conflict, protocol, not_found): permanent for this call.
// Except: when a call fails with unauthorized, forbidden or server_error and the backend's
// credentialAlert() says its credential has expired, the runner reports that and retries
// slowly until the credential is renewed (issue 24 section 5).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "libcore/api/bridge_job.hpp"
#include "libcore/base/result.hpp"
#include "libcore/net/http_client.hpp"

namespace kc::bridge::pod {

using WallSeconds = std::chrono::sys_seconds;

// A file of `jobdata.additionaldata`, downloaded from S3 by the runner before the submit: the
// object's base name (checked by stagedFileName, bridge_job.hpp) and its bytes. Each backend places
// it in the job's working directory its own way.
struct StagedFile {
  std::string name;
  std::string bytes;
};

// What a job is run with: the ConfigMap's parameters, identity and the script text.
struct JobContext {
  std::string jobName;  // the BridgeJob's name
  std::string jobNamespace;
  std::string uid;  // the BridgeJob's uid: the tag remote jobs carry
  JobParameters params;
  std::string script;             // inline or S3 script text; for `remote`, the remote path
  std::string scriptMetadata;     // JSON object text (inline or fetched from S3), may be empty
  std::string jobParametersJson;  // JSON object text, may be empty
  std::vector<StagedFile> additionalFiles;  // jobdata.additionaldata, in list order, names unique
};

// A remote job as the backend sees it.
struct RemoteJob {
  JobStatus status = JobStatus::kUnknown;
  std::string nativeState;  // the backend's own spelling ("COMPLETED", "SUCCEEDED", ...)
  std::optional<WallSeconds> submitTime;
  std::optional<WallSeconds> startTime;
  std::optional<WallSeconds> endTime;  // only meaningful once final
  std::string message;                 // exit code, reason, ...
};

struct Query {
  bool gone = false;  // the backend no longer knows the id (purged, deleted)
  RemoteJob job;      // when !gone
};

// A credential that a person must renew, as the backend knows it (Slurm: the `exp` of a token
// given as is). Never holds the credential itself.
struct CredentialAlert {
  bool expired = false;  // true: it has run out; false: it runs out soon (a warning ahead)
  std::string reason;    // the Event's reason, CamelCase ("SlurmTokenExpired")
  std::string message;   // for people: "Slurm token expired at 2026-01-01T00:00:00Z"
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // The most bytes of `jobdata.additionaldata` files (in total) this backend can place in a
  // job's directory; 0: it cannot stage files at all (the runner refuses such a job before
  // anything is downloaded or submitted).
  virtual std::uint64_t stagingLimit() const = 0;
  // Reachability / log-on before the first call (Slurm: ping). Transient errors are retried.
  virtual Status prepare() = 0;
  // The remote id of a job already submitted for ctx.uid (adoption after a crash), if any.
  virtual Result<std::optional<std::string>> findTagged(const JobContext& ctx) = 0;
  // Submits; the remote id. Errors `invalid` are final (bad job description).
  virtual Result<std::string> submit(const JobContext& ctx) = 0;
  virtual Result<Query> query(const std::string& id) = 0;
  // Cancels; false when the backend no longer knew the job.
  virtual Result<bool> cancel(const std::string& id) = 0;
  // The bytes of output `file` (a relative name) of a finished job (code not_found when it
  // does not exist).
  virtual Result<std::string> fetchOutput(const JobContext& ctx, const std::string& id,
                                          const std::string& file) = 0;
  // Called once when the pod ends, however it ends after the backend was made (final state,
  // kill, SIGTERM, an error): gives back what the backend holds on the remote side (LSF
  // Application Center: the session token). Never fails the pod: problems are logged only.
  virtual void release() {}
  // Whether the credential the next call would use has expired or expires soon; nullopt when
  // it is fine or nobody can tell (the default: the backend renews its own credentials or
  // cannot read their expiry).
  virtual std::optional<CredentialAlert> credentialAlert() { return std::nullopt; }
};

// Whether an error from a backend, S3 or the API server is worth retrying.
bool isTransient(const Error& e);

// An HTTP reply status as a backend error code (5xx server_error, 401 unauthorized, 404
// not_found, 429 throttled, other 4xx invalid), with the start of the body in the message.
Error httpError(const std::string& what, unsigned status, const std::string& body);
// The first 200 bytes of a reply body, on one line (for messages; replies carry no secrets).
std::string excerpt(const std::string& body);

// The HTTP client of a backend: base URL = resourceURL without trailing '/', Accept JSON.
// Errors (code "invalid") name resourceURL.
Result<std::unique_ptr<kc::net::HttpClient>> backendHttpClient(const std::string& resourceUrl,
                                                               const std::string& caFile,
                                                               std::chrono::milliseconds timeout);

}  // namespace kc::bridge::pod
