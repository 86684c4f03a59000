#pragma once
// verifiedMove: the one rule behind every driver's attach/detach. A move counts only when a
// re-read of the chassis shows it: a chassis that says "done" but did nothing ends in
// errc::kUnverified, one that says "failed" but did it (the real H3 assign quirk) ends in
// success with a note. Requests are re-sent up to CallPolicy::attempts times with backoff; an
// "accepted" answer (Redfish 202) gets re-reads with backoff before the request is re-sent.

#include <cstdint>
#include <functional>
#include <string>

#include "libcore/base/result.hpp"
#include "libcore/fabric/call_policy.hpp"
#include "libcore/fabric/types.hpp"

namespace kc::fabric {

// What the chassis answered to one move request.
struct MoveClaim {
  enum class Kind : std::uint8_t {
    kDone,      // says the move happened; a re-read that disagrees makes the move unverified
    kAccepted,  // will do it later (HTTP 202): re-read a few times before sending again
    kFailed,    // said no, or the request itself failed
  };
  Kind kind = Kind::kFailed;
  Error error;              // what this attempt amounts to when the re-read does not show the move
  std::string note;         // for the report when the move happened all the same
  std::string attemptNote;  // for the report in any case ("ETag precondition failed, retried")
};

enum class Observed : std::uint8_t { kReached, kNotYet };

struct MoveSteps {
  std::string what;  // "attach falcon-a.000500 to 48", for the final error
  // Sends the move once. An error aborts the move at once (credentials rejected, unsupported).
  std::function<Result<MoveClaim>()> send;
  // Re-reads the chassis. An error aborts the move (GPU lost, inventory unreadable).
  std::function<Result<Observed>()> observe;
};

// Runs send/observe until the re-read shows the move or the attempts are spent. `report`
// comes back with `attempts` and `changed` set and the claim's note added when the move
// happened although the chassis did not say so.
Result<MoveReport> verifiedMove(MoveReport report, const CallPolicy& policy, const Sleeper& sleeper,
                                const MoveSteps& steps);

}  // namespace kc::fabric
