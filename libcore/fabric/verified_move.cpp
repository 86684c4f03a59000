#include "libcore/fabric/verified_move.hpp"

namespace kc::fabric {

Result<MoveReport> verifiedMove(MoveReport report, const CallPolicy& policy, const Sleeper& sleeper,
                                const MoveSteps& steps) {
  Error last = makeError(errc::kRefused, "no attempt made");
  bool claimedSuccess = false;
  for (std::uint32_t attempt = 1; attempt <= policy.attempts; ++attempt) {
    if (attempt > 1) {
      sleeper(policy.backoffBefore(attempt));
    }
    report.attempts = attempt;
    auto claim = steps.send();
    if (!claim) {
      return claim.error();
    }
    if (claim->kind == MoveClaim::Kind::kDone) {
      claimedSuccess = true;
    }
    last = claim->error;
    if (!claim->attemptNote.empty()) {
      report.notes.push_back(claim->attemptNote);
    }
    // Whatever the chassis answered, the re-read decides.
    for (std::uint32_t poll = 0;; ++poll) {
      auto seen = steps.observe();
      if (!seen) {
        return seen.error();
      }
      if (*seen == Observed::kReached) {
        report.changed = true;
        if (!claim->note.empty()) {
          report.notes.push_back(claim->note);
        }
        return report;
      }
      if (claim->kind != MoveClaim::Kind::kAccepted || poll + 1 >= policy.attempts) {
        break;
      }
      sleeper(policy.backoffBefore(poll + 2));
    }
  }
  return makeError(claimedSuccess ? std::string(errc::kUnverified) : last.code,
                   steps.what + " failed after " + std::to_string(policy.attempts) +
                       " attempts: " + last.message);
}

}  // namespace kc::fabric
