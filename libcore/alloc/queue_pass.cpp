#include "libcore/alloc/queue_pass.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

namespace kc::alloc {
namespace {

const GpuModelFilter& modelsOf(const QueuedPod& q) {
  static const GpuModelFilter kAny{};
  return q.models != nullptr ? *q.models : kAny;
}

// A pod that did not fit now in this pass.
struct Failed {
  PodRequest pod;
  bool anyModel = true;
  std::uint32_t modelsKey = 0;
};

// At least as large as `f` in every resource, with the same or a narrower model filter: it
// cannot fit either (a filter only narrows the GPUs, so an unconstrained failure dominates
// constrained pods; a constrained one only pods with its filter).
bool dominatedBy(const Failed& f, const QueuedPod& q) {
  return (f.anyModel || f.modelsKey == q.modelsKey) && q.pod.cpuMilli >= f.pod.cpuMilli &&
         q.pod.memoryMiB >= f.pod.memoryMiB && q.pod.gpus >= f.pod.gpus;
}

// The time a candidate is tested as running: its expected run time plus the longest landing
// still ahead, saturating.
std::int64_t durationWithLanding(const QueuedPod& q, std::int64_t landing) {
  std::int64_t duration = 0;
  if (__builtin_add_overflow(q.duration, landing, &duration)) {
    duration = INT64_MAX;
  }
  return duration;
}

// A move in flight outside the fabric clock: the head's pool waits for it, and a candidate
// is tested as if it ran until its end plus the longest landing still ahead (a pod given that
// GPU starts only when it lands). Moves `reservation` no earlier than its pool's landing and
// returns that longest landing (0 when none is ahead).
std::int64_t waitForLanding(const QueueView& view, std::int64_t now, Reservation& reservation) {
  std::int64_t landing = 0;
  for (std::size_t p = 0; p < view.landing.size(); ++p) {
    if (view.landing[p] > now) {
      landing = std::max(landing, view.landing[p] - now);
      if (p == view.state->node(reservation.node).pool) {
        reservation.start = std::max(reservation.start, view.landing[p]);
      }
    }
  }
  return landing;
}

// run()'s refusals: a discipline the pass does not run, an invalid slack factor, or a slack
// factor for a discipline without slack.
Status checkPassConfig(QueueDiscipline discipline, double slackFactor) {
  if (discipline != QueueDiscipline::EasyBackfill && discipline != QueueDiscipline::SlackBackfill) {
    return makeError(kc::errc::kInvalid,
                     "the queue pass runs easy-backfill and slack-backfill only");
  }
  if (auto s = checkSlackFactor(slackFactor); !s) {
    return s;
  }
  if (discipline != QueueDiscipline::SlackBackfill && slackFactor != kDefaultSlackFactor) {
    return makeError(kc::errc::kInvalid, "a slack factor applies to slack-backfill only");
  }
  return okStatus();
}

}  // namespace

Status checkSlackFactor(double factor) {
  if (!std::isfinite(factor) || factor < 0 || factor > kMaxSlackFactor) {
    std::ostringstream msg;
    msg << "slack factor " << factor << " outside 0.." << kMaxSlackFactor;
    return makeError(kc::errc::kInvalid, msg.str());
  }
  return okStatus();
}

std::int64_t slackFor(std::int64_t duration, double factor) {
  if (factor == kDefaultSlackFactor || duration <= 0) {
    return factor == kDefaultSlackFactor ? duration : 0;
  }
  const long double slack = std::nearbyint(static_cast<long double>(duration) * factor);
  if (slack >= static_cast<long double>(INT64_MAX)) {
    return INT64_MAX;
  }
  return static_cast<std::int64_t>(slack);
}

Result<QueuePassResult> QueuePass::run(QueueHost& host, const PlacementRules& rules,
                                       std::int64_t now) {
  if (auto s = checkPassConfig(discipline_, slackFactor_); !s) {
    return s.error();
  }
  QueuePassResult out;
  out.verdicts.assign(host.waiting(), QueueVerdict::kUnfit);
  auto reserved = startUntilReserved(host, rules, now, out);
  if (!reserved) {
    return reserved.error();
  }
  if (!reserved->has_value()) {
    return out;
  }
  Reservation reservation = **reserved;
  const QueuedPod head = host.queued(*out.head);
  const std::int64_t landing = waitForLanding(host.view(), now, reservation);
  out.reservedStarts.push_back(reservation.start);
  out.reservation = reservation;
  if (auto s = backfillBehind(host, rules, now, head, landing, out); !s) {
    return s.error();
  }
  return out;
}

Result<std::optional<Reservation>> QueuePass::startUntilReserved(QueueHost& host,
                                                                 const PlacementRules& rules,
                                                                 std::int64_t now,
                                                                 QueuePassResult& out) {
  const std::size_t n = out.verdicts.size();
  std::size_t h = 0;
  while (true) {
    // 1. FCFS while the head fits.
    for (; h < n; ++h) {
      auto started = host.start(h, false);
      if (!started) {
        return started.error();
      }
      if (!*started) {
        break;
      }
      out.verdicts[h] = QueueVerdict::kStarted;
    }
    if (n - h < 2) {
      if (h < n) {
        out.verdicts[h] = QueueVerdict::kAlone;
      }
      return std::optional<Reservation>();
    }
    // 2. The head's reservation.
    const QueuedPod head = host.queued(h);
    const QueueView view = host.view();
    if (view.state == nullptr) {
      return makeError(kc::errc::kInvalid, "queue host gave no cluster");
    }
    if (auto s = planner_.reset(*view.state, view.running, view.fabric); !s) {
      return s.error();
    }
    auto r = planner_.reserveHead(head.pod, modelsOf(head), rules, now);
    if (r) {
      out.head = h;
      out.verdicts[h] = QueueVerdict::kHead;
      return std::optional<Reservation>(*r);
    }
    if (r.error().code != kc::errc::kUnschedulable) {
      return r.error();
    }
    out.verdicts[h++] = QueueVerdict::kNeverFits;
  }
}

Reservation QueuePass::backfillBound(const QueuedPod& head, const Reservation& reservation) {
  Reservation bound = reservation;
  if (discipline_ == QueueDiscipline::SlackBackfill) {
    if (slackHead_ != head.id) {
      slackHead_ = head.id;
      if (__builtin_add_overflow(reservation.start, slackFor(head.duration, slackFactor_),
                                 &slackBound_)) {
        slackBound_ = reservation.start;
      }
    }
    bound.start = std::max(reservation.start, slackBound_);
  }
  return bound;
}

Status QueuePass::backfillBehind(QueueHost& host, const PlacementRules& rules, std::int64_t now,
                                 const QueuedPod& head, std::int64_t landing,
                                 QueuePassResult& out) {
  Reservation& reservation = *out.reservation;
  // What a backfilled pod may not delay: easy-backfill, the current reservation;
  // slack-backfill, the bound fixed at the head's first reservation (plus its slack: its run
  // time times the slack factor).
  Reservation bound = backfillBound(head, reservation);
  // 3. Later pods, oldest first.
  std::vector<Failed> failed;
  bool planned = true;  // planner_ holds the host's view (until the next start)
  for (std::size_t i = *out.head + 1; i < out.verdicts.size(); ++i) {
    const QueuedPod q = host.queued(i);
    if (std::any_of(failed.begin(), failed.end(),
                    [&](const Failed& f) { return dominatedBy(f, q); })) {
      out.verdicts[i] = QueueVerdict::kDominated;
      continue;
    }
    ++out.tested;
    if (!planned) {
      const QueueView view = host.view();
      if (auto s = planner_.reset(*view.state, view.running, view.fabric); !s) {
        return s;
      }
      planned = true;
    }
    auto keeps =
        planner_.backfillKeeps(bound, head.pod, modelsOf(head), q.pod, modelsOf(q),
                               durationWithLanding(q, landing), rules, host.placementRng(), now);
    if (!keeps) {
      if (keeps.error().code == kc::errc::kUnschedulable) {
        failed.push_back(Failed{q.pod, modelsOf(q).acceptsAny(), q.modelsKey});
        out.verdicts[i] = QueueVerdict::kUnfit;
      } else if (keeps.error().code == kc::errc::kConflict) {
        out.verdicts[i] = QueueVerdict::kDelaysHead;
      } else {
        return keeps.error();
      }
      continue;
    }
    auto started = host.start(i, true);
    planned = false;
    if (!started) {
      return started.error();
    }
    if (!*started) {
      out.verdicts[i] = QueueVerdict::kUnfit;  // the host's placement saw more than the model
      continue;
    }
    out.verdicts[i] = QueueVerdict::kStarted;
    ++out.backfilled;
    if (keeps->start != reservation.start) {
      out.reservedStarts.push_back(keeps->start);
    }
    reservation = *keeps;
    if (discipline_ == QueueDiscipline::EasyBackfill) {
      bound = *keeps;
    }
  }
  out.bound = bound.start;
  return okStatus();
}

}  // namespace kc::alloc
