#pragma once
// What every bridge pod end-to-end test needs: the API server double with the BridgeJob CRD,
// a BridgeJob stored there, the bridge-operator's hook decision for it applied (its ConfigMap
// created as Metacontroller would), the bridge-pod program started with the env of the pod the
// operator asked for, npm's s3rver as the S3 endpoint, and the operator's status for the job
// once the pod wrote its keys.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "libcore/kube/client.hpp"
#include "services/bridge-pod/s3_client.hpp"
#include "tests/services/bridge-operator/hook_request_builder.hpp"
#include "tests/services/bridge-pod/local_jobs.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/manifests.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wait.hpp"
#include "tests/unit/kube/double_process.hpp"

namespace kc::bridge::testing {

inline const kube::GroupVersionResource kBridgeJobs{"bridge.kubecomp.io", "v1alpha1", "bridgejobs",
                                                    true};
inline const kube::GroupVersionResource kNamespacesGvr{"", "v1", "namespaces", false};
inline const kube::GroupVersionResource kConfigMapsGvr{"", "v1", "configmaps", true};

// Someone listens on the loopback port. Only meaningful for ports freePort() gives (below the
// ephemeral range): a connect() to a port inside it with nobody listening can connect to
// itself and would answer true, taking the port from the server meant to bind it.
inline bool portOpen(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const sockaddr_in a = loopback(port);
  const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// npm's s3rver (installed by tools/setup-deps.sh), one bucket configured.
class S3Server {
 public:
  S3Server(const std::string& dir, const std::string& bucket) : dir_(dir), port_(freePort()) {
    const char* prefix = std::getenv("KC_NPM_PREFIX");
    const std::string root =
        prefix != nullptr ? prefix : std::string(std::getenv("HOME")) + "/.cache/kubecomp/npm";
    const std::string exe = root + "/node_modules/.bin/s3rver";
    if (!std::filesystem::exists(exe)) {
      FAIL("s3rver not installed at " << exe << " (run tools/setup-deps.sh)");
    }
    std::filesystem::create_directories(dir);
    child_ = std::make_unique<kc::testing::ChildProcess>(
        std::vector<std::string>{exe, "-d", dir, "-a", "127.0.0.1", "-p", std::to_string(port_),
                                 "--configure-bucket", bucket, "--silent"});
    child_->waitUntil([&] { return portOpen(port_); }, std::chrono::seconds(30), "s3rver port");
  }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }
  // The bytes s3rver stored for bucket/key (it keeps objects as files).
  std::string object(const std::string& bucket, const std::string& key) const {
    const std::string p = dir_ + "/" + bucket + "/" + key + "._S3rver_object";
    return std::filesystem::exists(p) ? kc::testing::readFile(p) : std::string("<absent>");
  }

 private:
  std::string dir_;
  std::uint16_t port_;
  std::unique_ptr<kc::testing::ChildProcess> child_;
};

// The API server double with the CRD and a namespace, and the operator's decision applied.
class BridgeApi {
 public:
  explicit BridgeApi(const std::string& dir) : apiserver_(KC_APISERVER_DOUBLE_EXE, dir) {
    kube::KubeClientOptions o;
    o.qps = 0;
    auto c = kube::KubeClient::create(apiserver_.config(), o);
    REQUIRE(c.ok());
    kube_ = std::move(c).value();
    kc::testing::installCrd(
        *kube_,
        kc::testing::loadYamlFile(std::string(KC_SOURCE_DIR) +
                                  "/charts/kubecomp/crds/bridgejobs.bridge.kubecomp.io.yaml"));
    REQUIRE(
        kube_
            ->create(kNamespacesGvr, "",
                     {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}})
            .ok());
  }

  kube::KubeClient& kube() { return *kube_; }
  const std::string& kubeconfig() const { return apiserver_.kubeconfigPath(); }

  // Stores BridgeJob `name` with `spec`, runs the operator's first sync on it and creates the
  // ConfigMap it returns; the env of the pod it returns (name=value).
  std::vector<std::string> start(const std::string& name, const nlohmann::json& spec) {
    nlohmann::json job{{"apiVersion", "bridge.kubecomp.io/v1alpha1"},
                       {"kind", "BridgeJob"},
                       {"metadata", {{"name", name}, {"namespace", ns}}},
                       {"spec", spec}};
    auto stored = kube_->create(kBridgeJobs, ns, job);
    REQUIRE(stored.ok());
    builder_.name = name;
    builder_.ns = ns;
    builder_.uid = (*stored)["metadata"]["uid"];
    builder_.spec = (*stored)["spec"];
    builder_.version = metacontroller::HookVersion::kV2;
    Desired d = run(builder_);
    const nlohmann::json* cm = findChild(d, "ConfigMap", name + "-bridge");
    REQUIRE(cm != nullptr);
    nlohmann::json child = *cm;
    child["metadata"]["namespace"] = ns;
    REQUIRE(kube_->create(kConfigMapsGvr, ns, child).ok());
    const nlohmann::json* pod = findChild(d, "Pod", name + "-bridge-0");
    REQUIRE(pod != nullptr);
    std::vector<std::string> env;
    for (const auto& e : (*pod)["spec"]["containers"][0]["env"]) {
      if (e.contains("value")) {
        env.push_back(e["name"].get<std::string>() + "=" + e["value"].get<std::string>());
      }
    }
    env.push_back("BRIDGE_NAMESPACE=" + ns);  // the downward API's value
    return env;
  }

  const std::string& uid() const { return builder_.uid; }

  std::map<std::string, std::string> data(const std::string& name) {
    auto cm = kube_->get(kConfigMapsGvr, ns, name + "-bridge");
    REQUIRE(cm.ok());
    return (*cm)["data"].get<std::map<std::string, std::string>>();
  }
  std::string value(const std::string& name, const std::string& key) {
    auto d = data(name);
    auto it = d.find(key);
    return it == d.end() ? "<absent>" : it->second;
  }
  // Read, change, update; on 409 read again, as any writer of the ConfigMap must: the pod
  // writes it too, and even a pod just SIGKILLed may have a PUT in flight that the API server
  // applies after the kill (between this GET and PUT). Under load that window is wide.
  void set(const std::string& name, const std::map<std::string, std::optional<std::string>>& keys) {
    for (int attempt = 0;; ++attempt) {
      auto cm = kube_->get(kConfigMapsGvr, ns, name + "-bridge");
      REQUIRE(cm.ok());
      nlohmann::json u = *cm;
      for (const auto& [k, v] : keys) {
        if (v) {
          u["data"][k] = *v;
        } else {
          u["data"].erase(k);
        }
      }
      auto updated = kube_->update(kConfigMapsGvr, ns, u);
      if (updated.ok()) {
        return;
      }
      INFO(updated.error().message);
      REQUIRE(updated.error().isConflict());
      REQUIRE(attempt < 20);
    }
  }

  // spec.kill = true through the operator: its decision puts kill into the ConfigMap, applied
  // the way Metacontroller applies an in-place update (the pod's keys kept).
  void kill(const std::string& name) {
    RequestBuilder b = builder_;
    b.spec["kill"] = true;
    b.configMap = data(name);
    b.pods = {PodState{0, "Running", false}};
    Desired d = run(b);
    const nlohmann::json* cm = findChild(d, "ConfigMap", name + "-bridge");
    REQUIRE(cm != nullptr);
    REQUIRE((*cm)["data"].value("kill", "") == "true");
    set(name, {{"kill", std::string("true")}});
  }

  // The BridgeJob status the operator computes from the ConfigMap now (pod `phase`).
  nlohmann::json operatorStatus(const std::string& name, const std::string& phase) {
    RequestBuilder b = builder_;
    b.configMap = data(name);
    b.pods = {PodState{0, phase, false}};
    b.status = nlohmann::json{{"attempts", 1}};
    return run(b).status;
  }

  const std::string ns = "hpc";

 private:
  kube::testing::DoubleProcess apiserver_;
  std::unique_ptr<kube::KubeClient> kube_;
  RequestBuilder builder_;
};

// The bridge-pod binary with the env of the operator's pod (`podEnv`), the Secret mounts
// replaced by directories of the test, short backoff.
inline std::unique_ptr<kc::testing::ChildProcess> startBridgePod(
    const std::string& backend, const std::vector<std::string>& podEnv,
    const std::string& kubeconfig, const std::string& creds, const std::string& s3creds,
    std::vector<std::string> extraArgs = {}) {
  std::vector<std::string> e;
  for (const std::string& v : podEnv) {
    if (v.rfind("BRIDGE_CREDENTIALS_DIR=", 0) != 0 &&
        v.rfind("BRIDGE_S3_CREDENTIALS_DIR=", 0) != 0) {
      e.push_back(v);
    }
  }
  e.push_back("BRIDGE_BACKEND=" + backend);
  e.push_back("KUBERNETES_SERVICE_HOST");  // not in a cluster: KUBECONFIG
  e.push_back("KUBECONFIG=" + kubeconfig);
  e.push_back("BRIDGE_CREDENTIALS_DIR=" + creds);
  e.push_back("BRIDGE_S3_CREDENTIALS_DIR=" + s3creds);
  std::vector<std::string> argv{BRIDGE_POD_BIN, "--backoff-initial-ms", "200", "--backoff-max-ms",
                                "1000"};
  argv.insert(argv.end(), extraArgs.begin(), extraArgs.end());
  return std::make_unique<kc::testing::ChildProcess>(argv, kc::testing::ChildOutput::kInherit, e);
}

// What the backends' tests share: a scratch dir, the API double, s3rver with bucket `results`,
// the two Secret directories (S3: s3rver's default keys).
struct BridgeWorld {
  kc::testing::TempDir dir;
  S3Server s3{dir.file("s3"), "results"};
  BridgeApi api{dir.path().string()};
  std::string creds = dir.file("creds");
  std::string s3creds = dir.file("s3creds");

  BridgeWorld() {
    std::filesystem::create_directories(creds);
    std::filesystem::create_directories(s3creds);
    dir.write("s3creds/accesskey", "S3RVER");
    dir.write("s3creds/secretkey", "S3RVER");
  }
  nlohmann::json s3Spec() const {
    return {{"s3secret", "s3-credentials"}, {"endpoint", s3.endpoint()}, {"secure", false}};
  }
  // Puts an object into s3rver through the pod's own S3 client (an input the job reads).
  void putS3(const std::string& bucket, const std::string& key, const std::string& bytes) const {
    kc::bridge::pod::S3Options o;
    o.endpoint = s3.endpoint();
    o.secure = false;
    o.credentialsDir = s3creds;
    auto client = kc::bridge::pod::S3Client::create(o);
    REQUIRE(client.ok());
    auto put = (*client)->putObject(bucket, key, bytes);
    INFO((put.ok() ? std::string() : put.error().message));
    REQUIRE(put.ok());
  }
  std::unique_ptr<kc::testing::ChildProcess> pod(const std::string& backend,
                                                 const std::vector<std::string>& env,
                                                 std::vector<std::string> extraArgs = {}) {
    return startBridgePod(backend, env, api.kubeconfig(), creds, s3creds, std::move(extraArgs));
  }
};

// The scenarios every backend goes through, on any backend: how to start its pod, count the
// remote jobs made for this BridgeJob, and take its service away and back; for a backend with
// log-on sessions (LSF), how many were opened and never logged out (each scenario checks that
// its pods leave none, but for the ones SIGKILL takes: a killed process cannot log out).
struct Scenario {
  BridgeApi& api;
  std::function<std::unique_ptr<kc::testing::ChildProcess>(const std::vector<std::string>&)> pod;
  std::function<std::size_t()> jobs;
  std::function<void()> down;
  std::function<void()> up;
  std::function<int()> sessions{};  // null: the backend holds no session

  int openSessions() const { return sessions ? sessions() : 0; }

  // `pod` ends within `limit` with exit 0, the job DONE, one remote job for it, and no more
  // sessions open than `sessionsLeft`.
  void endsDoneOnce(kc::testing::ChildProcess& pod, const std::string& name,
                    std::chrono::milliseconds limit, int sessionsLeft) const {
    const auto exit = pod.waitExit(limit);
    REQUIRE(exit.has_value());
    CHECK(*exit == 0);
    CHECK(api.value(name, "status.jobStatus") == "DONE");
    CHECK(jobs() == 1);
    CHECK(openSessions() == sessionsLeft);
  }
};

// The pod of BridgeJob `name` (started here) ends within `limit`: its exit code, checked to
// come; no session left open (backends with sessions).
inline int runsToEnd(const Scenario& s, const std::string& name, const nlohmann::json& spec,
                     std::chrono::milliseconds limit) {
  const int opened = s.openSessions();
  auto pod = s.pod(s.api.start(name, spec));
  const auto exit = pod->waitExit(limit);
  REQUIRE(exit.has_value());
  CHECK(s.openSessions() == opened);
  return *exit;
}

// kill through the operator while the job RUNs: the pod cancels it and ends with exit 1 and
// KILLED; one remote job, no session left. The backend's own view of the cancel is the
// caller's to check.
inline void killedWhileRunning(const Scenario& s, const std::string& name,
                               const nlohmann::json& spec) {
  using namespace std::chrono_literals;
  const int opened = s.openSessions();
  auto pod = s.pod(s.api.start(name, spec));
  REQUIRE(kc::testing::eventually(
      [&] { return s.api.value(name, "status.jobStatus") == "RUNNING"; }, 60s));
  s.api.kill(name);
  const auto exit = pod->waitExit(60s);
  REQUIRE(exit.has_value());
  CHECK(*exit == 1);
  CHECK(s.api.value(name, "status.jobStatus") == "KILLED");
  CHECK(s.jobs() == 1);
  CHECK(s.openSessions() == opened);
}

// A script exiting 3: the pod ends with exit 1, FAILED, the message saying `exitCode3` (each
// backend words it its own way); one remote job, no session left. Outputs are the caller's.
inline void failsWithExitCode3(const Scenario& s, const std::string& name,
                               const nlohmann::json& spec, const std::string& exitCode3) {
  using namespace std::chrono_literals;
  CHECK(runsToEnd(s, name, spec, 90s) == 1);
  CHECK(s.api.value(name, "status.jobStatus") == "FAILED");
  CHECK(s.api.value(name, "status.message").find(exitCode3) != std::string::npos);
  CHECK(s.jobs() == 1);
}

// The pod SIGKILLed as soon as the backend holds the job, the id erased from the ConfigMap as if
// it had never been written, a second pod killed while it polls (it found the job by its tag
// and recorded it), a third one to the end: exactly one remote job and DONE. Nothing here
// depends on how long the job runs (a slow machine may see it end before any kill). The id
// the second pod found is returned.
inline std::string crashedTwiceRunsOnce(const Scenario& s, const std::string& name,
                                        const nlohmann::json& spec) {
  using namespace std::chrono_literals;
  auto env = s.api.start(name, spec);
  const int opened = s.openSessions();
  {
    auto pod = s.pod(env);
    REQUIRE(kc::testing::eventually([&] { return s.jobs() == 1; }, 60s));
    pod->kill(SIGKILL);
  }
  s.api.set(name, {{"id", std::nullopt}, {"status.jobStatus", std::nullopt}});
  std::string adopted;
  {
    auto pod = s.pod(env);
    REQUIRE(kc::testing::eventually([&] { return s.api.value(name, "id") != "<absent>"; }, 60s));
    adopted = s.api.value(name, "id");
    std::this_thread::sleep_for(1500ms);  // a poll or two
    pod->kill(SIGKILL);
  }
  const int leaked = s.openSessions();  // each killed pod's session stays until it expires
  if (s.sessions) {
    CHECK(leaked >= opened + 2);
  }
  auto pod = s.pod(env);
  s.endsDoneOnce(*pod, name, 90s, leaked);  // the last pod logged out of everything it opened
  CHECK(s.api.value(name, "id") == adopted);
  return adopted;
}

// The service down when the pod starts (nothing recorded, the pod waits), back, down again
// once the job is recorded (for `downWhilePolling`, during which the job may end), back: one
// job, DONE.
inline void outageRunsOnce(const Scenario& s, const std::string& name, const nlohmann::json& spec,
                           std::chrono::milliseconds downWhilePolling) {
  using namespace std::chrono_literals;
  auto env = s.api.start(name, spec);
  const int opened = s.openSessions();
  s.down();
  auto pod = s.pod(env);
  std::this_thread::sleep_for(2s);
  REQUIRE(pod->running());
  CHECK(s.api.value(name, "id") == "<absent>");
  s.up();
  REQUIRE(kc::testing::eventually([&] { return s.api.value(name, "id") != "<absent>"; }, 60s));
  s.down();
  std::this_thread::sleep_for(downWhilePolling);
  REQUIRE(pod->running());
  s.up();
  s.endsDoneOnce(*pod, name, 60s, opened);
}

// A refused credential: the pod keeps retrying without submitting until `fix` rotates the
// Secret's file, then runs the job once to DONE.
inline void badCredentialWaits(const Scenario& s, const std::string& name,
                               const nlohmann::json& spec, const std::function<void()>& fix) {
  using namespace std::chrono_literals;
  auto env = s.api.start(name, spec);
  const int opened = s.openSessions();
  auto pod = s.pod(env);
  std::this_thread::sleep_for(2s);
  CHECK(pod->running());
  CHECK(s.jobs() == 0);
  fix();
  s.endsDoneOnce(*pod, name, 60s, opened);
}

// The pod SIGTERMed while its job runs (the pod deleted or evicted): it exits 1 at once with
// no final state, its session logged out, the remote job left running; a replacement pod
// resumes the recorded job and, once `finish` lets the job end, takes it to DONE: one job.
// The spec's job must run until `finish` is called.
inline void terminatedLeavesJob(const Scenario& s, const std::string& name,
                                const nlohmann::json& spec, const std::function<void()>& finish) {
  using namespace std::chrono_literals;
  auto env = s.api.start(name, spec);
  const int opened = s.openSessions();
  {
    auto pod = s.pod(env);
    REQUIRE(kc::testing::eventually(
        [&] { return s.api.value(name, "status.jobStatus") == "RUNNING"; }, 60s));
    pod->kill(SIGTERM);
    const auto exit = pod->waitExit(30s);
    REQUIRE(exit.has_value());
    CHECK(*exit == 1);  // handled: a process ended by the signal itself reports 128 + 15
  }
  CHECK(s.openSessions() == opened);
  CHECK(s.api.value(name, "status.jobStatus") == "RUNNING");
  CHECK(s.jobs() == 1);
  finish();
  auto pod = s.pod(env);
  s.endsDoneOnce(*pod, name, 60s, opened);
}

}  // namespace kc::bridge::testing
