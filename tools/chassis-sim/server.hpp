#pragma once
// SimServer: serves a ChassisModel over HTTP in the H3 Falcon and/or Redfish dialect, plus a
// control API for tests. A test double; it persists nothing.
//
// Addressing: chassis <name> lives under "/chassis/<name>" (e.g.
// /chassis/falcon-a/h3api/v1/resources, /chassis/falcon-a/redfish/v1); with a single chassis
// it is also served at the root ("/h3api/v1/...", "/redfish/v1"), like a real chassis.
//
// Control API (no auth):
//   GET    /sim/v1/state      true state: GPUs, hosts, health, pending faults, op counters
//   POST   /sim/v1/faults     add a fault (see Fault in model.hpp), 201
//   DELETE /sim/v1/faults     clear all faults
//   DELETE /sim/v1/sessions   expire every Redfish session (clients must log in again)
//
// Redfish `$expand` (DSP0266): GETs take "$expand=.", "*" or "~" with "($levels=n)", n <= 3;
// the classic profile advertises it in the service root's ProtocolFeaturesSupported, the
// emulator profile does not (as the DMTF Interface Emulator does not). Other forms: 400.
//
// Latency: each operation's reply is held for its sampled latency without blocking the
// server (a timer thread sends it); the state change is applied when the reply goes out.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "libcore/base/result.hpp"
#include "libcore/fabric/credentials.hpp"
#include "libcore/net/http_server.hpp"
#include "tools/chassis-sim/model.hpp"

namespace kc::chassis_sim {

struct SimServerOptions {
  std::string bindAddress = "127.0.0.1";
  std::uint16_t port = 0;
  bool h3 = true;
  bool redfish = true;
  // When set: H3 and Redfish requests need HTTP basic auth with these credentials, and
  // Redfish session logins must use them. When unset, everything is open (as the real H3 was).
  std::optional<fabric::Credentials> credentials;
  unsigned ioThreads = 2;
  // Set: serve HTTPS with this certificate (a BMC with a private CA). baseUrl() is then https.
  std::optional<net::ServerTlsOptions> tls;
  // Added to every Redfish GET (a BMC's per-request time; the ResourceBlocks read also has its
  // sampled inventory latency). Replies are held on the timer thread, so concurrent GETs wait
  // concurrently, as on a service that serves requests in parallel.
  Millis redfishGetLatency{0};
};

class SimServer {
 public:
  SimServer(std::shared_ptr<ChassisModel> model, SimServerOptions options);
  ~SimServer();
  SimServer(const SimServer&) = delete;
  SimServer& operator=(const SimServer&) = delete;

  Result<std::uint16_t> start();
  void stop();
  std::string baseUrl() const;
  // Base URL of one chassis, to give a driver: baseUrl() + "/chassis/<name>".
  std::string chassisUrl(const std::string& chassis) const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace kc::chassis_sim
