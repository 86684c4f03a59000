// The disaggpu-devplugin binary as kubelet and the cluster see it: a real process against the
// API test double (GPUPool CRD loaded from the chart's YAML, a Node), with kubelet's
// Registration and PodResources servers played in-process. GPUPool status changes reach
// ListAndWatch within 50 ms (median over many changes), draining GPUs are withdrawn and the
// withdrawal confirmed on the Node, Allocate answers with the pool's UUIDs, kill -9 and restart
// recover, SIGTERM is clean, bad flags exit 2.

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "libcore/api/names.hpp"
#include "libcore/grpc/channel.hpp"
#include "libcore/grpc/unix_server.hpp"
#include "libcore/kube/client.hpp"
#include "libcore/kube/resource.hpp"
#include "libcore/net/http_client.hpp"
#include "services/disaggpu-devplugin/device_state.hpp"
#include "tests/services/disaggpu-devplugin/fake_kubelet.hpp"
#include "tests/services/disaggpu-devplugin/pool_builder.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/manifests.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/kube/double_process.hpp"

using namespace std::chrono_literals;
using kc::testing::ChildProcess;
using kc::testing::GpuOpts;
using kc::testing::ListAndWatchReader;
using kc::testing::PoolBuilder;
using nlohmann::json;
using List = ListAndWatchReader::List;

namespace {

const kc::kube::GroupVersionResource kPools = kc::api::gvr::gpuPools();

// The API test double with the GPUPool CRD from the chart and Node n1; kubelet's Registration
// and PodResources servers on <dir>/kubelet.sock and <dir>/pod-resources.sock.
struct Cluster {
  kc::testing::TempDir dir;
  kc::kube::testing::DoubleProcess api{KC_APISERVER_DOUBLE_EXE, dir.path()};
  std::unique_ptr<kc::kube::KubeClient> client;
  kc::testing::FakeRegistration registration;
  kc::testing::FakePodResources podResources;
  std::unique_ptr<kc::grpcx::UnixServer> kubelet;
  kc::grpcx::UnixServer podResourcesServer{
      kc::grpcx::UnixServerOptions{dir.file("pod-resources.sock")}};

  Cluster() {
    auto c = kc::kube::KubeClient::create(api.config());
    REQUIRE(c.ok());
    client = std::move(*c);
    kc::testing::installCrd(
        *client,
        kc::testing::loadYamlFile(KC_SOURCE_DIR "/charts/kubecomp/crds/gpupools.kubecomp.io.yaml"));
    REQUIRE(client->create(kc::kube::gvr::nodes(), "", {{"metadata", {{"name", "n1"}}}}).ok());
    startKubelet();
    podResourcesServer.addService(&podResources);
    REQUIRE(podResourcesServer.start().ok());
  }
  ~Cluster() {
    if (kubelet) {
      kubelet->stop(0ms);
    }
    podResourcesServer.stop(0ms);
  }
  // kubelet (re)starting: a new Registration socket.
  void startKubelet() {
    if (kubelet) {
      kubelet->stop(0ms);
    }
    kubelet = std::make_unique<kc::grpcx::UnixServer>(
        kc::grpcx::UnixServerOptions{dir.file("kubelet.sock")});
    kubelet->addService(&registration);
    REQUIRE(kubelet->start().ok());
  }
  std::string pluginSocket() const { return dir.file("kubecomp-gpu.sock"); }

  // Creates or replaces pool `name` with `b`'s spec and status (status through the subresource,
  // as reconfig-mgr writes it).
  void writePool(const PoolBuilder& b) {
    json obj = b.json();
    const std::string name = obj["metadata"]["name"];
    auto existing = client->get(kPools, "", name);
    if (!existing.ok()) {
      auto created = client->create(kPools, "", obj);
      REQUIRE(created.ok());
      existing = std::move(created);
    }
    json withStatus = *existing;
    withStatus["status"] = obj["status"];
    auto updated = client->updateStatus(kPools, "", withStatus);
    REQUIRE(updated.ok());
  }

  std::optional<json> usageAnnotation() {
    auto node = client->get(kc::kube::gvr::nodes(), "", "n1");
    REQUIRE(node.ok());
    const auto& ann = (*node)["metadata"].value("annotations", json::object());
    auto it = ann.find(kc::api::kUsageAnnotation);
    if (it == ann.end()) {
      return std::nullopt;
    }
    return json::parse(it->get<std::string>());
  }
  // Polls the Node annotation until `pred` holds (the deadline only bounds a failure).
  std::optional<json> waitUsage(const std::function<bool(const json&)>& pred,
                                std::chrono::milliseconds limit = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (auto u = usageAnnotation(); u && pred(*u)) {
        return u;
      }
      std::this_thread::sleep_for(20ms);
    }
    return std::nullopt;
  }
};

std::vector<std::string> pluginArgs(const Cluster& c, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {KC_DEVPLUGIN_EXE,
                                   "--node-name",
                                   "n1",
                                   "--kubeconfig",
                                   c.api.kubeconfigPath(),
                                   "--device-plugin-dir",
                                   c.dir.path(),
                                   "--pod-resources-socket",
                                   c.dir.file("pod-resources.sock"),
                                   "--pod-resources-interval-seconds",
                                   "0.1",
                                   "--port",
                                   "0",
                                   "--port-file",
                                   c.dir.file("port"),
                                   "--log-level",
                                   "warn"};
  // These cases are about the GPUPool's word; the host view's have their own (a fake host).
  if (std::find_if(extra.begin(), extra.end(), [](const std::string& a) {
        return a.starts_with("--host-check");
      }) == extra.end()) {
    args.emplace_back("--host-check=false");
  }
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

bool socketExists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

// Starts the plugin and waits for its registration number `registrations` with kubelet.
std::unique_ptr<ChildProcess> startPlugin(Cluster& c, std::size_t registrationsBefore) {
  auto p = std::make_unique<ChildProcess>(pluginArgs(c));
  REQUIRE(c.registration.waitForMoreThan(registrationsBefore, 15s));
  return p;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

TEST_CASE("devplugin process: registers with kubelet and advertises the pool's GPUs on its node",
          "[devplugin][process]") {
  Cluster c;
  c.writePool(PoolBuilder("pool-a")
                  .gpu("c0.1", "n1")
                  .gpu("c0.2", "n1", {.health = "Unhealthy"})
                  .gpu("c0.3", "n2")
                  .gpu("c0.4", ""));
  auto plugin = startPlugin(c, 0);
  const auto req = c.registration.last();
  CHECK(req.version() == "v1beta1");
  CHECK(req.endpoint() == "kubecomp-gpu.sock");
  CHECK(req.resource_name() == "kubecomp.io/gpu");
  CHECK(req.options().get_preferred_allocation_available());
  CHECK(socketExists(c.pluginSocket()));

  ListAndWatchReader reader(c.pluginSocket());
  auto first = reader.waitForList(0, 5s);
  REQUIRE(first);
  CHECK(first->devices == List{{"c0.1", "Healthy"}, {"c0.2", "Unhealthy"}});

  // Health endpoints and metrics on the port it wrote.
  plugin->waitUntil([&] { return kc::testing::readPortFile(c.dir.file("port")).has_value(); }, 10s,
                    "port file");
  const auto port = *kc::testing::readPortFile(c.dir.file("port"));
  kc::net::ClientOptions co;
  co.baseUrl = "http://127.0.0.1:" + std::to_string(port);
  auto http = kc::net::HttpClient::create(co);
  REQUIRE(http.ok());
  auto ready = (*http)->request("GET", "/readyz");
  REQUIRE(ready.ok());
  CHECK(ready->status == 200);
  auto metrics = (*http)->request("GET", "/metrics");
  REQUIRE(metrics.ok());
  CHECK(metrics->body.find("kubecomp_devplugin_devices") != std::string::npos);
}

TEST_CASE("devplugin process: GPUPool status changes reach ListAndWatch within 50 ms",
          "[devplugin][process]") {
  Cluster c;
  c.writePool(PoolBuilder("pool-a").gpu("c0.1", "n1"));
  auto plugin = startPlugin(c, 0);
  ListAndWatchReader reader(c.pluginSocket());
  REQUIRE(reader.waitForList(0, 5s));

  // Alternate between one and two GPUs on n1, with health flips; each write is one change.
  constexpr int kChanges = 40;
  std::vector<double> latencyMs;
  for (int i = 1; i <= kChanges; ++i) {
    PoolBuilder b("pool-a");
    b.gpu("c0.1", "n1", {.health = i % 4 == 0 ? "Unhealthy" : "Healthy"});
    if (i % 2 == 1) {
      b.gpu("c0.2", "n1");
    }
    const auto before = std::chrono::steady_clock::now();
    c.writePool(b);
    auto got = reader.waitForList(static_cast<std::size_t>(i), 5s);
    REQUIRE(got);
    CHECK(got->devices.size() == (i % 2 == 1 ? 2U : 1U));
    latencyMs.push_back(std::chrono::duration<double, std::milli>(got->at - before).count());
  }
  CAPTURE(latencyMs);
  CHECK(median(latencyMs) < 50.0);
}

TEST_CASE("devplugin process: a draining GPU is withdrawn, then confirmed unused on the Node",
          "[devplugin][process]") {
  Cluster c;
  c.writePool(PoolBuilder("pool-a").gpu("c0.1", "n1").gpu("c0.2", "n1"));
  c.podResources.setPods({{"default", "train", "main", "kubecomp.io/gpu", {"c0.1"}}});
  auto plugin = startPlugin(c, 0);
  ListAndWatchReader reader(c.pluginSocket());
  REQUIRE(reader.waitForList(0, 5s));

  // The report follows registration (kubelet's answer can arrive after it saw the request).
  auto inUse = c.waitUsage([](const json& u) {
    return u.value("registered", false) && u.contains("inUse") && u["inUse"].contains("c0.1");
  });
  REQUIRE(inUse);
  CHECK((*inUse)["inUse"]["c0.1"] == json::array({"default/train"}));
  CHECK((*inUse)["pool"] == "pool-a");
  CHECK((*inUse)["registered"] == true);

  // reconfig-mgr marks c0.2 draining: the plugin withdraws it from kubelet first, then reports
  // it withdrawn (delivered to kubelet and unused at a later PodResources read).
  c.writePool(PoolBuilder("pool-a").gpu("c0.1", "n1").gpu("c0.2", "n1", {.draining = true}));
  auto withdrawn = reader.waitFor([](const List& l) { return l == List{{"c0.1", "Healthy"}}; }, 5s);
  REQUIRE(withdrawn);
  auto confirmed = c.waitUsage([](const json& u) {
    const auto& w = u.value("withdrawn", json::array());
    return std::find(w.begin(), w.end(), json("c0.2")) != w.end();
  });
  REQUIRE(confirmed);

  // c0.1 is in use: draining it withdraws it from kubelet and the report says so, but it
  // stays in `inUse` while the pod holds it (reconfig-mgr detaches only withdrawn AND unused).
  c.writePool(PoolBuilder("pool-a").gpu("c0.1", "n1", {.draining = true}));
  REQUIRE(reader.waitFor([](const List& l) { return l.empty(); }, 5s));
  auto held = c.waitUsage([](const json& u) {
    const auto& wd = u.value("withdrawn", json::array());
    return std::find(wd.begin(), wd.end(), json("c0.1")) != wd.end();
  });
  REQUIRE(held);
  CHECK((*held)["inUse"]["c0.1"] == json::array({"default/train"}));
  const int callsAfter = c.podResources.calls();
  plugin->waitUntil([&] { return c.podResources.calls() >= callsAfter + 3; }, 10s,
                    "three PodResources reads");
  auto still = c.usageAnnotation();
  REQUIRE(still);
  CHECK((*still)["inUse"].contains("c0.1"));
  // The pod ends: no longer in use, still withdrawn: now it may be detached.
  c.podResources.setPods({});
  auto free =
      c.waitUsage([](const json& u) { return !u.value("inUse", json::object()).contains("c0.1"); });
  REQUIRE(free);
  const auto& wd = (*free)["withdrawn"];
  CHECK(std::find(wd.begin(), wd.end(), json("c0.1")) != wd.end());
}

TEST_CASE("devplugin process: Allocate answers with the pool's UUIDs, unknown IDs are refused",
          "[devplugin][process]") {
  Cluster c;
  c.writePool(PoolBuilder("pool-a")
                  .gpu("c0.1", "n1", {.uuid = "GPU-11111111-2222-3333-4444-555555555555"})
                  .gpu("c0.2", "n1", {.uuid = "GPU-66666666-7777-8888-9999-000000000000"})
                  .gpu("c0.3", "n2"));
  auto plugin = startPlugin(c, 0);
  auto stub = v1beta1::DevicePlugin::NewStub(kc::grpcx::dialUnix(c.pluginSocket()));
  // Registration happens after the first LIST, so the inventory is there.
  v1beta1::AllocateRequest req;
  auto* cr = req.add_container_requests();
  cr->add_devices_ids("c0.2");
  cr->add_devices_ids("c0.1");
  v1beta1::AllocateResponse resp;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    REQUIRE(stub->Allocate(&ctx, req, &resp).ok());
  }
  REQUIRE(resp.container_responses_size() == 1);
  const auto& envs = resp.container_responses(0).envs();
  CHECK(envs.at("NVIDIA_VISIBLE_DEVICES") ==
        "GPU-66666666-7777-8888-9999-000000000000,GPU-11111111-2222-3333-4444-555555555555");
  CHECK(envs.at("KUBECOMP_GPU_IDS") == "c0.2,c0.1");

  for (const char* bad : {"c0.3", "c9.9", ""}) {
    CAPTURE(bad);
    v1beta1::AllocateRequest r;
    auto* one = r.add_container_requests();
    one->add_devices_ids("c0.1");
    one->add_devices_ids(bad);
    v1beta1::AllocateResponse out;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    const auto s = stub->Allocate(&ctx, r, &out);
    CHECK_FALSE(s.ok());
    CHECK(out.container_responses_size() == 0);
  }
}

TEST_CASE("devplugin process: kubelet restart is noticed and the plugin re-registers within 1 s",
          "[devplugin][process]") {
  Cluster c;
  c.writePool(PoolBuilder("pool-a").gpu("c0.1", "n1"));
  auto plugin = startPlugin(c, 0);
  ListAndWatchReader before(c.pluginSocket());
  REQUIRE(before.waitForList(0, 5s));

  // kubelet restarting deletes every socket in the directory and serves kubelet.sock anew.
  const std::size_t n = c.registration.count();
  c.kubelet->stop(0ms);
  std::filesystem::remove(c.pluginSocket());
  const auto restartedAt = std::chrono::steady_clock::now();
  c.startKubelet();
  REQUIRE(c.registration.waitForMoreThan(n, 5s));
  const auto took = std::chrono::steady_clock::now() - restartedAt;
  CHECK(took < 1s);
  CHECK(socketExists(c.pluginSocket()));
  ListAndWatchReader after(c.pluginSocket());
  auto list = after.waitForList(0, 5s);
  REQUIRE(list);
  CHECK(list->devices == List{{"c0.1", "Healthy"}});
}

TEST_CASE("devplugin process: killed mid-stream and restarted, it serves the same GPUs again",
          "[devplugin][process]") {
  Cluster c;
  c.writePool(PoolBuilder("pool-a").gpu("c0.1", "n1").gpu("c0.2", "n1"));
  auto plugin = startPlugin(c, 0);
  {
    ListAndWatchReader reader(c.pluginSocket());
    REQUIRE(reader.waitForList(0, 5s));
    CHECK(plugin->kill(SIGKILL) == 128 + SIGKILL);
    CHECK(reader.waitEnded(5s));  // kubelet sees the stream end
  }
  // The dead process's socket file is still there: the new process replaces it.
  CHECK(socketExists(c.pluginSocket()));
  c.writePool(PoolBuilder("pool-a").gpu("c0.1", "n1").gpu("c0.2", "n1").gpu("c0.3", "n1"));
  auto again = startPlugin(c, c.registration.count());
  ListAndWatchReader reader(c.pluginSocket());
  auto list = reader.waitForList(0, 5s);
  REQUIRE(list);
  CHECK(list->devices == List{{"c0.1", "Healthy"}, {"c0.2", "Healthy"}, {"c0.3", "Healthy"}});
}

TEST_CASE("devplugin process: SIGTERM ends the streams, removes the socket and exits 0",
          "[devplugin][process]") {
  Cluster c;
  c.writePool(PoolBuilder("pool-a").gpu("c0.1", "n1"));
  auto plugin = startPlugin(c, 0);
  ListAndWatchReader reader(c.pluginSocket());
  REQUIRE(reader.waitForList(0, 5s));
  plugin->signal(SIGTERM);
  CHECK(reader.waitEnded(5s));
  const auto status = plugin->waitExit(10s);
  REQUIRE(status);
  CHECK(*status == 0);
  CHECK_FALSE(std::filesystem::exists(c.pluginSocket()));
}

TEST_CASE("devplugin process: bad flags exit 2 and touch nothing", "[devplugin][process]") {
  kc::testing::TempDir dir;
  const std::string exe = KC_DEVPLUGIN_EXE;
  std::ofstream(dir.file("kubeconfig")) << "not: [a kubeconfig\n";
  struct Row {
    std::vector<std::string> args;
  };
  const std::vector<Row> rows = {
      {{exe, "--device-plugin-dir", dir.path()}},                             // no node name
      {{exe, "--node-name", "n1", "--device-plugin-dir", "relative/dir"}},    // not absolute
      {{exe, "--node-name", "n1", "--device-plugin-dir", dir.file("none")}},  // missing
      {{exe, "--node-name", "n1", "--device-plugin-dir", dir.path(), "--socket-name", "a/b.sock"}},
      {{exe, "--node-name", "n1", "--device-plugin-dir", dir.path(), "--resource-name", "gpu"}},
      {{exe, "--node-name", "n1", "--device-plugin-dir", dir.path(),
        "--pod-resources-interval-seconds", "0"}},
      {{exe, "--node-name", "n1", "--device-plugin-dir", dir.path(), "--log-level", "loud"}},
      {{exe, "--node-name", "n1", "--device-plugin-dir", dir.path(), "--kubeconfig",
        dir.file("kubeconfig")}},
      {{exe, "--no-such-flag"}},
  };
  for (const auto& row : rows) {
    CAPTURE(row.args);
    ChildProcess p(row.args, kc::testing::ChildOutput::kCaptureMerged);
    const auto status = p.waitExit(10s);
    REQUIRE(status);
    CHECK(*status == 2);
    const std::string out = p.readAll();
    CHECK_FALSE(out.empty());  // says why
  }
  // Nothing was created in the plugin directory.
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) {
    ++entries;
  }
  CHECK(entries == 1);  // the kubeconfig written above

  ChildProcess help({exe, "--help"}, kc::testing::ChildOutput::kCapture);
  const std::string text = help.readAll();
  CHECK(help.wait() == 0);
  CHECK(text.find("--pod-resources-socket") != std::string::npos);
  CHECK(text.find("kubecomp.io/gpu") != std::string::npos);
}
