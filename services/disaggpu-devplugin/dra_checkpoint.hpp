#pragma once
// The DRA plugin's checkpoint: the claims it prepared, so a restarted plugin answers kubelet's
// repeated NodePrepareResources the same way and knows what NodeUnprepareResources must remove
// (kubelet keeps its own claim cache and repeats both calls after either side restarts). One
// JSON file, replaced atomically.

#include <map>
#include <string>

#include "libcore/base/result.hpp"
#include "services/disaggpu-devplugin/dra_prepare.hpp"

namespace kc::devplugin {

// Claim UID -> what was prepared.
using PreparedClaims = std::map<std::string, PreparedClaim>;

inline constexpr std::size_t kMaxCheckpointBytes = 4 * 1024 * 1024;

std::string serializeCheckpoint(const PreparedClaims& claims);
// Strict: error "invalid" naming the field (a version other than 1, a claim without uid, ...).
Result<PreparedClaims> parseCheckpoint(std::string_view text);

class DraCheckpoint {
 public:
  explicit DraCheckpoint(std::string path) : path_(std::move(path)) {}
  // Absent: empty. Unreadable or malformed: the error (the caller decides; see DraDriver).
  Result<PreparedClaims> load() const;
  Status save(const PreparedClaims& claims) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace kc::devplugin
