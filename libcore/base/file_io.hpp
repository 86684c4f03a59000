#pragma once
// Small files a daemon keeps on its node (CDI specs, checkpoints): read with a size limit, and
// replaced whole or not at all, so a reader (a container runtime, the daemon after a crash)
// never sees half a file. Errors: "not_found", "forbidden", "unavailable" (other I/O),
// "invalid" (not a regular file), "too_large".

#include <cstddef>
#include <string>
#include <string_view>

#include "libcore/base/result.hpp"

namespace kc {

// The regular file's bytes when at most `limit`. A symlink or FIFO at the path is refused, not
// followed or waited on.
Result<std::string> readFileBounded(const std::string& path, std::size_t limit);
// A hidden temp file beside `path` (".<name>.tmp-XXXXXX"), filled, fsync'ed, given `mode`,
// renamed over `path`, then the directory fsync'ed: after a crash the file is the old or the new.
Status replaceFileAtomically(const std::string& path, std::string_view text, unsigned mode = 0644);
// Unlinks `path` and syncs its directory; absent is a success.
Status removeFileDurably(const std::string& path);
// Creates `dir` (and parents) with `mode` when missing.
Status ensureDirectory(const std::string& dir, unsigned mode = 0755);

}  // namespace kc
