// rt-kubelet-shim in front of a real containerd 1.6 (Debian's, offline, private sockets and
// state): RT pods get their cores and their cgroup RT budget top-down before the workload
// runs; SCHED_FIFO is refused without a reservation and allowed with one; a FIFO busy loop is
// throttled to its runtime/period; what does not fit is refused; non-RT pods pass untouched;
// the shim killed and restarted keeps every reservation; removal frees the budget; the Node
// and the pod are annotated (through the API test double); teardown leaves nothing behind.
//
// Needs root and cgroup v1 RT group scheduling: elsewhere the binary prints why and exits 77
// (CTest reports it as skipped).

#include <grpcpp/completion_queue.h>
#include <grpcpp/generic/generic_stub.h>
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <thread>

#include "libcore/kube/client.hpp"
#include "libcore/kube/resource.hpp"
#include "libcore/net/http_client.hpp"
#include "tests/services/rt-kubelet-shim/containerd_env.hpp"
#include "tests/unit/kube/double_process.hpp"

using namespace std::chrono_literals;
using kc::testing::ChildProcess;
using kc::testing::ContainerdEnv;
using kc::testing::CriClient;
using kc::testing::readTrim;
namespace cri = runtime::v1;

namespace {

const std::string kCpu = "/sys/fs/cgroup/cpu";

void skipUnlessPossible() {
  const std::string why = kc::testing::rtSkipReason();
  if (!why.empty()) {
    std::printf("SKIPPED (rt real-peer): %s\n", why.c_str());
    std::fflush(stdout);
    std::_Exit(77);
  }
}

std::string imageTar(const kc::testing::TempDir& dir) {
  const std::string out = dir.file("rt-img.tar");
  if (kc::testing::run({"/usr/bin/python3", KC_MKIMAGE, out, kc::testing::kTestImage,
                        "/usr/bin/busybox", KC_RTPROBE}) != 0) {
    throw std::runtime_error("mkimage.py failed");
  }
  return out;
}

struct Shim {
  std::unique_ptr<ChildProcess> proc;
  std::string socket, portFile;
  std::uint16_t port = 0;

  Shim(const std::string& dir, const std::string& runtimeSock, std::vector<std::string> extra) {
    socket = dir + "/shim.sock";
    portFile = dir + "/shim.port";
    std::filesystem::remove(portFile);
    std::vector<std::string> args{KC_SHIM_EXE, "--socket",    socket, "--runtime-endpoint",
                                  runtimeSock, "--port",      "0",    "--port-file",
                                  portFile,    "--log-level", "warn"};
    args.insert(args.end(), extra.begin(), extra.end());
    proc = std::make_unique<ChildProcess>(args);
    proc->waitUntil(
        [&] {
          auto p = kc::testing::readPortFile(portFile);
          if (p) {
            port = *p;
          }
          return p.has_value();
        },
        20s, "rt-kubelet-shim port file");
  }
  kc::net::Response get(const std::string& path) const {
    kc::net::ClientOptions co;
    co.baseUrl = "http://127.0.0.1:" + std::to_string(port);
    auto http = kc::net::HttpClient::create(co);
    REQUIRE(http.ok());
    auto r = (*http)->request("GET", path);
    REQUIRE(r.ok());
    return *r;
  }
  std::string metrics() const { return get("/metrics").body; }
  std::string readyz() const { return std::to_string(get("/readyz").status); }
};

double metric(const std::string& text, const std::string& name) {
  std::smatch m;
  const std::regex re("\\n" + name + " ([0-9.e+-]+)");
  if (std::regex_search(text, m, re)) {
    return std::stod(m[1]);
  }
  return -1;
}

std::string ppbRuntime(const std::string& dir) {
  return readTrim(kCpu + dir + "/cpu.rt_runtime_us");
}

}  // namespace

TEST_CASE(
    "rt-kubelet-shim drives a real containerd: RT budget top-down, FIFO, throttling, refusal, "
    "restart, release",
    "[rt][real-peer]") {
  skipUnlessPossible();
  kc::testing::TempDir work;
  const std::string top = "/kctest-rt-" + std::to_string(::getpid());
  std::vector<std::string> left;
  {
    ContainerdEnv env(imageTar(work), top);
    kc::kube::testing::DoubleProcess api(KC_APISERVER_DOUBLE_EXE, work.path().string());
    auto client = kc::kube::KubeClient::create(api.config());
    REQUIRE(client.ok());
    REQUIRE((*client)->create(kc::kube::gvr::nodes(), "", {{"metadata", {{"name", "n1"}}}}).ok());
    for (const char* name : {"rt-a", "plain", "rt-big", "rt-b", "rt-s"}) {
      REQUIRE((*client)
                  ->create(kc::kube::gvr::pods(), "default",
                           {{"metadata", {{"name", name}, {"namespace", "default"}}},
                            {"spec", {{"containers", {{{"name", "app"}, {"image", "x"}}}}}}})
                  .ok());
    }
    auto shim = std::make_unique<Shim>(
        work.path().string(), env.socket(),
        std::vector<std::string>{"--kubeconfig", api.kubeconfigPath(), "--node-name", "n1"});
    CriClient viaShim(kc::grpcx::dialUnix(shim->socket));
    CriClient direct(env.channel());
    const std::string logDir = work.file("logs");
    std::filesystem::create_directories(logDir);

    // The Node is advertised with what the kernel offers.
    {
      nlohmann::json node;
      for (int i = 0; i < 100; ++i) {
        node = (*client)->get(kc::kube::gvr::nodes(), "", "n1").value();
        if (node["metadata"].contains("labels") &&
            node["metadata"]["labels"].contains("rt.kubecomp.io/capable")) {
          break;
        }
        std::this_thread::sleep_for(50ms);
      }
      CHECK(node["metadata"]["labels"]["rt.kubecomp.io/capable"] == "true");
      CHECK(node["metadata"]["annotations"]["rt.kubecomp.io/kernel"] == "rt-group");
      CHECK(node["metadata"]["annotations"]["rt.kubecomp.io/bound"] ==
            readTrim("/proc/sys/kernel/sched_rt_runtime_us") + "/" +
                readTrim("/proc/sys/kernel/sched_rt_period_us"));
      CHECK(node["metadata"]["annotations"]["rt.kubecomp.io/cores"] ==
            readTrim("/sys/fs/cgroup/cpuset/cpuset.effective_cpus"));
    }

    // An RT pod: 30 ms every 100 ms on one core.
    const std::string podA = top + "/besteffort/pod-rt-a";
    const auto cfgA = CriClient::podConfig(
        "rt-a", podA,
        {{"rt.kubecomp.io/runtime-us", "30000"}, {"rt.kubecomp.io/period-us", "100000"}}, logDir);
    std::string sandboxA, ctrA;
    REQUIRE(viaShim.runPod(cfgA, sandboxA).ok());
    auto st = viaShim.createContainer(sandboxA, cfgA, "app", ctrA);
    REQUIRE(st.ok());
    INFO(st.error_message());
    CHECK_FALSE(std::filesystem::exists(kCpu + podA + "/" + ctrA));  // nothing before start
    REQUIRE(viaShim.start(ctrA).ok());
    // Top-down: the leaf holds its own budget, every ancestor at least the sum beneath it.
    CHECK(readTrim(kCpu + podA + "/" + ctrA + "/cpu.rt_period_us") == "100000");
    CHECK(readTrim(kCpu + podA + "/" + ctrA + "/cpu.rt_runtime_us") == "30000");
    CHECK(ppbRuntime(podA) == "300000");
    CHECK(ppbRuntime(top + "/besteffort") == "300000");
    CHECK(ppbRuntime(top) == "300000");
    // runc reused the pre-created directory: the container's processes are in it.
    CHECK_FALSE(readTrim(kCpu + podA + "/" + ctrA + "/cgroup.procs").empty());
    CHECK(readTrim("/sys/fs/cgroup/cpuset" + podA + "/" + ctrA + "/cpuset.cpus") == "0");
    CHECK(viaShim.exec(ctrA, {"/rtprobe", "fifo"}) == std::pair<int, std::string>{0, "fifo ok\n"});
    // A second RT pod goes to an empty core, not next to the first (issue 24: cgroup v1
    // throttling does not isolate groups on a core; docs/rt.md "Two RT groups on one core").
    if (readTrim("/sys/fs/cgroup/cpuset/cpuset.effective_cpus") != "0") {
      const auto cfgS = CriClient::podConfig(
          "rt-s", top + "/besteffort/pod-rt-s",
          {{"rt.kubecomp.io/runtime-us", "20000"}, {"rt.kubecomp.io/period-us", "100000"}}, logDir);
      std::string sandboxS, ctrS;
      REQUIRE(viaShim.runPod(cfgS, sandboxS).ok());
      REQUIRE(viaShim.createContainer(sandboxS, cfgS, "app", ctrS).ok());
      CHECK(viaShim.status(ctrS).status().annotations().at("rt.kubecomp.io/shim-cores") != "0");
      REQUIRE(viaShim.stopRemovePod(sandboxS).ok());
    }
    // A cpuset update (kubelet's CPU manager) keeps an RT container on its cores.
    {
      grpc::ClientContext ctx;
      kc::grpcx::setTimeout(ctx, 10s);
      cri::UpdateContainerResourcesRequest u;
      u.set_container_id(ctrA);
      u.mutable_linux()->set_cpuset_cpus("0-1");
      cri::UpdateContainerResourcesResponse ur;
      CHECK(viaShim.stub().UpdateContainerResources(&ctx, u, &ur).ok());
      CHECK(readTrim("/sys/fs/cgroup/cpuset" + podA + "/" + ctrA + "/cpuset.cpus") == "0");
    }
    {
      const auto [rc, out] = viaShim.exec(ctrA, {"/rtprobe", "burn", "2000"}, 20);
      REQUIRE(rc == 0);
      const double share = std::stod(out.substr(5));
      INFO("FIFO busy loop got " << share << " of a CPU with runtime/period 0.3");
      CHECK(share > 0.25);
      CHECK(share < 0.35);
    }
    // The pod learns its cores.
    {
      std::string assigned;
      for (int i = 0; i < 100 && assigned.empty(); ++i) {
        auto pod = (*client)->get(kc::kube::gvr::pods(), "default", "rt-a").value();
        assigned = pod["metadata"]
                       .value("annotations", nlohmann::json::object())
                       .value("rt.kubecomp.io/assigned", "");
        std::this_thread::sleep_for(50ms);
      }
      CHECK(assigned == "app=0");
    }

    // A pod without annotations passes untouched: no cpuset, no shim annotations, no FIFO.
    const std::string podP = top + "/besteffort/pod-plain";
    const auto cfgP = CriClient::podConfig("plain", podP, {}, logDir);
    std::string sandboxP, ctrP;
    REQUIRE(viaShim.runPod(cfgP, sandboxP).ok());
    REQUIRE(viaShim.createContainer(sandboxP, cfgP, "app", ctrP).ok());
    REQUIRE(viaShim.start(ctrP).ok());
    CHECK(viaShim.status(ctrP).status().annotations().count("rt.kubecomp.io/shim-cores") == 0);
    CHECK(readTrim(kCpu + podP + "/" + ctrP + "/cpu.rt_runtime_us") == "0");
    const auto plainFifo = viaShim.exec(ctrP, {"/rtprobe", "fifo"});
    CHECK(plainFifo.first == 1);
    CHECK(plainFifo.second.starts_with("fifo refused"));

    // Byte-level pass-through: a call the shim does not parse answers exactly as the runtime.
    {
      grpc::GenericStub viaGeneric(kc::grpcx::dialUnix(shim->socket));
      grpc::GenericStub directGeneric(env.channel());
      auto call = [](grpc::GenericStub& s) {
        grpc::ClientContext ctx;
        kc::grpcx::setTimeout(ctx, 10s);
        std::string empty;
        grpc::Slice slice(empty);
        grpc::ByteBuffer req(&slice, 1), resp;
        std::mutex mu;
        std::condition_variable cv;
        bool done = false;
        grpc::Status status;
        s.UnaryCall(&ctx, "/runtime.v1.ImageService/ListImages", grpc::StubOptions(), &req, &resp,
                    [&](grpc::Status st) {
                      std::lock_guard l(mu);
                      status = st;
                      done = true;
                      cv.notify_all();
                    });
        std::unique_lock l(mu);
        cv.wait(l, [&] { return done; });
        std::vector<grpc::Slice> slices;
        (void)resp.Dump(&slices);
        std::string bytes;
        for (const auto& x : slices) {
          bytes.append(reinterpret_cast<const char*>(x.begin()), x.size());
        }
        return std::make_pair(status.ok(), bytes);
      };
      const auto a = call(viaGeneric);
      const auto b = call(directGeneric);
      CHECK(a.first);
      CHECK(a.second == b.second);
      CHECK_FALSE(a.second.empty());
    }

    // Many callers at once (kubelet's PLEG, probes, stats): every call answered.
    {
      std::atomic<int> failed{0};
      std::vector<std::thread> threads;
      for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&] {
          CriClient c(kc::grpcx::dialUnix(shim->socket));
          for (int i = 0; i < 100; ++i) {
            grpc::ClientContext ctx;
            kc::grpcx::setTimeout(ctx, 10s);
            cri::ListContainersResponse r;
            if (!c.stub().ListContainers(&ctx, {}, &r).ok() || r.containers().size() < 2) {
              ++failed;
            }
          }
        });
      }
      for (auto& t : threads) {
        t.join();
      }
      CHECK(failed == 0);
    }
    // A streaming method unknown to our proto: the runtime's own answer comes back.
    {
      auto stream = [](std::shared_ptr<grpc::Channel> ch) {
        grpc::GenericStub g(ch);
        grpc::CompletionQueue cq;
        grpc::ClientContext ctx;
        kc::grpcx::setTimeout(ctx, 5s);
        auto call = g.PrepareCall(&ctx, "/runtime.v1.RuntimeService/GetContainerEvents", &cq);
        void* tag = nullptr;
        bool ok = false;
        call->StartCall(reinterpret_cast<void*>(1));
        cq.Next(&tag, &ok);
        std::string empty;
        grpc::Slice slice(empty);
        grpc::ByteBuffer req(&slice, 1);
        call->Write(req, reinterpret_cast<void*>(2));
        cq.Next(&tag, &ok);
        call->WritesDone(reinterpret_cast<void*>(3));
        cq.Next(&tag, &ok);
        grpc::ByteBuffer resp;
        call->Read(&resp, reinterpret_cast<void*>(4));
        cq.Next(&tag, &ok);
        grpc::Status st;
        call->Finish(&st, reinterpret_cast<void*>(5));
        cq.Next(&tag, &ok);
        cq.Shutdown();
        while (cq.Next(&tag, &ok)) {
        }
        return std::make_pair(st.error_code(), st.error_message());
      };
      const auto viaStream = stream(kc::grpcx::dialUnix(shim->socket));
      const auto directStream = stream(env.channel());
      CHECK(viaStream == directStream);
    }

    // Does not fit: mainline cgroup v1 limits the sum over all RT containers to the bound.
    const std::string podBig = top + "/besteffort/pod-rt-big";
    const auto cfgBig = CriClient::podConfig(
        "rt-big", podBig,
        {{"rt.kubecomp.io/runtime-us", "700000"}, {"rt.kubecomp.io/period-us", "1000000"}}, logDir);
    std::string sandboxBig, ctrBig;
    REQUIRE(viaShim.runPod(cfgBig, sandboxBig).ok());
    st = viaShim.createContainer(sandboxBig, cfgBig, "app", ctrBig);
    CHECK(st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
    CHECK_THAT(st.error_message(), Catch::Contains("does not fit"));
    REQUIRE(viaShim.stopRemovePod(sandboxBig).ok());

    // Bad annotations never reach the runtime.
    {
      const auto bad = CriClient::podConfig(
          "rt-bad", top + "/besteffort/pod-bad",
          {{"rt.kubecomp.io/runtime-us", "200"}, {"rt.kubecomp.io/period-us", "100"}}, logDir);
      std::string id;
      st = viaShim.runPod(bad, id);
      CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
      CHECK_THAT(st.error_message(), Catch::Contains("runtime exceeds period"));
      CHECK_THAT(st.error_message(),
                 Catch::Contains("annotation rt.kubecomp.io/runtime-us=\"200\" is more than"));
    }

    // Killed and restarted: every reservation is rebuilt from the runtime.
    CHECK(metric(shim->metrics(), "kubecomp_rtshim_group_utilization") == Approx(0.3));
    shim->proc->kill(SIGKILL);
    shim.reset();
    shim = std::make_unique<Shim>(work.path().string(), env.socket(),
                                  std::vector<std::string>{"--no-api"});
    CHECK(metric(shim->metrics(), "kubecomp_rtshim_group_utilization") == Approx(0.3));
    CHECK(metric(shim->metrics(), "kubecomp_rtshim_reservations") == 1);
    CriClient viaShim2(kc::grpcx::dialUnix(shim->socket));
    // 0.7 still does not fit next to the rebuilt 0.3.
    std::string sandboxB, ctrB;
    const std::string podB = top + "/besteffort/pod-rt-b";
    const auto cfgB = CriClient::podConfig(
        "rt-b", podB,
        {{"rt.kubecomp.io/runtime-us", "700000"}, {"rt.kubecomp.io/period-us", "1000000"}}, logDir);
    REQUIRE(viaShim2.runPod(cfgB, sandboxB).ok());
    CHECK(viaShim2.createContainer(sandboxB, cfgB, "app", ctrB).error_code() ==
          grpc::StatusCode::RESOURCE_EXHAUSTED);

    // Removing the pod frees its budget bottom-up; then the big one fits.
    REQUIRE(viaShim2.stopRemovePod(sandboxA).ok());
    CHECK_FALSE(std::filesystem::exists(kCpu + podA + "/" + ctrA));
    CHECK(ppbRuntime(podA) == "0");
    CHECK(ppbRuntime(top + "/besteffort") == "0");
    CHECK(ppbRuntime(top) == "0");
    CHECK(metric(shim->metrics(), "kubecomp_rtshim_group_utilization") == 0);
    REQUIRE(viaShim2.createContainer(sandboxB, cfgB, "app", ctrB).ok());
    REQUIRE(viaShim2.start(ctrB).ok());
    CHECK(ppbRuntime(top) == "700000");
    REQUIRE(viaShim2.stopRemovePod(sandboxB).ok());
    CHECK(ppbRuntime(top) == "0");
    REQUIRE(viaShim2.stopRemovePod(sandboxP).ok());
    CHECK(shim->readyz() == "200");
    shim->proc->terminate(5s);
    env.teardown();
    CHECK(env.shimPids().empty());
    CHECK(ContainerdEnv::mountsUnder(env.base()).empty());
    left = env.cgroupsLeft();
  }
  CHECK(left.empty());
}
