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
// Everything outside (the fabric, the usage reports, the pending pod, the status write, pod
// Events) goes through MoveEnv; time through kc::Clock. Unit tests drive it with FakeDriver
// and FakeClock.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

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
};

class MoveRunner {
 public:
  MoveRunner(MoveEnv& env, kc::Clock& clock, MoveRunnerOptions options = {});

  struct Outcome {
    enum class Kind : std::uint8_t {
      kIdle,        // no move in flight
      kProgressed,  // a phase changed or the move finished: call again
      kWaiting,     // nothing to do before `wakeAt` (or an outside change)
    } kind = Kind::kIdle;
    std::chrono::steady_clock::time_point wakeAt{};
  };

  // Does what the move in flight needs now; at most one fabric request (two when a failure
  // needs a re-read to decide).
  Outcome step(Journal& journal);

  // Starts `move` (phase Draining, or Attaching for an unattached GPU) as the move in flight.
  // Error when a move is already in flight or the journal cannot be written.
  Status start(Journal& journal, Move move);

 private:
  Outcome waitUntil(std::chrono::steady_clock::time_point t);
  // Changes the move in flight to `next` and persists; on failure the old record is restored
  // and false returned (nothing may be sent then).
  bool commit(Journal& journal, Move next);
  // Finishes the move (Succeeded or Failed) and persists. `cancelled`: no longer wanted.
  bool finish(Journal& journal, MovePhase phase, const std::string& message,
              bool cancelled = false);
  Move advanced(const Move& m, MovePhase phase, const std::string& message) const;
  // A failed try of the current phase: counts it, waits with backoff; false when attempts are
  // spent.
  bool retryLater(Journal& journal, const std::string& message);
  std::string nowText() const;
  double secondsInPhase(const Move& m) const;

  Outcome drain(Journal& journal);
  Outcome detach(Journal& journal);
  Outcome attach(Journal& journal);
  Outcome verify(Journal& journal);
  // The chassis shows the GPU on the destination: wait for the destination node's host view.
  Outcome confirmByNode(Journal& journal);
  Outcome rollBack(Journal& journal);

  MoveEnv& env_;
  kc::Clock& clock_;
  MoveRunnerOptions opts_;
  std::chrono::steady_clock::time_point notBefore_{};  // backoff of the move in flight
  // The Verifying move whose fabric side is verified and which waits only for the destination
  // node (gpu + phase start): the chassis is not re-read while the node catches up.
  std::string fabricVerified_;
  std::chrono::steady_clock::time_point phaseStart_{};  // steady time the current phase began here
  std::string phaseOf_;                                 // gpu + phase the two times above belong to
};

}  // namespace kc::reconfig
