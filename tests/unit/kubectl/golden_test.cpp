// Every kubectl-kubecomp command through its command line (run(), as main() calls it) on the
// recorded cluster of cluster.json at a fixed time, against golden/<case>.txt: exit code,
// stdout and stderr. KC_UPDATE_GOLDEN=1 rewrites the files (review the diff before keeping it).

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "libcore/base/rfc3339.hpp"
#include "libcore/base/yaml_json.hpp"
#include "tests/unit/kubectl/fake_cluster.hpp"
#include "tools/kubectl-kubecomp/cli.hpp"

using kc::kubectl::testing::FakeCluster;
using nlohmann::json;

namespace {

json fixture() {
  std::ifstream in(KC_KUBECTL_FIXTURE);
  return json::parse(in);
}

struct Outcome {
  int exit = 0;
  std::string out;
  std::string err;
  std::string text() const {
    return "exit: " + std::to_string(exit) + "\n--- stdout\n" + out + "--- stderr\n" + err;
  }
};

// Runs the command line on `cluster` (which run() borrows) at 2026-11-28T12:00:00Z.
Outcome runOn(FakeCluster& cluster, std::vector<std::string> args) {
  std::ostringstream out;
  std::ostringstream err;
  kc::kubectl::Runtime rt{
      out, err, [](const std::string&) -> std::optional<std::string> { return std::nullopt; },
      [&cluster](const kc::kubectl::ConnectionOptions&,
                 const kc::kube::EnvLookup&) -> kc::Result<std::unique_ptr<kc::kubectl::Cluster>> {
        // A non-owning handle on the test's cluster.
        struct Borrowed final : kc::kubectl::Cluster {
          explicit Borrowed(FakeCluster& c) : c(c) {}
          FakeCluster& c;
          kc::kube::ApiResult<kc::kube::ObjectList> list(const kc::kube::GroupVersionResource& r,
                                                         const std::string& ns,
                                                         const kc::kube::ListOptions& o) override {
            return c.list(r, ns, o);
          }
          kc::kube::ApiResult<json> get(const kc::kube::GroupVersionResource& r,
                                        const std::string& ns, const std::string& n) override {
            return c.get(r, ns, n);
          }
          kc::kube::ApiResult<json> updateStatus(const kc::kube::GroupVersionResource& r,
                                                 const json& o) override {
            return c.updateStatus(r, o);
          }
          kc::kube::ApiResult<json> create(const kc::kube::GroupVersionResource& r,
                                           const std::string& ns, const json& o) override {
            return c.create(r, ns, o);
          }
          kc::kube::ApiStatus watch(const kc::kube::GroupVersionResource& r, const std::string& ns,
                                    const kc::kube::ListOptions& o,
                                    const std::function<bool(kc::kube::WatchEvent&&)>& f) override {
            return c.watch(r, ns, o, f);
          }
          std::string server() const override { return c.server(); }
          std::string defaultNamespace() const override { return c.defaultNamespace(); }
        };
        return std::unique_ptr<kc::kubectl::Cluster>(std::make_unique<Borrowed>(cluster));
      },
      [] { return *kc::parseRfc3339("2026-11-28T12:00:00Z"); }};
  std::vector<const char*> argv{"kubectl-kubecomp"};
  for (const auto& a : args) {
    argv.push_back(a.c_str());
  }
  Outcome o;
  o.exit = kc::kubectl::run(static_cast<int>(argv.size()), argv.data(), rt);
  o.out = out.str();
  o.err = err.str();
  return o;
}

void checkGolden(const std::string& name, const Outcome& o) {
  const std::string path = std::string(KC_KUBECTL_GOLDEN_DIR) + "/" + name + ".txt";
  if (std::getenv("KC_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(path) << o.text();
  }
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream want;
  want << in.rdbuf();
  CAPTURE(name);
  CHECK(o.text() == want.str());
}

kc::kube::ApiError apiError(int code, const std::string& reason, const std::string& message) {
  kc::kube::ApiError e;
  e.httpCode = code;
  e.reason = reason;
  e.message = message;
  return e;
}

json poolWithMove(const std::string& phase, const std::string& since, const std::string& rv) {
  json pool = fixture()["gpupools"][0];
  pool["metadata"]["resourceVersion"] = rv;
  pool["status"]["moves"][0]["phase"] = phase;
  pool["status"]["moves"][0]["phaseSince"] = since;
  return pool;
}

}  // namespace

TEST_CASE("every command prints what its golden file holds") {
  const auto [name, args] = GENERATE(table<std::string, std::vector<std::string>>({
      {"pools", {"pools"}},
      {"pools-wide", {"pools", "-o", "wide"}},
      {"pools-json", {"pools", "-o", "json"}},
      {"pools-yaml", {"pools", "-o", "yaml"}},
      {"moves", {"moves"}},
      {"moves-pool-wide", {"moves", "--pool", "pool-b", "-o", "wide"}},
      {"moves-unknown-pool", {"moves", "--pool", "nope"}},
      {"pending", {"pending"}},
      {"pending-all-namespaces", {"pending", "-A", "-o", "wide"}},
      {"pending-team-b", {"-n", "team-b", "pending"}},
      {"vnis-all-namespaces", {"vnis", "-A"}},
      {"vnis-json", {"vnis", "--namespace=team-b", "-o", "json"}},
      {"rt", {"rt", "host01"}},
      {"rt-json", {"rt", "host01", "-o", "json"}},
      {"rt-not-capable", {"rt", "host02"}},
      {"rt-malformed", {"rt", "host04"}},
      {"rt-no-node", {"rt", "host09"}},
      {"bridgejobs-wide", {"bridgejobs", "-o", "wide"}},
      {"claims-all-namespaces", {"claims", "-A", "-o", "wide"}},
      {"claims-yaml", {"claims", "-o", "yaml"}},
      {"completion-words", {"__complete", "mo"}},
  }));
  FakeCluster cluster(fixture());
  checkGolden(name, runOn(cluster, args));
}

TEST_CASE("-o json and -o yaml carry the same items, and JSON parses") {
  for (const char* cmd : {"pools", "moves", "pending", "vnis", "bridgejobs", "claims"}) {
    FakeCluster cluster(fixture());
    const auto j = runOn(cluster, {cmd, "-A", "-o", "json"});
    const auto y = runOn(cluster, {cmd, "-A", "-o", "yaml"});
    CAPTURE(cmd, j.out, y.out);
    REQUIRE(j.exit == 0);
    REQUIRE(y.exit == 0);
    const json parsed = json::parse(j.out);
    CHECK(parsed["items"].is_array());
    CHECK(!parsed["items"].empty());
    auto fromYaml = kc::yamlToJson(y.out);
    REQUIRE(fromYaml.ok());
    CHECK(*fromYaml == parsed);
  }
}

TEST_CASE("the CRDs not installed and access denied are clear errors with exit code 1") {
  const auto [resource, code, args,
              wanted] = GENERATE(table<std::string, int, std::vector<std::string>, std::string>({
      {"gpupools",
       404,
       {"pools"},
       "does not serve gpupools.kubecomp.io/v1alpha1 (404 Not Found); install the kubecomp CRDs"},
      {"gpupools", 404, {"moves", "-w"}, "install the kubecomp CRDs"},
      {"vnis", 404, {"vnis"}, "does not serve vnis.kubecomp.io/v1"},
      {"bridgejobs", 404, {"bridgejobs"}, "does not serve bridgejobs.bridge.kubecomp.io"},
      {"resourceclaims", 404, {"claims"}, "no Dynamic Resource Allocation API v1"},
      {"gpupools",
       403,
       {"pools"},
       "access denied (403 Forbidden): denied by the test (needs "
       "RBAC permission to list gpupools.kubecomp.io)"},
      {"pods", 403, {"pending"}, "needs RBAC permission to list pods"},
      {"gpupools",
       401,
       {"gpu", "quarantine", "c0.02", "--reason", "x"},
       "refused the credentials (401 Unauthorized)"},
      {"nodes", 0, {"rt", "host01"}, "cannot reach the API server at https://fake.test:6443"},
  }));
  FakeCluster cluster(fixture());
  const std::string reason = code == 404   ? "NotFound"
                             : code == 403 ? "Forbidden"
                                           : (code == 401 ? "Unauthorized" : "");
  cluster.errors[resource] = apiError(
      code, reason,
      code == 404 ? "the server could not find the requested resource" : "denied by the test");
  const auto o = runOn(cluster, args);
  CAPTURE(o.err);
  CHECK(o.exit == 1);
  CHECK(o.out.empty());
  CHECK(o.err.find(wanted) != std::string::npos);
  CHECK(cluster.statusWrites.empty());
}

TEST_CASE("bad arguments exit 2 and call nothing") {
  const auto args =
      GENERATE(as<std::vector<std::string>>{}, std::vector<std::string>{},
               std::vector<std::string>{"pools", "-o", "xml"},
               std::vector<std::string>{"pools", "--no-such-flag"},
               std::vector<std::string>{"pending", "-n", "a", "-A"},
               std::vector<std::string>{"pending", "-n", "a/b"}, std::vector<std::string>{"rt"},
               std::vector<std::string>{"frobnicate"},
               std::vector<std::string>{"gpu", "quarantine", "c0.02"},
               std::vector<std::string>{"gpu", "quarantine", "bad id", "--reason", "r"},
               std::vector<std::string>{"moves", "--watch-timeout", "soon"},
               std::vector<std::string>{"completion", "fish"});
  FakeCluster cluster(fixture());
  const auto o = runOn(cluster, args);
  CAPTURE(args, o.err);
  CHECK(o.exit == 2);
  CHECK(!o.err.empty());
  CHECK(cluster.statusWrites.empty());
  CHECK(cluster.created.empty());
}

TEST_CASE("gpu quarantine and release write status.quarantine and record an Event") {
  FakeCluster cluster(fixture());
  auto q = runOn(cluster, {"gpu", "quarantine", "c0.02", "--reason", "fan failure"});
  CAPTURE(q.err);
  REQUIRE(q.exit == 0);
  CHECK(q.out == "GPU c0.02 of pool pool-a quarantined: fan failure\n");
  REQUIRE(cluster.statusWrites.size() == 1);
  const json written = cluster.statusWrites[0]["status"]["quarantine"];
  CHECK(written ==
        json::parse(R"([{"gpu":"c1.03","reason":"detach reported done but the GPU stayed on c1/2"},
                                   {"gpu":"c0.02","reason":"fan failure"}])"));
  REQUIRE(cluster.created.size() == 1);
  CHECK(cluster.created[0]["reason"] == "GPUQuarantined");
  CHECK(cluster.created[0]["involvedObject"]["name"] == "pool-a");
  CHECK(cluster.created[0]["involvedObject"]["kind"] == "GPUPool");
  CHECK(cluster.created[0]["message"] == "GPU c0.02 quarantined by an operator: fan failure");

  // Again: nothing to change.
  auto again = runOn(cluster, {"gpu", "quarantine", "c0.02", "--pool", "pool-a", "--reason", "x"});
  CHECK(again.exit == 0);
  CHECK(again.out == "GPU c0.02 of pool pool-a is already quarantined: fan failure\n");
  CHECK(cluster.statusWrites.size() == 1);

  // The one reconfig-mgr set, released; a write that meets a newer object reads it again.
  cluster.conflictsToAnswer = 1;
  auto r = runOn(cluster, {"gpu", "release", "c1.03", "--reason", "chassis firmware fixed"});
  CAPTURE(r.err);
  REQUIRE(r.exit == 0);
  CHECK(r.out == "GPU c1.03 of pool pool-a released: chassis firmware fixed\n");
  REQUIRE(cluster.statusWrites.size() == 2);
  CHECK(cluster.statusWrites[1]["status"]["quarantine"] ==
        json::parse(R"([{"gpu":"c0.02","reason":"fan failure"}])"));
  CHECK(cluster.created.back()["reason"] == "GPUQuarantineReleased");
  CHECK(cluster.created.back()["type"] == "Normal");

  auto notQ = runOn(cluster, {"gpu", "release", "c0.01", "--reason", "x"});
  CHECK(notQ.exit == 0);
  CHECK(notQ.out == "GPU c0.01 of pool pool-a is not quarantined\n");

  auto unknown = runOn(cluster, {"gpu", "quarantine", "c9.99", "--reason", "x"});
  CHECK(unknown.exit == 1);
  CHECK(unknown.err == "error: no GPUPool lists GPU c9.99\n");
  auto wrongPool =
      runOn(cluster, {"gpu", "quarantine", "c0.01", "--pool", "pool-b", "--reason", "x"});
  CHECK(wrongPool.exit == 1);
  CHECK(wrongPool.err ==
        "error: GPUPool pool-b has no GPU c0.01 (kubectl kubecomp pools lists its GPUs)\n");
  auto noPool = runOn(cluster, {"gpu", "quarantine", "c0.01", "--pool", "pool-z", "--reason", "x"});
  CHECK(noPool.exit == 1);
  CHECK(noPool.err == "error: GPUPool \"pool-z\" not found\n");
  CHECK(cluster.statusWrites.size() == 2);
}

TEST_CASE("moves --watch prints each phase change with the time the phase took") {
  FakeCluster cluster(fixture());
  // The move of c0.06 goes Detaching (since 11:59:45) -> Attaching at 12:00:09 -> Verifying at
  // 12:00:12; an unrelated change of pool-b (no phase change) prints nothing; a new move starts.
  json newMove = poolWithMove("Verifying", "2026-11-28T12:00:12Z", "304");
  newMove["status"]["moves"].insert(newMove["status"]["moves"].begin(),
                                    json{{"gpu", "c0.02"},
                                         {"fromNode", "host01"},
                                         {"fromHost", "c0/1"},
                                         {"toNode", "host02"},
                                         {"toHost", "c0/2"},
                                         {"pod", "default/small"},
                                         {"phase", "Draining"},
                                         {"startedAt", "2026-11-28T12:00:13Z"},
                                         {"phaseSince", "2026-11-28T12:00:13Z"},
                                         {"message", ""}});
  json poolB = fixture()["gpupools"][1];
  poolB["metadata"]["resourceVersion"] = "302";
  cluster.watches.push_back({
      {"MODIFIED", poolWithMove("Attaching", "2026-11-28T12:00:09Z", "301")},
      {"MODIFIED", poolB},
      {"BOOKMARK", {{"kind", "GPUPool"}, {"metadata", {{"resourceVersion", "303"}}}}},
  });
  cluster.watches.push_back({
      {"MODIFIED", poolWithMove("Verifying", "2026-11-28T12:00:12Z", "304")},
      {"MODIFIED", newMove},
      {"MODIFIED", poolWithMove("Succeeded", "2026-11-28T12:00:20Z", "305")},
  });
  const auto o = runOn(cluster, {"moves", "--pool", "pool-a", "--watch", "--max-changes", "3"});
  checkGolden("moves-watch", o);
  // The second watch resumed from the last resourceVersion seen (the bookmark's); the fourth
  // change (Succeeded) was never taken.
  CHECK(cluster.calls == std::vector<std::string>{"list gpupools ns=", "watch gpupools ns= rv=200",
                                                  "watch gpupools ns= rv=303"});

  FakeCluster jsonCluster(fixture());
  jsonCluster.watches.push_back(
      {{"MODIFIED", poolWithMove("Attaching", "2026-11-28T12:00:09Z", "301")}});
  const auto j = runOn(jsonCluster, {"moves", "-w", "--max-changes=1", "-o", "json"});
  REQUIRE(j.exit == 0);
  // The journal document, then one JSON object per change.
  const auto split = j.out.rfind("\n{");
  REQUIRE(split != std::string::npos);
  CHECK(json::parse(j.out.substr(0, split))["kind"] == "MoveList");
  const json change = json::parse(j.out.substr(split + 1));
  CHECK(change["fromPhase"] == "Detaching");
  CHECK(change["toPhase"] == "Attaching");
  CHECK(change["fromPhaseSeconds"] == 24);
  CHECK(change["record"]["gpu"] == "c0.06");
}

TEST_CASE("moves --watch lists again after its watch expired and reports what changed") {
  FakeCluster cluster(fixture());
  json expired = {{"kind", "Status"},    {"apiVersion", "v1"},
                  {"status", "Failure"}, {"code", 410},
                  {"reason", "Expired"}, {"message", "too old resource version"}};
  cluster.watches.push_back({{"ERROR", expired}});
  // The relist sees the fixture as it is: nothing changed, so nothing is printed, and the next
  // watch (which delivers one change) runs from the relist's resourceVersion.
  cluster.watches.push_back(
      {{"MODIFIED", poolWithMove("Attaching", "2026-11-28T12:00:09Z", "301")}});
  const auto o = runOn(cluster, {"moves", "-w", "--max-changes", "1", "--pool", "pool-a"});
  CAPTURE(o.err);
  CHECK(o.exit == 0);
  CHECK(o.out.find("c0.06  default/big -> host01  Detaching -> Attaching (Detaching took 24s)") !=
        std::string::npos);
  CHECK(cluster.calls ==
        std::vector<std::string>{"list gpupools ns=", "watch gpupools ns= rv=200",
                                 "list gpupools ns=", "watch gpupools ns= rv=200"});
}

TEST_CASE("completion: commands, flags and -o values") {
  using kc::kubectl::completeWords;
  const auto [words, want] = GENERATE(table<std::vector<std::string>, std::string>({
      {{""}, "pools\nmoves\npending\ngpu\nvnis\nrt\nbridgejobs\nclaims\ncompletion\n:4\n"},
      {{"p"}, "pools\npending\n:4\n"},
      {{"gpu", ""}, "quarantine\nrelease\n:4\n"},
      {{"gpu", "quarantine", "c0.1", "--r"}, "--reason\n--request-timeout\n:4\n"},
      {{"moves", "--w"}, "--watch\n--watch-timeout\n:4\n"},
      {{"pools", "-o", ""}, "table\nwide\njson\nyaml\n:4\n"},
      {{"-n", "pools", "p"}, "pools\npending\n:4\n"},  // "pools" is -n's value
      {{"completion", ""}, "bash\nzsh\n:4\n"},
  }));
  CAPTURE(words);
  CHECK(completeWords(words) == want);
  CHECK(!kc::kubectl::completionScript("bash").empty());
  CHECK(kc::kubectl::completionScript("fish").empty());
}
