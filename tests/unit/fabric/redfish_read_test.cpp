// How the Redfish driver reads (issue 24): $expand where the service advertises it, bounded
// parallel GETs otherwise, both giving exactly the inventory that one GET after another gives;
// and https with a private CA, without one, with the wrong one, and with verification off.

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>

#include "libcore/fabric/config.hpp"
#include "libcore/net/http_server.hpp"
#include "libcore/net/pki.hpp"
#include "tests/unit/fabric/sim_harness.hpp"
#include "tests/unit/fabric/support.hpp"

using namespace kc::fabric;
using test::SimHarness;
using test::SleepLog;

namespace {

struct ReadMode {
  bool expand;
  std::uint32_t parallelism;
};

std::unique_ptr<RedfishDriver> simRedfish(SimHarness& sim, const std::string& chassis,
                                          SleepLog& log, ReadMode mode) {
  RedfishOptions o;
  o.chassis = chassis;
  o.baseUrl = sim.url(chassis);
  o.auth = RedfishAuth::kSession;
  o.credentials = Credentials{"admin", "secret"};
  o.policy = test::fastPolicy();
  o.sleeper = log.sleeper();
  o.expand = mode.expand;
  o.readParallelism = mode.parallelism;
  auto d = RedfishDriver::create(o);
  REQUIRE(d.ok());
  return std::move(d).value();
}

}  // namespace

TEST_CASE("redfish read: $expand and parallel GETs give the inventory one GET at a time gives",
          "[fabric][redfish]") {
  // falcon-a: 2 hosts (ComputerSystems), 4 GPU blocks with one Processor each.
  const std::string profile = GENERATE(as<std::string>{}, "classic", "emulator");
  const std::string paging = GENERATE(as<std::string>{}, "", ", pageSize: 2");
  CAPTURE(profile, paging);
  SimHarness sim(test::defaultTopology("redfish: {profile: " + profile + paging + "}\n"),
                 Credentials{"admin", "secret"});
  SleepLog log;
  auto oneByOne = simRedfish(sim, "falcon-a", log, {false, 1});
  auto baseline = oneByOne->inventory();
  REQUIRE(baseline.ok());
  REQUIRE(baseline->gpus.size() == 4);
  for (const ReadMode mode : {ReadMode{false, 4}, ReadMode{true, 1}, ReadMode{true, 4}}) {
    CAPTURE(mode.expand, mode.parallelism);
    auto d = simRedfish(sim, "falcon-a", log, mode);
    auto inv = d->inventory();
    REQUIRE(inv.ok());
    CHECK(inv->gpus == baseline->gpus);
    CHECK(inv->hosts == baseline->hosts);
    CHECK(inv->skipped == baseline->skipped);
  }
  if (profile == "classic" && paging.empty()) {
    // GETs of one inventory, counted from the topology: service root, CompositionService, the
    // Systems collection, 2 systems, the ResourceBlocks collection, 4 blocks, 4 Processors.
    CHECK(oneByOne->getsSent() == 14);
    auto expanded = simRedfish(sim, "falcon-a", log, {true, 4});
    REQUIRE(expanded->inventory().ok());
    CHECK(expanded->expandInUse() == "$expand=.($levels=1)");
    // Root, CompositionService, Systems expanded, ResourceBlocks expanded two levels deep.
    CHECK(expanded->getsSent() == 4);
    REQUIRE(expanded->inventory().ok());
    CHECK(expanded->getsSent() == 6);  // the links are known: two collection reads
  }
  if (profile == "emulator") {
    // The emulator profile, like the DMTF emulator, advertises no $expand.
    auto d = simRedfish(sim, "falcon-a", log, {true, 4});
    REQUIRE(d->inventory().ok());
    CHECK(d->expandInUse().empty());
  }
}

TEST_CASE("redfish read: moves work on a view read with $expand", "[fabric][redfish]") {
  // ETags come from the expanded bodies (@odata.etag) where no header carries them.
  SimHarness sim(test::defaultTopology("redfish: {requireEtags: true}\n"),
                 Credentials{"admin", "secret"});
  SleepLog log;
  auto d = simRedfish(sim, "falcon-a", log, {true, 4});
  REQUIRE(d->detach("falcon-a.001300").ok());
  REQUIRE(d->attach("falcon-a.001300", "node-2").ok());
  CHECK(sim.trueHost("falcon-a", "001300") == 0);
  CHECK(log.count() == 0);  // no 428 along the way
}

namespace {

// A Redfish service scripted by hand: two GPU blocks and one malformed block (no
// CompositionStatus); answers $expand=.($levels=n) on the ResourceBlocks collection with the
// members (and for n >= 2 their Processors) inline, or with `expandStatus` when that is not
// 200. Counts GETs per path and, for block GETs, how many are in flight at once.
class ExpandingService {
 public:
  explicit ExpandingService(unsigned expandStatus = 200, std::size_t blocks = 3)
      : expandStatus_(expandStatus), blocks_(blocks) {
    kc::net::ServerOptions so;
    so.ioThreads = 12;  // block GETs wait for each other (the in-flight barrier)
    server_ = std::make_unique<kc::net::HttpServer>(so);
    server_->routePrefix("", "/", [this](const kc::net::Request& req) { return answer(req); });
    REQUIRE(server_->start().ok());
  }
  std::string url() const { return server_->baseUrl(); }
  // Block GETs wait until `n` are in flight (or a guard time passes, counted as a miss).
  void holdBlockGetsUntil(std::size_t n) { barrier_ = n; }
  std::size_t maxInFlight() {
    std::lock_guard lock(mutex_);
    return maxInFlight_;
  }
  std::size_t barrierMisses() {
    std::lock_guard lock(mutex_);
    return misses_;
  }
  std::vector<std::string> targets() {
    std::lock_guard lock(mutex_);
    return targets_;
  }

 private:
  static constexpr const char* kBlocks = "/redfish/v1/CompositionService/ResourceBlocks";

  std::string blockLink(std::size_t i) const {
    return std::string(kBlocks) + "/b" + std::to_string(i);
  }
  nlohmann::json processor(std::size_t i) const {
    return {{"@odata.id", blockLink(i) + "/Processors/GPU0"},
            {"@odata.type", "#Processor.v1_18_0.Processor"},
            {"Id", "GPU0"},
            {"ProcessorType", "GPU"},
            {"Model", "A100"},
            {"UUID", "00000000-0000-4000-8000-0000000000" + std::to_string(10 + i)}};
  }
  // Block 1 is malformed (no CompositionStatus); the others are free GPU blocks.
  nlohmann::json block(std::size_t i, int levels) const {
    nlohmann::json b{{"@odata.id", blockLink(i)},
                     {"@odata.type", "#ResourceBlock.v1_4_0.ResourceBlock"},
                     {"Id", "b" + std::to_string(i)},
                     {"ResourceBlockType", {"Processor"}},
                     {"Processors", {{{"@odata.id", blockLink(i) + "/Processors/GPU0"}}}}};
    if (i != 1) {
      b["CompositionStatus"] = {{"CompositionState", "Unused"}};
    }
    if (levels >= 2) {
      b["Processors"] = {processor(i)};
    }
    return b;
  }

  kc::net::Response json(const nlohmann::json& body) {
    return kc::net::Response::text(200, body.dump(), "application/json");
  }

  void enterBlockGet() {
    std::unique_lock lock(mutex_);
    ++inFlight_;
    maxInFlight_ = std::max(maxInFlight_, inFlight_);
    cv_.notify_all();
    if (barrier_ > 0 && !cv_.wait_for(lock, std::chrono::seconds(5),
                                      [&] { return reached_ || inFlight_ >= barrier_; })) {
      ++misses_;
    }
    reached_ = reached_ || inFlight_ >= barrier_;
  }
  void leaveBlockGet() {
    std::lock_guard lock(mutex_);
    --inFlight_;
  }

  kc::net::Response answer(const kc::net::Request& req) {
    {
      std::lock_guard lock(mutex_);
      targets_.push_back(req.target);
    }
    const std::string& p = req.path;
    if (p == "/redfish/v1/") {
      return json({{"@odata.id", "/redfish/v1/"},
                   {"Systems", {{"@odata.id", "/redfish/v1/Systems"}}},
                   {"CompositionService", {{"@odata.id", "/redfish/v1/CompositionService"}}},
                   {"ProtocolFeaturesSupported",
                    {{"ExpandQuery", {{"NoLinks", true}, {"Levels", true}, {"MaxLevels", 2}}}}}});
    }
    if (p == "/redfish/v1/CompositionService") {
      return json({{"@odata.id", p}, {"ResourceBlocks", {{"@odata.id", kBlocks}}}});
    }
    if (p == "/redfish/v1/Systems") {
      return json({{"@odata.id", p}, {"Members", nlohmann::json::array()}});
    }
    if (p == kBlocks) {
      const auto expand = req.queryParam("$expand");
      if (expand && expandStatus_ != 200) {
        return kc::net::Response::error(expandStatus_, "unsupported", "no $expand here");
      }
      const int levels = !expand ? 0 : *expand == ".($levels=2)" ? 2 : 1;
      nlohmann::json members = nlohmann::json::array();
      for (std::size_t i = 0; i < blocks_; ++i) {
        members.push_back(levels > 0 ? block(i, levels)
                                     : nlohmann::json{{"@odata.id", blockLink(i)}});
      }
      return json({{"@odata.id", p}, {"Members", members}});
    }
    for (std::size_t i = 0; i < blocks_; ++i) {
      if (p == blockLink(i)) {
        enterBlockGet();
        auto r = json(block(i, 1));
        leaveBlockGet();
        return r;
      }
      if (p == blockLink(i) + "/Processors/GPU0") {
        return json(processor(i));
      }
    }
    return kc::net::Response::error(404, "not_found", p);
  }

  unsigned expandStatus_;
  std::size_t blocks_;
  std::unique_ptr<kc::net::HttpServer> server_;
  std::mutex mutex_;  // guards the members below
  std::condition_variable cv_;
  std::size_t barrier_ = 0;
  bool reached_ = false;
  std::size_t inFlight_ = 0;
  std::size_t maxInFlight_ = 0;
  std::size_t misses_ = 0;
  std::vector<std::string> targets_;
};

std::unique_ptr<RedfishDriver> scripted(const std::string& url, SleepLog& log, ReadMode mode) {
  RedfishOptions o;
  o.chassis = "bmc";
  o.baseUrl = url;
  o.auth = RedfishAuth::kNone;
  o.policy = test::fastPolicy();
  o.sleeper = log.sleeper();
  o.expand = mode.expand;
  o.readParallelism = mode.parallelism;
  auto d = RedfishDriver::create(o);
  REQUIRE(d.ok());
  return std::move(d).value();
}

std::size_t countWith(const std::vector<std::string>& targets, const std::string& part) {
  std::size_t n = 0;
  for (const auto& t : targets) {
    n += t.find(part) != std::string::npos ? 1 : 0;
  }
  return n;
}

}  // namespace

TEST_CASE("redfish read: an expanded member is parsed as a fetched one, a malformed one skipped",
          "[fabric][redfish]") {
  ExpandingService svc;
  SleepLog log;
  auto plain = scripted(svc.url(), log, {false, 4})->inventory();
  REQUIRE(plain.ok());
  const auto before = svc.targets().size();
  auto expanded = scripted(svc.url(), log, {true, 4})->inventory();
  REQUIRE(expanded.ok());
  // The same GPUs, and the malformed block left out with the same reason either way.
  CHECK(expanded->gpus == plain->gpus);
  REQUIRE(expanded->gpus.size() == 2);
  REQUIRE(plain->skipped.size() == 1);
  CHECK(expanded->skipped == plain->skipped);
  CHECK_THAT(expanded->skipped[0], Catch::Contains("/b1") && Catch::Contains("CompositionStatus"));
  // Expanded: no block or Processor was fetched on its own.
  const auto all = svc.targets();
  const std::vector<std::string> after(all.begin() + static_cast<std::ptrdiff_t>(before),
                                       all.end());
  CHECK(countWith(after, "$expand=.($levels=2)") == 1);
  CHECK(countWith(after, "/b0") == 0);
  CHECK(countWith(after, "/Processors/") == 0);
}

TEST_CASE("redfish read: a service refusing the $expand it advertises is read plainly",
          "[fabric][redfish]") {
  const unsigned status = GENERATE(400u, 501u);
  CAPTURE(status);
  ExpandingService svc(status);
  SleepLog log;
  auto d = scripted(svc.url(), log, {true, 4});
  auto inv = d->inventory();
  REQUIRE(inv.ok());
  CHECK(inv->gpus.size() == 2);
  CHECK(d->expandInUse().empty());  // not asked again
  CHECK(log.count() == 0);          // the refusal was not retried
  REQUIRE(d->inventory().ok());
  // Asked once, with the Systems collection of the same read (which answered it), never again.
  CHECK(countWith(svc.targets(), "ResourceBlocks?$expand") == 1);
  CHECK(countWith(svc.targets(), "$expand") == 2);
}

TEST_CASE("redfish read: member GETs run readParallelism at a time, never more",
          "[fabric][redfish]") {
  const std::uint32_t width = GENERATE(1u, 4u);
  CAPTURE(width);
  ExpandingService svc(200, 9);
  svc.holdBlockGetsUntil(width);  // met only when `width` block GETs are in flight together
  SleepLog log;
  auto inv = scripted(svc.url(), log, {false, width})->inventory();
  REQUIRE(inv.ok());
  CHECK(inv->gpus.size() == 8);
  CHECK(svc.barrierMisses() == 0);
  CHECK(svc.maxInFlight() == width);
}

// --- https --------------------------------------------------------------------------------

namespace {

struct Pki {
  kc::net::CertAndKey ca;
  kc::net::CertAndKey server;
  kc::net::CertAndKey otherCa;
};

Pki makePki() {
  Pki p;
  auto ca = kc::net::makeSelfSignedCa("bmc test CA");
  auto other = kc::net::makeSelfSignedCa("some other CA");
  REQUIRE(ca.ok());
  REQUIRE(other.ok());
  kc::net::CertRequest req;
  req.commonName = "bmc";
  req.ipAddresses = {"127.0.0.1"};
  auto server = kc::net::issueCertificate(*ca, req);
  REQUIRE(server.ok());
  return {*ca, *server, *other};
}

// Captures what the library logs through spdlog's default logger while alive.
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64)) {
    previous_ = spdlog::default_logger();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink_));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  std::string text() const {
    std::string out;
    for (const auto& line : sink_->last_formatted()) {
      out += line;
    }
    return out;
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> previous_;
};

}  // namespace

TEST_CASE("redfish over https: a private CA, none, the wrong one, verification off",
          "[fabric][redfish][tls]") {
  const Pki pki = makePki();
  test::TempDir dir;
  const std::string caFile = dir.write("ca.crt", pki.ca.certPem);
  const std::string otherCaFile = dir.write("other.crt", pki.otherCa.certPem);
  auto topo = kc::chassis_sim::parseTopology(test::defaultTopology());
  REQUIRE(topo.ok());
  topo->latencies.scale = 0;
  auto model = std::make_shared<kc::chassis_sim::ChassisModel>(*topo, 7);
  kc::chassis_sim::SimServerOptions so;
  kc::net::ServerTlsOptions tls;
  tls.certPem = pki.server.certPem;
  tls.keyPem = pki.server.keyPem;
  so.tls = tls;
  kc::chassis_sim::SimServer sim(model, so);
  REQUIRE(sim.start().ok());
  REQUIRE(sim.chassisUrl("falcon-a").rfind("https://127.0.0.1:", 0) == 0);

  const auto driverFor = [&](const std::string& tlsKeys) {
    auto config = parseFabricConfig(
        "chassis:\n  - name: falcon-a\n    dialect: redfish\n"
        "    auth: none\n    attempts: 3\n    url: " +
        sim.chassisUrl("falcon-a") + "\n" + tlsKeys);
    REQUIRE(config.ok());
    auto d = makeDriver(config->chassis[0], [](Millis) {});
    INFO((d.ok() ? std::string() : d.error().message));
    REQUIRE(d.ok());
    return std::move(d).value();
  };

  SECTION("the CA that signed the BMC's certificate: inventory works, nothing is logged") {
    LogCapture logs;
    auto inv = driverFor("    caFile: " + caFile + "\n")->inventory();
    REQUIRE(inv.ok());
    CHECK(inv->gpus.size() == 4);
    CHECK(logs.text().empty());
  }
  SECTION("no CA (the system store) or the wrong one: refused, naming the chassis, not retried") {
    const bool otherCa = GENERATE(false, true);
    const std::string keys = otherCa ? "    caFile: " + otherCaFile + "\n" : "";
    CAPTURE(keys);
    auto inv = driverFor(keys)->inventory();
    REQUIRE_FALSE(inv.ok());
    CHECK(inv.error().code == kc::errc::kTls);
    CHECK_THAT(inv.error().message, Catch::Contains("redfish chassis falcon-a") &&
                                        Catch::Contains("certificate verification") &&
                                        Catch::Contains("CA bundle"));
    // Nothing reached the service: the inventory read was never served.
    CHECK(model->stateJson()["chassis"][0]["counters"].value("inventory", 0) == 0);
  }
  SECTION("insecureSkipVerify: works, with a warning naming the endpoint") {
    LogCapture logs;
    auto inv = driverFor("    insecureSkipVerify: true\n")->inventory();
    REQUIRE(inv.ok());
    CHECK(inv->gpus.size() == 4);
    CHECK_THAT(logs.text(),
               Catch::Contains("verification is OFF") && Catch::Contains("https://127.0.0.1:"));
  }
  sim.stop();
}

// Not a test: the numbers in docs/fabric.md ("Reading a Redfish service"). Run with
//   fabric_driver_test "[.measure]"
// chassis-sim's classic profile, 10 GPU blocks on 2 hosts, every GET held 50 ms (the
// ResourceBlocks collection also 50 ms of inventory latency), one inventory after discovery.
TEST_CASE("redfish read: GETs and wall time of one inventory", "[.measure]") {
  std::string gpus;
  for (int i = 0; i < 10; ++i) {
    gpus += "      - {gid: \"00" + std::to_string(10 + i) +
            "00\", uuid: GPU-00000000-0000-4000-8000-0000000000" + std::to_string(10 + i) +
            ", model: A100, host: " + (i % 2 ? "48" : "0") + "}\n";
  }
  auto topo = kc::chassis_sim::parseTopology(
      "latency: {inventory: [50, 50]}\nchassis:\n  - name: c0\n    hosts: [{port: 48}, {port: 0}]\n"
      "    gpus:\n" +
      gpus);
  REQUIRE(topo.ok());
  auto model = std::make_shared<kc::chassis_sim::ChassisModel>(*topo, 7);
  kc::chassis_sim::SimServerOptions so;
  so.redfishGetLatency = Millis{50};
  so.ioThreads = 4;
  kc::chassis_sim::SimServer sim(model, so);
  REQUIRE(sim.start().ok());
  for (const ReadMode mode : {ReadMode{false, 1}, ReadMode{false, 4}, ReadMode{true, 4}}) {
    RedfishOptions o;
    o.chassis = "c0";
    o.baseUrl = sim.chassisUrl("c0");
    o.auth = RedfishAuth::kNone;
    o.expand = mode.expand;
    o.readParallelism = mode.parallelism;
    auto d = RedfishDriver::create(o);
    REQUIRE(d.ok());
    REQUIRE((*d)->inventory().ok());  // discovery
    const auto gets = (*d)->getsSent();
    const auto t0 = std::chrono::steady_clock::now();
    auto inv = (*d)->inventory();
    const auto ms = std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - t0);
    REQUIRE(inv.ok());
    REQUIRE(inv->gpus.size() == 10);
    WARN("expand " << mode.expand << " parallelism " << mode.parallelism << ": "
                   << (*d)->getsSent() - gets << " GETs, " << ms.count() << " ms (first read "
                   << gets << " GETs)");
  }
  sim.stop();
}

TEST_CASE("redfish move: a move is verified by one GET of the GPU's ResourceBlock",
          "[fabric][redfish]") {
  // Issue 29. The classic profile's GPU blocks name their ComputerSystem (Links.ComputerSystems):
  // after the action, the block alone proves the move. GETs of a move = the View it is planned
  // on + the verification; the View's GETs are counted with inventory() on the same driver.
  const bool expand = GENERATE(false, true);
  CAPTURE(expand);
  SimHarness sim(test::defaultTopology(), Credentials{"admin", "secret"});
  SleepLog log;
  auto d = simRedfish(sim, "falcon-a", log, {expand, 4});
  REQUIRE(d->inventory().ok());  // discovery done: later reads are the collections only
  auto gets = d->getsSent();
  REQUIRE(d->inventory().ok());
  const auto viewGets = d->getsSent() - gets;
  CHECK(viewGets == (expand ? 2U : 12U));  // plain: 2 collections, 2 systems, 4 blocks + 4 CPUs

  gets = d->getsSent();
  auto attached = d->attach("falcon-a.000500", "node-2");
  REQUIRE(attached.ok());
  CHECK(attached->changed);
  CHECK(sim.trueHost("falcon-a", "000500") == 0);
  CHECK(d->getsSent() - gets == viewGets + 1);

  gets = d->getsSent();
  auto detached = d->detach("falcon-a.000500");
  REQUIRE(detached.ok());
  CHECK(detached->changed);
  CHECK(sim.trueHost("falcon-a", "000500") == -1);
  CHECK(d->getsSent() - gets == viewGets + 1);
  CHECK(log.count() == 0);

  // The inventory after the cheap verification is the one a full read gives.
  auto inv = d->inventory();
  REQUIRE(inv.ok());
  for (const auto& g : inv->gpus) {
    if (g.localId == "000500") {
      CHECK_FALSE(g.hostPort.has_value());
    }
  }
}

TEST_CASE("redfish move: a block that names no system leaves the verification to the View",
          "[fabric][redfish]") {
  // The emulator profile's GPU blocks list no ComputerSystems (the composed system lists them):
  // the block proves nothing, and one full read decides, as before issue 29.
  SimHarness sim(test::defaultTopology("redfish: {profile: emulator}\n"),
                 Credentials{"admin", "secret"});
  SleepLog log;
  auto d = simRedfish(sim, "falcon-a", log, {false, 4});
  REQUIRE(d->inventory().ok());
  auto gets = d->getsSent();
  REQUIRE(d->inventory().ok());
  const auto viewGets = d->getsSent() - gets;
  gets = d->getsSent();
  auto attached = d->attach("falcon-a.000500", "node-2");
  REQUIRE(attached.ok());
  CHECK(sim.trueHost("falcon-a", "000500") == 0);
  const auto attachGets = d->getsSent() - gets;
  gets = d->getsSent();
  REQUIRE(d->inventory().ok());
  const auto viewAfter = d->getsSent() - gets;  // the composed system is one more to read
  CHECK(attachGets == viewGets + 1 + viewAfter);
}

namespace {

// A Redfish service scripted by hand with one host system and one GPU block whose URI changes
// when the GPU is attached (kRenumber) or that vanishes then (kVanish): the block GET that
// verifies the attach answers 404, and only a read of the collections can tell the two apart.
class MovingBlockService {
 public:
  enum class After : std::uint8_t { kRenumber, kVanish };
  explicit MovingBlockService(After after) : after_(after) {
    server_ = std::make_unique<kc::net::HttpServer>(kc::net::ServerOptions{});
    server_->routePrefix("", "/", [this](const kc::net::Request& req) { return answer(req); });
    REQUIRE(server_->start().ok());
  }
  std::string url() const { return server_->baseUrl(); }
  std::size_t gets() {
    std::lock_guard lock(mutex_);
    return gets_;
  }

 private:
  static constexpr const char* kSystem = "/redfish/v1/Systems/node-1";
  static constexpr const char* kBlocks = "/redfish/v1/CompositionService/ResourceBlocks";
  using json = nlohmann::json;

  std::string blockLink() const {
    return std::string(kBlocks) + (attached_ && after_ == After::kRenumber ? "/gpu0-b" : "/gpu0");
  }
  bool present() const { return !attached_ || after_ == After::kRenumber; }
  json blockJson() const {
    json systems = attached_ ? json::array({{{"@odata.id", kSystem}}}) : json::array();
    return {{"@odata.id", blockLink()},
            {"Id", "gpu0"},
            {"ResourceBlockType", {"Processor"}},
            {"Status", {{"State", "Enabled"}, {"Health", "OK"}}},
            {"CompositionStatus", {{"CompositionState", attached_ ? "Composed" : "Unused"}}},
            {"Processors", {{{"@odata.id", blockLink() + "/Processors/GPU0"}}}},
            {"Links", {{"ComputerSystems", systems}}}};
  }
  json systemJson() const {
    json blocks =
        attached_ && present() ? json::array({{{"@odata.id", blockLink()}}}) : json::array();
    return {{"@odata.id", kSystem},
            {"Id", "node-1"},
            {"Links", {{"ResourceBlocks", blocks}}},
            {"Actions",
             {{std::string(redfish::kAddAction),
               {{"target", std::string(kSystem) + "/Actions/ComputerSystem.AddResourceBlock"}}}}}};
  }
  kc::net::Response answer(const kc::net::Request& req) {
    std::lock_guard lock(mutex_);
    const std::string& p = req.path;
    if (req.method == "POST" &&
        p == std::string(kSystem) + "/Actions/ComputerSystem.AddResourceBlock") {
      attached_ = true;
      return kc::net::Response::text(204, "", "text/plain");
    }
    ++gets_;
    if (p == "/redfish/v1/") {
      return kc::net::Response::json(
          200, {{"@odata.id", p},
                {"Systems", {{"@odata.id", "/redfish/v1/Systems"}}},
                {"CompositionService", {{"@odata.id", "/redfish/v1/CompositionService"}}}});
    }
    if (p == "/redfish/v1/CompositionService") {
      return kc::net::Response::json(
          200, {{"@odata.id", p}, {"ResourceBlocks", {{"@odata.id", kBlocks}}}});
    }
    if (p == "/redfish/v1/Systems") {
      return kc::net::Response::json(
          200, {{"@odata.id", p}, {"Members", json::array({{{"@odata.id", kSystem}}})}});
    }
    if (p == kSystem) {
      return kc::net::Response::json(200, systemJson());
    }
    if (p == kBlocks) {
      json members = present() ? json::array({{{"@odata.id", blockLink()}}}) : json::array();
      return kc::net::Response::json(200, {{"@odata.id", p}, {"Members", members}});
    }
    if (present() && p == blockLink()) {
      return kc::net::Response::json(200, blockJson());
    }
    if (present() && p == blockLink() + "/Processors/GPU0") {
      return kc::net::Response::json(200, {{"@odata.id", p},
                                           {"ProcessorType", "GPU"},
                                           {"UUID", "16a0c321-fc4f-fd47-26e7-770eb9ecf5f9"},
                                           {"Model", "Tesla V100-PCIE-32GB"},
                                           {"Status", {{"Health", "OK"}}}});
    }
    return kc::net::Response::error(404, "not_found", p);
  }

  After after_;
  std::unique_ptr<kc::net::HttpServer> server_;
  std::mutex mutex_;  // guards the members below
  bool attached_ = false;
  std::size_t gets_ = 0;
};

}  // namespace

TEST_CASE("redfish move: a 404 on the moved block's URI is decided by one full read",
          "[fabric][redfish]") {
  SleepLog log;
  SECTION("the service re-numbered the block: found in the collection, verified") {
    MovingBlockService service(MovingBlockService::After::kRenumber);
    auto d = scripted(service.url(), log, {false, 1});
    REQUIRE(d->inventory().ok());
    const auto before = d->getsSent();
    auto r = d->attach("bmc.gpu0", "node-1");
    REQUIRE(r.ok());
    CHECK(r->changed);
    CHECK(r->attempts == 1);
    // The View (2 collections, 1 system, 1 block, 1 Processor), the 404, the View again.
    CHECK(d->getsSent() - before == 5 + 1 + 5);
    auto inv = d->inventory();
    REQUIRE(inv.ok());
    REQUIRE(inv->gpus.size() == 1);
    CHECK(inv->gpus[0].hostPort == "node-1");
  }
  SECTION("the block is gone: the GPU disappeared, as the full read says") {
    MovingBlockService service(MovingBlockService::After::kVanish);
    auto d = scripted(service.url(), log, {false, 1});
    REQUIRE(d->inventory().ok());
    const auto before = d->getsSent();
    auto r = d->attach("bmc.gpu0", "node-1");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == errc::kUnhealthy);
    CHECK_THAT(r.error().message, Catch::Contains("disappeared"));
    // The View it was planned on (2 collections, 1 system, 1 block, 1 Processor), the block's
    // 404, then one full read (2 collections, 1 system; the block is no longer listed).
    CHECK(d->getsSent() - before == 5 + 1 + 3);
  }
}
