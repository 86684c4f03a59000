#pragma once
// VniStore: the durable allocation table of vni-webhook, SQLite (WAL) via SQLiteCpp, with the
// libcore VniRange bitmap in memory as the allocation index.
//
// Table vni_allocs(uid, namespace, vni, ...) has PRIMARY KEY(uid, namespace) as in the seed
// PLUS UNIQUE(vni), so the database itself refuses a duplicate whatever the code above does.
// vni_released remembers when each VNI was last released (cooldown across restarts), vni_meta
// the next-fit cursor and the range the table was last opened with.
//
// Not thread-safe: one writer thread owns it (see VniWriter). apply() runs a batch of
// operations in ONE SQLite transaction, each operation in its own savepoint (atomic on its
// own), and commits once: group commit, one fsync for the whole batch.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "libcore/alloc/vni_range.hpp"
#include "libcore/base/result.hpp"
#include "services/vni-webhook/hook_decision.hpp"

namespace SQLite {
class Database;
class Statement;
}  // namespace SQLite

namespace kc::vni {

enum class Durability {
  kFull,    // PRAGMA synchronous=FULL: every commit is fsynced before the reply (default)
  kNormal,  // WAL + NORMAL: survives a process crash, may lose the last commits on power loss
};

struct StoreOptions {
  std::string path;  // SQLite file; its directory must exist
  alloc::VniRangeOptions range;
  Durability durability = Durability::kFull;
};

// What open() found, for the start-up log and metrics.
struct StoreReport {
  std::uint32_t allocations = 0;
  std::uint32_t outOfRange = 0;    // kept valid, never handed out again by this range
  std::uint32_t reservedHeld = 0;  // held values that the reserved set now excludes
  std::uint32_t coolingRestored = 0;
  std::optional<std::pair<Vni, Vni>> previousRange;  // set when the range changed
  std::vector<std::string> notes;                    // one line per finding
};

struct AllocationRow {
  std::string uid;
  std::string ns;
  Vni vni = 0;
  std::string kind;
  std::string name;
  std::int64_t allocatedAtMs = 0;
};

class VniStore {
 public:
  // Opens (creating the schema if needed), rebuilds the bitmap from the table. Errors:
  // "invalid" (bad range), "unavailable" (cannot open/initialise the file).
  static Result<std::unique_ptr<VniStore>> open(const StoreOptions& options, alloc::VniTime now,
                                                StoreReport* report = nullptr);
  ~VniStore();
  VniStore(const VniStore&) = delete;
  VniStore& operator=(const VniStore&) = delete;

  // Runs `ops` in one transaction (each op in a savepoint) and commits once. An op that fails
  // ("exhausted", "internal") writes nothing; if the commit itself fails every op reports
  // "unavailable" and the in-memory state is rebuilt from the file.
  std::vector<StoreOutcome> apply(std::span<const StoreOp> ops, alloc::VniTime now);
  StoreOutcome applyOne(const StoreOp& op, alloc::VniTime now);

  std::optional<Vni> find(const OwnerKey& owner) const;
  alloc::VniCounts counts(alloc::VniTime now);
  std::uint32_t outOfRangeHeld() const { return outOfRange_; }
  const alloc::VniRange& range() const { return *range_; }

  // Every row (admin listing, tests), ordered by namespace, vni.
  Result<std::vector<AllocationRow>> list() const;

 private:
  explicit VniStore(StoreOptions options);
  Status initialise(alloc::VniTime now, StoreReport* report);
  StoreOutcome execute(const StoreOp& op, alloc::VniTime now);
  Status reload(alloc::VniTime now, StoreReport* report);

  StoreOptions options_;
  std::unique_ptr<SQLite::Database> db_;
  std::unique_ptr<SQLite::Statement> insert_;
  std::unique_ptr<SQLite::Statement> delete_;
  std::unique_ptr<SQLite::Statement> released_;
  std::unique_ptr<alloc::VniRange> range_;
  // Committed-or-in-this-batch owners; key = namespace + '/' + uid.
  std::unordered_map<std::string, Vni> owners_;
  std::uint32_t outOfRange_ = 0;
  bool cursorDirty_ = false;
};

std::string ownerMapKey(const OwnerKey& owner);

// Read-only access for the admin CLI (works while the webhook runs: WAL readers never block).
Result<std::vector<AllocationRow>> readAllocations(const std::string& path);
// Deletes the given owners' rows (admin --release), recording the release time for the
// cooldown. Returns how many rows were deleted.
Result<std::uint32_t> releaseOwners(const std::string& path, const std::vector<OwnerKey>& owners,
                                    std::int64_t nowMs);

}  // namespace kc::vni
