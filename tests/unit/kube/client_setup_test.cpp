// setUpClient: what a daemon's --kubeconfig flag means (the named file wins over the environment;
// without it in-cluster, then $KUBECONFIG) and errors that name the failed step.
#include "libcore/kube/client_setup.hpp"

#include <catch2/catch.hpp>

#include "tests/support/fakes/fake_clock.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/kube/env_of.hpp"

using namespace kc::kube;
using kc::kube::testing::envOf;
using kc::testing::TempDir;

namespace {

// A kubeconfig whose one cluster is `server`, with extra cluster fields `clusterExtra`.
std::string kubeconfigFor(const std::string& server, const std::string& clusterExtra = {}) {
  return "apiVersion: v1\nkind: Config\ncurrent-context: k\n"
         "clusters: [{name: c, cluster: {server: '" +
         server + "'" + clusterExtra +
         "}}]\n"
         "contexts: [{name: k, context: {cluster: c, user: u, namespace: team}}]\n"
         "users: [{name: u, user: {token: t}}]\n";
}

}  // namespace

TEST_CASE("client setup: which config the --kubeconfig flag picks", "[kube][config]") {
  TempDir dir;
  const std::string named = dir.write("named.yaml", kubeconfigFor("https://named.example:6443"));
  const std::string fromEnv = dir.write("env.yaml", kubeconfigFor("https://env.example:6443"));
  const std::string home = dir.path().string();
  dir.write(".kube/config", kubeconfigFor("https://home.example:6443"));

  SECTION("the named file, whatever $KUBECONFIG and KUBERNETES_SERVICE_HOST say") {
    auto client = setUpClient(named, {},
                              envOf({{"KUBECONFIG", fromEnv},
                                     {"HOME", home},
                                     {"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
                                     {"KUBERNETES_SERVICE_PORT", "443"}}));
    REQUIRE(client.ok());
    CHECK((*client)->config().server == "https://named.example:6443");
    CHECK((*client)->defaultNamespace() == "team");
  }
  SECTION("no flag: $KUBECONFIG before ~/.kube/config") {
    auto client = setUpClient("", {}, envOf({{"KUBECONFIG", fromEnv}, {"HOME", home}}));
    REQUIRE(client.ok());
    CHECK((*client)->config().server == "https://env.example:6443");
  }
  SECTION("no flag, no $KUBECONFIG: ~/.kube/config") {
    auto client = setUpClient("", {}, envOf({{"HOME", home}}));
    REQUIRE(client.ok());
    CHECK((*client)->config().server == "https://home.example:6443");
  }
  SECTION("no flag in a pod: in-cluster, not the kubeconfig") {
    auto client = setUpClient("", {},
                              envOf({{"KUBECONFIG", fromEnv},
                                     {"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
                                     {"KUBERNETES_SERVICE_PORT", "443"}}));
    // Outside a pod the service account token is missing; inside one it is this pod's.
    if (client.ok()) {
      CHECK((*client)->config().server == "https://10.96.0.1:443");
    } else {
      CHECK_THAT(client.error().message, Catch::StartsWith("cluster config: in-cluster"));
    }
  }
}

TEST_CASE("client setup: the client options reach the client", "[kube][config]") {
  TempDir dir;
  const std::string named = dir.write("named.yaml", kubeconfigFor("https://named.example:6443"));
  kc::testing::FakeClock clock;
  KubeClientOptions options;
  options.clock = &clock;
  auto client = setUpClient(named, options);
  REQUIRE(client.ok());
  CHECK(&(*client)->clock() == &clock);
}

TEST_CASE("client setup: errors name the step that failed and keep its code", "[kube][config]") {
  TempDir dir;
  // certificate-authority-data is base64 of "not a pem": the file loads, the TLS set-up fails.
  dir.write("bad-ca.yaml",
            kubeconfigFor("https://x.example:6443", ", certificate-authority-data: bm90IGEgcGVt"));
  dir.write("exec.yaml",
            "apiVersion: v1\nkind: Config\ncurrent-context: k\n"
            "clusters: [{name: c, cluster: {server: 'https://x:1'}}]\n"
            "contexts: [{name: k, context: {cluster: c, user: u}}]\n"
            "users: [{name: u, user: {exec: {command: aws}}}]\n");
  const auto env = envOf({{"HOME", dir.file("no-home")}});
  auto [file, step, starts, mentions, code] =
      GENERATE(table<std::string, std::string, std::string, std::string, std::string>({
          {"absent.yaml", "cluster config", "cluster config: ", "absent.yaml", "not_found"},
          {"", "cluster config", "cluster config: no readable kubeconfig", "no-home", "not_found"},
          {"exec.yaml", "cluster config", "cluster config: ", "exec", "invalid"},
          {"exec.yaml", "kubeconfig", "kubeconfig: kubeconfig: ", "exec", "invalid"},
          {"bad-ca.yaml", "cluster config", "API client: ", "x.example", "tls"},
      }));
  CAPTURE(file, step);
  auto client = setUpClient(file.empty() ? "" : dir.file(file), {}, env, step);
  REQUIRE_FALSE(client.ok());
  CHECK_THAT(client.error().message, Catch::StartsWith(starts) && Catch::Contains(mentions));
  CHECK(client.error().code == code);
}
