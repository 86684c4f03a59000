#pragma once
// MoveRunner: carries out the journal's move in flight one phase at a time with the safe
// protocol (move_journal.hpp): mark draining → wait until the source node's device plugin has
// withdrawn the GPU and nothing uses it → detach → attach → verify by re-reading → clear
// draining. The journal is written (MoveEnv::persist) BEFORE every fabric action a phase
// announces; when the write fails nothing is sent. Fabric failures are retried with backoff
// (in-memory: a restarted runner retries at once), a half move is rolled back, a chassis that
// claims a move it did not make gets the GPU quarantined, and a driver that cannot move at all
// is reported (MoveEnv::unsupported) instead of retried.
//
// Several moves may be in flight (one per chassis by default, MoveRunnerOptions::concurrency):
// step() advances each. With asyncFabric, each fabric call runs on its own thread, so a 12 s
// assign on one chassis does not hold up the other chassis' moves: the phase waits until the
// call returns (MoveEnv::fabricDone wakes the caller) and then decides on the worker thread as
// before. The fabric work of a move is one FabricDriver::move() (detach and attach with one
// verifying re-read), so a move that needs no node confirmation goes from Detaching to
// Succeeded without a further inventory read.
//
// Everything outside (the fabric, the usage reports, the pending pod, the status write, pod
// Events) goes through MoveEnv; time through kc::Clock. Unit tests drive it with FakeDriver
// and FakeClock.

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "libcore/alloc/move_schedule.hpp"
#include "libcore/api/usage_report.hpp"
#include "libcore/base/backoff.hpp"
#include "libcore/base/clock.hpp"
#include "libcore/fabric/driver.hpp"
#include "services/reconfig-mgr/move_journal.hpp"

namespace kc::reconfig {

class MoveEnv {
 public:
  virtual ~MoveEnv() = default;
  virtual fabric::FabricDriver& fabric() = 0;
  // The latest usage report of `node`'s device plugin; nullopt when none can be read.
  virtual std::optional<api::UsageReport> usage(const std::string& node) = 0;
  // What the drain of `move` reads: whether the GPU is withdrawn from new users and unused on
  // move.fromNode. By default the node's device-plugin usage report; a DRA pool answers from
  // its published slices and the claims (PoolWorker::drainUsage).
  virtual std::optional<api::UsageReport> drainUsage(const Move& move) {
    return usage(move.fromNode);
  }
  // The move's pod still exists (same UID), is unbound and still asks for move.toNode; for a
  // claim move: the claim still exists (same UID), allocated that device for move.toNode, and
  // still waits for its binding conditions.
  virtual bool podWaiting(const Move& move) = 0;
  // A background move (no pod) still Draining: why it is no longer wanted (a real request
  // needs the pool's fabric, a pod may need the GPU), or nullopt to go on. Asked instead of
  // podWaiting; once the GPU is detached the move completes.
  virtual std::optional<std::string> cancelBackground(const Move& /*move*/) { return std::nullopt; }
  // Writes the journal (and the status derived from it). An error means "not recorded".
  virtual Status persist(const Journal& journal) = 0;
  // Events on the pod; `warning` selects the type.
  virtual void event(const Move& move, bool warning, const std::string& reason,
                     const std::string& message) = 0;
  // The runner read the inventory (to verify or decide after a failure): the caller's view.
  virtual void inventoryRead(const fabric::Inventory& inventory) = 0;
  // The chassis claimed a move on `gpu` that did not happen.
  virtual void quarantine(const std::string& gpu, const std::string& reason) = 0;
  // The fabric refused the move as unsupported (a condition on the pool, not a retry).
  virtual void unsupported(const std::string& message) = 0;
  // A phase of the move ended after `seconds` (metrics); `phase` is the one that ended.
  virtual void phaseEnded(const Move& /*move*/, MovePhase /*phase*/, double /*seconds*/) {}
  // The move finished (Succeeded or Failed; the record is in move.phase).
  virtual void moveFinished(const Move& /*move*/) {}
  // The fabric verified `gpu` on `host` (pool form) by the re-read of a move: the caller's
  // view may take it as read.
  virtual void gpuMoved(const std::string& /*gpu*/, const std::string& /*host*/) {}
  // The pool's moves run one at a time from now until `until` (steady time): a fabric step
  // failed as unavailable while others were in flight (`why`).
  virtual void movesSerialised(const std::string& /*why*/) {}
  // A fabric call run on its own thread (MoveRunnerOptions::asyncFabric) returned: step again.
  // Called on that thread.
  virtual void fabricDone() {}
};

struct MoveRunnerOptions {
  std::chrono::milliseconds drainTimeout{60'000};  // Draining longer than this gives up
  std::chrono::milliseconds drainPoll{500};  // re-check of the usage report (events wake earlier)
  // Verifying: how long the destination node may take to see the attached GPU on its own host
  // (PCIe hot-add, enumeration, the NVIDIA driver) when its node agent checks its host.
  std::chrono::milliseconds nodeConfirmTimeout{120'000};
  std::uint32_t maxAttempts = 5;  // failed tries of one phase before giving up
  BackoffParams backoff{std::chrono::milliseconds(500), std::chrono::milliseconds(15'000), 2.0,
                        0.0};
  // How many moves may be in flight per chassis and per pool (start() refuses more).
  alloc::MoveConcurrency concurrency = alloc::kSerialMoves;
  // Fabric calls on their own threads (reconfig-mgr); off: inline (unit tests, FakeClock).
  bool asyncFabric = false;
  // A fabric step that fails as unavailable (HTTP 5xx, "busy") while other moves of the pool are
  // in flight: the pool runs its moves one at a time for this long (MoveEnv::movesSerialised).
  std::chrono::milliseconds serialAfterBusy{600'000};
};

class MoveRunner {
 public:
  MoveRunner(MoveEnv& env, kc::Clock& clock, MoveRunnerOptions options = {});
  ~MoveRunner();
  MoveRunner(const MoveRunner&) = delete;
  MoveRunner& operator=(const MoveRunner&) = delete;

  struct Outcome {
    enum class Kind : std::uint8_t {
      kIdle,        // no move in flight
      kProgressed,  // a phase changed or a move finished: call again
      kWaiting,     // nothing to do before `wakeAt` (or an outside change)
    } kind = Kind::kIdle;
    std::chrono::steady_clock::time_point wakeAt{};
  };

  // Does what each move in flight needs now; per move at most one fabric call (a move and,
  // when it fails, the re-read that decides). kProgressed when any move progressed, else
  // kWaiting with the earliest wake time of them, kIdle when none is in flight.
  Outcome step(Journal& journal);

  // Starts `move` (phase Draining, or Attaching for an unattached GPU) as a move in flight.
  // Error "conflict" when the GPU already moves, or its chassis or the pool has no room
  // (canStart); an error from the journal write.
  Status start(Journal& journal, Move move);
  // Whether a move of `gpu` could start now beside the moves in flight.
  bool canStart(const Journal& journal, const std::string& gpu) const;
  // A fabric call of some move is running (its chassis is busy: the caller does not read the
  // inventory meanwhile, which would wait for that chassis).
  bool fabricBusy() const;
  // Waits for every fabric call still running (before the driver goes away).
  void joinCalls();
  const MoveRunnerOptions& options() const { return opts_; }
  // The concurrency in force: the configured one, or one move per pool while serialised after
  // a chassis answered busy.
  alloc::MoveConcurrency concurrencyNow() const;
  void setConcurrency(alloc::MoveConcurrency c) { opts_.concurrency = c; }

 private:
  // What a phase's fabric work returned: the call, and the re-read made when it failed.
  struct FabricOutcome {
    std::optional<Result<fabric::MoveReport>> op;
    std::optional<Result<fabric::Inventory>> inventory;
  };
  using FabricWork = std::function<FabricOutcome(fabric::FabricDriver&)>;
  struct PendingCall {
    std::string key;  // the phase it belongs to (gpu, phase, phaseSince, attempts)
    std::future<FabricOutcome> result;
    std::thread thread;
  };
  // Per move in flight (by GPU).
  struct MoveState {
    std::chrono::steady_clock::time_point notBefore{};  // backoff of the move
    // The Verifying move whose fabric side is verified and which waits only for the
    // destination node (phaseSince of that phase): the chassis is not re-read meanwhile.
    std::string fabricVerified;
    std::chrono::steady_clock::time_point phaseStart{};  // steady time the phase began here
    std::string phaseOf;                                 // phase the time above belongs to
    std::optional<PendingCall> call;
  };

  Outcome stepOne(Journal& journal);
  // Forgets the state of moves no longer in flight; joins calls that have returned.
  void reapCalls(const Journal& journal);
  Move& cur(Journal& journal) { return *journal.active.find(cur_); }
  MoveState& st() { return states_[cur_]; }
  // Runs `work` for the move being stepped: inline, or (asyncFabric) on its own thread;
  // nullopt while that call is still running.
  std::optional<FabricOutcome> fabricCall(const Move& m, const FabricWork& work);
  Outcome waitForCall();
  // A fabric step of `m` failed with `err`: if the chassis was unavailable while other moves
  // were in flight, serialise the pool's moves for a while.
  void noteBusy(const Journal& journal, const Move& m, const Error& err);

  Outcome waitUntil(std::chrono::steady_clock::time_point t);
  // Changes the move being stepped to `next` and persists; on failure the old record is
  // restored and false returned (nothing may be sent then).
  bool commit(Journal& journal, Move next);
  // Finishes the move (Succeeded or Failed) and persists. `cancelled`: no longer wanted.
  bool finish(Journal& journal, MovePhase phase, const std::string& message,
              bool cancelled = false);
  Move advanced(const Move& m, MovePhase phase, const std::string& message) const;
  // A failed try of the current phase: counts it, waits with backoff; false when attempts are
  // spent.
  bool retryLater(Journal& journal, const std::string& message);
  std::string nowText() const;
  double secondsInPhase(const Move& m);

  Outcome drain(Journal& journal);
  Outcome detach(Journal& journal);
  // The fabric's word on a failed detach (or move) of `m`: where `inv` shows the GPU.
  Outcome detachFailed(Journal& journal, const Move& m, const Error& err,
                       const std::optional<Result<fabric::Inventory>>& inv);
  Outcome attach(Journal& journal);
  Outcome attachFailed(Journal& journal, const Move& m, const Error& err,
                       const std::optional<Result<fabric::Inventory>>& inv);
  // The fabric verified the move (a re-read showed the GPU on the destination).
  Outcome fabricVerified(Journal& journal, const Move& m, const std::string& message);
  Outcome verify(Journal& journal);
  // The chassis shows the GPU on the destination: wait for the destination node's host view.
  Outcome confirmByNode(Journal& journal);
  Outcome rollBack(Journal& journal);

  MoveEnv& env_;
  kc::Clock& clock_;
  MoveRunnerOptions opts_;
  std::string cur_;  // GPU of the move being stepped
  std::chrono::steady_clock::time_point serialUntil_{};
  std::map<std::string, MoveState> states_;
  // Calls whose move finished or was dropped while they ran: joined when done.
  std::vector<PendingCall> orphans_;
};

}  // namespace kc::reconfig
