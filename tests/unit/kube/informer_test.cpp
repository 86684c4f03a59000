// The informer against FakeListerWatcher and FakeClock: LIST/WATCH/relist behaviour, backoff
// timing and the transform hook, with no server and no real time. Every wait below is on an
// event (a handler call, a watch call, a thread blocking on the fake clock).
#include "libcore/kube/informer.hpp"

#include <catch2/catch.hpp>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "libcore/kube/transform.hpp"
#include "tests/support/fakes/fake_clock.hpp"
#include "tests/support/fakes/fake_lister_watcher.hpp"

using namespace kc::kube;
using kc::testing::FakeClock;
using kc::testing::FakeListerWatcher;
using namespace std::chrono_literals;

namespace {

nlohmann::json pod(const std::string& name, const std::string& node = "n1") {
  return {{"metadata", {{"name", name}, {"namespace", "ns"}, {"uid", "uid-" + name}}},
          {"spec",
           {{"nodeName", node},
            {"schedulerName", "kubecomp-sched"},
            {"containers",
             {{{"name", "main"},
               {"image", "registry.example.org/trainer:1"},
               {"args", {"--epochs=10"}},
               {"resources", {{"requests", {{"cpu", "4"}, {"kubecomp.io/gpu", "2"}}}}}}}}}},
          {"status", {{"phase", "Pending"}}}};
}

// What the handlers saw, in order ("add ns/a", "update ns/a", "delete ns/a"); wait(n) blocks
// until n notifications arrived.
class EventLog {
 public:
  ResourceEventHandler handler() {
    ResourceEventHandler h;
    h.onAdd = [this](const ObjectPtr& o) { push("add " + objectKey(*o)); };
    h.onUpdate = [this](const ObjectPtr&, const ObjectPtr& n) { push("update " + objectKey(*n)); };
    h.onDelete = [this](const ObjectPtr& o) { push("delete " + objectKey(*o)); };
    return h;
  }
  bool wait(std::size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, 30s, [&] { return seen_.size() >= n; });
  }
  std::vector<std::string> seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

 private:
  void push(std::string s) {
    std::lock_guard<std::mutex> lock(mu_);
    seen_.push_back(std::move(s));
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> seen_;
};

InformerOptions testOptions(FakeClock& clock) {
  InformerOptions io;
  io.pageSize = 2;
  io.rand01 = [] { return 0.0; };  // no jitter: backoff 800 ms, 1600 ms, ...
  io.clock = &clock;
  io.labelSelector = "app=trainer";
  return io;
}

}  // namespace

TEST_CASE("informer lists in pages, then watches from the list's version", "[kube][informer]") {
  FakeClock clock;
  FakeListerWatcher lw;
  lw.upsert(pod("a"));
  lw.upsert(pod("b"));
  lw.upsert(pod("c"));
  EventLog log;
  Informer inf(lw, testOptions(clock));
  inf.addHandler(log.handler());
  inf.start();
  REQUIRE(inf.waitForSync(30s));
  REQUIRE(lw.awaitWatches(1));
  CHECK(inf.store().size() == 3);
  CHECK(log.seen() == std::vector<std::string>{"add ns/a", "add ns/b", "add ns/c"});  // LIST order
  const auto calls = lw.calls();
  REQUIRE(calls.lists.size() == 2);  // 3 items, pages of 2
  CHECK(calls.lists[0].limit == 2);
  CHECK(calls.lists[0].labelSelector == "app=trainer");
  CHECK(calls.lists[1].continueToken != "");
  REQUIRE(calls.watches.size() == 1);
  CHECK(calls.watches[0].resourceVersion == std::optional<std::string>("3"));
  CHECK(calls.watches[0].allowWatchBookmarks);
  CHECK(calls.watches[0].labelSelector == "app=trainer");

  lw.upsert(pod("d"));
  lw.upsert(pod("a", "n2"));
  REQUIRE(lw.erase("ns", "b"));
  REQUIRE(log.wait(6));
  CHECK(log.seen() == std::vector<std::string>{"add ns/a", "add ns/b", "add ns/c", "add ns/d",
                                               "update ns/a", "delete ns/b"});
  CHECK(inf.lastResourceVersion() == "6");
  CHECK(inf.store().byNode("n2").size() == 1);
  CHECK(inf.store().get("ns", "b") == nullptr);
  inf.stop();
  CHECK(inf.stats().eventsApplied == 3);
  CHECK(inf.stats().lists == 1);
}

TEST_CASE("informer relists on a 410 ERROR event and on HTTP 410, delivering the diff",
          "[kube][informer]") {
  FakeClock clock;
  FakeListerWatcher lw;
  lw.upsert(pod("a"));
  lw.upsert(pod("b"));
  EventLog log;
  Informer inf(lw, testOptions(clock));
  inf.addHandler(log.handler());
  inf.start();
  REQUIRE(lw.awaitWatches(1));
  REQUIRE(log.wait(2));

  // A watch that lived 0 s on the fake clock is not healthy, so each step below waits one
  // backoff (800 ms, then 1600 ms) on the fake clock.
  SECTION("ERROR event with code 410") {
    lw.expireWatches();
    REQUIRE(clock.awaitWait(1));
    // Changes the informer never sees as events: it must find them by relisting.
    lw.erase("ns", "a");
    lw.upsert(pod("c"));
    CHECK(clock.requestedWaits() == std::vector<std::chrono::nanoseconds>{800ms});
    clock.advance(800ms);
  }
  SECTION("watch refused with HTTP 410 after a clean end") {
    lw.pause();
    lw.erase("ns", "a");
    lw.upsert(pod("c"));
    lw.compact();
    lw.closeWatches();  // ends the open watch before it got the events; the next one is refused
    REQUIRE(clock.awaitWait(1));
    clock.advance(800ms);
    REQUIRE(clock.awaitWait(2));
    CHECK(clock.requestedWaits() == std::vector<std::chrono::nanoseconds>{800ms, 1600ms});
    CHECK(inf.stats().lists == 1);
    clock.advance(1600ms);
  }
  REQUIRE(log.wait(4));
  lw.resume();
  REQUIRE(lw.awaitWatches(2));
  const auto seen = log.seen();
  CHECK(std::vector<std::string>(seen.begin() + 2, seen.end()) ==
        std::vector<std::string>{"delete ns/a", "add ns/c"});
  CHECK(inf.stats().expired == 1);
  CHECK(inf.stats().lists == 2);
  CHECK(inf.store().size() == 2);
  inf.stop();
}

TEST_CASE("informer backs off on the fake clock: 800 ms, 1600 ms, then resets",
          "[kube][informer][clock]") {
  FakeClock clock;
  FakeListerWatcher lw;
  lw.upsert(pod("a"));
  ApiError unavailable;
  unavailable.httpCode = 503;
  unavailable.reason = "ServiceUnavailable";
  lw.failNextList(unavailable);
  lw.failNextList(unavailable);
  Informer inf(lw, testOptions(clock));
  inf.start();

  REQUIRE(clock.awaitWait(1));
  CHECK(lw.calls().lists.size() == 1);
  CHECK(clock.requestedWaits() == std::vector<std::chrono::nanoseconds>{800ms});
  clock.advance(799ms);
  // Not yet due: the informer cannot list again before the fake clock reaches the deadline.
  CHECK(lw.calls().lists.size() == 1);
  CHECK_FALSE(inf.hasSynced());
  clock.advance(1ms);
  REQUIRE(lw.awaitListCalls(2));
  REQUIRE(clock.awaitWait(2));
  CHECK(clock.requestedWaits() == std::vector<std::chrono::nanoseconds>{800ms, 1600ms});
  clock.advance(1600ms);
  REQUIRE(inf.waitForSync(30s));
  REQUIRE(lw.awaitWatches(1));

  // A watch that ends at once without events is not healthy: it waits the next backoff (3.2 s)
  // before watching again ...
  lw.closeWatches();
  REQUIRE(clock.awaitWait(3));
  CHECK(clock.requestedWaits().back() == 3200ms);
  clock.advance(3200ms);
  REQUIRE(lw.awaitWatches(2));
  // ... one that lived healthyWatch (2 s) resets the backoff and watches again at once.
  clock.advance(2s);
  lw.closeWatches();
  REQUIRE(lw.awaitWatches(3));
  CHECK(clock.requestedWaits().size() == 3);
  // The next failure starts over at 800 ms.
  lw.closeWatches();
  REQUIRE(clock.awaitWait(4));
  CHECK(clock.requestedWaits().back() == 800ms);
  inf.stop();  // ends the backoff wait at once, without advancing the clock
  CHECK(clock.waiters() == 0);
}

TEST_CASE("informer stop() ends a blocked watch", "[kube][informer]") {
  FakeClock clock;
  FakeListerWatcher lw;
  Informer inf(lw, testOptions(clock));
  inf.start();
  REQUIRE(lw.awaitWatches(1));
  inf.stop();
  CHECK(lw.openWatches() == 0);
  CHECK(inf.stats().watchErrors == 0);
}

TEST_CASE("informer transform keeps only the chosen fields, in LIST and WATCH",
          "[kube][informer][transform]") {
  FakeClock clock;
  FakeListerWatcher lw;
  lw.upsert(pod("a"));
  auto io = testOptions(clock);
  auto keep = keepFields({"spec.nodeName", "spec.containers[].resources.requests", "status.phase"});
  REQUIRE(keep.ok());
  EventLog log;
  Informer inf(lw, io);
  inf.setTransform(*keep);
  inf.addHandler(log.handler());
  inf.start();
  REQUIRE(lw.awaitWatches(1));
  lw.upsert(pod("b", "n7"));
  REQUIRE(log.wait(2));
  const nlohmann::json expectedB = {
      {"metadata",
       {{"name", "b"}, {"namespace", "ns"}, {"uid", "uid-b"}, {"resourceVersion", "2"}}},
      {"spec",
       {{"nodeName", "n7"},
        {"containers",
         {{{"resources", {{"requests", {{"cpu", "4"}, {"kubecomp.io/gpu", "2"}}}}}}}}}},
      {"status", {{"phase", "Pending"}}}};
  CHECK(*inf.store().get("ns", "b") == expectedB);
  CHECK_FALSE(inf.store().get("ns", "a")->at("spec").contains("schedulerName"));
  CHECK(inf.store().get("ns", "a")->at("metadata").at("resourceVersion") == "1");
  inf.stop();
}

TEST_CASE("informer drops objects the transform left without a name",
          "[kube][informer][transform]") {
  FakeClock clock;
  FakeListerWatcher lw;
  lw.upsert(pod("a"));
  lw.upsert(pod("skip-me"));
  Informer inf(lw, testOptions(clock));
  inf.setTransform([](nlohmann::json&& obj) {
    if (obj["metadata"]["name"] == "skip-me") {
      return nlohmann::json::object();
    }
    return std::move(obj);
  });
  inf.start();
  REQUIRE(inf.waitForSync(30s));
  CHECK(inf.store().keys() == std::vector<std::string>{"ns/a"});
  CHECK(inf.stats().dropped == 1);
  inf.stop();
}

TEST_CASE("keepFields: subtrees, arrays, absent paths, bad paths", "[kube][transform]") {
  const nlohmann::json obj = {
      {"apiVersion", "v1"},
      {"metadata", {{"name", "x"}, {"labels", {{"a", "1"}}}, {"annotations", {{"big", "..."}}}}},
      {"spec", {{"containers", {{{"name", "c1"}, {"image", "i"}}, {{"name", "c2"}}}}}},
      {"status", "not-an-object"}};
  auto t = keepFields(
      {"metadata.labels", "metadata", "spec.containers[].name", "status.phase", "missing.path"});
  REQUIRE(t.ok());
  const nlohmann::json got = (*t)(nlohmann::json(obj));
  // "metadata" named whole wins over the narrower path; status is not an object: left out.
  CHECK(got == nlohmann::json{{"metadata", obj["metadata"]},
                              {"spec", {{"containers", {{{"name", "c1"}}, {{"name", "c2"}}}}}}});
  CHECK_FALSE(keepFields({"spec..name"}).ok());
  CHECK_FALSE(keepFields({""}).ok());
  CHECK_FALSE(keepFields({"spec.[]"}).ok());
}

TEST_CASE("keepFieldsPacked: identity stays readable, the rest unpacks to what keepFields keeps",
          "[kube][transform]") {
  const nlohmann::json obj = nlohmann::json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "p", "namespace": "ns", "uid": "u-1", "resourceVersion": "42",
                 "labels": {"app": "x"}, "managedFields": [{"manager": "kubectl"}]},
    "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i",
             "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "4"}}}]},
    "status": {"phase": "Running", "conditions": []}})");
  const std::vector<std::string> paths = {"metadata.labels", "spec.nodeName",
                                          "spec.containers[].resources.requests", "status.phase"};
  auto plain = keepFields(paths);
  auto packed = keepFieldsPacked(paths);
  REQUIRE(plain.ok());
  REQUIRE(packed.ok());
  const nlohmann::json small = (*packed)(nlohmann::json(obj));
  // The store keys and diffs on these; everything else is one binary value.
  CHECK(small["metadata"] ==
        nlohmann::json{
            {"name", "p"}, {"namespace", "ns"}, {"uid", "u-1"}, {"resourceVersion", "42"}});
  CHECK(small.size() == 2);
  REQUIRE(small[kPackedFieldsKey].is_binary());
  auto back = unpackFields(small);
  REQUIRE(back.ok());
  CHECK(*back == (*plain)(nlohmann::json(obj)));
  CHECK((*back)["spec"]["containers"][0]["resources"] ==
        nlohmann::json{{"requests", {{"cpu", "2"}}}});

  // Nothing beyond identity kept: no packed value; unpacking a plain object returns it.
  auto onlyId = keepFieldsPacked({"missing.path"});
  REQUIRE(onlyId.ok());
  const nlohmann::json bare = (*onlyId)(nlohmann::json(obj));
  CHECK_FALSE(bare.contains(kPackedFieldsKey));
  CHECK(*unpackFields(bare) == bare);

  // A damaged packed value is an error, not a guess.
  nlohmann::json broken = small;
  broken[kPackedFieldsKey] = "text";
  CHECK(unpackFields(broken).error().code == "invalid");
  broken[kPackedFieldsKey] =
      nlohmann::json::binary({0x93, 0x01, 0x02, 0x03});  // a MessagePack array
  CHECK(unpackFields(broken).error().code == "invalid");
  broken[kPackedFieldsKey] = nlohmann::json::binary({0xc1});  // never used in MessagePack
  CHECK_FALSE(unpackFields(broken).ok());
  CHECK_FALSE(keepFieldsPacked({""}).ok());
}
