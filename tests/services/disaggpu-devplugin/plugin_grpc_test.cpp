// The DevicePlugin gRPC service over a real unix socket (kubelet's view of it), the registrar
// against an in-process kubelet Registration server, and the usage reporter's withdrawal rule.

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>

#include "libcore/grpc/channel.hpp"
#include "libcore/grpc/status.hpp"
#include "libcore/grpc/unix_server.hpp"
#include "services/disaggpu-devplugin/device_state.hpp"
#include "services/disaggpu-devplugin/plugin_service.hpp"
#include "services/disaggpu-devplugin/registrar.hpp"
#include "services/disaggpu-devplugin/usage_reporter.hpp"
#include "tests/services/disaggpu-devplugin/fake_kubelet.hpp"
#include "tests/services/disaggpu-devplugin/pool_builder.hpp"
#include "tests/support/fakes/fake_clock.hpp"
#include "tests/support/temp_dir.hpp"

using namespace std::chrono_literals;
using kc::devplugin::DevicePluginService;
using kc::testing::GpuOpts;
using kc::testing::ListAndWatchReader;
using kc::testing::PoolBuilder;

namespace {

kc::devplugin::NodeInventory inventory(const PoolBuilder& p) {
  return kc::devplugin::nodeInventory({p.json()}, "n1");
}

// A DevicePluginService served on <dir>/plugin.sock.
struct ServedPlugin {
  kc::testing::TempDir dir;
  DevicePluginService service;
  kc::grpcx::UnixServer server{kc::grpcx::UnixServerOptions{dir.file("plugin.sock")}};
  ServedPlugin() {
    server.addService(&service);
    REQUIRE(server.start().ok());
  }
  ~ServedPlugin() {
    service.finishAll();
    server.stop(1s);
  }
  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub() {
    return v1beta1::DevicePlugin::NewStub(kc::grpcx::dialUnix(server.path()));
  }
};

using List = ListAndWatchReader::List;

}  // namespace

TEST_CASE("ListAndWatch sends the full list at once, then on every change only", "[devplugin]") {
  ServedPlugin p;
  p.service.setInventory(inventory(PoolBuilder("a").gpu("c0.1", "n1").gpu("c0.2", "n1")));
  ListAndWatchReader reader(p.server.path());
  auto first = reader.waitForList(0, 5s);
  REQUIRE(first);
  CHECK(first->devices == List{{"c0.1", "Healthy"}, {"c0.2", "Healthy"}});

  // Same list again: nothing sent. A draining GPU: withdrawn. Unhealthy: reported so.
  p.service.setInventory(inventory(PoolBuilder("a").gpu("c0.1", "n1").gpu("c0.2", "n1")));
  p.service.setInventory(
      inventory(PoolBuilder("a").gpu("c0.1", "n1").gpu("c0.2", "n1", {.draining = true})));
  auto second = reader.waitForList(1, 5s);
  REQUIRE(second);
  CHECK(second->devices == List{{"c0.1", "Healthy"}});
  p.service.setInventory(inventory(PoolBuilder("a").gpu("c0.1", "n1", {.health = "Unhealthy"})));
  auto third = reader.waitForList(2, 5s);
  REQUIRE(third);
  CHECK(third->devices == List{{"c0.1", "Unhealthy"}});
  p.service.setInventory(inventory(PoolBuilder("a").gpu("c0.1", "n1")));
  auto fourth = reader.waitForList(3, 5s);
  REQUIRE(fourth);
  CHECK(fourth->devices == List{{"c0.1", "Healthy"}});
  CHECK(reader.count() == 4);  // the repeated identical inventory sent nothing
  // The client can read a list before the server's write completion runs: wait for it.
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!p.service.deliveredToAll(p.service.listVersion()) &&
         std::chrono::steady_clock::now() < deadline) {
    p.service.waitForChange(p.service.changeTick(), 100ms);
  }
  CHECK(p.service.deliveredToAll(p.service.listVersion()));
}

TEST_CASE("every open stream gets each change, a burst ends on the newest list", "[devplugin]") {
  ServedPlugin p;
  ListAndWatchReader r1(p.server.path());
  ListAndWatchReader r2(p.server.path());
  REQUIRE(r1.waitForList(0, 5s));
  REQUIRE(r2.waitForList(0, 5s));
  for (int i = 1; i <= 50; ++i) {
    PoolBuilder b("a");
    for (int g = 0; g < i % 7; ++g) {
      b.gpu("c0." + std::to_string(g), "n1");
    }
    p.service.setInventory(inventory(b));
  }
  // 50 % 7 = 1 GPU at the end.
  const auto isFinal = [](const List& l) { return l == List{{"c0.0", "Healthy"}}; };
  CHECK(r1.waitFor(isFinal, 5s));
  CHECK(r2.waitFor(isFinal, 5s));
  // Lists written are a subsequence of the changes (older pending lists are replaced).
  CHECK(r1.count() <= 51);
}

TEST_CASE("Allocate: right UUIDs, unknown or withdrawn ids refused, nothing recorded",
          "[devplugin]") {
  ServedPlugin p;
  p.service.setInventory(inventory(PoolBuilder("a")
                                       .gpu("c0.1", "n1", {.uuid = "GPU-11"})
                                       .gpu("c0.2", "n1", {.uuid = "GPU-22"})
                                       .gpu("c0.3", "n1", {.draining = true})));
  auto stub = p.stub();
  {
    v1beta1::AllocateRequest req;
    req.add_container_requests()->add_devices_ids("c0.2");
    auto* c = req.add_container_requests();
    c->add_devices_ids("c0.1");
    grpc::ClientContext ctx;
    kc::grpcx::setTimeout(ctx, 5s);
    v1beta1::AllocateResponse resp;
    REQUIRE(stub->Allocate(&ctx, req, &resp).ok());
    REQUIRE(resp.container_responses_size() == 2);
    CHECK(resp.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES") == "GPU-22");
    CHECK(resp.container_responses(0).envs().at("KUBECOMP_GPU_IDS") == "c0.2");
    CHECK(resp.container_responses(1).envs().at("NVIDIA_VISIBLE_DEVICES") == "GPU-11");
  }
  CHECK(p.service.allocationSeq() == 1);
  CHECK(p.service.allocatedSince(0) == std::set<std::string>{"c0.1", "c0.2"});
  for (const std::string bad : {"c9.9", "c0.3"}) {
    v1beta1::AllocateRequest req;
    auto* c = req.add_container_requests();
    c->add_devices_ids("c0.1");
    c->add_devices_ids(bad);
    grpc::ClientContext ctx;
    kc::grpcx::setTimeout(ctx, 5s);
    v1beta1::AllocateResponse resp;
    const grpc::Status st = stub->Allocate(&ctx, req, &resp);
    CAPTURE(bad);
    CHECK(st.error_code() == grpc::StatusCode::NOT_FOUND);
    CHECK(st.error_message().find(bad) != std::string::npos);
    CHECK(resp.container_responses_size() == 0);
  }
  CHECK(p.service.allocationSeq() == 1);  // refused requests recorded nothing
}

TEST_CASE("options are truthful, preferred allocation and PreStartContainer answer",
          "[devplugin]") {
  ServedPlugin p;
  p.service.setInventory(inventory(PoolBuilder("a")
                                       .gpu("x.1", "n1")
                                       .gpu("x.2", "n1")
                                       .gpu("y.1", "n1")
                                       .gpu("y.2", "n1")
                                       .gpu("y.3", "n1")));
  auto stub = p.stub();
  {
    grpc::ClientContext ctx;
    v1beta1::DevicePluginOptions o;
    REQUIRE(stub->GetDevicePluginOptions(&ctx, v1beta1::Empty(), &o).ok());
    CHECK(o.get_preferred_allocation_available());
    CHECK_FALSE(o.pre_start_required());
  }
  {
    v1beta1::PreferredAllocationRequest req;
    auto* c = req.add_container_requests();
    for (const char* id : {"y.3", "x.1", "y.1", "x.2", "y.2"}) {
      c->add_available_deviceids(id);
    }
    c->set_allocation_size(2);
    grpc::ClientContext ctx;
    v1beta1::PreferredAllocationResponse resp;
    REQUIRE(stub->GetPreferredAllocation(&ctx, req, &resp).ok());
    REQUIRE(resp.container_responses_size() == 1);
    const auto& ids = resp.container_responses(0).deviceids();
    CHECK(std::vector<std::string>(ids.begin(), ids.end()) ==
          std::vector<std::string>{"x.1", "x.2"});
  }
  {
    grpc::ClientContext ctx;
    v1beta1::PreStartContainerRequest req;
    v1beta1::PreStartContainerResponse resp;
    CHECK(stub->PreStartContainer(&ctx, req, &resp).ok());
  }
}

TEST_CASE("stopping ends the streams and removes only our socket", "[devplugin]") {
  auto p = std::make_unique<ServedPlugin>();
  const std::string path = p->server.path();
  ListAndWatchReader reader(path);
  REQUIRE(reader.waitForList(0, 5s));
  CHECK(p->service.openStreams() == 1);
  p->service.finishAll();
  CHECK(reader.waitEnded(5s));
  p->server.stop(1s);
  CHECK_FALSE(std::filesystem::exists(path));
}

TEST_CASE("UnixServer refuses bad paths and never deletes a non-socket", "[devplugin]") {
  // (path, expected words); "FILE" stands for a regular file made in this run's temp dir (the
  // table is built once, the temp dir anew for each row).
  const auto [given, why] = GENERATE(table<std::string, std::string>({
      {"relative.sock", "not absolute"},
      {"/no/such/dir/x.sock", "does not exist"},
      {"FILE", "not a socket"},
      {"/tmp/" + std::string(120, 'x'), "at most"},
  }));
  kc::testing::TempDir dir;
  const std::string file = dir.write("regular", "keep me");
  const std::string path = given == "FILE" ? file : given;
  kc::grpcx::UnixServer server(kc::grpcx::UnixServerOptions{path});
  auto s = server.start();
  REQUIRE_FALSE(s.ok());
  CAPTURE(path, s.error().message);
  CHECK(s.error().code == "invalid");
  CHECK(s.error().message.find(why) != std::string::npos);
  CHECK(std::filesystem::exists(file));
}

TEST_CASE("gRPC status and kc::Error map both ways", "[devplugin]") {
  const auto [code, name] = GENERATE(table<grpc::StatusCode, std::string>({
      {grpc::StatusCode::INVALID_ARGUMENT, "invalid"},
      {grpc::StatusCode::NOT_FOUND, "not_found"},
      {grpc::StatusCode::DEADLINE_EXCEEDED, "timeout"},
      {grpc::StatusCode::UNAVAILABLE, "unavailable"},
      {grpc::StatusCode::ALREADY_EXISTS, "conflict"},
      {grpc::StatusCode::FAILED_PRECONDITION, "failed_precondition"},
      {grpc::StatusCode::UNIMPLEMENTED, "unsupported"},
      {grpc::StatusCode::DATA_LOSS, "internal"},
  }));
  const kc::Error e = kc::grpcx::toError(grpc::Status(code, "boom"), "Call");
  CHECK(e.code == name);
  CHECK(e.message == "Call: boom");
  if (name != "internal") {
    CHECK(kc::grpcx::toStatus(e).error_code() == code);
  }
  CHECK(kc::grpcx::toStatus(kc::makeError("no-such-code", "x")).error_code() ==
        grpc::StatusCode::INTERNAL);
}

namespace {

struct FakeKubeletDir {
  kc::testing::TempDir dir;
  kc::testing::FakeRegistration registration;
  std::unique_ptr<kc::grpcx::UnixServer> kubelet;
  void startKubelet() {
    kubelet = std::make_unique<kc::grpcx::UnixServer>(
        kc::grpcx::UnixServerOptions{dir.file("kubelet.sock")});
    kubelet->addService(&registration);
    REQUIRE(kubelet->start().ok());
  }
  // What a restarting kubelet does: every socket in the directory is deleted, then a new
  // kubelet.sock appears.
  void restartKubelet() {
    kubelet->stop(0ms);
    for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
      struct stat st {};
      if (::lstat(e.path().c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
        std::filesystem::remove(e.path());
      }
    }
    startKubelet();
  }
  kc::devplugin::RegistrarOptions options(bool inotify) {
    kc::devplugin::RegistrarOptions o;
    o.pluginDir = dir.path().string();
    o.socketName = "kubecomp-gpu.sock";
    o.useInotify = inotify;
    o.retryMin = 20ms;
    o.retryMax = 200ms;
    o.registerTimeout = 2s;
    return o;
  }
};

}  // namespace

TEST_CASE("registers after serving, and again < 1 s after kubelet restarts", "[devplugin]") {
  const bool inotify = GENERATE(true, false);
  CAPTURE(inotify);
  FakeKubeletDir k;
  k.startKubelet();
  DevicePluginService service;
  service.setInventory(inventory(PoolBuilder("a").gpu("c0.1", "n1")));
  kc::devplugin::Registrar reg(k.options(inotify), service);
  REQUIRE(reg.start().ok());
  REQUIRE(k.registration.waitForMoreThan(0, 5s));
  const auto req = k.registration.last();
  CHECK(req.version() == "v1beta1");
  CHECK(req.endpoint() == "kubecomp-gpu.sock");
  CHECK(req.resource_name() == "kubecomp.io/gpu");
  CHECK(req.options().get_preferred_allocation_available());
  {
    // Registration only after the socket serves: kubelet can dial at once.
    ListAndWatchReader reader(reg.socketPath());
    CHECK(reader.waitForList(0, 5s));
  }
  for (int round = 1; round <= 3; ++round) {
    const std::size_t before = k.registration.count();
    const auto t0 = std::chrono::steady_clock::now();
    k.restartKubelet();
    REQUIRE(k.registration.waitForMoreThan(before, 5s));
    const auto took = std::chrono::steady_clock::now() - t0;
    CAPTURE(round, std::chrono::duration_cast<std::chrono::milliseconds>(took).count());
    CHECK(took < 1s);
    // Our socket is back and serves the list.
    ListAndWatchReader reader(reg.socketPath());
    auto l = reader.waitForList(0, 5s);
    REQUIRE(l);
    CHECK(l->devices == List{{"c0.1", "Healthy"}});
  }
  CHECK(reg.serverRestarts() == 3);
  reg.stop();
  CHECK_FALSE(std::filesystem::exists(k.dir.file("kubecomp-gpu.sock")));
}

TEST_CASE("a refused registration is retried and reported, then succeeds", "[devplugin]") {
  FakeKubeletDir k;
  k.registration.refuse("resource name kubecomp.io/gpu is already registered");
  k.startKubelet();
  DevicePluginService service;
  kc::devplugin::Registrar reg(k.options(true), service);
  REQUIRE(reg.start().ok());
  REQUIRE(k.registration.waitForMoreThan(2, 5s));  // retried
  CHECK_FALSE(reg.registered());
  CHECK(reg.lastError().find("already registered") != std::string::npos);
  k.registration.refuse("");
  const std::size_t n = k.registration.count();
  REQUIRE(k.registration.waitForMoreThan(n, 5s));
  for (int i = 0; i < 100 && !reg.registered(); ++i) {
    std::this_thread::sleep_for(10ms);  // the flag is set right after the reply; bounded wait
  }
  CHECK(reg.registered());
  CHECK(reg.lastError().empty());
}

TEST_CASE("a refused registration is retried exactly after the backoff on the clock",
          "[devplugin]") {
  kc::testing::FakeClock clock;
  FakeKubeletDir k;
  k.registration.refuse("resource name kubecomp.io/gpu is already registered");
  k.startKubelet();
  DevicePluginService service;
  auto o = k.options(true);
  o.retryMin = 300ms;
  o.retryMax = 300ms;  // the jitter is capped at the maximum: every retry is exactly 300 ms
  o.checkInterval = 10s;
  o.clock = &clock;
  kc::devplugin::Registrar reg(o, service);
  REQUIRE(reg.start().ok());
  REQUIRE(k.registration.waitForMoreThan(0, 5s));
  REQUIRE(clock.awaitWaiters(1));
  CHECK(clock.nextWaitLeft() == 300ms);
  clock.advance(299ms);
  CHECK(clock.nextWaitLeft() == 1ms);  // the same wait goes on: no attempt before the backoff
  CHECK(k.registration.count() == 1);

  std::size_t asked = clock.requestedWaits().size();
  clock.advance(1ms);
  REQUIRE(k.registration.waitForMoreThan(1, 5s));
  REQUIRE(clock.awaitWait(asked + 1));
  CHECK(clock.nextWaitLeft() == 300ms);
  CHECK_FALSE(reg.registered());

  // kubelet accepts now: registered on the next retry, then only the socket check is due.
  k.registration.refuse("");
  asked = clock.requestedWaits().size();
  clock.advance(300ms);
  REQUIRE(k.registration.waitForMoreThan(2, 5s));
  REQUIRE(clock.awaitWait(asked + 1));
  CHECK(reg.registered());
  CHECK(reg.lastError().empty());
  CHECK(clock.nextWaitLeft() == 10s);

  // stop() ends the wait at once: no clock time passes.
  reg.stop();
  CHECK(clock.waiters() == 0);
  CHECK(k.registration.count() == 3);
}

TEST_CASE("without inotify a kubelet restart is noticed at the next check on the clock",
          "[devplugin]") {
  kc::testing::FakeClock clock;
  FakeKubeletDir k;
  k.startKubelet();
  DevicePluginService service;
  auto o = k.options(false);
  o.checkInterval = 200ms;
  o.clock = &clock;
  kc::devplugin::Registrar reg(o, service);
  REQUIRE(reg.start().ok());
  REQUIRE(k.registration.waitForMoreThan(0, 5s));
  REQUIRE(clock.awaitWaiters(1));
  CHECK(clock.nextWaitLeft() == 200ms);

  k.restartKubelet();  // both sockets gone, a new kubelet.sock: only a stat can tell
  clock.advance(199ms);
  CHECK(clock.nextWaitLeft() == 1ms);
  CHECK(k.registration.count() == 1);
  CHECK(reg.serverRestarts() == 0);
  clock.advance(1ms);
  REQUIRE(k.registration.waitForMoreThan(1, 5s));
  CHECK(reg.serverRestarts() == 1);
}

TEST_CASE("registrar options are validated", "[devplugin]") {
  kc::testing::TempDir dir;
  kc::devplugin::RegistrarOptions o;
  o.pluginDir = dir.path().string();
  CHECK(kc::devplugin::validate(o).ok());
  const auto [field, value] = GENERATE(table<std::string, std::string>({
      {"dir", "relative"},
      {"dir", "/no/such/dir"},
      {"socket", "a/b.sock"},
      {"socket", "kubelet.sock"},
      {"socket", ""},
      {"resource", "gpu"},
      {"resource", "kubernetes.io/gpu"},
      {"resource", "example.com/"},
      {"resource", "Example.com/gpu"},
      {"resource", "example.com/gpu/x"},
  }));
  auto bad = o;
  if (field == "dir") {
    bad.pluginDir = value;
  } else if (field == "socket") {
    bad.socketName = value;
  } else {
    bad.resourceName = value;
  }
  CAPTURE(field, value);
  auto s = kc::devplugin::validate(bad);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code == "invalid");
}

namespace {

// The client has read the list; the server learns that its write completed a moment later.
bool waitDelivered(const DevicePluginService& service) {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::uint64_t tick = service.changeTick();
    if (service.deliveredToAll(service.listVersion())) {
      return true;
    }
    service.waitForChange(tick, 100ms);
  }
  return false;
}

// Not locked: a test that runs the reporter's thread touches them only while that thread
// waits on the FakeClock (the clock's mutex orders the accesses).
class FakeUse final : public kc::devplugin::PodResourcesSource {
 public:
  kc::Result<kc::devplugin::DeviceUse> devicesInUse(const std::string&) override {
    ++calls;
    if (hook) {
      hook();
    }
    if (fail) {
      return kc::makeError("unavailable", "no kubelet");
    }
    return use;
  }
  kc::devplugin::DeviceUse use;
  bool fail = false;
  std::function<void()> hook;
  int calls = 0;
};

class FakePublisher final : public kc::devplugin::UsagePublisher {
 public:
  kc::Status publish(const kc::devplugin::UsageReport& r) override {
    if (fail) {
      return kc::makeError("unavailable", "API server unreachable");
    }
    reports.push_back(r);
    return kc::okStatus();
  }
  std::vector<kc::devplugin::UsageReport> reports;  // the published ones
  bool fail = false;
};

}  // namespace

TEST_CASE(
    "a draining GPU is confirmed withdrawn only after kubelet got the list and a later "
    "PodResources read",
    "[devplugin]") {
  ServedPlugin p;
  p.service.setInventory(inventory(PoolBuilder("a").gpu("c0.1", "n1").gpu("c0.2", "n1")));
  ListAndWatchReader reader(p.server.path());
  REQUIRE(reader.waitForList(0, 5s));
  FakeUse use;
  FakePublisher pub;
  kc::devplugin::UsageReporter reporter({}, p.service, use, pub, [] { return true; });

  auto r = reporter.runOnce();
  CHECK(r.advertised == std::vector<std::string>{"c0.1", "c0.2"});
  CHECK(r.withdrawn.empty());
  CHECK(r.pool == "a");
  CHECK(r.registered);
  REQUIRE(pub.reports.size() == 1);
  reporter.runOnce();
  CHECK(pub.reports.size() == 1);  // unchanged: not published again

  // c0.2 starts draining; PodResources still shows it used by a pod.
  use.use = {{"c0.2", {"ns/p"}}};
  p.service.setInventory(
      inventory(PoolBuilder("a").gpu("c0.1", "n1").gpu("c0.2", "n1", {.draining = true})));
  REQUIRE(reader.waitForList(1, 5s));
  REQUIRE(waitDelivered(p.service));
  r = reporter.runOnce();
  CHECK(r.advertised == std::vector<std::string>{"c0.1"});
  CHECK(r.withdrawn == std::vector<std::string>{"c0.2"});
  CHECK(r.inUse.at("c0.2") == std::vector<std::string>{"ns/p"});  // withdrawn but in use

  // PodResources fails: no confirmation can be given, the last known use is kept.
  use.fail = true;
  r = reporter.runOnce();
  CHECK(r.withdrawn.empty());
  CHECK(r.inUse.at("c0.2") == std::vector<std::string>{"ns/p"});
  use.fail = false;
  use.use.clear();
  r = reporter.runOnce();
  CHECK(r.withdrawn == std::vector<std::string>{"c0.2"});
  CHECK(r.inUse.empty());
}

TEST_CASE(
    "the reporter reads again after the poll interval on the clock, at once on a change, and "
    "after the retry interval when publishing failed",
    "[devplugin]") {
  kc::testing::FakeClock clock;
  DevicePluginService service;
  service.setInventory(inventory(PoolBuilder("a").gpu("c0.1", "n1")));
  FakeUse use;
  FakePublisher pub;
  kc::devplugin::UsageReporterOptions o;
  o.pollInterval = 1000ms;
  o.retryInterval = 250ms;
  o.clock = &clock;
  kc::devplugin::UsageReporter reporter(o, service, use, pub, [] { return true; });
  reporter.start();
  REQUIRE(clock.awaitWait(1));
  CHECK(use.calls == 1);
  CHECK(pub.reports.size() == 1);
  CHECK(clock.nextWaitLeft() == 1000ms);
  clock.advance(999ms);
  CHECK(clock.nextWaitLeft() == 1ms);  // the same wait goes on: no read before the interval
  CHECK(use.calls == 1);
  clock.advance(1ms);
  REQUIRE(clock.awaitWait(2));
  CHECK(use.calls == 2);
  CHECK(clock.nextWaitLeft() == 1000ms);

  // An inventory change wakes the reporter with no clock time passing.
  service.setInventory(inventory(PoolBuilder("a").gpu("c0.1", "n1").gpu("c0.2", "n1")));
  REQUIRE(clock.awaitWait(3));
  CHECK(use.calls == 3);
  REQUIRE(pub.reports.size() == 2);
  CHECK(pub.reports.back().advertised == std::vector<std::string>{"c0.1", "c0.2"});

  // Publishing fails: the next round comes after the retry interval, changes do not hurry it.
  pub.fail = true;
  service.setInventory(inventory(PoolBuilder("a").gpu("c0.2", "n1")));
  REQUIRE(clock.awaitWait(4));
  CHECK(use.calls == 4);
  CHECK(reporter.lastError().find("API server unreachable") != std::string::npos);
  CHECK(clock.nextWaitLeft() == 250ms);
  service.setInventory(inventory(PoolBuilder("a").gpu("c0.3", "n1")));
  clock.advance(249ms);
  CHECK(clock.nextWaitLeft() == 1ms);
  CHECK(use.calls == 4);
  pub.fail = false;
  clock.advance(1ms);
  REQUIRE(clock.awaitWait(5));
  CHECK(use.calls == 5);
  REQUIRE(pub.reports.size() == 3);
  CHECK(pub.reports.back().advertised == std::vector<std::string>{"c0.3"});
  CHECK(reporter.lastError().empty());
  CHECK(clock.nextWaitLeft() == 1000ms);

  // stop() ends the wait at once: no clock time passes.
  reporter.stop();
  CHECK(clock.waiters() == 0);
}

TEST_CASE("withdrawal is not confirmed while a stream has not received the list", "[devplugin]") {
  kc::devplugin::UsageReporter::Reading reading;
  reading.inventory =
      inventory(PoolBuilder("a").gpu("c0.1", "n1").gpu("c0.2", "n1", {.draining = true}));
  reading.inUse = kc::devplugin::DeviceUse{};
  reading.listDelivered = false;
  CHECK(kc::devplugin::UsageReporter::decide(reading, std::nullopt).withdrawn.empty());
  reading.listDelivered = true;
  CHECK(kc::devplugin::UsageReporter::decide(reading, std::nullopt).withdrawn ==
        std::vector<std::string>{"c0.2"});
}

TEST_CASE("a device allocated while PodResources was read counts as in use", "[devplugin]") {
  ServedPlugin p;
  p.service.setInventory(inventory(PoolBuilder("a").gpu("c0.1", "n1").gpu("c0.2", "n1")));
  FakeUse use;
  FakePublisher pub;
  kc::devplugin::UsageReporter reporter({}, p.service, use, pub, [] { return true; });
  // Kubelet admits a pod with c0.1 while our read is in flight (PodResources misses it).
  use.hook = [&] {
    auto stub = p.stub();
    v1beta1::AllocateRequest req;
    req.add_container_requests()->add_devices_ids("c0.1");
    grpc::ClientContext ctx;
    v1beta1::AllocateResponse resp;
    REQUIRE(stub->Allocate(&ctx, req, &resp).ok());
    use.hook = nullptr;
  };
  auto r = reporter.runOnce();
  REQUIRE(r.inUse.count("c0.1") == 1);
  CHECK(r.inUse.at("c0.1") == std::vector<std::string>{"(allocating)"});
  // Next round: still shown (one more round of grace); then PodResources is the truth.
  use.use = {{"c0.1", {"ns/p"}}};
  r = reporter.runOnce();
  CHECK(r.inUse.at("c0.1") == std::vector<std::string>{"ns/p"});
  use.use.clear();
  r = reporter.runOnce();
  CHECK(r.inUse.empty());
}

TEST_CASE("PodResources client reads kubelet's answer for our resource only", "[devplugin]") {
  kc::testing::TempDir dir;
  kc::testing::FakePodResources fake;
  kc::grpcx::UnixServer server(kc::grpcx::UnixServerOptions{dir.file("pr.sock")});
  server.addService(&fake);
  REQUIRE(server.start().ok());
  fake.setPods({{"ns", "p1", "c", "kubecomp.io/gpu", {"c0.1", "c0.2"}},
                {"ns", "p2", "c", "other.io/nic", {"c0.1"}},
                {"ns2", "p3", "c", "kubecomp.io/gpu", {"c0.2"}}});
  auto client = kc::devplugin::makePodResourcesClient(server.path(), 2s);
  auto use = client->devicesInUse("kubecomp.io/gpu");
  REQUIRE(use.ok());
  CHECK(*use == kc::devplugin::DeviceUse{{"c0.1", {"ns/p1"}}, {"c0.2", {"ns/p1", "ns2/p3"}}});
  fake.fail(true);
  auto failed = client->devicesInUse("kubecomp.io/gpu");
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error().code == "unavailable");
  server.stop(0ms);
  auto gone = client->devicesInUse("kubecomp.io/gpu");
  REQUIRE_FALSE(gone.ok());
}
