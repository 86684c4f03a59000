// The Redfish driver's "fabric" style (DSP0268 Fabrics: Endpoints and Connections): the wire
// codec on literal bodies shaped like DMTF's public-cxl mockup, the config keys, and the
// driver against chassis-sim's fabric profile beyond the contract suite (the exact requests a
// move sends, choosing the Fabric, what the inventory shows of the service's shapes).

#include <catch2/catch.hpp>

#include "libcore/fabric/config.hpp"
#include "libcore/fabric/redfish_fabric_codec.hpp"
#include "tests/unit/fabric/sim_harness.hpp"

using namespace kc::fabric;
using test::SimHarness;
using test::SleepLog;

namespace {

// public-cxl's Endpoints/T2 (a GPU behind a CXL Type 2 device), trimmed.
constexpr const char* kCxlGpuEndpoint = R"({
  "@odata.type": "#Endpoint.v1_8_2.Endpoint", "Id": "T2", "Name": "CXL Device Type 2 endpoint",
  "EndpointProtocol": "CXL",
  "ConnectedEntities": [
    {"EntityType": "CXLDevice", "EntityRole": "Target",
     "EntityLink": {"@odata.id": "/redfish/v1/Chassis/PooledCXLType2/PCIeDevices/1/CXLLogicalDevices/1"}},
    {"EntityType": "Processor", "EntityRole": "Target",
     "EntityLink": {"@odata.id": "/redfish/v1/Chassis/PooledCXLType2/Processors/GPU"}},
    {"EntityType": "MemoryChunk", "EntityRole": "Target",
     "EntityLink": {"@odata.id": "/redfish/v1/Chassis/PooledCXLType2/MemoryDomains/1/MemoryChunks/1"}}],
  "Links": {"Zones": [{"@odata.id": "/redfish/v1/Fabrics/CXL/Zones/2"}],
            "Connections": [{"@odata.id": "/redfish/v1/Fabrics/CXL/Connections/12"}]},
  "@odata.id": "/redfish/v1/Fabrics/CXL/Endpoints/T2"})";

std::unique_ptr<RedfishDriver> fabricDriver(SimHarness& sim, SleepLog& log,
                                            const std::string& fabric) {
  RedfishOptions o;
  o.chassis = "falcon-a";
  o.baseUrl = sim.url("falcon-a");
  o.credentials = Credentials{"admin", "secret"};
  o.policy = test::fastPolicy();
  o.sleeper = log.sleeper();
  o.style = RedfishStyle::kFabric;
  o.fabric = fabric;
  auto d = RedfishDriver::create(o);
  REQUIRE(d.ok());
  return std::move(d).value();
}

std::string fabricTopology() {
  return test::defaultTopology("redfish: {profile: fabric}\n");
}

}  // namespace

TEST_CASE("fabric codec: public-cxl shapes parse to what the driver uses", "[fabric][codec]") {
  auto ep = redfish::parseEndpoint(kCxlGpuEndpoint);
  REQUIRE(ep.ok());
  CHECK(ep->id == "T2");
  CHECK_FALSE(ep->isInitiator());
  CHECK(ep->targetProcessors() ==
        std::vector<std::string>{"/redfish/v1/Chassis/PooledCXLType2/Processors/GPU"});
  CHECK(ep->connections == std::vector<std::string>{"/redfish/v1/Fabrics/CXL/Connections/12"});

  auto host = redfish::parseEndpoint(R"({"@odata.id":"/f/E/I2","Id":"I2","ConnectedEntities":[
      {"EntityType":"Processor","EntityRole":"Initiator",
       "EntityLink":{"@odata.id":"/redfish/v1/Systems/CXL-System/Processors/CPU"}}]})");
  REQUIRE(host.ok());
  CHECK(host->isInitiator());
  CHECK(host->targetProcessors().empty());  // an initiator's CPU is no GPU

  auto conn = redfish::parseConnection(R"({"@odata.id":"/f/C/12","Id":"12",
      "ConnectionType":"Memory","Links":{"InitiatorEndpoints":[{"@odata.id":"/f/E/I2"}],
      "TargetEndpoints":[{"@odata.id":"/f/E/T2"}]}})");
  REQUIRE(conn.ok());
  CHECK(conn->initiators == std::vector<std::string>{"/f/E/I2"});
  CHECK(conn->targets == std::vector<std::string>{"/f/E/T2"});

  auto root = redfish::parseFabricServiceRoot(
      R"({"Fabrics":{"@odata.id":"/redfish/v1/Fabrics"},"Systems":{"@odata.id":"/redfish/v1/Systems"}})");
  REQUIRE(root.ok());
  CHECK(root->fabrics == "/redfish/v1/Fabrics");
  CHECK_FALSE(root->sessions.has_value());
  auto none = redfish::parseFabricServiceRoot(R"({"Systems":{"@odata.id":"/redfish/v1/Systems"}})");
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().code == errc::kUnsupported);
}

TEST_CASE("fabric codec: wrong shapes are protocol errors naming the property", "[fabric][codec]") {
  using Row = std::tuple<std::string, std::string>;
  auto [body, needle] = GENERATE(table<std::string, std::string>({
      Row{R"({"Id":"T1"})", "needs a string \"@odata.id\" and \"Id\""},
      Row{R"({"@odata.id":"/e/1","Id":""})", "1..128"},
      Row{R"({"@odata.id":"/e/1","Id":"1","ConnectedEntities":{}})", "ConnectedEntities"},
      Row{R"({"@odata.id":"/e/1","Id":"1","ConnectedEntities":[{"EntityRole":1}]})", "EntityRole"},
      Row{R"({"@odata.id":"/e/1","Id":"1","ConnectedEntities":[{"EntityLink":"/x"}]})",
          "EntityLink"},
      Row{R"({"@odata.id":"/e/1","Id":"1","Links":{"Connections":[{"@odata.id":"x"}]}})",
          "not an absolute path"},
      Row{R"({"@odata.id":"/e/1","Id":"1","Status":"OK"})", "Status"},
      Row{R"([1,2])", "expected an object"},
  }));
  CAPTURE(body);
  auto ep = redfish::parseEndpoint(body);
  REQUIRE_FALSE(ep.ok());
  CHECK(ep.error().code == errc::kProtocol);
  CHECK_THAT(ep.error().message, Catch::Contains(needle));
  auto conn = redfish::parseConnection(
      R"({"@odata.id":"/c/1","Id":"1","Links":{"TargetEndpoints":{"@odata.id":"/e/1"}}})");
  REQUIRE_FALSE(conn.ok());
  CHECK_THAT(conn.error().message, Catch::Contains("TargetEndpoints"));
}

TEST_CASE("fabric codec: the Connection request carries the schema's link names",
          "[fabric][codec]") {
  CHECK(redfish::encodeConnectionRequest("kubecomp n1 + T2", "/f/E/I2", "/f/E/T2") ==
        R"({"Name":"kubecomp n1 + T2","Links":{"InitiatorEndpoints":[{"@odata.id":"/f/E/I2"}],)"
        R"("TargetEndpoints":[{"@odata.id":"/f/E/T2"}]}})");
  auto back =
      redfish::parseConnectionRequest(redfish::encodeConnectionRequest("x", "/f/E/I2", "/f/E/T2"));
  REQUIRE(back.ok());
  CHECK(back->initiators == std::vector<std::string>{"/f/E/I2"});
  auto bad = redfish::parseConnectionRequest(R"({"Links":{"InitiatorEndpoints":"/f/E/I2"}})");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == errc::kInvalid);
}

TEST_CASE("fabric config: style and fabric are redfish keys, checked", "[fabric][config]") {
  auto c = parseFabricConfig(
      "chassis:\n  - name: cxl\n    dialect: redfish\n    url: http://fm\n    auth: none\n"
      "    style: fabric\n    fabric: CXL\n");
  REQUIRE(c.ok());
  CHECK(c->chassis[0].style == RedfishStyle::kFabric);
  CHECK(c->chassis[0].fabric == "CXL");
  auto plain = parseFabricConfig(
      "chassis:\n  - name: b\n    dialect: redfish\n    url: http://b\n    auth: none\n");
  REQUIRE(plain.ok());
  CHECK(plain->chassis[0].style == RedfishStyle::kComposition);
  using Row = std::tuple<std::string, std::string>;
  auto [extra, needle] = GENERATE(table<std::string, std::string>({
      Row{"    style: zones\n", "style must be composition or fabric"},
      Row{"    fabric: CXL\n", "fabric applies to style fabric only"},
      Row{"    style: [fabric]\n", "style must be a string"},
  }));
  CAPTURE(extra);
  auto bad = parseFabricConfig(
      "chassis:\n  - name: b\n    dialect: redfish\n    url: http://b\n    auth: none\n" + extra);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == errc::kInvalid);
  CHECK_THAT(bad.error().message, Catch::Contains(needle));
  auto h3 = parseFabricConfig(
      "chassis:\n  - name: h\n    dialect: h3\n    url: http://h\n    style: fabric\n");
  REQUIRE_FALSE(h3.ok());
  CHECK_THAT(h3.error().message, Catch::Contains("redfish dialect only"));
}

TEST_CASE("fabric style: inventory, hosts and the Fabric chosen by Id", "[fabric][redfish]") {
  SimHarness sim(fabricTopology(), Credentials{"admin", "secret"});
  SleepLog log;
  SECTION("the only Fabric when none is configured") {
    auto d = fabricDriver(sim, log, "");
    CHECK(d->style() == RedfishStyle::kFabric);
    auto inv = d->inventory();
    REQUIRE(inv.ok());
    CHECK(inv->hosts == std::vector<std::string>{"node-1", "node-2"});
    REQUIRE(inv->gpus.size() == 4);
    const GpuInfo* g = inv->find("falcon-a.001300");
    REQUIRE(g != nullptr);
    CHECK(g->uuid == "GPU-16a0c321-fc4f-fd47-26e7-770eb9ecf5f9");
    CHECK(g->model == "Tesla V100-PCIE-32GB");
    CHECK(g->hostPort == std::optional<std::string>("node-1"));
  }
  SECTION("a Fabric the service does not have: not_found naming the ones it has") {
    auto d = fabricDriver(sim, log, "CXL");
    auto inv = d->inventory();
    REQUIRE_FALSE(inv.ok());
    CHECK(inv.error().code == errc::kNotFound);
    CHECK_THAT(inv.error().message, Catch::Contains("no Fabric with Id \"CXL\"") &&
                                        Catch::Contains("its Fabrics: PCIe"));
  }
  SECTION("the composition style on a service without CompositionService: unsupported") {
    auto d = sim.redfish("falcon-a", log);
    auto inv = d->inventory();
    REQUIRE_FALSE(inv.ok());
    CHECK(inv.error().code == errc::kUnsupported);
  }
}

TEST_CASE("fabric style: attach POSTs one Connection, detach DELETEs it", "[fabric][redfish]") {
  SimHarness sim(fabricTopology(), Credentials{"admin", "secret"});
  SleepLog log;
  auto d = fabricDriver(sim, log, "PCIe");
  // Read the Connection the simulator made, through the service: it links exactly the host's
  // initiator Endpoint and the GPU's target Endpoint.
  kc::net::ClientOptions co;
  co.baseUrl = sim.url("falcon-a");
  auto client = kc::net::HttpClient::create(co);
  REQUIRE(client.ok());
  const kc::net::Headers auth{{"Authorization", "Basic YWRtaW46c2VjcmV0"}};  // admin:secret
  const std::string conns = "/redfish/v1/Fabrics/PCIe/Connections";          // under the base URL

  auto a = d->attach("falcon-a.000500", "node-2");
  REQUIRE(a.ok());
  CHECK(sim.counter("falcon-a", "assign") == 1);
  auto list = (*client)->request("GET", conns, {}, auth);
  REQUIRE(list.ok());
  INFO(list->body);
  const auto doc = nlohmann::json::parse(list->body);
  CHECK(doc["Members@odata.count"] == 4);  // three from the topology and the new one
  auto made = (*client)->request("GET", conns + "/conn-000500", {}, auth);
  REQUIRE(made.ok());
  REQUIRE(made->status == 200);
  auto conn = redfish::parseConnection(made->body);
  REQUIRE(conn.ok());
  CHECK(conn->initiators ==
        std::vector<std::string>{"/chassis/falcon-a/redfish/v1/Fabrics/PCIe/Endpoints/node-2"});
  CHECK(conn->targets ==
        std::vector<std::string>{"/chassis/falcon-a/redfish/v1/Fabrics/PCIe/Endpoints/000500"});

  auto detached = d->detach("falcon-a.000500");
  REQUIRE(detached.ok());
  CHECK(detached->hostBefore == std::optional<std::string>("node-2"));
  CHECK(sim.counter("falcon-a", "unassign") == 1);
  auto gone = (*client)->request("GET", conns + "/conn-000500", {}, auth);
  REQUIRE(gone.ok());
  CHECK(gone->status == 404);

  // An unknown host is not_found before anything is sent.
  auto unknown = d->attach("falcon-a.000500", "node-9");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().code == errc::kNotFound);
  CHECK(sim.counter("falcon-a", "assign") == 1);
}
