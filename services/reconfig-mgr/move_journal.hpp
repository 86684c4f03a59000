#pragma once
// The move journal: one record per GPU move, kept in the GPUPool status (status.moves) and
// written BEFORE each fabric action it announces, so a reconfig-mgr that crashes at any point
// resumes from the record instead of guessing from the chassis. Every phase's action is
// idempotent (detaching a detached GPU and attaching a GPU to the host it is on are no-ops),
// so redoing the phase in the record is always safe.
//
//   Draining ──withdrawn, unused──▶ Detaching ──detached──▶ Attaching ──▶ Verifying ──▶ Succeeded
//      │ in use / timeout / cancelled   │ gave up, still attached  │ gave up    │ not shown:
//      Attaching ▼                                ▼                          ▼
//    Failed (draining cleared)        Failed                    RollingBack ──▶ Failed
//
// A GPU that starts unattached skips Draining and Detaching.
//
// A move is for a waiting pod (kind Demand, the paper's reconfiguration) or a background move
// of idle-time recomposition (kind Background, no pod; idle_planner.hpp): same phases, same
// journal, cancelled while still Draining when a real request needs the pool's fabric. A move
// of kind Claim attaches a DRA claim's allocated fabric device to the claim's node (docs/dra.md
// "Attach"); it names the claim instead of a pod, and is cancelled while still Draining when
// the claim no longer waits for it.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::reconfig {

enum class MovePhase : std::uint8_t {
  kDraining,
  kDetaching,
  kAttaching,
  kVerifying,
  kRollingBack,
  kSucceeded,
  kFailed,
};

std::string_view toString(MovePhase phase);
std::optional<MovePhase> parseMovePhase(std::string_view text);
// Succeeded or Failed: nothing more happens to the record.
bool finished(MovePhase phase);

enum class MoveKind : std::uint8_t {
  kDemand,      // for the pod that waits for it (kubecomp.io/dst-node)
  kBackground,  // idle-time recomposition: no pod waits, cancelled when one needs the fabric
  kClaim,       // the DRA attach controller: a ResourceClaim's allocated fabric device
};
std::string_view toString(MoveKind kind);

struct Move {
  std::string gpu;       // pool GPU id
  std::string fromNode;  // "" when the GPU was unattached
  std::string fromHost;  // pool-form host ("<chassis>/<host>"), "" when unattached
  std::string toNode;
  std::string toHost;
  std::string podNamespace;  // the pending pod the move is for ("" for a background move)
  std::string podName;
  std::string podUid;
  std::string claimNamespace;  // kind Claim: the ResourceClaim the move is for (no pod)
  std::string claimName;
  std::string claimUid;
  MoveKind kind = MoveKind::kDemand;
  std::string reason;      // background: why the planner chose it, for people
  bool cancelled = false;  // Failed because it was no longer wanted while Draining
  MovePhase phase = MovePhase::kDraining;
  std::uint32_t attempts = 0;  // failed tries in the current phase
  // Draining: the node's usage report listed the GPU as withdrawn when draining began (left
  // over from an earlier drain), so only a report seen without it and then with it counts.
  bool staleWithdrawn = false;
  std::string startedAt;   // RFC 3339
  std::string phaseSince;  // RFC 3339, start of the current phase
  std::string message;     // last outcome, for people

  bool active() const { return !finished(phase); }
  bool background() const { return kind == MoveKind::kBackground; }
  bool forClaim() const { return kind == MoveKind::kClaim; }
  std::string claimKey() const { return claimNamespace + "/" + claimName; }
  std::string podKey() const { return podNamespace + "/" + podName; }
  // Who the move is for, in words: "the background", "claim <ns>/<name>" or "<ns>/<pod>".
  std::string requester() const {
    return background() ? std::string("the background")
           : forClaim() ? "claim " + claimKey()
                        : podKey();
  }
  friend bool operator==(const Move&, const Move&) = default;
};

nlohmann::json toJson(const Move& move);
// Strict: error "invalid" naming the field.
Result<Move> parseMove(const nlohmann::json& j);

// The moves in flight of one pool, oldest first: at most one per GPU, and as many per chassis
// and per pool as the pool's move concurrency allows (alloc::MoveConcurrency; the paper's
// serial schedule is one per pool). Reads like an optional of the oldest move where only one
// matters (`if (active)`, `active->gpu`), and iterates over all of them.
class ActiveMoves {
 public:
  ActiveMoves() = default;
  ActiveMoves(std::nullopt_t) {}                 // NOLINT(google-explicit-constructor)
  ActiveMoves(Move m) : moves_{std::move(m)} {}  // NOLINT(google-explicit-constructor)
  ActiveMoves& operator=(Move m) {
    moves_.assign(1, std::move(m));
    return *this;
  }
  ActiveMoves& operator=(std::nullopt_t) {
    moves_.clear();
    return *this;
  }
  explicit operator bool() const { return !moves_.empty(); }
  bool has_value() const { return !moves_.empty(); }  // NOLINT(readability-identifier-naming)
  const Move& operator*() const { return moves_.front(); }
  Move& operator*() { return moves_.front(); }
  const Move* operator->() const { return &moves_.front(); }
  Move* operator->() { return &moves_.front(); }
  void reset() { moves_.clear(); }

  std::size_t size() const { return moves_.size(); }
  bool empty() const { return moves_.empty(); }
  auto begin() const { return moves_.begin(); }
  auto end() const { return moves_.end(); }
  auto begin() { return moves_.begin(); }
  auto end() { return moves_.end(); }
  void add(Move m) { moves_.push_back(std::move(m)); }
  // The move in flight of `gpu`, or null.
  Move* find(const std::string& gpu);
  const Move* find(const std::string& gpu) const;
  // The chassis (alloc::chassisOfGpu) of every move in flight.
  std::vector<std::string> chassis() const;
  // Takes the move of `gpu` out (nullopt when there is none).
  std::optional<Move> take(const std::string& gpu);
  friend bool operator==(const ActiveMoves&, const ActiveMoves&) = default;

 private:
  std::vector<Move> moves_;
};

// status.moves: the active records (the moves in flight) followed by the most recent finished
// ones.
struct Journal {
  ActiveMoves active;
  std::vector<Move> history;  // newest first, at most kHistory

  static constexpr std::size_t kHistory = 10;
  // Moves the (first) active record into the history (it must be finished).
  void retireActive();
  // Moves the active record of `gpu` into the history.
  void retire(const std::string& gpu);
  nlohmann::json toJson() const;
};

// Reads status.moves of a GPUPool object. Unreadable records are returned in `problems` and
// dropped; two active records of one GPU keep the first (the other is reported).
struct ParsedJournal {
  Journal journal;
  std::vector<std::string> problems;
};
ParsedJournal parseJournal(const nlohmann::json& pool);

}  // namespace kc::reconfig
