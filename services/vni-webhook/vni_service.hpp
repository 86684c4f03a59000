#pragma once
// VniService: one hook request = parse -> planHook (pure) -> VniStore op -> renderHookResponse
// (pure). Store operations from all request threads are queued to ONE writer thread that
// commits them in groups (one transaction and one fsync per group, each op in its own
// savepoint), so durable throughput does not cost one fsync per request.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "services/vni-webhook/hook_decision.hpp"
#include "services/vni-webhook/vni_store.hpp"

namespace kc::vni {

struct ServiceOptions {
  StoreOptions store;
  DecisionConfig decision;
  std::size_t maxBatch = 1024;  // ops per group commit
};

struct HookReply {
  unsigned status = 200;
  nlohmann::json body;
};

// Figures after the latest batch, for /metrics and /readyz.
struct ServiceStats {
  alloc::VniCounts counts;
  std::uint32_t outOfRange = 0;
};

class VniService {
 public:
  using WallClockMs = std::function<std::int64_t()>;  // Unix milliseconds
  using Done = std::function<void(HookReply)>;
  using StatsListener = std::function<void(const ServiceStats&)>;

  // Opens the store (see VniStore::open) and starts the writer thread.
  static Result<std::unique_ptr<VniService>> start(const ServiceOptions& options, WallClockMs clock,
                                                   StoreReport* report);
  ~VniService();  // stop()
  VniService(const VniService&) = delete;
  VniService& operator=(const VniService&) = delete;

  // Parses and decides on the calling thread; a bad request is answered at once (400, nothing
  // queued). Otherwise `done` runs on the writer thread after the group commit.
  void handle(HookKind kind, const std::string& body, Done done);
  // Blocking convenience for tests and tools.
  HookReply handleNow(HookKind kind, const std::string& body);

  // Called after each batch (and once at once); pass nullptr to unset. Thread-safe.
  void setStatsListener(StatsListener listener);
  ServiceStats stats() const;
  // False once stop() began (readiness).
  bool accepting() const;
  // Finishes queued work, then stops the writer. Idempotent.
  void stop();

  // Test and admin access to the owner table (writer-thread state; only call when idle).
  std::optional<Vni> findForTest(const OwnerKey& owner);

 private:
  VniService(ServiceOptions options, WallClockMs clock, std::unique_ptr<VniStore> store);
  void writerLoop();

  struct Pending {
    HookRequest request;
    HookPlan plan;
    Done done;
  };

  ServiceOptions options_;
  WallClockMs clock_;
  std::unique_ptr<VniStore> store_;  // touched only by the writer thread after start
  mutable std::mutex mutex_;         // guards queue_, stopping_, stats_, statsListener_
  StatsListener statsListener_;
  std::condition_variable wake_;
  std::deque<Pending> queue_;
  bool stopping_ = false;
  ServiceStats stats_;
  std::thread writer_;
};

// 503 body of an exhausted range: {"error":"exhausted","message":..,"range":{"min","max"},
// "held":..,"cooling":..}.
nlohmann::json exhaustedBody(const Error& error, const alloc::VniRange& range);

}  // namespace kc::vni
