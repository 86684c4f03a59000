#pragma once
// A chassis simulator in-process on port 0 plus driver factories, for the driver and contract
// tests. Latency scale 0: nothing waits except where a test injects a hang.

#include <catch2/catch.hpp>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "libcore/fabric/h3_driver.hpp"
#include "libcore/fabric/pool.hpp"
#include "libcore/fabric/redfish_driver.hpp"
#include "libcore/net/http_client.hpp"
#include "tools/chassis-sim/model.hpp"
#include "tools/chassis-sim/server.hpp"

namespace kc::fabric::test {

// falcon-a: hosts 48 (node-1) and 0 (node-2); 001300, 001800 on 48, 000C00 on 0, 000500 free.
// falcon-b: host 48 (node-1); 002F00 on 48, 004200 free.
inline std::string defaultTopology(const std::string& redfishExtra = "") {
  return R"(
latency: {inventory: [3000, 4000], unassign: [5000, 8000], assign: [8000, 16000]}
)" + redfishExtra +
         R"(
chassis:
  - name: falcon-a
    hosts: [{port: 48, system: node-1}, {port: 0, system: node-2}]
    gpus:
      - {gid: "001300", uuid: GPU-16a0c321-fc4f-fd47-26e7-770eb9ecf5f9, model: Tesla V100-PCIE-32GB, host: 48}
      - {gid: "001800", uuid: GPU-00000000-0000-4000-8000-000000000018, model: Tesla V100-PCIE-32GB, host: 48}
      - {gid: "000C00", uuid: GPU-00000000-0000-4000-8000-00000000000c, model: Tesla V100-PCIE-32GB, host: 0}
      - {gid: "000500", uuid: GPU-00000000-0000-4000-8000-000000000005, model: A100-PCIE-40GB}
  - name: falcon-b
    hosts: [{port: 48, system: node-1}]
    gpus:
      - {gid: "002F00", uuid: GPU-00000000-0000-4000-8000-00000000002f, model: Tesla V100-PCIE-32GB, host: 48}
      - {gid: "004200", uuid: GPU-00000000-0000-4000-8000-000000000042, model: Tesla V100-PCIE-32GB}
)";
}

// Records the backoff a driver asked for instead of sleeping.
struct SleepLog {
  std::mutex mutex;
  std::vector<Millis> sleeps;
  Sleeper sleeper() {
    return [this](Millis d) {
      std::lock_guard lock(mutex);
      sleeps.push_back(d);
    };
  }
  std::size_t count() {
    std::lock_guard lock(mutex);
    return sleeps.size();
  }
};

inline CallPolicy fastPolicy() {
  CallPolicy p;
  p.readTimeout = Millis{2000};
  p.moveTimeout = Millis{700};  // the hang tests wait this long once
  p.attempts = 3;
  p.initialBackoff = Millis{100};
  p.maxBackoff = Millis{400};
  return p;
}

class SimHarness {
 public:
  explicit SimHarness(const std::string& topology = defaultTopology(),
                      std::optional<Credentials> creds = std::nullopt) {
    auto topo = chassis_sim::parseTopology(topology);
    REQUIRE(topo.ok());
    topo->latencies.scale = 0;
    model_ = std::make_shared<chassis_sim::ChassisModel>(*topo, 7);
    chassis_sim::SimServerOptions options;
    options.credentials = creds;
    server_ = std::make_unique<chassis_sim::SimServer>(model_, options);
    REQUIRE(server_->start().ok());
    net::ClientOptions co;
    co.baseUrl = server_->baseUrl();
    co.requestTimeout = Millis{5000};
    auto client = net::HttpClient::create(co);
    REQUIRE(client.ok());
    control_ = std::move(client).value();
  }

  chassis_sim::ChassisModel& model() { return *model_; }
  std::string url(const std::string& chassis) const { return server_->chassisUrl(chassis); }

  // Adds a fault through the control API (real HTTP), e.g.
  // fault(R"({"op":"assign","kind":"lie_success"})").
  void fault(const std::string& json) {
    auto resp =
        control_->request("POST", "/sim/v1/faults", json, {{"Content-Type", "application/json"}});
    REQUIRE(resp.ok());
    INFO(resp->body);
    REQUIRE(resp->status == 201);
  }
  void expireSessions() {
    auto resp = control_->request("DELETE", "/sim/v1/sessions");
    REQUIRE(resp.ok());
    REQUIRE(resp->status == 204);
  }
  // The simulator's true state (GET /sim/v1/state).
  nlohmann::json state() {
    auto resp = control_->request("GET", "/sim/v1/state");
    REQUIRE(resp.ok());
    REQUIRE(resp->status == 200);
    return nlohmann::json::parse(resp->body);
  }
  // True host port of a GPU (-1 when unattached).
  int trueHost(const std::string& chassis, const std::string& gid) {
    const auto st = state();
    for (const auto& c : st["chassis"]) {
      if (c["name"] == chassis) {
        for (const auto& g : c["gpus"]) {
          if (g["gid"] == gid) {
            return g["host"].is_null() ? -1 : g["host"].get<int>();
          }
        }
      }
    }
    FAIL("no GPU " << chassis << "." << gid);
    return -2;
  }
  std::uint64_t counter(const std::string& chassis, const std::string& op) {
    const auto st = state();
    for (const auto& c : st["chassis"]) {
      if (c["name"] == chassis) {
        return c["counters"].value(op, std::uint64_t{0});
      }
    }
    return 0;
  }

  std::unique_ptr<H3Driver> h3(const std::string& chassis, SleepLog& log,
                               CallPolicy policy = fastPolicy(),
                               std::optional<Credentials> creds = std::nullopt) {
    H3Options o;
    o.chassis = chassis;
    o.baseUrl = url(chassis);
    o.gpuModel = "Tesla V100-PCIE-32GB";
    o.policy = policy;
    o.credentials = creds;
    o.sleeper = log.sleeper();
    auto d = H3Driver::create(o);
    REQUIRE(d.ok());
    return std::move(d).value();
  }

  std::unique_ptr<RedfishDriver> redfish(const std::string& chassis, SleepLog& log,
                                         RedfishAuth auth = RedfishAuth::kSession,
                                         std::optional<Credentials> creds = Credentials{"admin",
                                                                                        "secret"},
                                         CallPolicy policy = fastPolicy()) {
    RedfishOptions o;
    o.chassis = chassis;
    o.baseUrl = url(chassis);
    o.auth = auth;
    o.credentials = creds;
    o.policy = policy;
    o.sleeper = log.sleeper();
    auto d = RedfishDriver::create(o);
    REQUIRE(d.ok());
    return std::move(d).value();
  }

 private:
  std::shared_ptr<chassis_sim::ChassisModel> model_;
  std::unique_ptr<chassis_sim::SimServer> server_;
  std::unique_ptr<net::HttpClient> control_;
};

}  // namespace kc::fabric::test
