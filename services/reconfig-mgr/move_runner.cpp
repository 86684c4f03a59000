#include "services/reconfig-mgr/move_runner.hpp"

#include <algorithm>

#include "libcore/base/rfc3339.hpp"

namespace kc::reconfig {
namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) {
    out += (out.empty() ? "" : ", ") + s;
  }
  return out;
}

std::string describe(const std::optional<std::string>& host) {
  return host ? *host : "no host";
}

}  // namespace

MoveRunner::MoveRunner(MoveEnv& env, kc::Clock& clock, MoveRunnerOptions options)
    : env_(env), clock_(clock), opts_(options) {}

std::string MoveRunner::nowText() const {
  return formatRfc3339(clock_.wallNow());
}

double MoveRunner::secondsInPhase(const Move& m) {
  if (st().phaseOf == m.gpu + "/" + std::string(toString(m.phase))) {
    return std::chrono::duration<double>(clock_.now() - st().phaseStart).count();
  }
  auto since = parseRfc3339(m.phaseSince);
  if (!since) {
    return 0.0;
  }
  return std::max(0.0, std::chrono::duration<double>(clock_.wallNow() - *since).count());
}

MoveRunner::Outcome MoveRunner::waitUntil(std::chrono::steady_clock::time_point t) {
  return Outcome{Outcome::Kind::kWaiting, t};
}

Move MoveRunner::advanced(const Move& m, MovePhase phase, const std::string& message) const {
  Move next = m;
  next.phase = phase;
  next.attempts = 0;
  next.phaseSince = nowText();
  next.message = message;
  return next;
}

bool MoveRunner::commit(Journal& journal, Move next) {
  Move old = cur(journal);
  const bool phaseChanged = old.phase != next.phase;
  const double spent = phaseChanged ? secondsInPhase(old) : 0.0;
  cur(journal) = std::move(next);
  if (!env_.persist(journal)) {
    cur(journal) = std::move(old);
    st().notBefore = clock_.now() + opts_.backoff.base(0);
    return false;
  }
  if (phaseChanged) {
    env_.phaseEnded(old, old.phase, spent);
    st().phaseStart = clock_.now();
    st().phaseOf = cur(journal).gpu + "/" + std::string(toString(cur(journal).phase));
    st().notBefore = {};
  }
  return true;
}

bool MoveRunner::finish(Journal& journal, MovePhase phase, const std::string& message,
                        bool cancelled) {
  const Journal before = journal;
  const Move old = cur(journal);
  const double spent = secondsInPhase(old);
  cur(journal).phase = phase;
  cur(journal).phaseSince = nowText();
  cur(journal).message = message;
  cur(journal).cancelled = cancelled;
  const Move done = cur(journal);
  journal.retire(cur_);
  if (!env_.persist(journal)) {
    journal = before;
    st().notBefore = clock_.now() + opts_.backoff.base(0);
    return false;
  }
  env_.phaseEnded(old, old.phase, spent);
  if (auto it = states_.find(cur_); it != states_.end()) {
    if (it->second.call) {
      orphans_.push_back(std::move(*it->second.call));
    }
    states_.erase(it);
  }
  const bool ok = phase == MovePhase::kSucceeded;
  // A background move no longer wanted is routine, not a failure.
  const bool routine = ok || (cancelled && done.background());
  env_.event(
      done, !routine,
      ok ? "GPUMoved" : (cancelled && done.background() ? "GPUMoveCancelled" : "GPUMoveFailed"),
      "GPU " + done.gpu + (done.fromNode.empty() ? " (unattached)" : " from " + done.fromNode) +
          " to " + done.toNode + ": " + message);
  env_.moveFinished(done);
  return true;
}

bool MoveRunner::retryLater(Journal& journal, const std::string& message) {
  Move next = cur(journal);
  next.attempts += 1;
  next.message = message;
  if (next.attempts >= opts_.maxAttempts) {
    return false;
  }
  if (commit(journal, next)) {
    st().notBefore = clock_.now() + opts_.backoff.base(next.attempts - 1);
  }
  return true;
}

bool MoveRunner::canStart(const Journal& journal, const std::string& gpu) const {
  if (journal.active.find(gpu) != nullptr) {
    return false;
  }
  const std::vector<std::string> pending{std::string(alloc::chassisOfGpu(gpu))};
  return !alloc::movesToStart(pending, journal.active.chassis(), concurrencyNow()).empty();
}

alloc::MoveConcurrency MoveRunner::concurrencyNow() const {
  if (clock_.now() < serialUntil_) {
    return alloc::MoveConcurrency{opts_.concurrency.perChassis, 1};
  }
  return opts_.concurrency;
}

void MoveRunner::noteBusy(const Journal& journal, const Move& m, const Error& err) {
  if (err.code != errc::kUnavailable || journal.active.size() < 2 ||
      concurrencyNow().perPool == 1 || opts_.serialAfterBusy.count() <= 0) {
    return;
  }
  serialUntil_ = clock_.now() + opts_.serialAfterBusy;
  env_.movesSerialised("chassis " + std::string(alloc::chassisOfGpu(m.gpu)) + " answered \"" +
                       err.message + "\" with " + std::to_string(journal.active.size()) +
                       " moves in flight; moves run one at a time for " +
                       std::to_string(opts_.serialAfterBusy.count() / 1000) + " s");
}

bool MoveRunner::fabricBusy() const {
  for (const auto& [gpu, state] : states_) {
    if (state.call) {
      return true;
    }
  }
  return !orphans_.empty();
}

Status MoveRunner::start(Journal& journal, Move move) {
  if (journal.active.find(move.gpu) != nullptr) {
    return makeError(errc::kConflict, "a move of GPU " + move.gpu + " is in flight");
  }
  if (!canStart(journal, move.gpu)) {
    return makeError(errc::kConflict,
                     "no room for another move (GPU " + journal.active->gpu + " is in flight)");
  }
  move.startedAt = nowText();
  move.phaseSince = move.startedAt;
  move.attempts = 0;
  if (move.phase == MovePhase::kDraining) {
    // A withdrawal left over from an earlier drain of this GPU proves nothing about this one.
    if (auto u = env_.drainUsage(move); u && contains(u->withdrawn, move.gpu)) {
      move.staleWithdrawn = true;
    }
  }
  journal.active.add(move);
  if (auto s = env_.persist(journal); !s) {
    journal.active.take(move.gpu);
    return s;
  }
  cur_ = move.gpu;
  if (auto it = states_.find(cur_); it != states_.end() && it->second.call) {
    orphans_.push_back(std::move(*it->second.call));
  }
  states_[cur_] = MoveState{};
  st().phaseStart = clock_.now();
  st().phaseOf = move.gpu + "/" + std::string(toString(move.phase));
  env_.event(move, false, "GPUMoveStarted",
             "moving GPU " + move.gpu +
                 (move.fromNode.empty() ? " (unattached)" : " from " + move.fromNode) + " to " +
                 move.toNode + (move.phase == MovePhase::kDraining ? "; draining it first" : ""));
  return okStatus();
}

MoveRunner::Outcome MoveRunner::step(Journal& journal) {
  reapCalls(journal);
  if (!journal.active) {
    return Outcome{};
  }
  std::vector<std::string> gpus;
  for (const Move& m : journal.active) {
    gpus.push_back(m.gpu);
  }
  Outcome waiting{Outcome::Kind::kWaiting, std::chrono::steady_clock::time_point::max()};
  bool progressed = false;
  for (const auto& gpu : gpus) {
    if (journal.active.find(gpu) == nullptr) {
      continue;
    }
    cur_ = gpu;
    const Outcome out = stepOne(journal);
    if (out.kind == Outcome::Kind::kProgressed) {
      progressed = true;
    } else if (out.kind == Outcome::Kind::kWaiting) {
      waiting.wakeAt = std::min(waiting.wakeAt, out.wakeAt);
    }
  }
  if (progressed) {
    return Outcome{Outcome::Kind::kProgressed, {}};
  }
  return journal.active ? waiting : Outcome{};
}

MoveRunner::Outcome MoveRunner::stepOne(Journal& journal) {
  if (clock_.now() < st().notBefore) {
    return waitUntil(st().notBefore);
  }
  switch (cur(journal).phase) {
    case MovePhase::kDraining:
      return drain(journal);
    case MovePhase::kDetaching:
      return detach(journal);
    case MovePhase::kAttaching:
      return attach(journal);
    case MovePhase::kVerifying:
      return verify(journal);
    case MovePhase::kRollingBack:
      return rollBack(journal);
    case MovePhase::kSucceeded:
    case MovePhase::kFailed:
      journal.retire(cur_);
      return Outcome{Outcome::Kind::kProgressed, {}};
  }
  return Outcome{};
}

MoveRunner::Outcome MoveRunner::drain(Journal& journal) {
  const Move& m = cur(journal);
  const Outcome progressed{Outcome::Kind::kProgressed, {}};
  if (m.background()) {
    if (auto why = env_.cancelBackground(m)) {
      return finish(journal, MovePhase::kFailed,
                    "cancelled: " + *why + "; GPU left on " + m.fromNode, true)
                 ? progressed
                 : waitUntil(st().notBefore);
    }
  } else if (!env_.podWaiting(m)) {
    return finish(journal, MovePhase::kFailed,
                  "cancelled: " + (m.forClaim() ? "claim " + m.claimKey() : "pod " + m.podKey()) +
                      " no longer waits for " + m.toNode + "; GPU left on " + m.fromNode,
                  true)
               ? progressed
               : waitUntil(st().notBefore);
  }
  const auto usage = env_.drainUsage(m);
  if (usage) {
    const auto inUse = usage->inUse.find(m.gpu);
    if (inUse != usage->inUse.end() && !inUse->second.empty()) {
      return finish(journal, MovePhase::kFailed,
                    "GPU " + m.gpu + " is in use on " + m.fromNode + " by " +
                        joined(inUse->second) + "; not moved")
                 ? progressed
                 : waitUntil(st().notBefore);
    }
    const bool withdrawn = contains(usage->withdrawn, m.gpu);
    if (m.staleWithdrawn) {
      if (!withdrawn) {
        Move next = m;
        next.staleWithdrawn = false;
        commit(journal, next);
      }
    } else if (withdrawn) {
      if (!commit(journal,
                  advanced(m, MovePhase::kDetaching,
                           "withdrawn by " + m.fromNode + "'s device plugin and unused"))) {
        return waitUntil(st().notBefore);
      }
      env_.event(cur(journal), false, "GPUDrained",
                 "GPU " + m.gpu + " withdrawn from kubelet on " + m.fromNode + "; detaching");
      return progressed;
    }
  }
  // The source node hot-removes the GPU before its detach and cannot yet: the move says why.
  std::string blocked;
  if (usage) {
    if (auto it = usage->removeBlocked.find(m.gpu); it != usage->removeBlocked.end()) {
      blocked = "not hot-removed from " + m.fromNode + ": " + it->second;
    }
  }
  if (!blocked.empty() && cur(journal).message != "waiting: " + blocked) {
    Move next = m;
    next.message = "waiting: " + blocked;
    if (commit(journal, next)) {
      env_.event(next, true, "GPUHeldOpen", next.message);
    }
  }
  auto since = parseRfc3339(m.phaseSince);
  if (since && clock_.wallNow() - *since > opts_.drainTimeout) {
    return finish(journal, MovePhase::kFailed,
                  "the device plugin on " + m.fromNode + " did not confirm GPU " + m.gpu +
                      " withdrawn within " + std::to_string(opts_.drainTimeout.count() / 1000) +
                      " s" + (blocked.empty() ? "" : " (" + blocked + ")") + "; GPU left on " +
                      m.fromNode)
               ? progressed
               : waitUntil(st().notBefore);
  }
  return waitUntil(clock_.now() + opts_.drainPoll);
}

MoveRunner::Outcome MoveRunner::detach(Journal& journal) {
  const Move m = cur(journal);
  // The whole journey in one call: detach, attach and the re-read that verifies both.
  const auto from = m.fromHost.empty() ? std::nullopt : std::optional<std::string>(m.fromHost);
  auto o = fabricCall(m, [gpu = m.gpu, from, to = m.toHost](fabric::FabricDriver& d) {
    FabricOutcome out;
    out.op = d.move(gpu, from, to);
    if (!*out.op) {
      out.inventory = d.inventory();
    }
    return out;
  });
  if (!o) {
    return waitForCall();
  }
  if (*o->op) {
    return fabricVerified(journal, m,
                          "detached from " + m.fromNode + " and attached to " + m.toNode +
                              "; verified by re-reading");
  }
  return detachFailed(journal, m, o->op->error(), o->inventory);
}

MoveRunner::Outcome MoveRunner::detachFailed(Journal& journal, const Move& m, const Error& err,
                                             const std::optional<Result<fabric::Inventory>>& read) {
  const Outcome progressed{Outcome::Kind::kProgressed, {}};
  noteBusy(journal, m, err);
  // Decide by what the chassis shows, not by what it said.
  const fabric::Inventory* inv = read && read->ok() ? &read->value() : nullptr;
  if (const fabric::GpuInfo* g = inv != nullptr ? inv->find(m.gpu) : nullptr;
      g != nullptr && !g->hostPort) {
    // Detached, not attached: a failed try of Attaching (backoff, limits, roll-back as there).
    if (!commit(journal, advanced(m, MovePhase::kAttaching,
                                  "detached from " + m.fromNode + "; attach: " + err.message))) {
      return waitUntil(st().notBefore);
    }
    return attachFailed(journal, cur(journal), err, read);
  }
  if (err.code == errc::kUnsupported) {
    env_.unsupported(err.message);
  }
  if (inv != nullptr) {
    env_.inventoryRead(*inv);
    const fabric::GpuInfo* g = inv->find(m.gpu);
    if (g != nullptr && g->hostPort == m.toHost && g->health == fabric::GpuHealth::kOk) {
      return fabricVerified(
          journal, m, "attached to " + m.toNode + " (the chassis answered: " + err.message + ")");
    }
    if (g == nullptr) {
      return finish(journal, MovePhase::kFailed, "GPU " + m.gpu + " is gone from the inventory")
                 ? progressed
                 : waitUntil(st().notBefore);
    }
    if (err.code == errc::kUnverified) {
      env_.quarantine(m.gpu, "detach reported done but the GPU stayed on " + describe(g->hostPort) +
                                 ": " + err.message);
    }
    if (err.code == errc::kUnverified || err.code == errc::kUnsupported ||
        err.code == errc::kUnhealthy || err.code == errc::kUnauthorized) {
      return finish(journal, MovePhase::kFailed,
                    "detach failed, GPU stays on " + m.fromNode + ": " + err.message)
                 ? progressed
                 : waitUntil(st().notBefore);
    }
  }
  if (!retryLater(journal, "detach: " + err.message)) {
    if (inv != nullptr) {
      return finish(journal, MovePhase::kFailed,
                    "detach failed " + std::to_string(opts_.maxAttempts) + " times, GPU stays on " +
                        m.fromNode + ": " + err.message)
                 ? progressed
                 : waitUntil(st().notBefore);
    }
    // Where the GPU is cannot be read: it stays draining (no pod can get it) and the runner
    // keeps trying at the longest backoff.
    st().notBefore = clock_.now() + opts_.backoff.max;
  }
  return waitUntil(st().notBefore);
}

MoveRunner::Outcome MoveRunner::attach(Journal& journal) {
  const Move m = cur(journal);
  auto o = fabricCall(m, [gpu = m.gpu, to = m.toHost](fabric::FabricDriver& d) {
    FabricOutcome out;
    out.op = d.move(gpu, std::nullopt, to);
    if (!*out.op) {
      out.inventory = d.inventory();
    }
    return out;
  });
  if (!o) {
    return waitForCall();
  }
  if (*o->op) {
    return fabricVerified(journal, m, "attached to " + m.toNode + "; verified by re-reading");
  }
  return attachFailed(journal, m, o->op->error(), o->inventory);
}

MoveRunner::Outcome MoveRunner::attachFailed(Journal& journal, const Move& m, const Error& err,
                                             const std::optional<Result<fabric::Inventory>>& read) {
  const Outcome progressed{Outcome::Kind::kProgressed, {}};
  noteBusy(journal, m, err);  // once: a pool already serialised is left as it is
  if (err.code == errc::kUnsupported) {
    env_.unsupported(err.message);
  }
  const fabric::Inventory* inv = read && read->ok() ? &read->value() : nullptr;
  if (inv != nullptr) {
    env_.inventoryRead(*inv);
    const fabric::GpuInfo* g = inv->find(m.gpu);
    if (g == nullptr) {
      return finish(journal, MovePhase::kFailed, "GPU " + m.gpu + " is gone from the inventory")
                 ? progressed
                 : waitUntil(st().notBefore);
    }
    if (g->hostPort == m.toHost && g->health == fabric::GpuHealth::kOk) {
      return fabricVerified(
          journal, m, "attached to " + m.toNode + " (the chassis answered: " + err.message + ")");
    }
    if (g->hostPort && g->hostPort != m.toHost) {
      return finish(journal, MovePhase::kFailed,
                    "GPU " + m.gpu + " was attached to " + *g->hostPort +
                        " by someone else; left there")
                 ? progressed
                 : waitUntil(st().notBefore);
    }
    if (err.code == errc::kUnverified) {
      // A chassis that claims moves it does not make: keep the GPU out of use, unattached.
      env_.quarantine(
          m.gpu, "attach to " + m.toHost + " reported done but did not happen: " + err.message);
      return finish(journal, MovePhase::kFailed,
                    "attach unverified; GPU quarantined and left unattached")
                 ? progressed
                 : waitUntil(st().notBefore);
    }
    if (err.code == errc::kUnhealthy) {
      return finish(journal, MovePhase::kFailed,
                    "GPU " + m.gpu + " became unhealthy: " + err.message)
                 ? progressed
                 : waitUntil(st().notBefore);
    }
    if (err.code == errc::kUnsupported || err.code == errc::kUnauthorized ||
        err.code == errc::kNotFound || err.code == errc::kInvalid) {
      return commit(journal, advanced(m, MovePhase::kRollingBack,
                                      "attach to " + m.toNode + " failed: " + err.message))
                 ? progressed
                 : waitUntil(st().notBefore);
    }
  }
  if (!retryLater(journal, "attach: " + err.message)) {
    if (inv != nullptr) {
      return commit(journal,
                    advanced(m, MovePhase::kRollingBack,
                             "attach to " + m.toNode + " failed " +
                                 std::to_string(opts_.maxAttempts) + " times: " + err.message))
                 ? progressed
                 : waitUntil(st().notBefore);
    }
    st().notBefore = clock_.now() + opts_.backoff.max;
  }
  return waitUntil(st().notBefore);
}

MoveRunner::Outcome MoveRunner::fabricVerified(Journal& journal, const Move& m,
                                               const std::string& message) {
  if (!commit(journal, advanced(m, MovePhase::kVerifying, message))) {
    return waitUntil(st().notBefore);
  }
  st().fabricVerified = cur(journal).phaseSince;
  env_.gpuMoved(m.gpu, m.toHost);
  return confirmByNode(journal);
}

MoveRunner::Outcome MoveRunner::verify(Journal& journal) {
  const Move m = cur(journal);
  const Outcome progressed{Outcome::Kind::kProgressed, {}};
  if (st().fabricVerified == m.phaseSince) {
    return confirmByNode(journal);
  }
  auto o = fabricCall(m, [](fabric::FabricDriver& d) {
    FabricOutcome out;
    out.inventory = d.inventory();
    return out;
  });
  if (!o) {
    return waitForCall();
  }
  const auto& inv = *o->inventory;
  if (!inv) {
    if (!retryLater(journal, "verify: inventory: " + inv.error().message)) {
      // the GPU stays draining until it can be read
      st().notBefore = clock_.now() + opts_.backoff.max;
    }
    return waitUntil(st().notBefore);
  }
  env_.inventoryRead(*inv);
  const fabric::GpuInfo* g = inv->find(m.gpu);
  if (g == nullptr) {
    return finish(journal, MovePhase::kFailed, "GPU " + m.gpu + " is gone from the inventory")
               ? progressed
               : waitUntil(st().notBefore);
  }
  if (g->hostPort == m.toHost) {
    st().fabricVerified = m.phaseSince;
    return confirmByNode(journal);
  }
  if (g->hostPort) {
    return finish(
               journal, MovePhase::kFailed,
               "GPU " + m.gpu + " shows on " + *g->hostPort + ", not " + m.toHost + "; left there")
               ? progressed
               : waitUntil(st().notBefore);
  }
  Move again = advanced(m, MovePhase::kAttaching,
                        "re-read shows GPU " + m.gpu + " unattached; attaching again");
  again.attempts = m.attempts + 1;
  if (again.attempts >= opts_.maxAttempts) {
    return commit(journal,
                  advanced(m, MovePhase::kRollingBack, "attach never showed in the inventory"))
               ? progressed
               : waitUntil(st().notBefore);
  }
  if (commit(journal, again)) {
    st().notBefore = clock_.now() + opts_.backoff.base(again.attempts - 1);
  }
  return waitUntil(st().notBefore);
}

MoveRunner::Outcome MoveRunner::confirmByNode(Journal& journal) {
  const Move m = cur(journal);
  const Outcome progressed{Outcome::Kind::kProgressed, {}};
  // A node agent that judges its GPUs by its own host view must have seen the GPU; one that
  // does not (an older plugin, --host-check=false) or no report at all: the fabric's word.
  const auto usage = env_.usage(m.toNode);
  if (!usage || !usage->hostChecked || contains(usage->hostVisible, m.gpu)) {
    const std::string how =
        usage && usage->hostChecked ? " by re-reading and by the node's host" : " by re-reading";
    return finish(journal, MovePhase::kSucceeded, "attached to " + m.toNode + " and verified" + how)
               ? progressed
               : waitUntil(st().notBefore);
  }
  auto since = parseRfc3339(m.phaseSince);
  if (since && clock_.wallNow() - *since > opts_.nodeConfirmTimeout) {
    const auto why = usage->notVisible.find(m.gpu);
    return finish(journal, MovePhase::kFailed,
                  "attached at the chassis, but node " + m.toNode + " does not see GPU " + m.gpu +
                      " after " + std::to_string(opts_.nodeConfirmTimeout.count() / 1000) + " s" +
                      (why != usage->notVisible.end() ? " (" + why->second + ")" : "") +
                      "; left attached, not offered to pods")
               ? progressed
               : waitUntil(st().notBefore);
  }
  return waitUntil(clock_.now() + opts_.drainPoll);
}

MoveRunner::Outcome MoveRunner::rollBack(Journal& journal) {
  const Move m = cur(journal);
  const Outcome progressed{Outcome::Kind::kProgressed, {}};
  if (m.fromHost.empty()) {
    return finish(journal, MovePhase::kFailed, m.message + "; GPU left unattached in the pool")
               ? progressed
               : waitUntil(st().notBefore);
  }
  auto o = fabricCall(m, [gpu = m.gpu, from = m.fromHost](fabric::FabricDriver& d) {
    FabricOutcome out;
    out.op = d.attach(gpu, from);
    if (!*out.op) {
      out.inventory = d.inventory();
    }
    return out;
  });
  if (!o) {
    return waitForCall();
  }
  const auto& r = *o->op;
  if (r) {
    return finish(journal, MovePhase::kFailed, m.message + "; rolled back to " + m.fromNode)
               ? progressed
               : waitUntil(st().notBefore);
  }
  const auto& inv = o->inventory;
  if (inv && *inv) {
    env_.inventoryRead(**inv);
    const fabric::GpuInfo* g = (*inv)->find(m.gpu);
    if (g != nullptr && g->hostPort == m.fromHost) {
      return finish(journal, MovePhase::kFailed, m.message + "; rolled back to " + m.fromNode)
                 ? progressed
                 : waitUntil(st().notBefore);
    }
    if (g == nullptr || g->hostPort || r.error().code == errc::kUnverified ||
        r.error().code == errc::kUnhealthy) {
      if (g != nullptr && r.error().code == errc::kUnverified) {
        env_.quarantine(m.gpu,
                        "roll-back attach reported done but did not happen: " + r.error().message);
      }
      return finish(journal, MovePhase::kFailed,
                    m.message + "; roll-back to " + m.fromNode + " failed (" + r.error().message +
                        "); GPU " +
                        (g != nullptr && g->hostPort ? "on " + *g->hostPort
                                                     : std::string("left unattached")))
                 ? progressed
                 : waitUntil(st().notBefore);
    }
  }
  Move next = m;
  next.attempts += 1;
  if (next.attempts >= opts_.maxAttempts && inv && *inv) {
    return finish(journal, MovePhase::kFailed,
                  m.message + "; roll-back failed: " + r.error().message +
                      "; GPU left unattached in the pool")
               ? progressed
               : waitUntil(st().notBefore);
  }
  if (commit(journal, next)) {
    st().notBefore = clock_.now() + opts_.backoff.base(std::min(next.attempts, 20u) - 1);
  }
  return waitUntil(st().notBefore);
}

}  // namespace kc::reconfig
