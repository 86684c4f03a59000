#pragma once
// The HTTP adapter of vni-webhook: POST /sync, /finalize, /customize hand the body to
// VniService and send its reply; /metrics, /livez, /readyz come from libcore/obs. Nothing else
// happens here (no decision, no storage).

#include <chrono>
#include <cstdint>
#include <memory>

#include "libcore/base/result.hpp"
#include "libcore/net/http_server.hpp"
#include "services/vni-webhook/vni_service.hpp"

namespace kc::obs {
class Metrics;
class HealthChecks;
}  // namespace kc::obs

namespace kc::vni {

class VniHttpFrontend {
 public:
  // `service`, `metrics` and `health` must outlive the frontend.
  VniHttpFrontend(VniService& service, obs::Metrics& metrics, obs::HealthChecks& health,
                  net::ServerOptions options);
  ~VniHttpFrontend();
  VniHttpFrontend(const VniHttpFrontend&) = delete;
  VniHttpFrontend& operator=(const VniHttpFrontend&) = delete;

  Result<std::uint16_t> start();
  void stop(std::chrono::milliseconds drain = std::chrono::seconds(5));
  std::string baseUrl() const;

 private:
  struct Instruments;
  VniService& service_;
  std::unique_ptr<Instruments> instruments_;
  net::HttpServer server_;
};

}  // namespace kc::vni
