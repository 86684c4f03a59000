#pragma once
// The Slurm backend: slurmrestd (OpenAPI v0.0.38 to v0.0.41) over HTTP, through the pure codec
// (slurm_codec.hpp). Every request carries X-SLURM-USER-NAME / X-SLURM-USER-TOKEN from the
// SlurmTokenSource (minted HS256 tokens refreshed before expiry, or a token file re-read).
//
// The API version (SlurmOptions::apiVersion, docs/bridge.md "Slurm API versions"): an
// explicit "v0.0.NN" is used as is; "auto" uses the version the resourceURL names
// (`.../slurm/v0.0.38/`) and discovers when it names none (`http://host:6820/`); "newest"
// always discovers. Discovery (in prepare()) reads the `/slurm/v0.0.NN/` paths of
// GET /openapi/v3 (then GET /openapi), else probes GET /slurm/v0.0.NN/ping newest first, and
// takes the newest version the codec implements; a server offering none is a permanent error.
//
// slurmrestd has no endpoint for a job's files: outputs are read from the job's
// current_working_directory on the shared file system the bridge pod mounts (`sharedRoot`
// is prefixed to that path; empty = the same path as on the cluster). A `remote` script (an
// absolute path on the cluster) is submitted as a wrapper `exec '<path>'`; additionaldata files
// travel inside the batch script (slurm_script.hpp).
//
// A token given as is (Secret key `token`) can expire: slurmrestd does not say so (HTTP 500,
// errors such as "Unable to find JobId=N" with error_number -1), but the token's own `exp`
// does, and credentialAlert() reads it for the runner to report.

#include <memory>
#include <optional>
#include <string>

#include "libcore/net/http_client.hpp"
#include "services/bridge-pod/backend.hpp"
#include "services/bridge-pod/credentials.hpp"
#include "services/bridge-pod/slurm_codec.hpp"

namespace kc::bridge::pod {

struct SlurmOptions {
  std::string resourceUrl;          // http(s)://host:port/slurm/v0.0.NN/ or http(s)://host:port/
  std::string apiVersion = "auto";  // "auto", "newest" or "v0.0.NN"
  std::string credentialsDir;
  std::chrono::seconds tokenLifespan{600};
  // How long before a given token's `exp` credentialAlert() starts warning.
  std::chrono::seconds tokenWarning{300};
  std::string sharedRoot;
  std::string caFile;
  std::chrono::milliseconds timeout{30'000};
  kc::Clock* clock = nullptr;
};

class SlurmBackend final : public Backend {
 public:
  static Result<std::unique_ptr<SlurmBackend>> create(SlurmOptions options);
  const char* name() const override { return "slurm"; }
  // The API version spoken: fixed at create() or found by prepare().
  std::optional<slurm::ApiVersion> apiVersion() const { return version_; }
  std::uint64_t stagingLimit() const override;
  Status prepare() override;
  Result<std::optional<std::string>> findTagged(const JobContext& ctx) override;
  Result<std::string> submit(const JobContext& ctx) override;
  Result<Query> query(const std::string& id) override;
  Result<bool> cancel(const std::string& id) override;
  Result<std::string> fetchOutput(const JobContext& ctx, const std::string& id,
                                  const std::string& file) override;
  // The Secret key `token` when it is a JWT whose `exp` is past (reason SlurmTokenExpired:
  // slurmrestd 22.05 then answers every call with HTTP 500, e.g. "Unable to find JobId=N") or
  // within tokenWarning (SlurmTokenExpiring). nullopt for minted tokens and tokens that are not
  // JWTs.
  std::optional<CredentialAlert> credentialAlert() override;

 private:
  SlurmBackend(SlurmOptions options, std::unique_ptr<kc::net::HttpClient> http,
               std::optional<slurm::ApiVersion> version);
  // `path` below /slurm/<version> ("/job/submit"); send() needs the version known.
  Result<kc::net::Response> send(const std::string& method, const std::string& path,
                                 std::string body = {});
  // Any target below the resourceURL's root ("/openapi/v3").
  Result<kc::net::Response> sendRoot(const std::string& method, const std::string& target,
                                     std::string body = {});
  Status discover();
  Status ping();
  SlurmOptions options_;
  std::optional<slurm::ApiVersion> version_;
  std::unique_ptr<kc::net::HttpClient> http_;
  SlurmTokenSource tokens_;
};

// A relative output name that stays inside its directory (no "..", not absolute, not empty).
bool safeRelativePath(const std::string& file);

}  // namespace kc::bridge::pod
