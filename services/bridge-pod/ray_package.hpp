#pragma once
// jobdata.additionaldata on Ray: the files become a runtime_env `working_dir` package, as Ray's
// own job SDK uploads a local working_dir. A zip archive (libzip, in memory) holds each file at
// its top level; its content-addressed URI `gcs://_ray_pkg_<32 hex>.zip` names it; the dashboard
// takes it with `PUT /api/packages/gcs/<name>` after `GET` answered 404 (200: already there),
// and the job's runtime_env.working_dir is that URI: Ray unpacks it on the node and runs the
// entrypoint inside it, so the files are in the job's working directory.

#include <string>
#include <vector>

#include "services/bridge-pod/backend.hpp"

namespace kc::bridge::pod {

inline constexpr std::uint64_t kRayStagingLimit = 32ull << 20;

// The zip archive of `files` (deflated, one fixed modification time, so that the same files
// give the same bytes). Errors: internal (libzip failed).
Result<std::string> rayZipPackage(const std::vector<StagedFile>& files);
// "gcs://_ray_pkg_<first 32 hex digits of the archive's SHA-256>.zip".
std::string rayPackageUri(const std::string& zip);

}  // namespace kc::bridge::pod
