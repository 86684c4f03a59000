#pragma once
// Mirroring a freshly written fake host tree onto the live one that a plugin is reading. The
// CLI runs one process per command while FakeHostTree keeps its GPUs in memory, so each command
// writes the whole host anew into a staging tree and only the difference reaches the live tree:
// entries that did not change are never touched (a reader never sees a GPU vanish and come back),
// new files and links appear whole (written in the staging tree, then renamed into place).

#include <filesystem>
#include <set>
#include <string>

#include "libcore/base/result.hpp"

namespace kc::fakehost {

// Writes a node agent made into the live tree since it was last mirrored: the regular files
// that are empty under `fresh` (as FakeHostTree writes sysfs attributes such as `remove` and
// `rescan`) but hold text under `live`. Their text is copied into `fresh`, so FakeHostTree sees
// the requests; the relative paths are returned for mirrorTree.
Result<std::set<std::string>> pullWrites(const std::filesystem::path& fresh,
                                         const std::filesystem::path& live);

// The relative paths of every entry under `dir` (directories, files, links; links not
// followed).
Result<std::set<std::string>> listTree(const std::filesystem::path& dir);

// Makes `live` hold what `fresh` holds (directories, symlinks with their targets, regular files
// with their text), leaving equal entries alone, and removes from `live` the entries of
// `before` (what fresh held before the command changed it) that fresh no longer holds; entries
// nobody wrote through us (a device node a test added by hand) are left alone. One exception:
// a file empty under `fresh` whose live text was written after pullWrites looked (not in
// `pulled`) keeps that text, so a request made meanwhile is not lost. Temporary entries are made
// at `scratch` (a path on the same file system, not under `live`) and renamed into place.
Status mirrorTree(const std::filesystem::path& fresh, const std::filesystem::path& live,
                  const std::set<std::string>& before, const std::set<std::string>& pulled,
                  const std::filesystem::path& scratch);

}  // namespace kc::fakehost
