// MoveRunner's fabric calls on their own threads (MoveRunnerOptions::asyncFabric): start,
// collect, and join before the driver goes away.
#include "services/reconfig-mgr/move_runner.hpp"

namespace kc::reconfig {

MoveRunner::~MoveRunner() {
  joinCalls();
}

void MoveRunner::joinCalls() {
  for (auto& [gpu, state] : states_) {
    if (state.call) {
      orphans_.push_back(std::move(*state.call));
      state.call.reset();
    }
  }
  for (auto& call : orphans_) {
    if (call.thread.joinable()) {
      call.thread.join();
    }
  }
  orphans_.clear();
}

void MoveRunner::reapCalls(const Journal& journal) {
  for (auto it = states_.begin(); it != states_.end();) {
    if (journal.active.find(it->first) == nullptr) {
      if (it->second.call) {
        orphans_.push_back(std::move(*it->second.call));
      }
      it = states_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = orphans_.begin(); it != orphans_.end();) {
    if (it->result.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      it->thread.join();
      it = orphans_.erase(it);
    } else {
      ++it;
    }
  }
}

std::optional<MoveRunner::FabricOutcome> MoveRunner::fabricCall(const Move& m,
                                                                const FabricWork& work) {
  if (!opts_.asyncFabric) {
    return work(env_.fabric());
  }
  const std::string key =
      std::string(toString(m.phase)) + "@" + m.phaseSince + "#" + std::to_string(m.attempts);
  MoveState& state = st();
  if (state.call) {
    if (state.call->result.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      return std::nullopt;
    }
    auto done = std::move(*state.call);
    state.call.reset();
    done.thread.join();
    auto out = done.result.get();
    if (done.key == key) {
      return out;
    }
    // A call of an earlier record of this move (changed meanwhile): this phase calls afresh.
  }
  std::promise<FabricOutcome> promise;
  PendingCall call;
  call.key = key;
  call.result = promise.get_future();
  call.thread = std::thread(
      [promise = std::move(promise), driver = &env_.fabric(), env = &env_, work]() mutable {
        try {
          promise.set_value(work(*driver));
        } catch (...) {
          promise.set_exception(std::current_exception());
        }
        env->fabricDone();
      });
  state.call = std::move(call);
  return std::nullopt;
}

MoveRunner::Outcome MoveRunner::waitForCall() {
  // fabricDone() wakes the caller when the call returns; the second is a safety net.
  return waitUntil(clock_.now() + std::chrono::seconds(1));
}

}  // namespace kc::reconfig
