#include "libcore/kube/config.hpp"

#include <catch2/catch.hpp>
#include <map>

#include "tests/support/fakes/fake_clock.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/kube/env_of.hpp"

using namespace kc::kube;
using kc::kube::testing::envOf;
using kc::testing::TempDir;

namespace {

// "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n" in base64.
const std::string kCaPem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
const std::string kCaB64 =
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=";

}  // namespace

TEST_CASE("kubeconfig paths from the environment", "[kube][config]") {
  CHECK(kubeconfigPaths(envOf({{"KUBECONFIG", "/a:/b::/c"}, {"HOME", "/h"}})) ==
        std::vector<std::string>{"/a", "/b", "/c"});
  CHECK(kubeconfigPaths(envOf({{"HOME", "/h"}})) == std::vector<std::string>{"/h/.kube/config"});
  CHECK(kubeconfigPaths(envOf({{"KUBECONFIG", ""}, {"HOME", "/h"}})) ==
        std::vector<std::string>{"/h/.kube/config"});
}

TEST_CASE("kubeconfig with inline data and token", "[kube][config]") {
  TempDir dir;
  auto path = dir.write("config", R"(apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: c1
  cluster:
    server: https://10.0.0.1:6443/
    certificate-authority-data: )" + kCaB64 +
                                      R"(
    tls-server-name: kubernetes
contexts:
- name: dev
  context: {cluster: c1, user: u1, namespace: team-a}
users:
- name: u1
  user:
    token: abc123
)");
  auto cfg = loadKubeconfig({path});
  REQUIRE(cfg.ok());
  CHECK(cfg->server == "https://10.0.0.1:6443");
  CHECK(cfg->caPem == kCaPem);
  CHECK(cfg->token == "abc123");
  CHECK(cfg->tlsServerName == "kubernetes");
  CHECK(cfg->defaultNamespace == "team-a");
  CHECK_FALSE(cfg->insecureSkipTlsVerify);
}

TEST_CASE("kubeconfig files are merged, first definition wins, relative files resolve",
          "[kube][config]") {
  TempDir dir;
  dir.write("certs/ca.crt", kCaPem);
  dir.write("certs/client.crt", "CERT");
  dir.write("certs/client.key", "KEY");
  dir.write("tok", "file-token\n");
  auto first = dir.write("one.yaml", R"(
clusters:
- name: shared
  cluster: {server: "https://first:443", certificate-authority: certs/ca.crt}
users:
- name: cert-user
  user: {client-certificate: certs/client.crt, client-key: certs/client.key, tokenFile: tok}
)");
  auto second = dir.write("two.yaml", R"(
current-context: ctx2
clusters:
- name: shared
  cluster: {server: "https://second:443", insecure-skip-tls-verify: true}
contexts:
- name: ctx2
  context: {cluster: shared, user: cert-user}
- name: other
  context: {cluster: shared}
)");
  auto cfg = loadKubeconfig({dir.file("missing.yaml"), first, second});
  REQUIRE(cfg.ok());
  CHECK(cfg->server == "https://first:443");
  CHECK(cfg->caPem == kCaPem);
  CHECK_FALSE(cfg->insecureSkipTlsVerify);
  CHECK(cfg->clientCertPem == "CERT");
  CHECK(cfg->clientKeyPem == "KEY");
  CHECK(cfg->tokenFile == dir.file("tok"));
  CHECK(cfg->defaultNamespace == "default");

  auto other = loadKubeconfig({first, second}, "other");
  REQUIRE(other.ok());
  CHECK(other->clientCertPem.empty());
}

TEST_CASE("bad kubeconfigs are rejected with a clear error", "[kube][config]") {
  TempDir dir;
  const std::string base =
      "clusters: [{name: c, cluster: {server: 'https://x:1'}}]\n"
      "contexts: [{name: k, context: {cluster: c, user: u}}]\n";
  auto [body, fragment] = GENERATE_COPY(table<std::string, std::string>({
      {"current-context: k\nusers: [{name: u, user: {exec: {command: aws}}}]\n" + base, "exec"},
      {"current-context: nope\n" + base + "users: [{name: u, user: {}}]\n", "'nope' not found"},
      {base + "users: [{name: u, user: {}}]\n", "no current-context"},
      {"current-context: k\nusers: [{name: u, user: {client-certificate-data: Q0VSVA==}}]\n" + base,
       "without key"},
      {"current-context: k\nusers: [{name: u, user: {client-certificate-data: 'Q0V!SVA=='}}]\n" +
           base,
       "client-certificate-data: base64"},
      {"current-context: k\nusers: [{name: u, user: {client-key: /nonexistent/key}}]\n" + base,
       "client-key"},
      {"current-context: k\nusers: [{name: x, user: {}}]\n" + base, "unknown user"},
      {"clusters: {a: 1}\n", "not a list"},
      {"- just\n- a list\n", "not a mapping"},
      {"current-context: k\ncontexts: [{name: k, context: {cluster: c}}]\nclusters: [{name: c, "
       "cluster: {server: 'ftp://x'}}]\n",
       "not an http(s) URL"},
      {"clusters: [{name: c, cluster: {server: 'https://x'\n", "kubeconfig"},
  }));
  CAPTURE(body);
  auto path = dir.write("bad.yaml", body);
  auto cfg = loadKubeconfig({path});
  REQUIRE_FALSE(cfg.ok());
  CHECK_THAT(cfg.error().message, Catch::Contains(fragment));
  CHECK(loadKubeconfig({dir.file("absent")}).error().code == "not_found");
}

TEST_CASE("in-cluster config", "[kube][config]") {
  TempDir sa;
  sa.write("token", "tok-1\n");
  sa.write("ca.crt", kCaPem);
  sa.write("namespace", "gpu-system\n");
  SECTION("IPv4 and namespace file") {
    auto cfg = loadInCluster(
        envOf({{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}}),
        sa.path().string());
    REQUIRE(cfg.ok());
    CHECK(cfg->server == "https://10.96.0.1:443");
    CHECK(cfg->token == "tok-1");
    CHECK(cfg->tokenFile == sa.file("token"));
    CHECK(cfg->caPem == kCaPem);
    CHECK(cfg->defaultNamespace == "gpu-system");
  }
  SECTION("IPv6 host is bracketed, POD_NAMESPACE wins") {
    auto cfg = loadInCluster(envOf({{"KUBERNETES_SERVICE_HOST", "fd00::1"},
                                    {"KUBERNETES_SERVICE_PORT", "6443"},
                                    {"POD_NAMESPACE", "override"}}),
                             sa.path().string());
    REQUIRE(cfg.ok());
    CHECK(cfg->server == "https://[fd00::1]:6443");
    CHECK(cfg->defaultNamespace == "override");
  }
  SECTION("not in a cluster") {
    auto cfg = loadInCluster(envOf({{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}}), sa.path().string());
    CHECK(cfg.error().code == "not_found");
  }
  SECTION("no token") {
    TempDir empty;
    auto cfg =
        loadInCluster(envOf({{"KUBERNETES_SERVICE_HOST", "h"}, {"KUBERNETES_SERVICE_PORT", "1"}}),
                      empty.path().string());
    CHECK_FALSE(cfg.ok());
  }
}

TEST_CASE("token file is re-read once per period", "[kube][config]") {
  TempDir dir;
  auto file = dir.write("token", "first\n");
  kc::testing::FakeClock clock;
  TokenSource src("static", file, &clock, std::chrono::minutes(1));
  CHECK(src.token() == "first");
  dir.write("token", "second\n");
  clock.advance(std::chrono::seconds(59));
  CHECK(src.token() == "first");
  clock.advance(std::chrono::seconds(1));
  CHECK(src.token() == "second");
  // An empty or vanished file keeps the last good token.
  dir.write("token", "");
  clock.advance(std::chrono::minutes(1));
  CHECK(src.token() == "second");
  std::filesystem::remove(file);
  clock.advance(std::chrono::minutes(1));
  CHECK(src.token() == "second");
  dir.write("token", "third");
  src.invalidate();
  CHECK(src.token() == "third");

  TokenSource fixed("static", "");
  CHECK(fixed.token() == "static");
}
