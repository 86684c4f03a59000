#pragma once
// The HTTP adapter of bridge-operator: POST /sync and /finalize parse the body, call the pure
// decision (hook_decision.hpp) and send its response; /metrics, /livez, /readyz come from
// libcore/obs. Bad bodies answer 400 {"error","message"} and decide nothing.

#include <chrono>
#include <cstdint>
#include <memory>

#include "libcore/base/clock.hpp"
#include "libcore/base/result.hpp"
#include "libcore/net/http_server.hpp"
#include "services/bridge-operator/hook_decision.hpp"

namespace kc::obs {
class Metrics;
class HealthChecks;
}  // namespace kc::obs

namespace kc::bridge {

struct HookReply {
  unsigned status = 200;
  nlohmann::json body;
};

// parse -> decide -> render, as one function of the body (what the handler runs).
HookReply handleHook(HookKind kind, const std::string& body, const DecisionConfig& config,
                     std::chrono::system_clock::time_point now);

class BridgeHttpFrontend {
 public:
  // `clock` stamps condition transitions (wallNow) and times requests (now); it, `metrics` and
  // `health` must outlive the frontend.
  BridgeHttpFrontend(DecisionConfig config, kc::Clock& clock, obs::Metrics& metrics,
                     obs::HealthChecks& health, net::ServerOptions options);
  ~BridgeHttpFrontend();
  BridgeHttpFrontend(const BridgeHttpFrontend&) = delete;
  BridgeHttpFrontend& operator=(const BridgeHttpFrontend&) = delete;

  Result<std::uint16_t> start();
  void stop(std::chrono::milliseconds drain = std::chrono::seconds(5));
  std::string baseUrl() const;

 private:
  struct Instruments;
  const DecisionConfig config_;
  kc::Clock& clock_;
  std::unique_ptr<Instruments> instruments_;
  net::HttpServer server_;
};

}  // namespace kc::bridge
