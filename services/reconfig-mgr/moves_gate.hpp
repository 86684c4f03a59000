#pragma once
// MovesGate: whether a pool's fabric can move GPUs, as far as the moves have told. A move the
// driver refuses as unsupported (errc::kUnsupported, e.g. a Redfish service without
// AddResourceBlock) closes the gate: no move is started on the pool (condition
// MovesSupported=False). After the re-probe interval the gate lets the next needed move through
// to try the fabric again: refused again, the gate stays closed and the interval starts over;
// a move that goes through opens it (MovesSupported=True). Interval 0: closed until reset()
// (the driver rebuilt because the pool's chassis list changed, or a restart).
//
// The transitions are returned so that the caller writes one Event per change of the
// condition, none for a re-probe that changes nothing. Time through the caller's kc::Clock.
// Not thread-safe (one pool worker owns it).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace kc::reconfig {

class MovesGate {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;
  enum class Transition : std::uint8_t {
    kNone,         // the condition is as it was
    kUnsupported,  // it turned False (MovesSupported=False)
    kSupported,    // it turned True again
  };

  explicit MovesGate(std::chrono::seconds reprobe) : reprobe_(reprobe) {}

  // The fabric refused a move as unsupported at `now`. The message is kept for the condition.
  Transition refused(std::string message, SteadyTime now);
  // A move went through on the fabric (finished Succeeded).
  Transition moved();
  // Forgets a refusal (the fabric changed): moves are tried again.
  Transition reset();

  // A move may be started at `now`: no refusal stands, or the re-probe time has come.
  bool allows(SteadyTime now) const;
  // While closed with a re-probe ahead: when allows() turns true. nullopt otherwise.
  std::optional<SteadyTime> reprobeAt() const;
  // The refusal the condition shows (nullopt: MovesSupported=True).
  const std::optional<std::string>& unsupported() const { return message_; }
  std::chrono::seconds reprobeInterval() const { return reprobe_; }

 private:
  std::chrono::seconds reprobe_;
  std::optional<std::string> message_;
  SteadyTime refusedAt_{};
};

}  // namespace kc::reconfig
