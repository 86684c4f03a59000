// Dialect-specific behaviour of the H3 and Redfish drivers: exact wire requests, auth,
// sessions, ETags, link following.

#include <catch2/catch.hpp>
#include <mutex>

#include "libcore/net/http_server.hpp"
#include "tests/unit/fabric/sim_harness.hpp"

using namespace kc::fabric;
using test::SimHarness;
using test::SleepLog;

namespace {

// A scripted chassis: records every request and answers from a table, to pin the exact bytes
// a driver sends and to serve replies the simulator never would.
class ScriptedChassis {
 public:
  ScriptedChassis() {
    server_.routePrefix("", "/", [this](const kc::net::Request& req) {
      std::lock_guard lock(mutex_);
      requests_.push_back(req);
      const auto it = replies_.find(req.method + " " + req.path);
      if (it == replies_.end()) {
        return kc::net::Response::error(404, "not_found", req.path);
      }
      return it->second;
    });
    REQUIRE(server_.start().ok());
  }
  void reply(const std::string& key, kc::net::Response r) {
    std::lock_guard lock(mutex_);
    replies_[key] = std::move(r);
  }
  std::vector<kc::net::Request> requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  std::string url() const { return server_.baseUrl(); }

 private:
  kc::net::HttpServer server_;
  std::mutex mutex_;  // guards the two members below
  std::map<std::string, kc::net::Response> replies_;
  std::vector<kc::net::Request> requests_;
};

}  // namespace

TEST_CASE("h3 driver: sends the exact requests the real chassis takes", "[fabric][h3]") {
  ScriptedChassis chassis;
  // Before: 000500 unattached. The assign answers Result:[false] (the quirk); after it the
  // inventory shows it on port 48.
  const std::string before =
      R"([{"dev_type":"GPU","Dev_GID":"000500","Host_Port#":"","OB_GPU_GUID":"GPU-1"},{"Port#":"48","Port_GID":"30h"}])";
  const std::string after =
      R"([{"dev_type":"GPU","Dev_GID":"000500","Host_Port#":"48","OB_GPU_GUID":"GPU-1"},{"Port#":"48","Port_GID":"30h"}])";
  chassis.reply("GET /h3api/v1/resources",
                kc::net::Response::text(200, before, "application/json"));
  chassis.reply("POST /h3api/v1/allocation",
                kc::net::Response::text(200, R"({"Action":"assign","Result":[false],"Remark":""})",
                                        "application/json"));
  SleepLog log;
  H3Options o;
  o.chassis = "falcon-x";
  o.baseUrl = chassis.url();
  o.policy = test::fastPolicy();
  o.policy.attempts = 1;
  o.sleeper = log.sleeper();
  auto driver = H3Driver::create(o);
  REQUIRE(driver.ok());

  auto r = (*driver)->attach("falcon-x.000500", "48");
  REQUIRE_FALSE(r.ok());  // inventory still says unattached: not a success, whatever was answered
  CHECK(r.error().code == errc::kRefused);

  auto reqs = chassis.requests();
  REQUIRE(reqs.size() == 3);
  CHECK(reqs[1].method == "POST");
  CHECK(reqs[1].path == "/h3api/v1/allocation");
  CHECK(reqs[1].header("Content-Type") == "text/plain");
  CHECK(reqs[1].body == R"({"gep":"0","port_gid":"30h","dev_gid":"000500"})");
  CHECK_FALSE(reqs[1].header("Authorization").has_value());  // the real chassis has no auth

  chassis.reply("GET /h3api/v1/resources", kc::net::Response::text(200, after, "application/json"));
  chassis.reply("DELETE /h3api/v1/allocation",
                kc::net::Response::text(200, R"({"Action":"unassign","Result":[true],"Remark":""})",
                                        "application/json"));
  // Now attached: idempotent attach, and a detach whose verification fails (inventory unchanged).
  auto same = (*driver)->attach("falcon-x.000500", "48");
  REQUIRE(same.ok());
  CHECK_FALSE(same->changed);
  auto d = (*driver)->detach("falcon-x.000500");
  REQUIRE_FALSE(d.ok());
  CHECK(d.error().code == errc::kUnverified);
  reqs = chassis.requests();
  CHECK(reqs.back().method == "GET");
  CHECK(reqs[reqs.size() - 2].method == "DELETE");
  CHECK(reqs[reqs.size() - 2].body == R"({"gep":"0","dev_gid":"000500"})");
}

TEST_CASE("h3 driver: argument validation happens before any request", "[fabric][h3]") {
  SimHarness sim;
  SleepLog log;
  auto d = sim.h3("falcon-a", log);
  for (const char* host : {"", "x", "256", "-1", "30h"}) {
    CAPTURE(host);
    auto r = d->attach("falcon-a.000500", host);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == errc::kInvalid);
  }
  CHECK(d->attach("falcon-b.002F00", "48").error().code == errc::kInvalid);  // other chassis
  CHECK(d->attach("falcon-a.xyz", "48").error().code == errc::kInvalid);
  CHECK(d->attach("falcon-a.000500", "7").error().code == errc::kNotFound);  // no such host port
  CHECK(sim.counter("falcon-a", "assign") == 0);
  H3Options bad;
  bad.chassis = "Falcon";
  bad.baseUrl = "http://127.0.0.1:1";
  CHECK_FALSE(H3Driver::create(bad).ok());
  bad.chassis = "falcon";
  bad.baseUrl = "ftp://x";
  CHECK_FALSE(H3Driver::create(bad).ok());
}

TEST_CASE("h3 driver: basic auth when the chassis requires it", "[fabric][h3]") {
  SimHarness sim(test::defaultTopology(), Credentials{"admin", "secret"});
  SleepLog log;
  auto none = sim.h3("falcon-a", log);
  auto r = none->inventory();
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == errc::kUnauthorized);
  CHECK(log.count() == 0);  // auth failures are not retried
  auto wrong = sim.h3("falcon-a", log, test::fastPolicy(), Credentials{"admin", "guess"});
  REQUIRE_FALSE(wrong->inventory().ok());
  auto right = sim.h3("falcon-a", log, test::fastPolicy(), Credentials{"admin", "secret"});
  CHECK(right->inventory().ok());
}

TEST_CASE("h3 driver: connection refused is unavailable after retries", "[fabric][h3]") {
  SleepLog log;
  H3Options o;
  o.chassis = "gone";
  o.baseUrl = "http://127.0.0.1:1";
  o.policy = test::fastPolicy();
  o.sleeper = log.sleeper();
  auto d = H3Driver::create(o);
  REQUIRE(d.ok());
  auto r = (*d)->inventory();
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == errc::kUnavailable);
  CHECK(log.count() == 2);
}

TEST_CASE("redfish driver: sessions are created once and renewed after expiry",
          "[fabric][redfish]") {
  SimHarness sim(test::defaultTopology(), Credentials{"admin", "secret"});
  SleepLog log;
  auto d = sim.redfish("falcon-a", log);
  REQUIRE(d->inventory().ok());
  REQUIRE(d->inventory().ok());
  CHECK(d->logins() == 1);
  sim.expireSessions();
  auto r = d->attach("falcon-a.000500", "node-2");
  REQUIRE(r.ok());
  CHECK(d->logins() == 2);
  CHECK(sim.trueHost("falcon-a", "000500") == 0);
}

TEST_CASE("redfish driver: rejected credentials are an auth error without the password",
          "[fabric][redfish]") {
  SimHarness sim(test::defaultTopology(), Credentials{"admin", "secret"});
  SleepLog log;
  auto mode = GENERATE(RedfishAuth::kSession, RedfishAuth::kBasic);
  auto d = sim.redfish("falcon-a", log, mode, Credentials{"admin", "hunter2"});
  auto r = d->inventory();
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == errc::kUnauthorized);
  CHECK_THAT(r.error().message, Catch::Contains("admin"));
  CHECK_THAT(r.error().message, !Catch::Contains("hunter2"));
  auto none = sim.redfish("falcon-a", log, RedfishAuth::kNone, std::nullopt);
  CHECK(none->inventory().error().code == errc::kUnauthorized);
}

TEST_CASE("redfish driver: stale ETag (428) is re-read and retried", "[fabric][redfish]") {
  SimHarness sim(test::defaultTopology("redfish: {requireEtags: true}\n"),
                 Credentials{"admin", "secret"});
  SleepLog log;
  auto d = sim.redfish("falcon-a", log);
  sim.fault(R"({"chassis":"falcon-a","op":"assign","kind":"precondition"})");
  auto r = d->attach("falcon-a.000500", "node-1");
  REQUIRE(r.ok());
  CHECK(r->attempts == 2);
  REQUIRE_FALSE(r->notes.empty());
  CHECK_THAT(r->notes.front(), Catch::Contains("428"));
  CHECK(sim.trueHost("falcon-a", "000500") == 48);
}

TEST_CASE("redfish driver: ETags found only in bodies are sent with actions", "[fabric][redfish]") {
  SimHarness sim(test::defaultTopology("redfish: {requireEtags: true, etagHeader: false}\n"),
                 Credentials{"admin", "secret"});
  SleepLog log;
  auto d = sim.redfish("falcon-a", log);
  auto r = d->attach("falcon-a.000500", "node-1");
  REQUIRE(r.ok());
  CHECK(r->attempts == 1);
  CHECK(sim.trueHost("falcon-a", "000500") == 48);
  auto back = d->detach("falcon-a.000500");
  REQUIRE(back.ok());
  CHECK(back->attempts == 1);
}

TEST_CASE("redfish driver: follows links, not URI conventions", "[fabric][redfish]") {
  const std::string profile = GENERATE(as<std::string>{}, "classic", "emulator");
  CAPTURE(profile);
  SimHarness sim(test::defaultTopology("redfish: {uris: opaque, profile: " + profile + "}\n"),
                 Credentials{"admin", "secret"});
  SleepLog log;
  auto d = sim.redfish("falcon-a", log);
  auto inv = d->inventory();
  REQUIRE(inv.ok());
  CHECK(inv->find("falcon-a.001300")->hostPort == "node-1");
  REQUIRE(d->detach("falcon-a.001300").ok());
  REQUIRE(d->attach("falcon-a.001300", "node-2").ok());
  CHECK(sim.trueHost("falcon-a", "001300") == 0);
}

namespace {

kc::net::Response redfishJson(const std::string& body) {
  return kc::net::Response::text(200, body, "application/json");
}

// A composing service that offers neither composition style: systems without
// Add/RemoveResourceBlock actions and no @Redfish.CollectionCapabilities anywhere. node-1 holds
// gpu1; gpu0 is free. With `computeBlock`, node-1 is a Compute ResourceBlock composed into
// system composed-1 together with gpu1 and a storage block (so deleting composed-1 would take
// the storage along).
void scriptNoComposition(ScriptedChassis& svc, bool computeBlock) {
  const std::string rb = "/redfish/v1/CompositionService/ResourceBlocks";
  const std::string sys =
      computeBlock ? "/redfish/v1/Systems/composed-1" : "/redfish/v1/Systems/node-1";
  svc.reply("GET /redfish/v1/", redfishJson(R"({"@odata.id":"/redfish/v1/",
      "Systems":{"@odata.id":"/redfish/v1/Systems"},
      "CompositionService":{"@odata.id":"/redfish/v1/CompositionService"}})"));
  svc.reply("GET /redfish/v1/CompositionService",
            redfishJson(R"({"@odata.id":"/redfish/v1/CompositionService","ServiceEnabled":true,
      "AllowOverprovisioning":false,"ResourceBlocks":{"@odata.id":")" +
                        rb + R"("}})"));
  svc.reply("GET /redfish/v1/Systems",
            redfishJson(R"({"Members":[{"@odata.id":")" + sys + R"("}],"Members@odata.count":1})"));
  std::string sysBlocks = R"([{"@odata.id":")" + rb + R"(/gpu1"})";
  if (computeBlock) {
    sysBlocks += R"(,{"@odata.id":")" + rb + R"(/node-1"},{"@odata.id":")" + rb + R"(/disk-1"})";
  }
  svc.reply("GET " + sys, redfishJson(R"({"@odata.id":")" + sys + R"(","Id":")" +
                                      (computeBlock ? "composed-1" : "node-1") +
                                      R"(","Links":{"ResourceBlocks":)" + sysBlocks + R"(]},
      "Actions":{"#ComputerSystem.Reset":{"target":")" +
                                      sys + R"(/Actions/ComputerSystem.Reset"}}})"));
  std::string members = R"({"@odata.id":")" + rb + R"(/gpu0"},{"@odata.id":")" + rb + R"(/gpu1"})";
  if (computeBlock) {
    members += R"(,{"@odata.id":")" + rb + R"(/node-1"})";
  }
  svc.reply("GET " + rb, redfishJson(R"({"Members":[)" + members + "]}"));
  for (const std::string id : {"gpu0", "gpu1"}) {
    const std::string link = rb + "/" + id;
    svc.reply("GET " + link, redfishJson(R"({"@odata.id":")" + link + R"(","Id":")" + id + R"(",
        "ResourceBlockType":["Processor"],"Status":{"State":"Enabled","Health":"OK"},
        "CompositionStatus":{"CompositionState":")" +
                                         (id == "gpu1" ? "Composed" : "Unused") + R"("},
        "Processors":[{"@odata.id":")" + link +
                                         R"(/Processors/GPU0"}]})"));
    svc.reply("GET " + link + "/Processors/GPU0",
              redfishJson(R"({"@odata.id":")" + link + R"(/Processors/GPU0","Id":"GPU0",
        "ProcessorType":"GPU","Model":"A100","UUID":"00000000-0000-4000-8000-00000000000)" +
                          id.substr(3) + R"(","Status":{"State":"Enabled","Health":"OK"}})"));
  }
  if (computeBlock) {
    svc.reply("GET " + rb + "/node-1", redfishJson(R"({"@odata.id":")" + rb + R"(/node-1",
        "Id":"node-1","ResourceBlockType":["Compute"],"Status":{"State":"Enabled","Health":"OK"},
        "CompositionStatus":{"CompositionState":"Composed","SharingEnabled":true,
                             "MaxCompositions":8,"NumberOfCompositions":1},
        "Links":{"ComputerSystems":[{"@odata.id":"/redfish/v1/Systems/composed-1"}]}})"));
  }
}

std::unique_ptr<RedfishDriver> scriptedRedfish(ScriptedChassis& svc, SleepLog& log) {
  RedfishOptions o;
  o.chassis = "bmc";
  o.baseUrl = svc.url();
  o.auth = RedfishAuth::kNone;
  o.policy = test::fastPolicy();
  o.sleeper = log.sleeper();
  auto d = RedfishDriver::create(o);
  REQUIRE(d.ok());
  return std::move(d).value();
}

std::size_t writes(ScriptedChassis& svc) {
  std::size_t n = 0;
  for (const auto& r : svc.requests()) {
    n += r.method != "GET" ? 1 : 0;
  }
  return n;
}

}  // namespace

TEST_CASE("redfish driver: a service without composition is refused clearly", "[fabric][redfish]") {
  ScriptedChassis svc;
  svc.reply("GET /redfish/v1/",
            kc::net::Response::text(
                200, R"({"@odata.id":"/redfish/v1","Systems":{"@odata.id":"/redfish/v1/Systems"}})",
                "application/json"));
  SleepLog log;
  auto d = scriptedRedfish(svc, log);
  auto r = d->inventory();
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == errc::kUnsupported);  // not a malformed reply: retrying cannot help
  CHECK_THAT(r.error().message, Catch::Contains("CompositionService"));
}

TEST_CASE("redfish driver: a service offering neither composition style is unsupported",
          "[fabric][redfish]") {
  const bool computeBlock = GENERATE(false, true);
  CAPTURE(computeBlock);
  ScriptedChassis svc;
  scriptNoComposition(svc, computeBlock);
  SleepLog log;
  auto d = scriptedRedfish(svc, log);
  auto inv = d->inventory();
  REQUIRE(inv.ok());  // reading works; only moving does not
  REQUIRE(inv->find("bmc.gpu1"));
  CHECK(inv->find("bmc.gpu1")->hostPort == "node-1");

  auto up = d->attach("bmc.gpu0", "node-1");
  REQUIRE_FALSE(up.ok());
  CHECK(up.error().code == errc::kUnsupported);  // not kProtocol: nothing was malformed
  CHECK_THAT(up.error().message, Catch::Contains("offers no #ComputerSystem.AddResourceBlock"));
  CHECK_THAT(up.error().message, Catch::Contains(computeBlock ? "ComputerSystemComposition"
                                                              : "needs Compute ResourceBlocks"));
  auto down = d->detach("bmc.gpu1");
  REQUIRE_FALSE(down.ok());
  CHECK(down.error().code == errc::kUnsupported);
  CHECK_THAT(down.error().message, Catch::Contains("RemoveResourceBlock"));
  CHECK_THAT(down.error().message,
             Catch::Contains(computeBlock ? "disk-1" : "it is the host itself"));
  CHECK(writes(svc) == 0);  // nothing was tried, nothing changed
  CHECK(log.count() == 0);  // and nothing was retried
}

TEST_CASE("redfish driver: a redirect to another origin is refused, not followed",
          "[fabric][redfish]") {
  ScriptedChassis svc;
  svc.reply("GET /redfish/v1/", kc::net::Response::text(308, "moved")
                                    .withHeader("Location", "http://192.0.2.1:8000/redfish/v1/"));
  SleepLog log;
  auto d = scriptedRedfish(svc, log);
  auto inv = d->inventory();
  REQUIRE_FALSE(inv.ok());
  CHECK(inv.error().code == errc::kProtocol);
  CHECK_THAT(inv.error().message,
             Catch::Contains("another origin") && Catch::Contains("192.0.2.1:8000"));
}
