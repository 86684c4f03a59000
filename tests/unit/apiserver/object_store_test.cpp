// GCC 12 reports a false -Wrestrict inside std::string assignment at -O3 (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"

#include "tools/kube-apiserver-double/object_store.hpp"

#include <catch2/catch.hpp>
#include <mutex>

using namespace kc::apiserver;
using nlohmann::json;

namespace {

// A watch sink that records what the server wrote.
class RecordingSink : public WatchSink {
 public:
  bool write(const std::string& data) override {
    if (ended_) {
      return false;
    }
    for (size_t start = 0; start < data.size();) {
      size_t nl = data.find('\n', start);
      lines.push_back(json::parse(data.substr(start, nl - start)));
      start = nl + 1;
    }
    return true;
  }
  void end() override { ended_ = true; }
  bool closed() const override { return ended_; }
  std::vector<std::string> types() const {
    std::vector<std::string> t;
    for (const auto& l : lines) {
      t.push_back(l["type"]);
    }
    return t;
  }
  std::vector<json> lines;
  bool ended_ = false;
};

// Builder for pod bodies, as kube-scheduler's st.MakePod().
struct PodBuilder {
  json body = {{"apiVersion", "v1"},
               {"kind", "Pod"},
               {"metadata", json::object()},
               {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox:1"}}}}}}};
  explicit PodBuilder(std::string name) { body["metadata"]["name"] = std::move(name); }
  PodBuilder& label(const std::string& k, const std::string& v) {
    body["metadata"]["labels"][k] = v;
    return *this;
  }
  PodBuilder& node(const std::string& n) {
    body["spec"]["nodeName"] = n;
    return *this;
  }
  PodBuilder& scheduler(const std::string& s) {
    body["spec"]["schedulerName"] = s;
    return *this;
  }
  PodBuilder& finalizer(const std::string& f) {
    body["metadata"]["finalizers"].push_back(f);
    return *this;
  }
  PodBuilder& owner(const std::string& uid) {
    body["metadata"]["ownerReferences"].push_back(
        {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"name", "o"}, {"uid", uid}});
    return *this;
  }
  operator json() const { return body; }
};

struct Fixture {
  Fixture() : store(makeOptions()) {}
  static StoreOptions makeOptions(std::size_t window = 10'000) {
    StoreOptions o;
    o.historyWindow = window;
    o.seed = 42;
    o.clock = [] {
      return std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000));
    };
    return o;
  }
  ResourceInfo res(const std::string& g, const std::string& v, const std::string& r) {
    auto info = store.findResource(g, v, r);
    REQUIRE(info.has_value());
    return *info;
  }
  ResourceInfo pods() { return res("", "v1", "pods"); }
  ObjectStore store;
};

std::string numbered(const char* prefix, int i) {
  std::string s(prefix);
  s.append(std::to_string(i));
  return s;
}

std::uint64_t rvOf(const ObjectPtr& o) {
  return std::stoull(o->object["metadata"]["resourceVersion"].get<std::string>());
}

}  // namespace

TEST_CASE_METHOD(Fixture, "create stamps uid, timestamps and a growing resourceVersion",
                 "[store]") {
  auto a = store.create(pods(), "default", PodBuilder("a"));
  auto b = store.create(pods(), "default", PodBuilder("b"));
  CHECK(rvOf(b) > rvOf(a));
  CHECK(a->uid.size() == 36);
  CHECK(a->uid != b->uid);
  CHECK(a->object["metadata"]["creationTimestamp"] == "2023-11-14T22:13:20Z");
  CHECK(a->object["status"]["phase"] == "Pending");
  CHECK(a->object["spec"]["schedulerName"] == "default-scheduler");
  // Items omit kind/apiVersion; a GET carries them.
  CHECK(json::parse(a->itemJson).contains("kind") == false);
  auto full = json::parse(a->fullJson("v1", "Pod"));
  CHECK(full["kind"] == "Pod");
  CHECK(full["metadata"]["name"] == "a");
}

TEST_CASE_METHOD(Fixture, "create failures match the real server", "[store]") {
  store.create(pods(), "default", PodBuilder("a"));
  SECTION("duplicate name") {
    try {
      store.create(pods(), "default", PodBuilder("a"));
      FAIL("expected AlreadyExists");
    } catch (const ApiError& e) {
      CHECK(e.code() == 409);
      CHECK(e.reason() == "AlreadyExists");
      CHECK(std::string(e.what()) == "pods \"a\" already exists");
    }
  }
  SECTION("missing namespace") {
    try {
      store.create(pods(), "nope", PodBuilder("a"));
      FAIL("expected NotFound");
    } catch (const ApiError& e) {
      CHECK(e.code() == 404);
      CHECK(std::string(e.what()) == "namespaces \"nope\" not found");
    }
  }
  SECTION("invalid name") {
    CHECK_THROWS_MATCHES(
        store.create(pods(), "default", PodBuilder("Bad_Name")), ApiError,
        Catch::Predicate<ApiError>([](const ApiError& e) { return e.code() == 422; }));
  }
  SECTION("no containers") {
    json body = PodBuilder("x");
    body["spec"].erase("containers");
    CHECK_THROWS_AS(store.create(pods(), "default", body), ApiError);
  }
  CHECK(store.objectCount(pods()) == 1);
}

TEST_CASE_METHOD(Fixture, "generateName produces a fresh name", "[store]") {
  json body = PodBuilder("");
  body["metadata"].erase("name");
  body["metadata"]["generateName"] = "web-";
  auto o = store.create(pods(), "default", body);
  CHECK(o->name.rfind("web-", 0) == 0);
  CHECK(o->name.size() == 9);
}

TEST_CASE_METHOD(Fixture,
                 "update with a stale resourceVersion is a 409 Conflict with the real message",
                 "[store]") {
  auto a = store.create(pods(), "default", PodBuilder("x"));
  json body = a->object;
  body["metadata"]["labels"]["v"] = "1";
  auto b = store.update(pods(), "default", "x", body, Subresource::kNone);
  CHECK(rvOf(b) > rvOf(a));
  try {
    store.update(pods(), "default", "x", body, Subresource::kNone);  // still carries a's RV
    FAIL("expected Conflict");
  } catch (const ApiError& e) {
    CHECK(e.code() == 409);
    CHECK(e.reason() == "Conflict");
    CHECK(std::string(e.what()) ==
          "Operation cannot be fulfilled on pods \"x\": the object has been modified; please apply "
          "your changes to "
          "the latest version and try again");
  }
  // A no-op update creates no new version.
  auto same = store.update(pods(), "default", "x", b->object, Subresource::kNone);
  CHECK(rvOf(same) == rvOf(b));
}

TEST_CASE_METHOD(Fixture, "status subresource and main resource change disjoint parts", "[store]") {
  store.create(pods(), "default", PodBuilder("p"));
  auto cur = store.get(pods(), "default", "p");
  json withStatus = cur->object;
  withStatus["status"]["phase"] = "Running";
  withStatus["metadata"]["labels"]["x"] = "y";
  auto main = store.update(pods(), "default", "p", withStatus, Subresource::kNone);
  CHECK(main->object["status"]["phase"] == "Pending");  // main PUT ignores status
  CHECK(main->object["metadata"]["labels"]["x"] == "y");
  json statusOnly = main->object;
  statusOnly["status"]["phase"] = "Running";
  statusOnly["metadata"]["labels"]["x"] = "z";
  auto st = store.update(pods(), "default", "p", statusOnly, Subresource::kStatus);
  CHECK(st->object["status"]["phase"] == "Running");
  CHECK(st->object["metadata"]["labels"]["x"] == "y");  // status PUT ignores the rest
}

TEST_CASE_METHOD(Fixture, "LIST pages share one resourceVersion and see a consistent snapshot",
                 "[store]") {
  for (int i = 0; i < 10; ++i) {
    store.create(pods(), "default", PodBuilder(numbered("p", i)));
  }
  ListOptions opt;
  opt.ns = "default";
  opt.limit = 4;
  auto first = store.list(pods(), opt);
  REQUIRE(first.items.size() == 4);
  REQUIRE_FALSE(first.continueToken.empty());
  // Changes after the first page must not show in later pages.
  store.create(pods(), "default", PodBuilder("p99"));
  store.remove(pods(), "default", "p8", {});
  std::vector<std::string> names;
  for (const auto& o : first.items) {
    names.push_back(o->name);
  }
  std::string token = first.continueToken;
  while (!token.empty()) {
    ListOptions next = opt;
    next.continueToken = token;
    auto page = store.list(pods(), next);
    CHECK(page.resourceVersion == first.resourceVersion);
    for (const auto& o : page.items) {
      names.push_back(o->name);
    }
    token = page.continueToken;
  }
  CHECK(names ==
        std::vector<std::string>{"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9"});
  // A fresh list sees the present.
  ListOptions inDefault;
  inDefault.ns = "default";
  auto now = store.list(pods(), inDefault);
  CHECK(now.items.size() == 10);
  CHECK(now.resourceVersion == store.currentResourceVersion());
}

TEST_CASE_METHOD(Fixture, "LIST resourceVersion rules", "[store]") {
  auto a = store.create(pods(), "default", PodBuilder("a"));
  store.create(pods(), "default", PodBuilder("b"));
  SECTION("exact RV with limit returns the old state") {
    ListOptions opt;
    opt.resourceVersion = std::to_string(rvOf(a));
    opt.limit = 10;
    auto r = store.list(pods(), opt);
    CHECK(r.items.size() == 1);
    CHECK(r.resourceVersion == rvOf(a));
  }
  SECTION("not-older-than RV without limit returns the present") {
    ListOptions opt;
    opt.resourceVersion = std::to_string(rvOf(a));
    CHECK(store.list(pods(), opt).items.size() == 2);
  }
  SECTION("continue with a resourceVersion is a 400") {
    ListOptions opt;
    opt.limit = 1;
    auto page = store.list(pods(), opt);
    opt.continueToken = page.continueToken;
    opt.resourceVersion = "5";
    CHECK_THROWS_MATCHES(
        store.list(pods(), opt), ApiError,
        Catch::Predicate<ApiError>([](const ApiError& e) { return e.code() == 400; }));
  }
  SECTION("a future RV is a 504 'Too large resource version'") {
    ListOptions opt;
    opt.resourceVersion = "99999";
    CHECK_THROWS_MATCHES(
        store.list(pods(), opt), ApiError,
        Catch::Predicate<ApiError>([](const ApiError& e) { return e.code() == 504; }));
  }
  SECTION("unsupported field selector is a 400") {
    ListOptions opt;
    opt.fieldSelector = "spec.unknown=x";
    CHECK_THROWS_MATCHES(
        store.list(pods(), opt), ApiError,
        Catch::Predicate<ApiError>([](const ApiError& e) { return e.code() == 400; }));
  }
}

TEST_CASE("LIST and continue tokens older than the history window are 410 Expired", "[store]") {
  ObjectStore store(Fixture::makeOptions(5));
  auto pods = *store.findResource("", "v1", "pods");
  for (int i = 0; i < 4; ++i) {
    store.create(pods, "default", PodBuilder(numbered("p", i)));
  }
  ListOptions opt;
  opt.limit = 2;
  auto page = store.list(pods, opt);
  for (int i = 0; i < 6; ++i) {
    store.create(pods, "default", PodBuilder(numbered("q", i)));
  }
  opt.continueToken = page.continueToken;
  CHECK_THROWS_MATCHES(store.list(pods, opt), ApiError,
                       Catch::Predicate<ApiError>([](const ApiError& e) {
                         return e.code() == 410 && e.reason() == "Expired";
                       }));
}

TEST_CASE_METHOD(Fixture, "label and field selectors filter LIST", "[store]") {
  store.create(pods(), "default", PodBuilder("a").label("app", "web").scheduler("kubecomp-sched"));
  store.create(pods(), "default", PodBuilder("b").label("app", "db").node("n1"));
  store.create(pods(), "kube-system", PodBuilder("c").label("app", "web"));
  auto count = [&](std::string ns, std::string labels, std::string fields) {
    ListOptions o;
    o.ns = std::move(ns);
    o.labelSelector = std::move(labels);
    o.fieldSelector = std::move(fields);
    return store.list(pods(), o).items.size();
  };
  CHECK(count("", "", "") == 3);
  CHECK(count("default", "", "") == 2);
  CHECK(count("", "app=web", "") == 2);
  CHECK(count("", "app in (db)", "") == 1);
  CHECK(count("", "", "spec.nodeName=") == 2);
  CHECK(count("", "", "spec.schedulerName=kubecomp-sched,spec.nodeName=") == 1);
  CHECK(count("", "", "metadata.namespace=kube-system") == 1);
}

TEST_CASE_METHOD(Fixture, "WATCH replays from a resourceVersion and streams changes",
                 "[store][watch]") {
  auto a = store.create(pods(), "default", PodBuilder("a"));
  store.create(pods(), "default", PodBuilder("b"));
  auto sink = std::make_shared<RecordingSink>();
  WatchOptions wo;
  wo.ns = "default";
  wo.resourceVersion = std::to_string(rvOf(a));
  store.watch(pods(), wo, sink);
  REQUIRE(sink->types() == std::vector<std::string>{"ADDED"});
  CHECK(sink->lines[0]["object"]["metadata"]["name"] == "b");
  CHECK(sink->lines[0]["object"]["kind"] == "Pod");  // watch objects carry kind/apiVersion
  auto cur = store.get(pods(), "default", "a");
  json body = cur->object;
  body["metadata"]["labels"]["x"] = "1";
  store.update(pods(), "default", "a", body, Subresource::kNone);
  auto del = store.remove(pods(), "default", "b", {});
  CHECK(del.deletedNow);
  REQUIRE(sink->types() == std::vector<std::string>{"ADDED", "MODIFIED", "DELETED"});
  // DELETED carries the deletion's resourceVersion.
  CHECK(sink->lines[2]["object"]["metadata"]["resourceVersion"] ==
        std::to_string(store.currentResourceVersion()));
}

TEST_CASE_METHOD(Fixture, "WATCH without a resourceVersion starts with synthetic ADDED events",
                 "[store][watch]") {
  store.create(pods(), "default", PodBuilder("a").label("app", "web"));
  store.create(pods(), "default", PodBuilder("b"));
  auto sink = std::make_shared<RecordingSink>();
  WatchOptions wo;
  wo.labelSelector = "app=web";
  store.watch(pods(), wo, sink);
  CHECK(sink->types() == std::vector<std::string>{"ADDED"});
  // An object leaving the selector is DELETED for this watcher.
  json body = store.get(pods(), "default", "a")->object;
  body["metadata"]["labels"]["app"] = "db";
  store.update(pods(), "default", "a", body, Subresource::kNone);
  CHECK(sink->types() == std::vector<std::string>{"ADDED", "DELETED"});
}

TEST_CASE("WATCH from an expired resourceVersion: ERROR event or HTTP 410", "[store][watch]") {
  bool asEvent = GENERATE(true, false);
  CAPTURE(asEvent);
  auto opts = Fixture::makeOptions(3);
  opts.expiredAsEvent = asEvent;
  ObjectStore store(opts);
  auto pods = *store.findResource("", "v1", "pods");
  for (int i = 0; i < 6; ++i) {
    store.create(pods, "default", PodBuilder(numbered("p", i)));
  }
  auto sink = std::make_shared<RecordingSink>();
  WatchOptions wo;
  wo.resourceVersion = "2";
  if (asEvent) {
    store.watch(pods, wo, sink);
    REQUIRE(sink->lines.size() == 1);
    CHECK(sink->lines[0]["type"] == "ERROR");
    CHECK(sink->lines[0]["object"]["code"] == 410);
    CHECK(sink->lines[0]["object"]["reason"] == "Expired");
    CHECK(sink->ended_);
  } else {
    CHECK_THROWS_MATCHES(
        store.watch(pods, wo, sink), ApiError,
        Catch::Predicate<ApiError>([](const ApiError& e) { return e.code() == 410; }));
  }
}

TEST_CASE_METHOD(Fixture, "WATCH bookmarks, timeouts and fault drops", "[store][watch]") {
  store.create(pods(), "default", PodBuilder("a"));
  auto now = std::chrono::steady_clock::now();
  auto sink = std::make_shared<RecordingSink>();
  WatchOptions wo;
  wo.resourceVersion = std::to_string(store.currentResourceVersion());
  wo.allowBookmarks = true;
  wo.deadline = now + std::chrono::seconds(30);
  store.watch(pods(), wo, sink);
  store.tick(now + std::chrono::seconds(2));
  REQUIRE(sink->types() == std::vector<std::string>{"BOOKMARK"});
  CHECK(sink->lines[0]["object"]["metadata"]["resourceVersion"] ==
        std::to_string(store.currentResourceVersion()));
  CHECK(sink->lines[0]["object"]["kind"] == "Pod");
  store.tick(now + std::chrono::seconds(31));
  CHECK(sink->ended_);
  CHECK(store.watcherCount() == 0);

  store.setWatchFaults(true, 2, 0.0);
  auto dropped = std::make_shared<RecordingSink>();
  WatchOptions all;
  store.watch(pods(), all, dropped);
  store.create(pods(), "default", PodBuilder("b"));
  store.create(pods(), "default", PodBuilder("c"));
  CHECK(dropped->lines.size() == 2);
  CHECK(dropped->ended_);
}

TEST_CASE_METHOD(Fixture, "DELETE with finalizers waits until the last finalizer is removed",
                 "[store]") {
  auto sink = std::make_shared<RecordingSink>();
  WatchOptions fromNow;
  fromNow.resourceVersion = std::to_string(store.currentResourceVersion());
  store.watch(pods(), fromNow, sink);
  store.create(pods(), "default", PodBuilder("f").finalizer("example.com/hold"));
  auto r = store.remove(pods(), "default", "f", {});
  CHECK_FALSE(r.deletedNow);
  CHECK(r.object->object["metadata"].contains("deletionTimestamp"));
  CHECK(store.objectCount(pods()) == 1);
  json body = store.get(pods(), "default", "f")->object;
  body["metadata"]["finalizers"].push_back("example.com/new");
  CHECK_THROWS_AS(store.update(pods(), "default", "f", body, Subresource::kNone), ApiError);
  body["metadata"]["finalizers"] = json::array();
  store.update(pods(), "default", "f", body, Subresource::kNone);
  CHECK(store.objectCount(pods()) == 0);
  CHECK(sink->types() == std::vector<std::string>{"ADDED", "MODIFIED", "DELETED"});
}

TEST_CASE_METHOD(Fixture, "ownerReferences: background GC deletes orphans, keeps multi-owned",
                 "[store][gc]") {
  auto cms = res("", "v1", "configmaps");
  json cm = {{"metadata", {{"name", "owner"}}}};
  auto owner = store.create(cms, "default", cm);
  cm["metadata"]["name"] = "other";
  auto other = store.create(cms, "default", cm);
  store.create(pods(), "default", PodBuilder("only").owner(owner->uid));
  store.create(pods(), "default", PodBuilder("both").owner(owner->uid).owner(other->uid));
  auto policy = GENERATE(as<std::string>{}, "", "Background", "Foreground", "Orphan");
  CAPTURE(policy);
  DeleteOptions opts;
  opts.propagationPolicy = policy;
  store.remove(cms, "default", "owner", opts);
  CHECK(store.objectCount(cms) == 1);
  if (policy == "Orphan") {
    CHECK(store.objectCount(pods()) == 2);
    CHECK_FALSE(
        store.get(pods(), "default", "only")->object["metadata"].contains("ownerReferences"));
  } else {
    CHECK(store.objectCount(pods()) == 1);
    auto both = store.get(pods(), "default", "both");
    CHECK(both->object["metadata"]["ownerReferences"].size() == 1);
  }
}

TEST_CASE_METHOD(Fixture, "pods/binding follows the real rules", "[store][binding]") {
  auto p = store.create(pods(), "default", PodBuilder("p"));
  json binding = {{"metadata", {{"name", "p"}, {"annotations", {{"kubecomp.io/x", "1"}}}}},
                  {"target", {{"kind", "Node"}, {"name", "n1"}}}};
  SECTION("binds, merges annotations, sets PodScheduled") {
    store.bindPod("default", "p", binding);
    auto bound = store.get(pods(), "default", "p");
    CHECK(bound->object["spec"]["nodeName"] == "n1");
    CHECK(bound->object["metadata"]["annotations"]["kubecomp.io/x"] == "1");
    CHECK(bound->object["status"]["conditions"][0]["type"] == "PodScheduled");
    CHECK(bound->object["status"]["conditions"][0]["status"] == "True");
    try {
      store.bindPod("default", "p", binding);
      FAIL("expected a conflict");
    } catch (const ApiError& e) {
      CHECK(e.code() == 409);
      CHECK(std::string(e.what()) ==
            "Operation cannot be fulfilled on pods/binding \"p\": pod p is already assigned to "
            "node \"n1\"");
    }
  }
  SECTION("a uid precondition from a recreated pod conflicts") {
    binding["metadata"]["uid"] = "00000000-0000-4000-8000-000000000000";
    CHECK_THROWS_MATCHES(
        store.bindPod("default", "p", binding), ApiError,
        Catch::Predicate<ApiError>([](const ApiError& e) { return e.code() == 409; }));
  }
  SECTION("a pod being deleted cannot be bound") {
    json body = p->object;
    body["metadata"]["finalizers"] = {"x/y"};
    store.update(pods(), "default", "p", body, Subresource::kNone);
    store.remove(pods(), "default", "p", {});
    try {
      store.bindPod("default", "p", binding);
      FAIL("expected a conflict");
    } catch (const ApiError& e) {
      CHECK(std::string(e.what()).find("is being deleted, cannot be assigned to a host") !=
            std::string::npos);
    }
  }
  SECTION("missing pod is 404") {
    CHECK_THROWS_MATCHES(
        store.bindPod("default", "zz", binding), ApiError,
        Catch::Predicate<ApiError>([](const ApiError& e) { return e.code() == 404; }));
  }
  SECTION("spec.nodeName cannot change through update") {
    json body = p->object;
    body["spec"]["nodeName"] = "n2";
    CHECK_THROWS_AS(store.update(pods(), "default", "p", body, Subresource::kNone), ApiError);
  }
}

TEST_CASE_METHOD(Fixture, "a CRD registers its resource, deleting it removes resource and objects",
                 "[store][crd]") {
  auto crds = res("apiextensions.k8s.io", "v1", "customresourcedefinitions");
  json crd =
      json::parse(R"({"metadata":{"name":"gpupools.kubecomp.io"},"spec":{"group":"kubecomp.io",
    "names":{"plural":"gpupools","singular":"gpupool","kind":"GPUPool","shortNames":["gp"]},"scope":"Cluster",
    "versions":[{"name":"v1alpha1","served":true,"storage":true,"subresources":{"status":{}},
                 "schema":{"openAPIV3Schema":{"type":"object"}}}]}})");
  auto created = store.create(crds, "", crd);
  CHECK(created->object["status"]["conditions"][1]["type"] == "Established");
  auto pools = store.findResource("kubecomp.io", "v1alpha1", "gpupools");
  REQUIRE(pools.has_value());
  CHECK_FALSE(pools->namespaced);
  CHECK(pools->hasStatus);
  auto doc = store.resourceList("kubecomp.io", "v1alpha1");
  REQUIRE(doc.has_value());
  CHECK((*doc)["resources"][0]["shortNames"][0] == "gp");
  store.create(*pools, "",
               {{"apiVersion", "kubecomp.io/v1alpha1"},
                {"kind", "GPUPool"},
                {"metadata", {{"name", "p1"}}}});
  // A custom resource needs the resourceVersion on update.
  json body = store.get(*pools, "", "p1")->object;
  body["metadata"].erase("resourceVersion");
  CHECK_THROWS_MATCHES(
      store.update(*pools, "", "p1", body, Subresource::kNone), ApiError,
      Catch::Predicate<ApiError>([](const ApiError& e) { return e.code() == 422; }));
  store.remove(crds, "", "gpupools.kubecomp.io", {});
  CHECK_FALSE(store.findResource("kubecomp.io", "v1alpha1", "gpupools").has_value());
  CHECK_FALSE(store.resourceList("kubecomp.io", "v1alpha1").has_value());
  // A CRD whose name does not match plural.group is invalid.
  crd["metadata"]["name"] = "wrong.kubecomp.io";
  CHECK_THROWS_MATCHES(
      store.create(crds, "", crd), ApiError,
      Catch::Predicate<ApiError>([](const ApiError& e) { return e.code() == 422; }));
}

TEST_CASE_METHOD(Fixture, "deleting a namespace deletes its content and blocks new content",
                 "[store]") {
  auto nss = res("", "v1", "namespaces");
  store.create(nss, "", {{"metadata", {{"name", "team"}}}});
  store.create(pods(), "team", PodBuilder("a"));
  store.create(pods(), "team", PodBuilder("held").finalizer("x/y"));
  auto r = store.remove(nss, "", "team", {});
  CHECK_FALSE(r.deletedNow);
  CHECK(store.get(nss, "", "team")->object["status"]["phase"] == "Terminating");
  CHECK_THROWS_MATCHES(
      store.create(pods(), "team", PodBuilder("new")), ApiError,
      Catch::Predicate<ApiError>([](const ApiError& e) { return e.code() == 403; }));
  json held = store.get(pods(), "team", "held")->object;
  held["metadata"].erase("finalizers");
  store.update(pods(), "team", "held", held, Subresource::kNone);
  CHECK_THROWS_AS(store.get(nss, "", "team"), ApiError);
}

TEST_CASE_METHOD(Fixture, "ownerReferences naming a missing owner uid: the dependent is collected",
                 "[store][gc]") {
  auto cms = res("", "v1", "configmaps");
  auto live = store.create(cms, "default", json{{"metadata", {{"name", "live"}}}});
  auto sink = std::make_shared<RecordingSink>();
  WatchOptions wo;
  wo.ns = "default";
  wo.resourceVersion = std::to_string(rvOf(live));
  store.watch(pods(), wo, sink);

  // Never-existing owner: the create answers the object, then background GC deletes it.
  auto orphan = store.create(pods(), "default", PodBuilder("orphan").owner("no-such-uid"));
  CHECK(orphan->name == "orphan");
  CHECK_THROWS_AS(store.get(pods(), "default", "orphan"), ApiError);
  CHECK(sink->types() == std::vector<std::string>{"ADDED", "DELETED"});

  // One live owner and one missing: kept, the dangling reference is dropped.
  store.create(pods(), "default", PodBuilder("mixed").owner(live->uid).owner("gone-uid"));
  auto mixed = store.get(pods(), "default", "mixed");
  REQUIRE(mixed->object["metadata"]["ownerReferences"].size() == 1);
  CHECK(mixed->object["metadata"]["ownerReferences"][0]["uid"] == live->uid);

  // An update that points a dependent at an owner that is already gone.
  auto keep = store.create(pods(), "default", PodBuilder("kept"));
  json body = keep->object;
  body["metadata"]["ownerReferences"] = json::array(
      {{{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"name", "x"}, {"uid", "deleted-uid"}}});
  store.update(pods(), "default", "kept", body, Subresource::kNone);
  CHECK_THROWS_AS(store.get(pods(), "default", "kept"), ApiError);
  CHECK(store.objectCount(pods()) == 1);  // only "mixed"
}

TEST_CASE_METHOD(Fixture, "a Secret's stringData is stored as base64 data, as the API server does",
                 "[store]") {
  const auto secrets = res("", "v1", "secrets");
  json body = {{"apiVersion", "v1"},
               {"kind", "Secret"},
               {"metadata", {{"name", "login"}}},
               {"data", {{"token", "b2xk"}, {"username", "aWdub3JlZA=="}}},
               {"stringData", {{"username", "kubecomp"}, {"password", "pa:ss"}}}};
  auto s = store.create(secrets, "default", body);
  CHECK(!s->object.contains("stringData"));
  CHECK(s->object["type"] == "Opaque");
  CHECK(s->object["data"] ==
        json({{"token", "b2xk"}, {"username", "a3ViZWNvbXA="}, {"password", "cGE6c3M="}}));
  // An update with stringData merges the same way; the stored object never shows stringData.
  json next = s->object;
  next["stringData"] = {{"token", "new"}};
  auto u = store.update(secrets, "default", "login", next, Subresource::kNone);
  CHECK(!u->object.contains("stringData"));
  CHECK(u->object["data"]["token"] == "bmV3");
  CHECK(u->object["data"]["username"] == "a3ViZWNvbXA=");
}
