#include "services/vni-webhook/vni_service.hpp"

#include <spdlog/spdlog.h>

#include <future>
#include <vector>

namespace kc::vni {

namespace {

HookReply errorReply(unsigned status, const Error& error) {
  return HookReply{status, nlohmann::json{{"error", error.code}, {"message", error.message}}};
}

}  // namespace

nlohmann::json exhaustedBody(const Error& error, const alloc::VniRange& range) {
  const alloc::VniCounts c = range.counts();
  return nlohmann::json{{"error", error.code},
                        {"message", error.message},
                        {"range", {{"min", range.min()}, {"max", range.max()}}},
                        {"held", c.allocated},
                        {"cooling", c.cooling},
                        {"capacity", c.capacity}};
}

Result<std::unique_ptr<VniService>> VniService::start(const ServiceOptions& options,
                                                      WallClockMs clock, StoreReport* report) {
  auto store = VniStore::open(options.store, alloc::VniTime{clock()}, report);
  if (!store) {
    return store.error();
  }
  std::unique_ptr<VniService> service(
      new VniService(options, std::move(clock), std::move(store).value()));
  service->stats_.counts = service->store_->counts(alloc::VniTime{service->clock_()});
  service->stats_.outOfRange = service->store_->outOfRangeHeld();
  service->writer_ = std::thread([s = service.get()] { s->writerLoop(); });
  return service;
}

VniService::VniService(ServiceOptions options, WallClockMs clock, std::unique_ptr<VniStore> store)
    : options_(std::move(options)), clock_(std::move(clock)), store_(std::move(store)) {}

VniService::~VniService() {
  stop();
}

void VniService::setStatsListener(StatsListener listener) {
  std::lock_guard<std::mutex> lock(mutex_);
  statsListener_ = std::move(listener);
  if (statsListener_) {
    statsListener_(stats_);
  }
}

ServiceStats VniService::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

bool VniService::accepting() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !stopping_;
}

void VniService::handle(HookKind kind, const std::string& body, Done done) {
  auto request = parseHookRequest(kind, body);
  if (!request) {
    done(errorReply(400, request.error()));
    return;
  }
  if (request->kind == HookKind::kCustomize) {
    done(HookReply{200, renderCustomizeResponse(*request)});
    return;
  }
  HookPlan plan = planHook(*request, options_.decision, clock_() / 1000);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) {
      done(errorReply(503, makeError(kc::errc::kUnavailable, "vni-webhook is shutting down")));
      return;
    }
    queue_.push_back(Pending{std::move(request).value(), std::move(plan), std::move(done)});
  }
  wake_.notify_one();
}

HookReply VniService::handleNow(HookKind kind, const std::string& body) {
  std::promise<HookReply> promise;
  auto future = promise.get_future();
  handle(kind, body, [&promise](HookReply reply) { promise.set_value(std::move(reply)); });
  return future.get();
}

void VniService::writerLoop() {
  std::vector<Pending> batch;
  std::vector<StoreOp> ops;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) {
        return;  // stopping and drained
      }
      while (!queue_.empty() && batch.size() < options_.maxBatch) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    ops.clear();
    for (const Pending& p : batch) {
      ops.push_back(p.plan.op);
    }
    const alloc::VniTime now{clock_()};
    std::vector<StoreOutcome> outcomes = store_->apply(ops, now);
    ServiceStats stats{store_->counts(now), store_->outOfRangeHeld()};
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stats_ = stats;
      if (statsListener_) {
        statsListener_(stats);  // cheap (sets gauges); under the lock so it can be unset safely
      }
    }
    for (std::size_t i = 0; i < batch.size(); ++i) {
      Pending& p = batch[i];
      const StoreOutcome& out = outcomes[i];
      const ObservedParent& parent = p.request.parent;
      if (out.error) {
        if (out.error->code == kc::errc::kExhausted) {
          spdlog::warn("VNI range exhausted for {} {}/{}: {}", parent.kind, parent.ns, parent.name,
                       out.error->message);
          p.done(HookReply{503, exhaustedBody(*out.error, store_->range())});
        } else {
          spdlog::error("VNI store error for {} {}/{}: {}", parent.kind, parent.ns, parent.name,
                        out.error->message);
          p.done(errorReply(out.error->code == kc::errc::kInternal ? 500 : 503, *out.error));
        }
        continue;
      }
      if (out.created) {
        spdlog::info("allocated VNI {} to {} {}/{} (uid {}){}", *out.vni, parent.kind, parent.ns,
                     parent.name, parent.uid, out.adopted ? " (adopted from its VNI object)" : "");
      }
      if (out.released) {
        spdlog::info("released VNI {} of {} {}/{} (uid {})", *out.vni, parent.kind, parent.ns,
                     parent.name, parent.uid);
      }
      if (p.plan.podWaitTimedOut && out.released) {
        spdlog::warn(
            "released VNI {} of {} {}/{} although {} pod(s) remain: waited past the "
            "{} s timeout after deletion",
            *out.vni, parent.kind, parent.ns, parent.name, p.plan.podsRemaining,
            options_.decision.podWaitTimeoutSec);
      }
      p.done(HookReply{200, renderHookResponse(p.request, p.plan, out, options_.decision)});
    }
    batch.clear();
  }
}

void VniService::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (writer_.joinable()) {
    writer_.join();
  }
}

std::optional<Vni> VniService::findForTest(const OwnerKey& owner) {
  return store_->find(owner);
}

}  // namespace kc::vni
