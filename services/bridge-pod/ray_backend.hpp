#pragma once
// The Ray backend: the Ray Jobs REST API of the dashboard (default port 8265).
//  - submission_id is deterministic, `bridge-<uid>`: adoption is GET /api/jobs/<that id>, and a
//    second submit answered 400 "... already exists" means the first one arrived (adopted);
//  - POST /api/jobs/ (the trailing slash is part of the route), GET /api/jobs/<id>,
//    POST /api/jobs/<id>/stop ({"stopped": bool}), GET /api/jobs/<id>/logs ({"logs": text});
//    404 (text "Job X does not exist") means gone; times are milliseconds since the epoch;
//  - the entrypoint: `remote` -> jobscript is the command line run on the cluster; `inline` /
//    `s3` -> the script text travels in runtime_env.env_vars BRIDGE_SCRIPT and the entrypoint
//    runs it with `python` (no package upload needed); jobparameters (a JSON object) is in
//    BRIDGE_JOB_PARAMETERS; scriptmetadata {"pip": {name: version}, "env": {K: V}} becomes
//    runtime_env pip ["name==version"] and env_vars; jobproperties may set entrypoint_num_cpus,
//    entrypoint_num_gpus, entrypoint_memory, entrypoint_resources;
//  - additionaldata: a zip package uploaded with PUT /api/packages/gcs/_ray_pkg_<hash>.zip
//    (unless GET finds it there) and named in runtime_env.working_dir (ray_package.hpp);
//  - outputs: only `logs` (the job's driver log) can be fetched;
//  - auth: Secret key `token` when present -> Authorization: Bearer (Ray >= 2.52 token mode);
//    no token: no header (Ray's default has no authentication).

#include <memory>
#include <string>

#include "libcore/net/http_client.hpp"
#include "services/bridge-pod/backend.hpp"

namespace kc::bridge::pod {

struct RayOptions {
  std::string resourceUrl;  // http(s)://ray-head:8265
  std::string credentialsDir;
  std::string caFile;
  std::chrono::milliseconds timeout{30'000};
};

// The submission id of a BridgeJob's Ray job.
std::string raySubmissionId(const std::string& uid);
// The POST /api/jobs/ body (errors "invalid" name the field); `workingDir`, when not empty, is
// the URI of the uploaded additionaldata package (runtime_env.working_dir).
Result<nlohmann::json> buildRaySubmitBody(const JobContext& ctx,
                                          const std::string& workingDir = {});
// A Ray job status string -> BridgeJob status (nullopt: unknown string).
std::optional<JobStatus> mapRayStatus(std::string_view status);
// GET /api/jobs/<id> reply -> Query (404 -> gone).
Result<Query> parseRayJob(unsigned httpStatus, const std::string& body);

class RayBackend final : public Backend {
 public:
  static Result<std::unique_ptr<RayBackend>> create(RayOptions options);
  const char* name() const override { return "ray"; }
  std::uint64_t stagingLimit() const override;
  Status prepare() override;
  Result<std::optional<std::string>> findTagged(const JobContext& ctx) override;
  Result<std::string> submit(const JobContext& ctx) override;
  Result<Query> query(const std::string& id) override;
  Result<bool> cancel(const std::string& id) override;
  Result<std::string> fetchOutput(const JobContext& ctx, const std::string& id,
                                  const std::string& file) override;

 private:
  RayBackend(RayOptions options, std::unique_ptr<kc::net::HttpClient> http);
  Result<kc::net::Response> send(const std::string& method, const std::string& target,
                                 std::string body = {},
                                 const std::string& contentType = "application/json");
  // Uploads the additionaldata package unless the dashboard has it; its URI.
  Result<std::string> uploadPackage(const std::vector<StagedFile>& files);
  RayOptions options_;
  std::unique_ptr<kc::net::HttpClient> http_;
};

}  // namespace kc::bridge::pod
