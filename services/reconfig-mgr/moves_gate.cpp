#include "services/reconfig-mgr/moves_gate.hpp"

#include <utility>

namespace kc::reconfig {

MovesGate::Transition MovesGate::refused(std::string message, SteadyTime now) {
  const bool was = message_.has_value();
  message_ = std::move(message);
  refusedAt_ = now;  // a re-probe refused again: the interval starts over
  return was ? Transition::kNone : Transition::kUnsupported;
}

MovesGate::Transition MovesGate::moved() {
  return reset();
}

MovesGate::Transition MovesGate::reset() {
  if (!message_) {
    return Transition::kNone;
  }
  message_.reset();
  return Transition::kSupported;
}

bool MovesGate::allows(SteadyTime now) const {
  if (!message_) {
    return true;
  }
  return reprobe_.count() > 0 && now >= refusedAt_ + reprobe_;
}

std::optional<MovesGate::SteadyTime> MovesGate::reprobeAt() const {
  if (!message_ || reprobe_.count() == 0) {
    return std::nullopt;
  }
  return refusedAt_ + reprobe_;
}

}  // namespace kc::reconfig
