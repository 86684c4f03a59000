#pragma once
// The thin I/O part of libcore/cdi: which control device nodes the host has, and our spec files
// in a CDI spec directory (/var/run/cdi for specs that live as long as the node agent's state,
// /etc/cdi for static ones). Runtimes rescan the directory and may read a file at any moment, so
// a spec is only ever replaced whole (temp file in the same directory, fsync, rename).

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::cdi {

inline constexpr std::size_t kMaxSpecBytes = 1024 * 1024;
inline constexpr std::size_t kMaxTagLength = 100;

// The names among kControlNodeNames (cdi_spec.hpp) that exist under devRoot, in that order.
std::vector<std::string> presentControlNodes(const std::string& devRoot);

// Our spec files in one directory: "<vendor>-<class>_<tag>.json" ("kubecomp.io-gpu_<tag>.json",
// the name the CDI reference library gives a transient spec). The tag says what the spec is for
// (e.g. "node", or a claim's UID). Not thread-safe: one owner per directory.
class SpecDir {
 public:
  explicit SpecDir(std::string dir);  // e.g. /var/run/cdi; created (0755) on first write

  // [A-Za-z0-9_.-], 1..kMaxTagLength characters, not starting with '.': a tag never leaves the
  // directory nor names a hidden (temp) file.
  static bool isValidTag(std::string_view tag);

  const std::string& dir() const { return dir_; }
  // The file of `tag`; "" when the tag is not valid.
  std::string pathFor(std::string_view tag) const;

  // Writes the spec as the file of `tag`, mode 0644, atomically (a temp file in the directory,
  // fsync, rename, fsync of the directory). The same content already there is a success that
  // touches nothing. Refuses (errc::kInvalid, nothing written) an invalid tag and a spec that
  // parseOurSpec refuses, so every file here is one a runtime can load.
  Status write(std::string_view tag, const nlohmann::json& spec);
  // Removes the file of `tag`; absent is a success.
  Status remove(std::string_view tag);
  // The spec of `tag` (errc::kNotFound when absent; at most kMaxSpecBytes).
  Result<nlohmann::json> read(std::string_view tag) const;
  // The tags of our files present, sorted; other vendors' files and temp files are ignored.
  std::vector<std::string> tags() const;

 private:
  std::string dir_;
};

}  // namespace kc::cdi
