#include <catch2/catch.hpp>

#include "tools/chassis-sim/model.hpp"

using namespace kc::chassis_sim;

namespace {

const char* kYaml = R"(
latency:
  assign: [100, 200]
chassis:
  - name: falcon-a
    hosts:
      - port: 48
        system: node-1
      - port: 0
    gpus:
      - gid: "001300"
        uuid: GPU-16a0c321-fc4f-fd47-26e7-770eb9ecf5f9
        model: Tesla V100-PCIE-32GB
        host: 48
      - gid: "000C00"
        uuid: GPU-2
)";

Topology topo() {
  auto t = parseTopology(kYaml);
  REQUIRE(t.ok());
  return std::move(t).value();
}

}  // namespace

TEST_CASE("sim topology: YAML and JSON describe the same chassis", "[fabric][sim-model]") {
  Topology t = topo();
  REQUIRE(t.chassis.size() == 1);
  const auto& c = t.chassis[0];
  CHECK(c.name == "falcon-a");
  CHECK(c.hosts[0].system == "node-1");
  CHECK(c.hosts[1].system == "host-0");
  CHECK(c.gpus[0].gid == "001300");
  CHECK(c.gpus[0].host == 48u);
  CHECK_FALSE(c.gpus[1].host.has_value());
  CHECK(t.latencies.assign.min.count() == 100);
  CHECK(t.latencies.unassign.min.count() == 5000);  // measured default kept

  auto j = parseTopology(
      R"({"chassis":[{"name":"falcon-a","hosts":[{"port":48,"system":"node-1"},{"port":0}],
    "gpus":[{"gid":"001300","uuid":"GPU-16a0c321-fc4f-fd47-26e7-770eb9ecf5f9","model":"Tesla V100-PCIE-32GB","host":48},
            {"gid":"000C00","uuid":"GPU-2"}]}]})");
  REQUIRE(j.ok());
  CHECK(j->chassis[0].gpus[0].uuid == c.gpus[0].uuid);
  CHECK(j->chassis[0].gpus[1].model == c.gpus[1].model);
}

TEST_CASE("sim topology: invalid files name the problem", "[fabric][sim-model]") {
  auto [text, fragment] = GENERATE(table<std::string, std::string>({
      {"chassis: []", "non-empty"},
      {"{", "JSON"},
      {"chassis: [{name: A, hosts: [{port: 1}], gpus: []}]", "DNS label"},
      {"chassis: [{name: a, hosts: [], gpus: []}]", "hosts"},
      {"chassis: [{name: a, hosts: [{port: 300}], gpus: []}]", "0..255"},
      {"chassis: [{name: a, hosts: [{port: 1}], gpus: [{gid: zz, uuid: u}]}]", "hex"},
      {"chassis: [{name: a, hosts: [{port: 1}], gpus: [{gid: '01', uuid: u, host: 2}]}]",
       "not one of"},
      {"chassis: [{name: a, hosts: [{port: 1}], gpus: [{gid: '01', uuid: u}, {gid: '01', uuid: "
       "v}]}]",
       "duplicate gid"},
      {"chassis: [{name: a, hosts: [{port: 1}], gpus: [{gid: '01', uuid: u}, {gid: '02', uuid: "
       "u}]}]",
       "unique"},
      {"latency: {assign: [5, 1]}\nchassis: [{name: a, hosts: [{port: 1}], gpus: []}]",
       "min <= max"},
      {"latency: {teleport: [1, 1]}\nchassis: [{name: a, hosts: [{port: 1}], gpus: []}]",
       "unknown operation"},
      {"redfish: {profile: dmtf}\nchassis: [{name: a, hosts: [{port: 1}], gpus: []}]",
       "\"classic\", \"emulator\" or \"fabric\""},
      {"redfish: {pageSize: -1}\nchassis: [{name: a, hosts: [{port: 1}], gpus: []}]", "0 to 1000"},
  }));
  CAPTURE(text);
  auto t = parseTopology(text);
  REQUIRE_FALSE(t.ok());
  CHECK_THAT(t.error().message, Catch::Contains(fragment));
}

TEST_CASE("sim model: assign and unassign semantics", "[fabric][sim-model]") {
  ChassisModel m(topo());
  CHECK(m.assign("falcon-a", "001300", 48).ok());  // already there: idempotent
  CHECK(m.assign("falcon-a", "001300", 0).error().code == "conflict");
  CHECK(m.assign("falcon-a", "0FFFFF", 0).error().code == "not_found");
  CHECK(m.assign("falcon-a", "000C00", 7).error().code == "not_found");
  CHECK(m.unassign("falcon-a", "001300", 0u).error().code == "conflict");
  CHECK(m.unassign("falcon-a", "001300").ok());
  CHECK(m.unassign("falcon-a", "001300").ok());  // idempotent
  CHECK(m.assign("falcon-a", "001300", 0).ok());
  CHECK(m.snapshot("falcon-a")->gpu("001300")->host == 0u);
  CHECK(m.loseGpu("falcon-a", "000C00").ok());
  CHECK(m.assign("falcon-a", "000C00", 0).error().code == "unhealthy");
}

TEST_CASE("sim model: faults match op, chassis and GPU and are consumed", "[fabric][sim-model]") {
  ChassisModel m(topo());
  auto fault = parseFault(
      nlohmann::json::parse(R"({"op":"assign","kind":"lie_success","gpu":"000C00","times":2})"));
  REQUIRE(fault.ok());
  m.addFault(*fault);
  CHECK_FALSE(m.plan("falcon-a", Op::kAssign, "001300").fault.has_value());
  CHECK_FALSE(m.plan("falcon-a", Op::kUnassign, "000C00").fault.has_value());
  CHECK(m.plan("falcon-a", Op::kAssign, "000C00").fault->kind == FaultKind::kLieSuccess);
  CHECK(m.plan("falcon-a", Op::kAssign, "000C00").fault.has_value());
  CHECK_FALSE(m.plan("falcon-a", Op::kAssign, "000C00").fault.has_value());
  CHECK(m.faults().empty());

  m.addFault(*parseFault(nlohmann::json::parse(R"({"op":"inventory","kind":"fail","times":-1})")));
  for (int i = 0; i < 5; ++i) {
    CHECK(m.plan("falcon-a", Op::kInventory, "").fault.has_value());
  }
  m.clearFaults();
  CHECK_FALSE(m.plan("falcon-a", Op::kInventory, "").fault.has_value());
}

TEST_CASE("sim model: latency sampled in range, scaled, zero when scale is 0",
          "[fabric][sim-model]") {
  ChassisModel m(topo(), 42);
  for (int i = 0; i < 100; ++i) {
    auto d = m.plan("falcon-a", Op::kAssign, "001300").delay.count();
    CHECK(d >= 100);
    CHECK(d <= 200);
  }
  m.setLatencyScale(0.5);
  for (int i = 0; i < 100; ++i) {
    auto d = m.plan("falcon-a", Op::kInventory, "").delay.count();
    CHECK(d >= 1500);
    CHECK(d <= 2000);
  }
  m.setLatencyScale(0);
  CHECK(m.plan("falcon-a", Op::kUnassign, "001300").delay.count() == 0);
}

TEST_CASE("sim model: bad fault requests are refused", "[fabric][sim-model]") {
  for (const char* bad :
       {R"({"op":"assign"})", R"({"op":"x","kind":"fail"})", R"({"op":"assign","kind":"nope"})",
        R"({"op":"assign","kind":"fail","times":0})", R"({"op":"assign","kind":"malformed"})",
        R"({"op":"assign","kind":"lose_gpu"})", R"({"op":"assign","kind":"fail","extra":1})",
        "[]"}) {
    CAPTURE(bad);
    CHECK_FALSE(parseFault(nlohmann::json::parse(bad)).ok());
  }
}

TEST_CASE("sim model: the change listener hears every change, in order, and no no-op",
          "[fabric][sim-model]") {
  ChassisModel m(topo());
  std::vector<std::string> heard;
  m.setChangeListener([&heard](const GpuChange& c) {
    heard.push_back(c.chassis + "/" + c.gid + "@" + (c.host ? std::to_string(*c.host) : "-") +
                    (c.healthy ? "" : "!"));
  });
  REQUIRE(m.assign("falcon-a", "001300", 48).ok());  // already there: no change
  REQUIRE(m.unassign("falcon-a", "000C00").ok());    // not attached: no change
  REQUIRE(m.unassign("falcon-a", "001300").ok());
  REQUIRE(m.assign("falcon-a", "000C00", 0).ok());
  CHECK_FALSE(m.assign("falcon-a", "001300", 99).ok());  // refused: no change
  REQUIRE(m.loseGpu("falcon-a", "000C00").ok());
  REQUIRE(m.loseGpu("falcon-a", "000C00").ok());  // lost already
  CHECK(heard ==
        std::vector<std::string>{"falcon-a/001300@-", "falcon-a/000C00@0", "falcon-a/000C00@0!"});
  m.setChangeListener(nullptr);
  REQUIRE(m.unassign("falcon-a", "000C00").ok());
  CHECK(heard.size() == 3);
}
