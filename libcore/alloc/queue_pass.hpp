#pragma once
// One scheduling pass of the queue policies that plan ahead (easy-backfill, slack-backfill),
// shared by the simulator (tools/kubecomp-sim) and kubecomp-sched. The pass decides; the caller
// (a QueueHost) owns the queue and carries out each start with its own placement, so the
// simulator's moves and events and the daemon's binds and reconfiguration requests stay theirs.
//
//   1. FCFS while the head fits: the oldest waiting pod is started, then the next, until one
//      does not fit now. A head that cannot fit even with every running pod ended (the
//      reservation finds nothing) is passed over and never blocks the queue.
//   2. The head (if another pod waits behind it) gets a reservation (backfill.hpp reserveHead,
//      asked of a BackfillPlanner built from the host's view, as are the tests in 3).
//      A move in flight that the pool model does not see yet (QueueView::landing: its GPU is
//      already attached there) makes the reservation no earlier than its pool's landing, and
//      every candidate is tested as if it ran that much longer.
//   3. Each later pod, oldest first: skipped if it is at least as large (CPU, memory, GPUs, and
//      the same or a narrower GPU model filter) as one that did not fit now in this pass
//      (feasibility is monotone); otherwise started only if backfillKeeps says the head's
//      reservation stays no later than the bound: easy-backfill, the current reservation;
//      slack-backfill, the bound fixed when that pod became the head (its first reservation
//      plus its slack: its own expected run time times the slack factor, 1 by default), which
//      persists across passes in this object.
//
// Pure code: no I/O, threads or clocks; the host passes in its cluster view, generator and
// times (any unit, e.g. ms).

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "libcore/alloc/backfill.hpp"
#include "libcore/alloc/gpu_model.hpp"
#include "libcore/alloc/pool_model.hpp"
#include "libcore/alloc/rng.hpp"
#include "libcore/base/result.hpp"

namespace kc::alloc {

// A waiting pod as the pass sees it.
struct QueuedPod {
  std::uint64_t id = 0;  // stable across passes (slack-backfill remembers its head by it)
  PodRequest pod{};
  const GpuModelFilter* models = nullptr;  // null: any model
  std::uint32_t modelsKey = 0;             // equal keys: the same model filter
  std::int64_t duration = 0;               // expected run time
};

// The cluster as the pass reads it, valid until the host's next start().
struct QueueView {
  const ClusterState* state = nullptr;
  std::span<const RunningPod> running{};
  FabricClock fabric{};
  // Per pool (or empty): when a move in flight that the pool model already shows done lands;
  // a value not after `now` means none.
  std::span<const std::int64_t> landing{};
};

// The caller's side: its queue in its order (index 0 the head) and its placement. "Oldest"
// above means first in that order: kubecomp-sched gives its queue order (pod_order.hpp: higher
// spec.priority first, FCFS within a priority), so the head a pass reserves for is the
// highest-priority pod waiting longest; the simulator gives its own order.
class QueueHost {
 public:
  virtual ~QueueHost() = default;
  virtual std::size_t waiting() const = 0;
  virtual QueuedPod queued(std::size_t i) const = 0;
  virtual QueueView view() const = 0;
  // The generator the host's next placement will use (a copy: the test must place as the
  // real start does).
  virtual SplitMix64 placementRng() const = 0;
  // Starts pod i now with the host's placement (it may wait for GPU moves first). false: it
  // does not fit now and nothing changed. `tested`: the backfill test found that it fits.
  virtual Result<bool> start(std::size_t i, bool tested) = 0;
};

enum class QueueVerdict : std::uint8_t {
  kStarted,     // started in this pass (at the head, or backfilled)
  kHead,        // the head that does not fit now; it holds the reservation
  kNeverFits,   // a head the reservation found no room for even on the emptied cluster
  kUnfit,       // does not fit now
  kDominated,   // not tested: at least as large as a pod that did not fit now
  kDelaysHead,  // fits now, but starting it would delay the head beyond the bound
  kAlone,       // the head with nobody behind it: no reservation needed
};

struct QueuePassResult {
  std::vector<QueueVerdict> verdicts;      // per waiting pod, by its index at the start
  std::optional<std::size_t> head;         // index of the kHead pod, if any
  std::optional<Reservation> reservation;  // the head's, after the pass
  std::int64_t bound = 0;                  // what a backfilled pod could not delay (last)
  // Each reservation made or renewed in this pass (the first with the landing correction).
  std::vector<std::int64_t> reservedStarts;
  std::uint64_t tested = 0;      // backfill tests run
  std::uint64_t backfilled = 0;  // pods started behind the head
};

// slack-backfill's slack factor: the head may slip by up to this many of its own run times
// (textbook relaxed backfill). 1 is the default and slack-backfill's behaviour as registered;
// 0 fixes the bound at the head's first reservation. Valid: finite, 0..kMaxSlackFactor.
inline constexpr double kDefaultSlackFactor = 1.0;
inline constexpr double kMaxSlackFactor = 1000.0;
// Error "invalid" (with the value) unless `factor` is valid.
Status checkSlackFactor(double factor);
// The slack of a head with expected run time `duration` (>= 0): duration x factor, rounded to
// the nearest unit, saturating at INT64_MAX; exactly `duration` for the default factor.
std::int64_t slackFor(std::int64_t duration, double factor);

class QueuePass {
 public:
  // EasyBackfill or SlackBackfill; any other discipline, or an invalid slack factor (only
  // SlackBackfill reads it; others must keep the default), is refused by run().
  explicit QueuePass(QueueDiscipline discipline, double slackFactor = kDefaultSlackFactor)
      : discipline_(discipline), slackFactor_(slackFactor) {}

  // One pass at `now`. Errors: "invalid" (discipline, slack factor, a host view that does not
  // match its cluster), or whatever the host's start() returns.
  Result<QueuePassResult> run(QueueHost& host, const PlacementRules& rules, std::int64_t now);

 private:
  // Steps 1 and 2: FCFS while the head fits, then the head's reservation, passing over heads
  // that never fit. nullopt: the pass is over (fewer than two pods left waiting); otherwise
  // out.head names the head.
  Result<std::optional<Reservation>> startUntilReserved(QueueHost& host,
                                                        const PlacementRules& rules,
                                                        std::int64_t now, QueuePassResult& out);
  // What a backfilled pod may not delay, given the head's current reservation (slack-backfill
  // fixes its bound when `head` first becomes the head).
  Reservation backfillBound(const QueuedPod& head, const Reservation& reservation);
  // Step 3: the pods behind out.head, oldest first, against out.reservation (updated as pods
  // start); sets out.bound.
  Status backfillBehind(QueueHost& host, const PlacementRules& rules, std::int64_t now,
                        const QueuedPod& head, std::int64_t landing, QueuePassResult& out);

  QueueDiscipline discipline_;
  double slackFactor_;
  BackfillPlanner planner_;  // the head's reservation and the backfill tests (kept for storage)
  std::optional<std::uint64_t> slackHead_;  // slack-backfill: the head whose bound is slackBound_
  std::int64_t slackBound_ = 0;
};

}  // namespace kc::alloc
