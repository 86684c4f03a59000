#pragma once
// The Slurm backend: slurmrestd (OpenAPI v0.0.38) over HTTP, through the pure codec
// (slurm_codec.hpp). Every request carries X-SLURM-USER-NAME / X-SLURM-USER-TOKEN from the
// SlurmTokenSource (minted HS256 tokens refreshed before expiry, or a token file re-read).
//
// slurmrestd has no endpoint for a job's files: outputs are read from the job's
// current_working_directory on the shared file system the bridge pod mounts (`sharedRoot`
// is prefixed to that path; empty = the same path as on the cluster). A `remote` script (an
// absolute path on the cluster) is submitted as a wrapper `exec '<path>'`; additionaldata files
// travel inside the batch script (slurm_script.hpp).

#include <memory>
#include <string>

#include "libcore/net/http_client.hpp"
#include "services/bridge-pod/backend.hpp"
#include "services/bridge-pod/credentials.hpp"

namespace kc::bridge::pod {

struct SlurmOptions {
  std::string resourceUrl;  // http(s)://host:port/slurm/v0.0.38/
  std::string credentialsDir;
  std::chrono::seconds tokenLifespan{600};
  std::string sharedRoot;
  std::string caFile;
  std::chrono::milliseconds timeout{30'000};
  kc::Clock* clock = nullptr;
};

class SlurmBackend final : public Backend {
 public:
  static Result<std::unique_ptr<SlurmBackend>> create(SlurmOptions options);
  const char* name() const override { return "slurm"; }
  std::uint64_t stagingLimit() const override;
  Status prepare() override;
  Result<std::optional<std::string>> findTagged(const JobContext& ctx) override;
  Result<std::string> submit(const JobContext& ctx) override;
  Result<Query> query(const std::string& id) override;
  Result<bool> cancel(const std::string& id) override;
  Result<std::string> fetchOutput(const JobContext& ctx, const std::string& id, const std::string& file) override;

 private:
  SlurmBackend(SlurmOptions options, std::unique_ptr<kc::net::HttpClient> http);
  Result<kc::net::Response> send(const std::string& method, const std::string& target, std::string body = {});
  SlurmOptions options_;
  std::unique_ptr<kc::net::HttpClient> http_;
  SlurmTokenSource tokens_;
};

// A relative output name that stays inside its directory (no "..", not absolute, not empty).
bool safeRelativePath(const std::string& file);

}  // namespace kc::bridge::pod
