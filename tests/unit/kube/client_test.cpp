#include "libcore/kube/client.hpp"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "libcore/kube/events.hpp"
#include "libcore/kube/informer.hpp"
#include "tests/support/fakes/fake_clock.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/kube/fake_server.hpp"

using namespace kc::kube;
using kc::kube::testing::FakeServer;
using kc::kube::testing::statusResponse;
using kc::testing::TempDir;

namespace {

// Options on a fake clock in simulated-time mode: the client's waits are recorded and move the
// clock forward instead of sleeping.
struct Recorded {
  kc::testing::FakeClock clock;
  Recorded() { clock.setAutoAdvance(true); }
  std::vector<std::chrono::nanoseconds> sleeps() const { return clock.requestedWaits(); }
};

KubeClientOptions recordingOptions(Recorded& rec) {
  KubeClientOptions o;
  o.qps = 0;
  o.clock = &rec.clock;
  o.retryBackoff = {std::chrono::milliseconds(10), std::chrono::milliseconds(100), 2.0, 0.0};
  return o;
}

std::unique_ptr<KubeClient> makeClient(const ClusterConfig& cfg, KubeClientOptions o) {
  auto c = KubeClient::create(cfg, std::move(o));
  REQUIRE(c.ok());
  return std::move(c).value();
}

nlohmann::json pod(const std::string& name, const std::string& rv = "1") {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", "ns"}, {"resourceVersion", rv}}}};
}

}  // namespace

TEST_CASE("429 is retried after Retry-After, 5xx after backoff", "[kube][client]") {
  FakeServer fake;
  std::atomic<int> calls{0};
  fake.setHandler([&](const kc::net::Request&) {
    int n = calls++;
    if (n == 0) {
      return statusResponse(429, "TooManyRequests", "slow down").withHeader("Retry-After", "2");
    }
    if (n == 1) {
      return statusResponse(503, "ServiceUnavailable", "busy");
    }
    return kc::net::Response::json(200, pod("p"));
  });
  Recorded rec;
  auto client = makeClient(fake.config(), recordingOptions(rec));
  auto got = client->get(gvr::pods(), "ns", "p");
  REQUIRE(got.ok());
  CHECK((*got)["metadata"]["name"] == "p");
  CHECK(calls == 3);
  REQUIRE(rec.sleeps().size() == 2);
  CHECK(rec.sleeps()[0] == std::chrono::seconds(2));
  CHECK(rec.sleeps()[1] == std::chrono::milliseconds(10));
  CHECK(client->stats().retries == 2);
}

TEST_CASE("retries give up, and non-idempotent writes are not repeated on 500", "[kube][client]") {
  FakeServer fake;
  std::atomic<int> calls{0};
  fake.setHandler([&](const kc::net::Request&) {
    ++calls;
    return statusResponse(500, "InternalError", "boom");
  });
  Recorded rec;
  auto opts = recordingOptions(rec);
  opts.maxRetries = 3;
  auto client = makeClient(fake.config(), opts);
  auto got = client->get(gvr::pods(), "ns", "p");
  REQUIRE_FALSE(got.ok());
  CHECK(got.error().httpCode == 500);
  CHECK(got.error().message == "boom");
  CHECK(calls == 4);
  calls = 0;
  auto created = client->create(gvr::pods(), "ns", pod("p"));
  REQUIRE_FALSE(created.ok());
  CHECK(created.error().isServerError());
  CHECK(calls == 1);
}

TEST_CASE("409 and 404 come back typed and are not retried", "[kube][client]") {
  FakeServer fake;
  std::atomic<int> calls{0};
  fake.setHandler([&](const kc::net::Request& req) {
    ++calls;
    if (req.method == "PUT") {
      return statusResponse(
          409, "Conflict",
          "Operation cannot be fulfilled on pods \"p\": the object has been modified; please apply "
          "your changes to the latest version and try again");
    }
    if (req.method == "POST") {
      return statusResponse(409, "AlreadyExists", "pods \"p\" already exists");
    }
    return statusResponse(404, "NotFound", "pods \"p\" not found");
  });
  Recorded rec;
  auto client = makeClient(fake.config(), recordingOptions(rec));
  auto upd = client->update(gvr::pods(), "ns", pod("p", "5"));
  REQUIRE_FALSE(upd.ok());
  CHECK(upd.error().isConflict());
  auto crt = client->create(gvr::pods(), "ns", pod("p"));
  REQUIRE_FALSE(crt.ok());
  CHECK(crt.error().isAlreadyExists());
  auto get = client->get(gvr::pods(), "ns", "p");
  CHECK(get.error().isNotFound());
  CHECK(calls == 3);
  CHECK(rec.sleeps().empty());
  // Bad arguments never reach the server.
  CHECK(client->get(gvr::pods(), "ns", "a/b").error().reason == "InvalidArgument");
  CHECK(client->update(gvr::pods(), "ns", nlohmann::json::object()).error().reason ==
        "InvalidArgument");
  CHECK(client->patch(gvr::pods(), "ns", "p", PatchType::kJson, nlohmann::json::object())
            .error()
            .reason == "InvalidArgument");
  CHECK(calls == 3);
}

TEST_CASE("requests carry the right verbs, paths, content types and bodies", "[kube][client]") {
  FakeServer fake;
  fake.setHandler([](const kc::net::Request& req) {
    if (req.method == "DELETE") {
      return kc::net::Response::json(200, {{"kind", "Status"}, {"status", "Success"}});
    }
    return kc::net::Response::json(req.method == "POST" ? 201 : 200, pod("p"));
  });
  Recorded rec;
  auto client = makeClient(fake.config(), recordingOptions(rec));
  REQUIRE(client
              ->patch(gvr::pods(), "ns", "p", PatchType::kMerge,
                      {{"metadata", {{"labels", {{"a", "b"}}}}}})
              .ok());
  REQUIRE(client
              ->patch(gvr::pods(), "ns", "p", PatchType::kJson,
                      nlohmann::json::array(
                          {{{"op", "add"}, {"path", "/metadata/labels/a"}, {"value", "b"}}}))
              .ok());
  REQUIRE(
      client
          ->patch(gvr::pods(), "ns", "p", PatchType::kStrategicMerge,
                  {{"status", {{"conditions", {{{"type", "PodScheduled"}, {"status", "False"}}}}}}},
                  "status")
          .ok());
  DeleteOptions del;
  del.preconditionUid = "uid-1";
  del.preconditionResourceVersion = "7";
  del.propagationPolicy = "Foreground";
  REQUIRE(client->remove(gvr::pods(), "ns", "p", del).ok());
  REQUIRE(client->bindPod("ns", "p", "node-1", "uid-1").ok());
  REQUIRE(client->updateStatus(gvr::pods(), "ns", pod("p", "9")).ok());
  REQUIRE(client
              ->create({"kubecomp.io", "v1alpha1", "gpupools", false}, "",
                       {{"metadata", {{"name", "pool"}}}})
              .ok());

  auto reqs = fake.requests();
  REQUIRE(reqs.size() == 7);
  CHECK(reqs[0].method == "PATCH");
  CHECK(reqs[0].target == "/api/v1/namespaces/ns/pods/p");
  CHECK(reqs[0].header("Content-Type") == "application/merge-patch+json");
  CHECK(reqs[1].header("Content-Type") == "application/json-patch+json");
  CHECK(reqs[2].header("Content-Type") == "application/strategic-merge-patch+json");
  CHECK(reqs[2].target == "/api/v1/namespaces/ns/pods/p/status");
  CHECK(reqs[3].method == "DELETE");
  auto delBody = nlohmann::json::parse(reqs[3].body);
  CHECK(delBody["preconditions"] == nlohmann::json({{"uid", "uid-1"}, {"resourceVersion", "7"}}));
  CHECK(delBody["propagationPolicy"] == "Foreground");
  CHECK(reqs[4].method == "POST");
  CHECK(reqs[4].target == "/api/v1/namespaces/ns/pods/p/binding");
  auto binding = nlohmann::json::parse(reqs[4].body);
  CHECK(binding["kind"] == "Binding");
  CHECK(binding["metadata"]["uid"] == "uid-1");
  CHECK(binding["target"]["name"] == "node-1");
  CHECK(binding["target"]["kind"] == "Node");
  CHECK(reqs[5].method == "PUT");
  CHECK(reqs[5].target == "/api/v1/namespaces/ns/pods/p/status");
  CHECK(reqs[6].target == "/apis/kubecomp.io/v1alpha1/gpupools");
  CHECK(reqs[6].header("Accept") == "application/json");
}

TEST_CASE("bearer token follows the rotating token file", "[kube][client]") {
  TempDir dir;
  auto file = dir.write("token", "tok-1\n");
  FakeServer fake;
  fake.setHandler([](const kc::net::Request& req) {
    if (req.header("Authorization") == "Bearer expired") {
      return statusResponse(401, "Unauthorized", "Unauthorized");
    }
    return kc::net::Response::json(200, pod("p"));
  });
  auto cfg = fake.config();
  cfg.token = "tok-1";
  cfg.tokenFile = file;
  Recorded rec;
  auto client = makeClient(cfg, recordingOptions(rec));
  REQUIRE(client->get(gvr::pods(), "ns", "p").ok());
  dir.write("token", "tok-2\n");
  REQUIRE(client->get(gvr::pods(), "ns", "p").ok());  // within the minute: old token
  rec.clock.advance(std::chrono::seconds(61));
  REQUIRE(client->get(gvr::pods(), "ns", "p").ok());
  // A 401 forces a re-read before the period is over.
  dir.write("token", "expired");
  rec.clock.advance(std::chrono::seconds(61));
  dir.write("token", "expired");
  REQUIRE_FALSE(client->get(gvr::pods(), "ns", "p").ok());
  auto reqs = fake.requests();
  REQUIRE(reqs.size() >= 4);
  CHECK(reqs[0].header("Authorization") == "Bearer tok-1");
  CHECK(reqs[1].header("Authorization") == "Bearer tok-1");
  CHECK(reqs[2].header("Authorization") == "Bearer tok-2");
  CHECK(reqs[3].header("Authorization") == "Bearer expired");
}

TEST_CASE("client-side QPS limit paces requests", "[kube][client]") {
  FakeServer fake;
  fake.setHandler([](const kc::net::Request&) { return kc::net::Response::json(200, pod("p")); });
  Recorded rec;
  auto opts = recordingOptions(rec);
  opts.qps = 10;
  opts.burst = 2;
  auto client = makeClient(fake.config(), opts);
  for (int i = 0; i < 5; ++i) {
    REQUIRE(client->get(gvr::pods(), "ns", "p").ok());
  }
  // Two burst tokens, then one request per 100 ms (each wait moves the fake clock).
  const auto t0 = rec.clock.now();
  REQUIRE(rec.sleeps().size() == 3);
  CHECK(rec.sleeps()[0] == std::chrono::milliseconds(100));
  CHECK(rec.sleeps()[1] == std::chrono::milliseconds(100));
  CHECK(rec.sleeps()[2] == std::chrono::milliseconds(100));
  CHECK(client->stats().throttledWaits == 3);
  // Two more at once: both queue, the second behind the first.
  REQUIRE(client->get(gvr::pods(), "ns", "p").ok());
  REQUIRE(client->get(gvr::pods(), "ns", "p").ok());
  CHECK(rec.clock.now() - t0 == std::chrono::milliseconds(200));
}

TEST_CASE("list pages follow continue tokens with the first page's version", "[kube][client]") {
  FakeServer fake;
  fake.setHandler([](const kc::net::Request& req) {
    const std::string cont = req.queryParam("continue").value_or("");
    nlohmann::json list = {
        {"kind", "PodList"}, {"apiVersion", "v1"}, {"metadata", {{"resourceVersion", "100"}}}};
    int start = cont.empty() ? 0 : std::stoi(cont);
    int limit = std::stoi(req.queryParam("limit").value_or("1000"));
    list["items"] = nlohmann::json::array();
    for (int i = start; i < std::min(start + limit, 7); ++i) {
      list["items"].push_back(
          {{"metadata", {{"name", "p" + std::to_string(i)}, {"namespace", "ns"}}}});
    }
    if (start + limit < 7) {
      list["metadata"]["continue"] = std::to_string(start + limit);
    }
    return kc::net::Response::json(200, list);
  });
  Recorded rec;
  auto client = makeClient(fake.config(), recordingOptions(rec));
  ListOptions lo;
  lo.limit = 3;
  lo.labelSelector = "app=x";
  auto all = client->listAll(gvr::pods(), "ns", lo);
  if (!all.ok()) {
    FAIL(all.error().describe());
  }
  CHECK(all->items.size() == 7);
  CHECK(all->resourceVersion == "100");
  CHECK(all->items[6]["metadata"]["name"] == "p6");
  auto reqs = fake.requests();
  REQUIRE(reqs.size() == 3);
  CHECK(reqs[0].target == "/api/v1/namespaces/ns/pods?labelSelector=app%3Dx&limit=3");
  CHECK(reqs[1].queryParam("continue") == "3");
  CHECK(reqs[2].queryParam("continue") == "6");
}

TEST_CASE("watch splits events across arbitrary chunks and reports ERROR and 410",
          "[kube][client]") {
  FakeServer fake;
  fake.setStreamHandler([](const kc::net::Request& req,
                           std::shared_ptr<kc::net::ResponseStream> out) {
    if (req.queryParam("resourceVersion") == "1") {
      out->send(statusResponse(410, "Expired", "too old resource version: 1 (50)"));
      return;
    }
    std::string all;
    for (int i = 0; i < 20; ++i) {
      all += nlohmann::json({{"type", "ADDED"},
                             {"object", pod("p" + std::to_string(i), std::to_string(10 + i))}})
                 .dump() +
             "\n";
    }
    all +=
        R"({"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"99"}}})"
        "\n";
    all +=
        R"({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old","reason":"Expired","code":410}})"
        "\n";
    out->begin(200, {{"Content-Type", "application/json"}});
    for (std::size_t i = 0; i < all.size(); i += 37) {  // chunk boundaries inside events
      out->write(all.substr(i, 37));
    }
    out->end();
  });
  Recorded rec;
  auto client = makeClient(fake.config(), recordingOptions(rec));
  std::vector<WatchEvent> events;
  ListOptions wo;
  wo.resourceVersion = "5";
  wo.allowWatchBookmarks = true;
  wo.timeoutSeconds = 30;
  auto st = client->watch(gvr::pods(), "ns", wo, [&](WatchEvent&& ev) {
    events.push_back(std::move(ev));
    return true;
  });
  REQUIRE(st.ok());
  REQUIRE(events.size() == 22);
  CHECK(events[19].object["metadata"]["name"] == "p19");
  CHECK(events[20].type == "BOOKMARK");
  CHECK(events[21].type == "ERROR");
  CHECK(statusFromJson(events[21].object).isExpired());
  auto reqs = fake.requests();
  wo.resourceVersion = "1";
  auto gone = client->watch(gvr::pods(), "ns", wo, [](WatchEvent&&) { return true; });
  REQUIRE_FALSE(gone.ok());
  INFO(gone.error().describe());
  CHECK(gone.error().isExpired());
  CHECK(gone.error().httpCode == 410);
}

TEST_CASE("event recorder aggregates repeats into count and lastTimestamp", "[kube][events]") {
  FakeServer fake;
  std::mutex mu;
  std::map<std::string, nlohmann::json> events;  // name -> event
  fake.setHandler([&](const kc::net::Request& req) {
    std::lock_guard<std::mutex> lock(mu);
    if (req.method == "POST" && req.path == "/api/v1/namespaces/ns/events") {
      auto ev = nlohmann::json::parse(req.body);
      events[ev["metadata"]["name"]] = ev;
      return kc::net::Response::json(201, ev);
    }
    if (req.method == "PATCH") {
      std::string name = req.path.substr(req.path.rfind('/') + 1);
      auto it = events.find(name);
      if (it == events.end()) {
        return statusResponse(404, "NotFound", "events \"" + name + "\" not found");
      }
      it->second.merge_patch(nlohmann::json::parse(req.body));
      return kc::net::Response::json(200, it->second);
    }
    return statusResponse(405, "MethodNotAllowed", "no");
  });
  Recorded rec;
  auto client = makeClient(fake.config(), recordingOptions(rec));
  EventRecorder recorder(*client, "kubecomp-sched", "host-a");
  auto ref = ObjectReference::of(pod("p1"), "Pod", "v1");
  for (int i = 0; i < 3; ++i) {
    REQUIRE(recorder.record(ref, "Warning", "FailedScheduling", "0/3 nodes are available").ok());
  }
  REQUIRE(
      recorder.record(ref, "Normal", "Scheduled", "Successfully assigned ns/p1 to node-1").ok());
  {
    std::lock_guard<std::mutex> lock(mu);
    REQUIRE(events.size() == 2);
    for (const auto& [name, ev] : events) {
      CHECK(name.rfind("p1.", 0) == 0);
      CHECK(ev["involvedObject"]["name"] == "p1");
      CHECK(ev["involvedObject"]["namespace"] == "ns");
      CHECK(ev["source"]["component"] == "kubecomp-sched");
      if (ev["reason"] == "FailedScheduling") {
        CHECK(ev["count"] == 3);
        CHECK(ev["type"] == "Warning");
      } else {
        CHECK(ev["count"] == 1);
      }
    }
    events.clear();  // the server's TTL removed them
  }
  REQUIRE(recorder.record(ref, "Warning", "FailedScheduling", "0/3 nodes are available").ok());
  {
    std::lock_guard<std::mutex> lock(mu);
    REQUIRE(events.size() == 1);
    CHECK(events.begin()->second["count"] == 1);
  }
  auto methods = fake.requests();
  int posts = 0;
  int patches = 0;
  for (const auto& r : methods) {
    posts += r.method == "POST";
    patches += r.method == "PATCH";
  }
  CHECK(posts == 3);
  CHECK(patches == 3);  // two aggregations + the one that found the event gone
  CHECK_FALSE(recorder.record(ref, "Info", "X", "y").ok());
}

TEST_CASE("informer backs off between relists when every watch answers 410 at once",
          "[kube][informer]") {
  FakeServer fake;
  kc::testing::FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::chrono::steady_clock::time_point> lists;  // on the fake clock
  fake.setHandler([&](const kc::net::Request& req) {
    if (req.target.find("watch=") != std::string::npos) {
      return statusResponse(410, "Expired", "too old resource version");
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      lists.push_back(clock.now());
    }
    cv.notify_all();
    return kc::net::Response::json(200, {{"kind", "PodList"},
                                         {"apiVersion", "v1"},
                                         {"metadata", {{"resourceVersion", "7"}}},
                                         {"items", nlohmann::json::array({pod("a", "7")})}});
  });
  KubeClientOptions o;
  o.qps = 0;
  o.clock = &clock;  // the informer takes the client's clock
  auto client = makeClient(fake.config(), o);
  InformerOptions io;
  io.resource = gvr::pods();
  io.ns = "ns";
  io.backoff = {std::chrono::milliseconds(100), std::chrono::milliseconds(1000), 2.0, 0.0};
  io.healthyWatch = std::chrono::seconds(30);
  io.rand01 = [] { return 0.0; };
  Informer inf(*client, io);
  inf.start();
  // Each LIST -> WATCH -> 410 round ends in a backoff wait on the fake clock; release it.
  for (std::size_t k = 1; k <= 3; ++k) {
    REQUIRE(clock.awaitWait(k));
    clock.advance(clock.requestedWaits().back());
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return lists.size() >= 4; }));
  }
  inf.stop();
  std::lock_guard<std::mutex> lock(mu);
  // Backoff 100, 200, 400 ms between the relists; without it they would be 0 ms apart.
  // (The fourth round may already be waiting its 800 ms when the informer is stopped.)
  auto waits = clock.requestedWaits();
  REQUIRE(waits.size() >= 3);
  waits.resize(3);
  CHECK(waits == std::vector<std::chrono::nanoseconds>{std::chrono::milliseconds(100),
                                                       std::chrono::milliseconds(200),
                                                       std::chrono::milliseconds(400)});
  CHECK(lists[1] - lists[0] == std::chrono::milliseconds(100));
  CHECK(lists[2] - lists[1] == std::chrono::milliseconds(200));
  CHECK(lists[3] - lists[2] == std::chrono::milliseconds(400));
  CHECK(inf.stats().expired >= 3);
}

TEST_CASE("event recorder counts concurrent repeats one after the other", "[kube][events]") {
  FakeServer fake;
  std::mutex mu;
  std::condition_variable cv;
  nlohmann::json stored;
  std::vector<std::int64_t> patchedCounts;
  int inPatch = 0;
  fake.setHandler([&](const kc::net::Request& req) {
    std::unique_lock<std::mutex> lock(mu);
    if (req.method == "POST") {
      stored = nlohmann::json::parse(req.body);
      return kc::net::Response::json(201, stored);
    }
    const auto body = nlohmann::json::parse(req.body);
    patchedCounts.push_back(body["count"].get<std::int64_t>());
    // Hold the first PATCH until a second one arrives (bounded): without per-key ordering
    // both are in flight with the same count.
    ++inPatch;
    cv.notify_all();
    cv.wait_for(lock, std::chrono::milliseconds(300), [&] { return inPatch >= 2; });
    --inPatch;
    stored.merge_patch(body);
    return kc::net::Response::json(200, stored);
  });
  KubeClientOptions o;
  o.qps = 0;
  auto client = makeClient(fake.config(), o);
  EventRecorder recorder(*client, "kubecomp-test", "host-a");
  auto ref = ObjectReference::of(pod("p1"), "Pod", "v1");
  REQUIRE(recorder.record(ref, "Warning", "Busy", "again").ok());
  std::thread t1([&] { CHECK(recorder.record(ref, "Warning", "Busy", "again").ok()); });
  std::thread t2([&] { CHECK(recorder.record(ref, "Warning", "Busy", "again").ok()); });
  t1.join();
  t2.join();
  std::lock_guard<std::mutex> lock(mu);
  std::sort(patchedCounts.begin(), patchedCounts.end());
  CHECK(patchedCounts == std::vector<std::int64_t>{2, 3});
  CHECK(stored["count"] == 3);
}

TEST_CASE(
    "events about a cluster-scoped object go to default with an empty involvedObject namespace",
    "[kube][events]") {
  FakeServer fake;
  fake.setHandler([&](const kc::net::Request& req) {
    return kc::net::Response::json(201, nlohmann::json::parse(req.body));
  });
  KubeClientOptions o;
  o.qps = 0;
  auto client = makeClient(fake.config(), o);
  EventRecorder recorder(*client, "kubecomp-test", "host-a");
  nlohmann::json node = {
      {"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "node-1"}, {"uid", "u1"}}}};
  auto ev =
      recorder.record(ObjectReference::of(node, "Node", "v1"), "Normal", "Ready", "node is ready");
  REQUIRE(ev.ok());
  auto reqs = fake.requests();
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].path == "/api/v1/namespaces/default/events");
  const auto body = nlohmann::json::parse(reqs[0].body);
  CHECK(body["metadata"]["namespace"] == "default");
  CHECK_FALSE(body["involvedObject"].contains("namespace"));
  CHECK(body["involvedObject"]["name"] == "node-1");
}

TEST_CASE("a POST is retried on 5xx only with a Retry-After header", "[kube][client]") {
  FakeServer fake;
  std::atomic<int> calls{0};
  std::atomic<bool> withHeader{false};
  fake.setHandler([&](const kc::net::Request&) {
    if (calls++ == 0) {
      auto r = kc::net::Response::json(503, {{"kind", "Status"},
                                             {"apiVersion", "v1"},
                                             {"status", "Failure"},
                                             {"reason", "ServiceUnavailable"},
                                             {"message", "busy"},
                                             {"details", {{"retryAfterSeconds", 1}}},
                                             {"code", 503}});
      return withHeader ? r.withHeader("Retry-After", "1") : r;
    }
    return kc::net::Response::json(201, pod("p"));
  });
  Recorded rec;
  auto client = makeClient(fake.config(), recordingOptions(rec));
  auto bodyOnly = client->create(gvr::pods(), "ns", pod("p"));
  REQUIRE_FALSE(bodyOnly.ok());
  CHECK(bodyOnly.error().httpCode == 503);
  CHECK(calls == 1);
  calls = 0;
  withHeader = true;
  auto retried = client->create(gvr::pods(), "ns", pod("p"));
  CHECK(retried.ok());
  CHECK(calls == 2);
}

TEST_CASE("a DELETE whose first reply was lost and then finds 404 succeeds", "[kube][client]") {
  FakeServer fake;
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  fake.setHandler([&](const kc::net::Request&) {
    std::unique_lock<std::mutex> lock(mu);
    const int n = calls++;
    cv.notify_all();
    if (n == 0) {
      // The delete happens, but the answer comes too late for the client (it timed out).
      cv.wait_for(lock, std::chrono::seconds(2), [&] { return calls >= 2; });
      return kc::net::Response::json(200, pod("p"));
    }
    return statusResponse(404, "NotFound", "pods \"p\" not found");
  });
  Recorded rec;
  auto opts = recordingOptions(rec);
  opts.requestTimeout = std::chrono::milliseconds(200);
  auto client = makeClient(fake.config(), opts);
  auto removed = client->remove(gvr::pods(), "ns", "p");
  REQUIRE(removed.ok());
  CHECK((*removed)["status"] == "Success");
  {
    std::lock_guard<std::mutex> lock(mu);
    CHECK(calls == 2);
    calls = 5;  // from now on every answer is 404
  }
  // Without a lost reply a 404 stays an error.
  auto again = client->remove(gvr::pods(), "ns", "p");
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().isNotFound());
}
