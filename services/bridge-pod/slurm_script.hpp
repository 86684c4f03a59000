#pragma once
// The batch script the Slurm backend submits. slurmrestd takes script text and has no file
// transfer API, so:
//  - a `remote` jobscript (an absolute path on the cluster) becomes the wrapper
//    `#!/bin/sh` / `exec '<path>'`;
//  - inline and S3 scripts are submitted as they are;
//  - with jobdata.additionaldata the script gets a prologue: `#!/bin/sh`, then for each file
//    `base64 -d > '<name>' <<'BRIDGE_STAGED_EOF'` with the file's bytes in base64 (76-column
//    lines; the delimiter holds '_', which base64 never does), written into the job's working
//    directory (current_working_directory). Then the remote wrapper's `exec`, or for an
//    inline/S3 script the user's script, unchanged, written the same way to
//    `.bridge-script.$SLURM_JOB_ID` (mode 0700) and exec'd, so its own interpreter line, exit
//    code and signals are what Slurm sees. A failed write ends the job with exit 1 and a line
//    on stderr naming the file.
// Bounded: at most kSlurmStagingLimit bytes of files (slurmctld refuses batch scripts over its
// max_script_size, 4 MB by default; base64 adds a third).

#include <cstdint>
#include <string>

#include "services/bridge-pod/backend.hpp"

namespace kc::bridge::pod {

inline constexpr std::uint64_t kSlurmStagingLimit = 2ull << 20;

// Errors "invalid": a remote path that is not absolute or spans lines, an empty script, files
// over the limit.
Result<std::string> slurmBatchScript(const JobContext& ctx);

}  // namespace kc::bridge::pod
