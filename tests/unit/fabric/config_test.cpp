// Fabric config: parsing and validation, and drivers built from it against the chassis
// simulator in both dialects.
#include "libcore/fabric/config.hpp"

#include <catch2/catch.hpp>

#include "tests/unit/fabric/sim_harness.hpp"
#include "tests/unit/fabric/support.hpp"

using namespace kc::fabric;

TEST_CASE("fabric config: a full file parses with defaults where keys are absent",
          "[fabric][config]") {
  auto c = parseFabricConfig(R"(
pool: pool-a
chassis:
  - name: falcon-0
    dialect: h3
    url: http://10.0.0.5
    gpuModel: Tesla V100-PCIE-32GB
    readTimeoutMs: 5000
    attempts: 5
  - name: bmc-1
    dialect: redfish
    url: https://bmc-1.example
    auth: basic
    credentialsFile: /etc/kubecomp/fabric/bmc-1
    caFile: /etc/kubecomp/fabric/ca.crt
)");
  REQUIRE(c.ok());
  CHECK(c->pool == "pool-a");
  REQUIRE(c->chassis.size() == 2);
  const auto& h3 = c->chassis[0];
  CHECK(h3.dialect == "h3");
  CHECK(h3.gep == "0");
  CHECK(h3.gpuModel == "Tesla V100-PCIE-32GB");
  CHECK(h3.policy.readTimeout == Millis{5000});
  CHECK(h3.policy.moveTimeout == CallPolicy{}.moveTimeout);
  CHECK(h3.policy.attempts == 5);
  const auto& rf = c->chassis[1];
  CHECK(rf.auth == RedfishAuth::kBasic);
  CHECK(rf.caFile == "/etc/kubecomp/fabric/ca.crt");
  CHECK_FALSE(rf.insecureSkipVerify);
  CHECK(rf.readParallelism == 4);  // defaults
  CHECK(rf.expand);
  auto tuned = parseFabricConfig(
      "chassis:\n  - name: s\n    dialect: redfish\n    url: https://x\n    auth: none\n"
      "    insecureSkipVerify: true\n    readParallelism: 1\n    expand: false\n");
  REQUIRE(tuned.ok());
  CHECK(tuned->chassis[0].insecureSkipVerify);
  CHECK(tuned->chassis[0].readParallelism == 1);
  CHECK_FALSE(tuned->chassis[0].expand);
  // JSON is YAML too.
  auto j = parseFabricConfig(
      R"({"chassis":[{"name":"s","dialect":"redfish","url":"http://x","auth":"none"}]})");
  REQUIRE(j.ok());
  CHECK(j->pool == "fabric");
}

TEST_CASE("fabric config: mistakes are refused with the key named", "[fabric][config]") {
  const auto base = std::string("chassis:\n  - name: c0\n    dialect: h3\n    url: http://x\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "'chassis' list"},
      {"chassis: []\n", "non-empty 'chassis'"},
      {"pools: a\n" + base, "unknown key 'pools'"},
      {base + "    timeout: 5\n", "unknown key 'timeout'"},
      {base + "    auth: basic\n", "auth applies to the redfish dialect only"},
      {base + "    attempts: 0\n", "attempts must be an integer"},
      {base + "    readTimeoutMs: fast\n", "readTimeoutMs must be an integer"},
      {base + "    insecureSkipVerify: maybe\n", "insecureSkipVerify must be true or false"},
      {base + "    caFile: /etc/ca.crt\n", "apply to an https:// url only"},
      {base + "    insecureSkipVerify: true\n", "apply to an https:// url only"},
      {"chassis:\n  - name: c0\n    dialect: h3\n    url: https://x\n    caFile: /ca\n"
       "    insecureSkipVerify: true\n",
       "exclude each other"},
      {base + "    readParallelism: 4\n", "readParallelism applies to the redfish dialect only"},
      {base + "    expand: false\n", "expand applies to the redfish dialect only"},
      {"chassis:\n  - name: c0\n    dialect: redfish\n    url: https://x\n    auth: none\n"
       "    readParallelism: 0\n",
       "readParallelism must be an integer in [1, 16]"},
      {base + "    initialBackoffMs: 900\n    maxBackoffMs: 100\n", "maxBackoffMs"},
      {"chassis:\n  - name: C0\n    dialect: h3\n    url: http://x\n", "DNS label"},
      {"chassis:\n  - name: c0\n    dialect: nvlink\n    url: http://x\n", "dialect must be"},
      {"chassis:\n  - name: c0\n    dialect: h3\n    url: ftp://x\n", "url must start"},
      {"chassis:\n  - name: c0\n    dialect: redfish\n    url: http://x\n",
       "needs credentialsFile"},
      {base + base.substr(9), "listed twice"},
      {"chassis: [unclosed\n", "not valid YAML"},
  };
  for (const auto& [text, want] : cases) {
    INFO(text);
    auto c = parseFabricConfig(text);
    REQUIRE_FALSE(c.ok());
    CHECK(c.error().code == errc::kInvalid);
    CHECK_THAT(c.error().message, Catch::Contains(want));
  }
}

TEST_CASE("fabric config: a pool built from the file drives the simulator in both dialects",
          "[fabric][config]") {
  test::SimHarness sim(test::defaultTopology(), Credentials{"admin", "secret"});
  test::TempDir dir;
  const std::string creds = dir.write("creds/bmc", "admin:secret\n");
  const std::string file = dir.write("fabric.yaml", R"(
pool: pool-a
chassis:
  - name: falcon-a
    dialect: h3
    url: )" + sim.url("falcon-a") + R"(
    gpuModel: Tesla V100-PCIE-32GB
    credentialsFile: )" + creds + R"(
    attempts: 2
  - name: falcon-b
    dialect: redfish
    url: )" + sim.url("falcon-b") + R"(
    credentialsFile: )" + creds + R"(
)");
  auto config = loadFabricConfig(file);
  REQUIRE(config.ok());
  auto pool = makePool(*config, [](Millis) {});
  REQUIRE(pool.ok());
  CHECK((*pool)->chassisCount() == 2);
  auto inv = (*pool)->inventory();
  REQUIRE(inv.ok());
  CHECK(inv->gpus.size() ==
        sim.state()["chassis"][0]["gpus"].size() + sim.state()["chassis"][1]["gpus"].size());

  // A credentials file that does not exist fails the build, naming the chassis only.
  config->chassis[1].credentialsFile = (dir.path() / "missing").string();
  auto bad = makePool(*config);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message, Catch::Contains("chassis falcon-b"));
  CHECK_THAT(loadFabricConfig((dir.path() / "nope.yaml").string()).error().message,
             Catch::Contains("cannot read fabric config"));
}
