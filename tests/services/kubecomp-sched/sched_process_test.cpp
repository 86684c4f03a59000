// The kubecomp-sched binary as it is deployed: flags, health and metrics endpoints, scheduling a
// pod, SIGTERM, and a SIGKILL while a pod waits for reconfig-mgr (the next process adopts the
// request and sends nothing again; restarted mid-reservation, its timeout ends when it would have).

#include <signal.h>

#include <catch2/catch.hpp>

#include "libcore/base/rfc3339.hpp"
#include "libcore/net/http_client.hpp"
#include "tests/services/kubecomp-sched/sched_cluster.hpp"
#include "tests/support/child_process.hpp"

using namespace std::chrono_literals;
using kc::testing::ChildProcess;
using kc::testing::SchedCluster;
using nlohmann::json;

namespace {

std::unique_ptr<ChildProcess> startBinary(SchedCluster& c, const std::string& identity,
                                          std::vector<std::string> extra = {}) {
  std::filesystem::remove(c.dir.file("port-" + identity));
  std::vector<std::string> args = {KC_SCHED_EXE,
                                   "--kubeconfig",
                                   c.api.kubeconfigPath(),
                                   "--port",
                                   "0",
                                   "--port-file",
                                   c.dir.file("port-" + identity),
                                   "--identity",
                                   identity,
                                   "--leader-elect-resource-namespace",
                                   "team",
                                   "--leader-elect-lease-duration",
                                   "2",
                                   "--leader-elect-renew-deadline",
                                   "1.5",
                                   "--leader-elect-retry-period",
                                   "0.2"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto p = std::make_unique<ChildProcess>(std::move(args));
  p->waitUntil(
      [&] { return kc::testing::readPortFile(c.dir.file("port-" + identity)).has_value(); }, 20s,
      "port file");
  return p;
}

std::unique_ptr<kc::net::HttpClient> healthClient(SchedCluster& c, const std::string& identity) {
  kc::net::ClientOptions co;
  co.baseUrl = "http://127.0.0.1:" +
               std::to_string(*kc::testing::readPortFile(c.dir.file("port-" + identity)));
  auto http = kc::net::HttpClient::create(co);
  REQUIRE(http.ok());
  return std::move(*http);
}

}  // namespace

TEST_CASE("kubecomp-sched binary: help, bad flags, readiness, metrics, a pod bound, SIGTERM",
          "[sched]") {
  {
    ChildProcess help({KC_SCHED_EXE, "--help"}, kc::testing::ChildOutput::kCapture);
    const std::string out = help.readAll();
    CHECK(help.wait() == 0);
    CHECK(out.find("--reservation-timeout-seconds") != std::string::npos);
    CHECK(out.find("kubecomp.io/dst-node") != std::string::npos);
  }
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--node-policy", "fastest"},
        {"--bind-workers", "0"},
        {"--max-backoff-seconds", "0.5", "--initial-backoff-seconds", "2"},
        {"--no-such-flag"},
        {"--queue-policy", "easy"},
        {"--move-seconds", "-1"},
        {"--default-runtime-seconds", "0"},
        {"--default-runtime-seconds", "1.5"},
        {"--queue-policy", "slack-backfill", "--slack-factor", "-1"},
        {"--queue-policy", "slack-backfill", "--slack-factor", "nan"},
        {"--slack-factor", "3"},
        {"--queue-policy", "easy-backfill", "--slack-factor", "1"}}) {
    std::vector<std::string> args = {KC_SCHED_EXE};
    args.insert(args.end(), bad.begin(), bad.end());
    ChildProcess p(args, kc::testing::ChildOutput::kCaptureMerged);
    CAPTURE(bad);
    CHECK(p.wait() == 2);
  }
  SchedCluster c;
  c.node("n1", {.gpus = 1});
  c.pool("p0", {"n1"}, {{"c0.1", "n1"}});
  auto sched = startBinary(c, "bin-a");
  auto http = healthClient(c, "bin-a");
  REQUIRE(kc::testing::eventually([&] {
    auto r = http->request("GET", "/readyz");
    return r.ok() && r->status == 200;
  }));
  c.pod("one", {.gpus = 1});
  REQUIRE(kc::testing::eventually([&] { return c.nodeOf("one") == "n1"; }));
  REQUIRE(kc::testing::eventually([&] {
    auto m = http->request("GET", "/metrics");
    return m.ok() &&
           m->body.find("kubecomp_sched_schedule_attempts_total{result=\"scheduled\"} 1") !=
               std::string::npos;
  }));
  auto m = http->request("GET", "/metrics");
  REQUIRE(m.ok());
  CHECK(m->body.find("kubecomp_sched_leader 1") != std::string::npos);
  CHECK(sched->terminate(10s) == 0);
}

TEST_CASE("kubecomp-sched binary: SIGKILL while a pod waits, the next process adopts the request",
          "[sched]") {
  SchedCluster c;
  c.node("n1", {.gpus = 0});
  c.pool("p0", {"n1"}, {{"c0.1", ""}});
  auto first = startBinary(c, "bin-a");
  c.pod("w", {.gpus = 1});
  REQUIRE(
      kc::testing::eventually([&] { return c.annotationOf("w", "kubecomp.io/dst-node") == "n1"; }));
  REQUIRE(kc::testing::eventually([&] { return !c.events("w", "Reconfig").empty(); }));
  first->kill(SIGKILL);
  // The Lease of the killed process must expire (2 s) before the next one leads.
  auto second = startBinary(c, "bin-b");
  auto http = healthClient(c, "bin-b");
  REQUIRE(kc::testing::eventually(
      [&] {
        auto m = http->request("GET", "/metrics");
        return m.ok() && m->body.find("kubecomp_sched_reservations 1") != std::string::npos;
      },
      15s));
  auto reconfig = c.events("w", "Reconfig");
  REQUIRE(reconfig.size() == 1);
  CHECK(reconfig.front().second == 1);
  CHECK(c.nodeOf("w").empty());
  c.setPoolGpus("p0", {{"c0.1", "n1"}});
  c.setAllocatableGpus("n1", 1);
  REQUIRE(kc::testing::eventually([&] { return c.nodeOf("w") == "n1"; }));
  CHECK(second->terminate(10s) == 0);
}

TEST_CASE(
    "kubecomp-sched binary: restarted mid-reservation, the request times out at its original "
    "deadline",
    "[sched]") {
  SchedCluster c;
  c.node("n1", {.gpus = 0});
  c.pool("p0", {"n1"}, {{"c0.1", ""}});
  const std::vector<std::string> timeout = {"--reservation-timeout-seconds", "6",
                                            "--initial-backoff-seconds",     "10",
                                            "--max-backoff-seconds",         "10"};
  auto first = startBinary(c, "bin-a", timeout);
  c.pod("w", {.gpus = 1});
  REQUIRE(kc::testing::eventually(
      [&] { return c.annotationOf("w", "kubecomp.io/reserved-at") != "<none>"; }));
  const std::string stamp = c.annotationOf("w", "kubecomp.io/reserved-at");
  CHECK(c.annotationOf("w", "kubecomp.io/dst-node") == "n1");
  auto reservedAt = kc::parseRfc3339(stamp);
  REQUIRE(reservedAt.ok());
  CHECK(std::chrono::abs(std::chrono::system_clock::now() - *reservedAt) < 5s);
  std::this_thread::sleep_for(2500ms);
  first->kill(SIGKILL);
  // The next process adopts the request once the killed one's Lease has run out (2 s): a fresh
  // timeout would end 6 s after that, at least 10.5 s after the request; the original ends 6 s
  // after it.
  auto second = startBinary(c, "bin-b", timeout);
  REQUIRE(kc::testing::eventually(
      [&] { return c.annotationOf("w", "kubecomp.io/reserved-at") != stamp; }, 20s));
  const auto cancelledAt = std::chrono::system_clock::now();
  CHECK(c.annotationOf("w", "kubecomp.io/dst-node") == "<none>");
  CHECK(c.annotationOf("w", "kubecomp.io/demand") == "<none>");
  CHECK(c.annotationOf("w", "kubecomp.io/reserved-at") == "<none>");
  const auto deadline = *reservedAt + 6s;
  CAPTURE(kc::formatRfc3339(cancelledAt, kc::Rfc3339Precision::kMillis), stamp);
  CHECK(cancelledAt >= deadline - 50ms);
  CHECK(cancelledAt < deadline + 3s);
  REQUIRE(kc::testing::eventually([&] { return !c.events("w", "FailedScheduling").empty(); }));
  CHECK(c.events("w", "FailedScheduling").front().first ==
        "node n1 did not show the 1 kubecomp.io/gpu the pod needs within 6s of the reconfiguration "
        "request; "
        "trying again");
  CHECK(c.events("w", "Reconfig").size() == 1);  // adopted, not sent again
  CHECK(second->terminate(10s) == 0);
}

TEST_CASE(
    "kubecomp-sched binary: --queue-policy by registry name, fcfs holds a pod behind the head",
    "[sched]") {
  {
    ChildProcess help({KC_SCHED_EXE, "--help"}, kc::testing::ChildOutput::kCapture);
    const std::string out = help.readAll();
    CHECK(help.wait() == 0);
    for (const char* flag :
         {"--queue-policy", "--move-seconds", "--default-runtime-seconds", "--slack-factor"}) {
      CAPTURE(flag);
      CHECK(out.find(flag) != std::string::npos);
    }
  }
  {
    ChildProcess bad({KC_SCHED_EXE, "--queue-policy", "easy"},
                     kc::testing::ChildOutput::kCaptureMerged);
    const std::string out = bad.readAll();
    CHECK(bad.wait() == 2);
    CHECK(out.find(
              "--queue-policy: unknown queue policy 'easy' (known: fcfs, backfill, easy-backfill, "
              "slack-backfill)") != std::string::npos);
  }
  {
    ChildProcess bad({KC_SCHED_EXE, "--slack-factor", "3"},
                     kc::testing::ChildOutput::kCaptureMerged);
    const std::string out = bad.readAll();
    CHECK(bad.wait() == 2);
    CHECK(out.find("--slack-factor applies to --queue-policy slack-backfill only (queue policy is "
                   "backfill)") != std::string::npos);
  }
  SchedCluster c;
  c.node("n1", {.gpus = 1});
  c.pool("p0", {"n1"}, {{"c0.1", "n1"}});
  auto sched = startBinary(c, "bin-a", {"--queue-policy", "fcfs"});
  auto http = healthClient(c, "bin-a");
  auto reason = [&](const std::string& pod) {
    const auto cond = c.condition(pod);
    return cond.is_object() ? cond.value("reason", std::string()) : std::string();
  };
  c.pod("big", {.gpus = 2});
  REQUIRE(kc::testing::eventually([&] { return reason("big") == "Unschedulable"; }));
  c.pod("small", {.gpus = 0});
  REQUIRE(kc::testing::eventually([&] { return reason("small") == "WaitingInQueue"; }));
  CHECK(c.condition("small").value("message", "") ==
        "waiting behind the queue head team/big (it does not fit now); queue policy fcfs starts "
        "pods in order");
  CHECK(c.nodeOf("small").empty());
  REQUIRE(kc::testing::eventually([&] {
    auto m = http->request("GET", "/metrics");
    return m.ok() &&
           m->body.find("kubecomp_sched_schedule_attempts_total{result=\"queued\"}") !=
               std::string::npos &&
           m->body.find("kubecomp_sched_queue_held_total 0\n") == std::string::npos;
  }));
  CHECK(sched->terminate(10s) == 0);
}

TEST_CASE("kubecomp-sched binary: a namespaceSelector reads the Namespaces' labels as they change",
          "[sched]") {
  SchedCluster c;
  c.node("n1");
  c.node("n2");
  c.pool("p0", {"n1", "n2"}, {});
  const kc::kube::GroupVersionResource namespaces = kc::kube::gvr::namespaces();
  // An app=db pod running on n1 in a-1 and one on n2 in b-1, both namespaces team=a.
  for (const auto& [ns, node] : {std::pair<std::string, std::string>{"a-1", "n1"}, {"b-1", "n2"}}) {
    REQUIRE(
        c.client
            ->create(namespaces, "", {{"metadata", {{"name", ns}, {"labels", {{"team", "a"}}}}}})
            .ok());
    REQUIRE(c.client
                ->create(kc::kube::gvr::pods(), ns,
                         {{"metadata", {{"name", "db"}, {"labels", {{"app", "db"}}}}},
                          {"spec",
                           {{"nodeName", node},
                            {"containers", {{{"name", "db"}, {"image", "postgres"}}}}}}})
                .ok());
  }
  auto sched = startBinary(c, "bin-ns");
  const json away = {{"podAntiAffinity",
                      {{"requiredDuringSchedulingIgnoredDuringExecution",
                        json::array({{{"labelSelector", {{"matchLabels", {{"app", "db"}}}}},
                                      {"namespaceSelector", {{"matchLabels", {{"team", "a"}}}}},
                                      {"topologyKey", "kubernetes.io/hostname"}}})}}}};
  REQUIRE(c.client
              ->create(kc::kube::gvr::pods(), "team",
                       {{"metadata", {{"name", "client"}}},
                        {"spec",
                         {{"schedulerName", "kubecomp-sched"},
                          {"affinity", away},
                          {"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}})
              .ok());
  REQUIRE(kc::testing::eventually([&] {
    const json cond = c.condition("client");
    return cond.is_object() &&
           cond.value("message", std::string())
                   .find("2 node(s) didn't match pod anti-affinity rules") != std::string::npos;
  }));
  // b-1 moves to team b (the merge patch also tries to drop the name label, which the API
  // server sets again): n2's db pod no longer counts.
  REQUIRE(c.client
              ->patch(namespaces, "", "b-1", kc::kube::PatchType::kMerge,
                      {{"metadata",
                        {{"labels", {{"team", "b"}, {"kubernetes.io/metadata.name", nullptr}}}}}})
              .ok());
  auto b1 = c.client->get(namespaces, "", "b-1");
  REQUIRE(b1.ok());
  CHECK((*b1)["metadata"]["labels"] ==
        json({{"team", "b"}, {"kubernetes.io/metadata.name", "b-1"}}));
  REQUIRE(kc::testing::eventually([&] { return c.nodeOf("client") == "n2"; }));
  CHECK(sched->terminate(10s) == 0);
}
