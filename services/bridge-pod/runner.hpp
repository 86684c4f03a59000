#pragma once
// The bridge pod's life for one BridgeJob, whatever the backend:
//  1. read the ConfigMap (parameters, identity, `id`, `kill`); a final status there ends the
//     pod at once (exit 0 for DONE, 1 otherwise);
//  2. without an `id`: adopt a job already tagged with the BridgeJob's uid (a pod that died
//     between submit and recording the id), else submit; the id goes into the ConfigMap
//     before anything else (with SUBMITTED and the submit time; conflicts re-read, transient
//     errors retried with backoff, never given up: the id must not be lost). A submit that
//     failed in transit is followed by another look for the tag before submitting again;
//  3. poll every updateInterval (backoff on transient errors, reset on success), writing the
//     status when it changes; `kill: "true"` cancels the job (also while pending);
//  4. at a final state: fetch each `s3upload.files` output and put it at
//     `<bucket>/<jobname>/<file>`, write the final status, times and message; exit 0 for DONE,
//     1 otherwise. A job that vanished before its final state was seen is UNKNOWN (KILLED
//     when its cancel had been sent).
// Permanent errors (bad parameters, a refused submit) are written to status.message with
// FAILED; a permanent error while polling is written to status.message and ends the pod with
// exit 1 and no final state, so that the operator starts a replacement that adopts the job.
// A stop request (SIGTERM: the pod deleted or evicted) ends the pod the same way at its next
// wait or step: exit 1, no final state, the remote job left running for a replacement.
// However the pod ends once its backend exists, the backend's release() runs last (LSF: the
// session token is logged out).
// An expired credential (issue 24 section 5): a backend call failing unauthorized, forbidden or
// server_error while the backend's credentialAlert() says its credential expired is written to
// status.message ("Slurm token expired at <time>; ...") and told as a Warning Event once per
// expiry, then retried every credentialRetry instead of backing off (the credential is re-read
// on every call: a renewed Secret is picked up); the status is rewritten once calls work again.
// A credential that expires soon is warned of once (Event and log) after a call that worked.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "libcore/base/backoff.hpp"
#include "libcore/base/clock.hpp"
#include "services/bridge-pod/backend.hpp"
#include "services/bridge-pod/job_store.hpp"
#include "services/bridge-pod/s3_client.hpp"

namespace kc::bridge::pod {

// Set from another thread (main's SIGTERM handling) to end a running pod early; the runner's
// waits end at once when it is set.
class StopRequest {
 public:
  void request();
  bool requested() const;
  // Waits up to d on `clock`; true when a stop was requested (before or during the wait).
  bool waitFor(kc::Clock& clock, std::chrono::milliseconds d);

 private:
  mutable std::mutex mu_;  // guards stop_
  std::condition_variable cv_;
  bool stop_ = false;
};

// Where the runner tells people what they must act on: Events about the BridgeJob (main:
// KubeJobEvents, job_events.hpp). Best effort: a failure to record is the recorder's to log.
class JobEvents {
 public:
  virtual ~JobEvents() = default;
  virtual void warning(const JobContext& job, const std::string& reason,
                       const std::string& message) = 0;
};

struct RunnerOptions {
  std::string s3CredentialsDir = "/s3credentials";
  std::string s3Region = "us-east-1";
  std::string s3CaFile;
  BackoffParams backoff{std::chrono::milliseconds(1000), std::chrono::milliseconds(60'000), 2.0,
                        0.2};
  int uploadAttempts = 5;
  // The retry period while the backend's credential has expired (slower than any backoff: every
  // call fails until a person renews the Secret).
  std::chrono::milliseconds credentialRetry{300'000};
  // The poll interval when positive (tests); otherwise the ConfigMap's updateInterval.
  std::chrono::milliseconds pollIntervalOverride{0};
  kc::Clock* clock = nullptr;
  StopRequest* stop = nullptr;  // not owned; null: the pod only ends with its job
  JobEvents* events = nullptr;  // not owned; null: warnings are only logged
};

using BackendFactory = std::function<Result<std::unique_ptr<Backend>>(const JobParameters&)>;

// Runs the job to its end; the process exit code (0 DONE, 1 anything else).
int runBridgePod(JobStore& store, const BackendFactory& makeBackend, const RunnerOptions& options);

}  // namespace kc::bridge::pod
