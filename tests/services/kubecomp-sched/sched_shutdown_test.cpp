// The kubecomp-sched binary on SIGTERM where shutdown used to hang or die (issue 24 §6): with a
// backlog of Events and writes behind a low --kube-api-qps it exits within --stop-grace-seconds
// and says what it dropped; started before the GPUPool CRD exists (still in its start-up), it
// logs the signal and exits 0 instead of dying of it.

#include <signal.h>

#include <catch2/catch.hpp>
#include <optional>
#include <string>

#include "libcore/net/http_client.hpp"
#include "tests/services/kubecomp-sched/sched_cluster.hpp"
#include "tests/support/child_process.hpp"

using namespace std::chrono_literals;
using kc::testing::ChildProcess;
using kc::testing::SchedCluster;

namespace {

// The binary with its output captured and read as it comes (so the pipe never fills up).
class SchedBinary {
 public:
  SchedBinary(const std::string& kubeconfig, const kc::testing::TempDir& dir,
              const std::vector<std::string>& extra)
      : portFile_(dir.file("port")) {
    std::vector<std::string> args = {KC_SCHED_EXE, "--kubeconfig",
                                     kubeconfig,   "--port",
                                     "0",          "--port-file",
                                     portFile_,    "--identity",
                                     "bin-a",      "--leader-elect-resource-namespace",
                                     "team",       "--leader-elect-lease-duration",
                                     "2",          "--leader-elect-renew-deadline",
                                     "1.5",        "--leader-elect-retry-period",
                                     "0.2"};
    args.insert(args.end(), extra.begin(), extra.end());
    child_ =
        std::make_unique<ChildProcess>(std::move(args), kc::testing::ChildOutput::kCaptureMerged);
    child_->waitUntil(
        [&] {
          pump();
          return kc::testing::readPortFile(portFile_).has_value();
        },
        20s, "port file");
    kc::net::ClientOptions co;
    co.baseUrl = "http://127.0.0.1:" + std::to_string(*kc::testing::readPortFile(portFile_));
    auto http = kc::net::HttpClient::create(co);
    REQUIRE(http.ok());
    http_ = std::move(*http);
  }

  // Reads what the binary wrote so far into log().
  void pump() {
    while (auto line = child_->readLine(1ms)) {
      log_ += *line + "\n";
    }
  }

  // GET `path` on the health/metrics port, reading the log meanwhile; nullopt: no answer.
  std::optional<kc::net::Response> get(const std::string& path) {
    pump();
    auto r = http_->request("GET", path);
    if (!r.ok()) {
      return std::nullopt;
    }
    return std::move(*r);
  }

  // The value of a metric without labels (-1 when not there).
  double metric(const std::string& name) {
    auto m = get("/metrics");
    if (!m) {
      return -1;
    }
    const auto at = m->body.find("\n" + name + " ");
    return at == std::string::npos ? -1 : std::stod(m->body.substr(at + name.size() + 2));
  }

  // SIGTERM, then the exit status once it exited within `limit` (nullopt: still running, then
  // killed), with the whole log read.
  std::optional<int> terminateWithin(std::chrono::milliseconds limit) {
    child_->signal(SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!child_->running()) {
        log_ += child_->readAll();
        return child_->wait();
      }
      if (auto line = child_->readLine(50ms)) {
        log_ += *line + "\n";
      }
    }
    child_->kill(SIGKILL);
    log_ += child_->readAll();
    return std::nullopt;
  }

  const std::string& log() const { return log_; }

 private:
  std::string portFile_;
  std::unique_ptr<ChildProcess> child_;
  std::unique_ptr<kc::net::HttpClient> http_;
  std::string log_;
};

}  // namespace

TEST_CASE(
    "kubecomp-sched binary: SIGTERM with an Event backlog behind a low --kube-api-qps exits "
    "within --stop-grace-seconds",
    "[sched][e2e]") {
  SchedCluster c;
  c.node("n1");
  c.pool("p0", {"n1"}, {});
  // 4 requests a second, no burst: 40 binds and their 40 Scheduled Events take 20 s to send.
  SchedBinary sched(c.api.kubeconfigPath(), c.dir,
                    {"--kube-api-qps", "4", "--kube-api-burst", "1", "--stop-grace-seconds", "2"});
  REQUIRE(kc::testing::eventually(
      [&] {
        auto r = sched.get("/readyz");
        return r && r->status == 200;
      },
      20s));
  for (int i = 0; i < 40; ++i) {
    c.pod("p" + std::to_string(i), {.gpus = 0});
  }
  // Events pile up: the writers bind faster than the one Event thread gets tokens.
  REQUIRE(kc::testing::eventually(
      [&] { return sched.metric("kubecomp_sched_events_pending") >= 5; }, 20s));
  const auto signalled = std::chrono::steady_clock::now();
  const auto status = sched.terminateWithin(10s);
  const auto took = std::chrono::steady_clock::now() - signalled;
  CAPTURE(sched.log());
  REQUIRE(status.has_value());
  CHECK(*status == 0);
  // The grace (2 s), the health server's drain (up to 1 s) and stopping the informers.
  CHECK(took < 4500ms);
  CHECK(sched.log().find("shutdown: signal SIGTERM") != std::string::npos);
  CHECK(sched.log().find("grace of 2.0 s over: dropped") != std::string::npos);
  CHECK(sched.log().find("kubecomp-sched stopped (signal SIGTERM)") != std::string::npos);
  // What was dropped is left for the next leader: some pods stay unbound.
  int unbound = 0;
  for (int i = 0; i < 40; ++i) {
    unbound += c.nodeOf("p" + std::to_string(i)).empty() ? 1 : 0;
  }
  CHECK(unbound > 0);
}

TEST_CASE(
    "kubecomp-sched binary: SIGTERM while it waits for the GPUPool CRD (404) logs the shutdown "
    "and exits 0",
    "[sched][e2e]") {
  kc::testing::TempDir dir;
  kc::kube::testing::DoubleProcess api(KC_APISERVER_DOUBLE_EXE, dir.path().string());
  SchedBinary sched(api.kubeconfigPath(), dir, {});
  // Serving, not ready: GPUPools are not served, so the informers never list them and the
  // daemon is still in its start-up.
  REQUIRE(kc::testing::eventually([&] {
    auto r = sched.get("/readyz");
    return r && r->status == 503;
  }));
  const auto status = sched.terminateWithin(8s);
  CAPTURE(sched.log());
  REQUIRE(status.has_value());
  CHECK(*status == 0);
  CHECK(sched.log().find("shutdown: signal SIGTERM") != std::string::npos);
  CHECK(sched.log().find("kubecomp-sched stopped (signal SIGTERM)") != std::string::npos);
}
