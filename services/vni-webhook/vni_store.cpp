#include "services/vni-webhook/vni_store.hpp"

#include <SQLiteCpp/SQLiteCpp.h>

#include <exception>
#include <string>

namespace kc::vni {

namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS vni_allocs (
  uid             TEXT    NOT NULL,
  namespace       TEXT    NOT NULL,
  vni             INTEGER NOT NULL UNIQUE CHECK (vni > 0 AND vni < 65536),
  kind            TEXT    NOT NULL DEFAULT '',
  name            TEXT    NOT NULL DEFAULT '',
  allocated_at_ms INTEGER NOT NULL,
  PRIMARY KEY (uid, namespace)
);
CREATE TABLE IF NOT EXISTS vni_released (
  vni            INTEGER PRIMARY KEY,
  released_at_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS vni_meta (
  key   TEXT PRIMARY KEY,
  value INTEGER NOT NULL
);
)sql";

std::int64_t metaValue(SQLite::Database& db, const char* key, std::int64_t fallback) {
  SQLite::Statement q(db, "SELECT value FROM vni_meta WHERE key = ?");
  q.bind(1, key);
  return q.executeStep() ? q.getColumn(0).getInt64() : fallback;
}

void setMeta(SQLite::Database& db, const char* key, std::int64_t value) {
  SQLite::Statement q(db, "INSERT OR REPLACE INTO vni_meta(key, value) VALUES (?, ?)");
  q.bind(1, key);
  q.bind(2, static_cast<int64_t>(value));
  q.exec();
}

bool needsWrite(const StoreOp& op, const std::unordered_map<std::string, Vni>& owners) {
  const bool held = owners.count(ownerMapKey(op.owner)) != 0;
  switch (op.kind) {
    case StoreOp::Kind::kAcquire:
      return !held && !(op.deferTo && owners.count(ownerMapKey(*op.deferTo)) != 0);
    case StoreOp::Kind::kRelease:
      return held;
    case StoreOp::Kind::kLookup:
    case StoreOp::Kind::kNone:
      return false;
  }
  return true;
}

std::string rangeText(Vni min, Vni max) {
  std::string t("[");
  t.append(std::to_string(min)).append(", ").append(std::to_string(max)).append(")");
  return t;
}

}  // namespace

std::string ownerMapKey(const OwnerKey& owner) {
  std::string k;
  k.reserve(owner.ns.size() + owner.uid.size() + 1);
  k.append(owner.ns).append("/").append(owner.uid);
  return k;
}

VniStore::VniStore(StoreOptions options) : options_(std::move(options)) {}
VniStore::~VniStore() = default;

Result<std::unique_ptr<VniStore>> VniStore::open(const StoreOptions& options, alloc::VniTime now,
                                                 StoreReport* report) {
  auto range = alloc::VniRange::create(options.range);
  if (!range) {
    return range.error();
  }
  std::unique_ptr<VniStore> store(new VniStore(options));
  try {
    store->db_ = std::make_unique<SQLite::Database>(
        options.path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE, 5000);
    store->db_->exec("PRAGMA journal_mode=WAL");
    store->db_->exec(options.durability == Durability::kFull ? "PRAGMA synchronous=FULL"
                                                             : "PRAGMA synchronous=NORMAL");
    store->db_->exec(kSchema);
    store->insert_ = std::make_unique<SQLite::Statement>(
        *store->db_,
        "INSERT INTO vni_allocs(uid, namespace, vni, kind, name, allocated_at_ms) "
        "VALUES (?, ?, ?, ?, ?, ?)");
    store->delete_ = std::make_unique<SQLite::Statement>(
        *store->db_, "DELETE FROM vni_allocs WHERE uid = ? AND namespace = ?");
    store->released_ = std::make_unique<SQLite::Statement>(
        *store->db_, "INSERT OR REPLACE INTO vni_released(vni, released_at_ms) VALUES (?, ?)");
  } catch (const std::exception& e) {
    return makeError(kc::errc::kUnavailable,
                     "cannot open VNI database " + options.path + ": " + e.what());
  }
  if (Status s = store->initialise(now, report); !s) {
    return s.error();
  }
  return store;
}

Status VniStore::initialise(alloc::VniTime now, StoreReport* report) {
  StoreReport local;
  StoreReport& r = report ? *report : local;
  try {
    SQLite::Transaction tx(*db_);
    const auto oldMin = metaValue(*db_, "range_min", -1);
    const auto oldMax = metaValue(*db_, "range_max", -1);
    if (oldMin >= 0 && (oldMin != options_.range.min || oldMax != options_.range.max)) {
      r.previousRange = {static_cast<Vni>(oldMin), static_cast<Vni>(oldMax)};
      r.notes.push_back("VNI range changed from " +
                        rangeText(static_cast<Vni>(oldMin), static_cast<Vni>(oldMax)) + " to " +
                        rangeText(options_.range.min, options_.range.max) +
                        "; existing allocations stay valid");
    }
    setMeta(*db_, "range_min", options_.range.min);
    setMeta(*db_, "range_max", options_.range.max);
    // Cooldowns older than the cooldown are over: prune them.
    SQLite::Statement prune(*db_, "DELETE FROM vni_released WHERE released_at_ms <= ?");
    prune.bind(1, static_cast<int64_t>((now - options_.range.cooldown).count()));
    prune.exec();
    tx.commit();
  } catch (const std::exception& e) {
    return makeError(kc::errc::kUnavailable,
                     std::string("cannot initialise VNI database: ") + e.what());
  }
  return reload(now, &r);
}

Status VniStore::reload(alloc::VniTime now, StoreReport* report) {
  StoreReport local;
  StoreReport& r = report ? *report : local;
  auto range = alloc::VniRange::create(options_.range);
  if (!range) {
    return range.error();
  }
  range_ = std::make_unique<alloc::VniRange>(std::move(range).value());
  owners_.clear();
  outOfRange_ = 0;
  try {
    SQLite::Statement rows(*db_, "SELECT uid, namespace, vni FROM vni_allocs");
    while (rows.executeStep()) {
      const OwnerKey owner{rows.getColumn(0).getString(), rows.getColumn(1).getString()};
      const auto vni = static_cast<Vni>(rows.getColumn(2).getInt64());
      owners_[ownerMapKey(owner)] = vni;
      ++r.allocations;
      Status s = range_->reserve(vni);
      if (!s) {
        if (s.error().code == kc::errc::kOutOfRange) {
          ++outOfRange_;
          ++r.outOfRange;
        } else if (s.error().code == kc::errc::kReserved) {
          ++r.reservedHeld;
        }
        r.notes.push_back("allocation " + ownerMapKey(owner) + " -> VNI " + std::to_string(vni) +
                          ": " + s.error().message + " (kept; never issued again)");
      }
    }
    SQLite::Statement cooling(*db_, "SELECT vni, released_at_ms FROM vni_released");
    while (cooling.executeStep()) {
      const auto vni = static_cast<Vni>(cooling.getColumn(0).getInt64());
      const alloc::VniTime at{cooling.getColumn(1).getInt64()};
      if (at + options_.range.cooldown > now && range_->restoreCooldown(vni, at)) {
        ++r.coolingRestored;
      }
    }
    const auto last = metaValue(*db_, "last_allocated", -1);
    if (last >= 0) {
      range_->setLastAllocated(static_cast<Vni>(last));
    }
  } catch (const std::exception& e) {
    return makeError(kc::errc::kUnavailable, std::string("cannot read VNI database: ") + e.what());
  }
  return okStatus();
}

StoreOutcome VniStore::execute(const StoreOp& op, alloc::VniTime now) {
  StoreOutcome out;
  const std::string key = ownerMapKey(op.owner);
  auto held = owners_.find(key);
  switch (op.kind) {
    case StoreOp::Kind::kNone:
      return out;
    case StoreOp::Kind::kLookup:
      if (held != owners_.end()) {
        out.vni = held->second;
      }
      return out;
    case StoreOp::Kind::kAcquire: {
      if (held != owners_.end()) {
        out.vni = held->second;
        return out;
      }
      if (op.deferTo) {
        if (auto d = owners_.find(ownerMapKey(*op.deferTo)); d != owners_.end()) {
          out.deferredVni = d->second;
          return out;
        }
      }
      Vni vni = 0;
      if (op.adopt) {
        range_->advanceTo(now);  // a value whose cooldown just ended is free to adopt
      }
      if (op.adopt && range_->state(*op.adopt) == alloc::VniState::Free) {
        // The VNI object survived while our row did not (e.g. the database was restored from
        // an older backup): keep the value the pods already use.
        Status s = range_->reserve(*op.adopt);
        if (!s) {
          out.error = s.error();
          return out;
        }
        vni = *op.adopt;
        out.adopted = true;
      } else {
        auto got = range_->allocate(now);
        if (!got) {
          out.error = got.error();
          return out;
        }
        vni = *got;
        cursorDirty_ = true;
      }
      insert_->reset();
      insert_->bind(1, op.owner.uid);
      insert_->bind(2, op.owner.ns);
      insert_->bind(3, static_cast<int64_t>(vni));
      insert_->bind(4, op.ownerKind);
      insert_->bind(5, op.ownerName);
      insert_->bind(6, static_cast<int64_t>(now.count()));
      insert_->exec();
      owners_[key] = vni;
      out.vni = vni;
      out.created = true;
      return out;
    }
    case StoreOp::Kind::kRelease: {
      if (held == owners_.end()) {
        return out;  // idempotent: released before, or never held
      }
      const Vni vni = held->second;
      delete_->reset();
      delete_->bind(1, op.owner.uid);
      delete_->bind(2, op.owner.ns);
      delete_->exec();
      released_->reset();
      released_->bind(1, static_cast<int64_t>(vni));
      released_->bind(2, static_cast<int64_t>(now.count()));
      released_->exec();
      if (Status s = range_->release(vni, now); !s && s.error().code == kc::errc::kOutOfRange) {
        --outOfRange_;
      }
      owners_.erase(held);
      out.vni = vni;
      out.released = true;
      return out;
    }
  }
  return out;
}

StoreOutcome VniStore::applyOne(const StoreOp& op, alloc::VniTime now) {
  return std::move(apply(std::span<const StoreOp>(&op, 1), now).front());
}

std::vector<StoreOutcome> VniStore::apply(std::span<const StoreOp> ops, alloc::VniTime now) {
  std::vector<StoreOutcome> outcomes;
  outcomes.reserve(ops.size());
  bool write = false;
  for (const StoreOp& op : ops) {
    write = write || needsWrite(op, owners_);
  }
  if (!write) {
    for (const StoreOp& op : ops) {
      outcomes.push_back(execute(op, now));
    }
    return outcomes;
  }
  bool reloadNeeded = false;
  try {
    db_->exec("BEGIN IMMEDIATE");
  } catch (const std::exception& e) {
    for (std::size_t i = 0; i < ops.size(); ++i) {
      StoreOutcome out;
      out.error = makeError(kc::errc::kUnavailable, std::string("VNI database busy: ") + e.what());
      outcomes.push_back(std::move(out));
    }
    return outcomes;
  }
  for (const StoreOp& op : ops) {
    try {
      db_->exec("SAVEPOINT op");
      outcomes.push_back(execute(op, now));
      db_->exec("RELEASE op");
    } catch (const std::exception& e) {
      try {
        db_->exec("ROLLBACK TO op");
        db_->exec("RELEASE op");
      } catch (const std::exception&) {
      }
      StoreOutcome out;
      out.error =
          makeError(kc::errc::kInternal, std::string("VNI database write failed: ") + e.what());
      outcomes.push_back(std::move(out));
      reloadNeeded = true;  // the bitmap may hold a value whose row was rolled back
    }
  }
  try {
    if (cursorDirty_) {
      setMeta(*db_, "last_allocated", range_->lastAllocated());
    }
    db_->exec("COMMIT");
    cursorDirty_ = false;
  } catch (const std::exception& e) {
    try {
      db_->exec("ROLLBACK");
    } catch (const std::exception&) {
    }
    for (StoreOutcome& out : outcomes) {
      out = StoreOutcome{};
      out.error =
          makeError(kc::errc::kUnavailable, std::string("VNI database commit failed: ") + e.what());
    }
    reloadNeeded = true;
  }
  if (reloadNeeded) {
    (void)reload(now, nullptr);
    cursorDirty_ = false;
  }
  return outcomes;
}

std::optional<Vni> VniStore::find(const OwnerKey& owner) const {
  auto it = owners_.find(ownerMapKey(owner));
  if (it == owners_.end()) {
    return std::nullopt;
  }
  return it->second;
}

alloc::VniCounts VniStore::counts(alloc::VniTime now) {
  range_->advanceTo(now);
  return range_->counts();
}

namespace {

std::vector<AllocationRow> readRows(SQLite::Database& db) {
  std::vector<AllocationRow> rows;
  SQLite::Statement q(db,
                      "SELECT uid, namespace, vni, kind, name, allocated_at_ms FROM vni_allocs "
                      "ORDER BY namespace, vni");
  while (q.executeStep()) {
    AllocationRow row;
    row.uid = q.getColumn(0).getString();
    row.ns = q.getColumn(1).getString();
    row.vni = static_cast<Vni>(q.getColumn(2).getInt64());
    row.kind = q.getColumn(3).getString();
    row.name = q.getColumn(4).getString();
    row.allocatedAtMs = q.getColumn(5).getInt64();
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

Result<std::vector<AllocationRow>> VniStore::list() const {
  try {
    return readRows(*db_);
  } catch (const std::exception& e) {
    return makeError(kc::errc::kUnavailable, e.what());
  }
}

Result<std::vector<AllocationRow>> readAllocations(const std::string& path) {
  try {
    SQLite::Database db(path, SQLite::OPEN_READONLY, 5000);
    return readRows(db);
  } catch (const std::exception& e) {
    return makeError(kc::errc::kUnavailable, "cannot read VNI database " + path + ": " + e.what());
  }
}

Result<std::uint32_t> releaseOwners(const std::string& path, const std::vector<OwnerKey>& owners,
                                    std::int64_t nowMs) {
  try {
    SQLite::Database db(path, SQLite::OPEN_READWRITE, 5000);
    db.exec("PRAGMA synchronous=FULL");
    SQLite::Transaction tx(db, SQLite::TransactionBehavior::IMMEDIATE);
    std::uint32_t deleted = 0;
    for (const OwnerKey& owner : owners) {
      SQLite::Statement find(db, "SELECT vni FROM vni_allocs WHERE uid = ? AND namespace = ?");
      find.bind(1, owner.uid);
      find.bind(2, owner.ns);
      if (!find.executeStep()) {
        continue;
      }
      const int64_t vni = find.getColumn(0).getInt64();
      SQLite::Statement del(db, "DELETE FROM vni_allocs WHERE uid = ? AND namespace = ?");
      del.bind(1, owner.uid);
      del.bind(2, owner.ns);
      del.exec();
      SQLite::Statement rel(
          db, "INSERT OR REPLACE INTO vni_released(vni, released_at_ms) VALUES (?, ?)");
      rel.bind(1, vni);
      rel.bind(2, static_cast<int64_t>(nowMs));
      rel.exec();
      ++deleted;
    }
    tx.commit();
    return deleted;
  } catch (const std::exception& e) {
    return makeError(kc::errc::kUnavailable,
                     "cannot release in VNI database " + path + ": " + e.what());
  }
}

}  // namespace kc::vni
