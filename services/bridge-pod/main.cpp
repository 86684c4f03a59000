// bridge-pod: runs one BridgeJob on its remote workload manager (one backend per image,
// chosen with --backend / BRIDGE_BACKEND). Reads and writes only its ConfigMap. Thin main:
// flags -> backend + store -> runBridgePod (SIGTERM stops it early, runner.hpp). Exit 0: the
// job is DONE; 1: any other end; 2: bad flags.

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "libcore/cli/flags.hpp"
#include "libcore/kube/client.hpp"
#include "libcore/kube/config.hpp"
#include "libcore/obs/log.hpp"
#include "libcore/obs/shutdown.hpp"
#include "services/bridge-pod/job_store.hpp"
#include "services/bridge-pod/lsf_backend.hpp"
#include "services/bridge-pod/quantum_backend.hpp"
#include "services/bridge-pod/ray_backend.hpp"
#include "services/bridge-pod/runner.hpp"
#include "services/bridge-pod/slurm_backend.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "bridge-pod: submits and follows one BridgeJob's remote job, writing its state into the "
      "job's ConfigMap."};
  std::string backendName;
  std::string configMap, ns;
  std::string credentialsDir = "/credentials";
  std::string caFile;
  kc::bridge::pod::RunnerOptions runner;
  std::int64_t backoffInitialMs = 1000, backoffMaxMs = 60'000;
  std::int64_t slurmTokenLifespan = 600;
  std::string slurmSharedRoot;
  std::string slurmApiVersion = "auto";
  std::string iamUrl = kc::bridge::pod::kDefaultIamUrl;
  std::string logLevel = "info", logFormat = "text";

  app.add_option("--backend", backendName, "slurm, ray, quantum or lsf (one per image)")
      ->envname("BRIDGE_BACKEND")
      ->required()
      ->check(CLI::IsMember({"slurm", "ray", "quantum", "lsf"}));
  app.add_option("--configmap", configMap, "the job's ConfigMap")
      ->envname("BRIDGE_CONFIGMAP")
      ->required();
  app.add_option("--namespace", ns, "its namespace")->envname("BRIDGE_NAMESPACE")->required();
  app.add_option("--credentials-dir", credentialsDir, "the resource Secret's files")
      ->envname("BRIDGE_CREDENTIALS_DIR")
      ->capture_default_str();
  app.add_option("--s3-credentials-dir", runner.s3CredentialsDir,
                 "the S3 Secret's files (accesskey, secretkey)")
      ->envname("BRIDGE_S3_CREDENTIALS_DIR")
      ->capture_default_str();
  app.add_option("--s3-region", runner.s3Region, "SigV4 region")
      ->envname("BRIDGE_S3_REGION")
      ->capture_default_str();
  app.add_option("--s3-ca-file", runner.s3CaFile, "CA bundle for an https S3 endpoint")
      ->envname("BRIDGE_S3_CA_FILE");
  app.add_option("--ca-file", caFile, "CA bundle for an https resourceURL")
      ->envname("BRIDGE_CA_FILE");
  app.add_option("--backoff-initial-ms", backoffInitialMs,
                 "first retry delay after a transient error")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{600'000}))
      ->capture_default_str();
  app.add_option("--backoff-max-ms", backoffMaxMs, "longest retry delay")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{3'600'000}))
      ->capture_default_str();
  app.add_option(
         "--slurm-token-lifespan", slurmTokenLifespan,
         "seconds a minted Slurm JWT lives (Secret key jwtkey); re-minted with a fifth left")
      ->check(CLI::Range(std::int64_t{10}, std::int64_t{86'400}))
      ->capture_default_str();
  app.add_option(
         "--slurm-shared-root", slurmSharedRoot,
         "where the cluster's file system is mounted (prefix of the job's working directory)")
      ->envname("BRIDGE_SLURM_SHARED_ROOT");
  app.add_option("--slurm-api-version", slurmApiVersion,
                 "slurmrestd API: auto (the resourceURL's /slurm/v0.0.NN/, discovered for a base "
                 "URL), newest "
                 "(always discovered) or v0.0.38 .. v0.0.41")
      ->envname("BRIDGE_SLURM_API_VERSION")
      ->capture_default_str();
  app.add_option("--iam-url", iamUrl, "IBM Cloud IAM token endpoint (quantum)")
      ->envname("BRIDGE_IAM_URL")
      ->capture_default_str();
  app.add_option("--log-level", logLevel, "trace, debug, info, warn, error, critical or off")
      ->envname("BRIDGE_LOG_LEVEL")
      ->capture_default_str();
  app.add_option("--log-format", logFormat, "text or json")
      ->envname("BRIDGE_LOG_FORMAT")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  kc::cli::addVersionFlag(app, "bridge-pod");
  if (auto exit = kc::cli::parse(app, argc, argv)) {
    return *exit;
  }
  auto format = kc::obs::parseLogFormat(logFormat);
  if (!format || !kc::obs::setupLogging({"bridge-pod", logLevel, *format})) {
    std::cerr << "error: bad --log-level or --log-format\n";
    return 2;
  }
  if (backoffInitialMs > backoffMaxMs) {
    std::cerr << "error: --backoff-initial-ms above --backoff-max-ms\n";
    return 2;
  }
  runner.backoff.initial = std::chrono::milliseconds(backoffInitialMs);
  runner.backoff.max = std::chrono::milliseconds(backoffMaxMs);

  auto cluster = kc::kube::loadDefaultConfig(kc::kube::processEnv());
  if (!cluster.ok()) {
    spdlog::error("Kubernetes API configuration: {}", cluster.error().message);
    return 1;
  }
  auto kube = kc::kube::KubeClient::create(*cluster);
  if (!kube.ok()) {
    spdlog::error("Kubernetes client: {}", kube.error().message);
    return 1;
  }
  kc::bridge::pod::ConfigMapStore store(**kube, ns, configMap);

  const kc::bridge::pod::BackendFactory factory = [&](const kc::bridge::JobParameters& p)
      -> kc::Result<std::unique_ptr<kc::bridge::pod::Backend>> {
    if (backendName == "lsf") {
      kc::bridge::pod::LsfOptions o;
      o.resourceUrl = p.resourceUrl;
      o.credentialsDir = credentialsDir;
      o.caFile = caFile;
      auto b = kc::bridge::pod::LsfBackend::create(o);
      if (!b.ok()) {
        return b.error();
      }
      return std::unique_ptr<kc::bridge::pod::Backend>(std::move(b).value());
    }
    if (backendName == "quantum") {
      kc::bridge::pod::QuantumOptions o;
      o.resourceUrl = p.resourceUrl;
      o.iamUrl = iamUrl;
      o.credentialsDir = credentialsDir;
      o.caFile = caFile;
      auto b = kc::bridge::pod::QuantumBackend::create(o);
      if (!b.ok()) {
        return b.error();
      }
      return std::unique_ptr<kc::bridge::pod::Backend>(std::move(b).value());
    }
    if (backendName == "ray") {
      kc::bridge::pod::RayOptions o;
      o.resourceUrl = p.resourceUrl;
      o.credentialsDir = credentialsDir;
      o.caFile = caFile;
      auto b = kc::bridge::pod::RayBackend::create(o);
      if (!b.ok()) {
        return b.error();
      }
      return std::unique_ptr<kc::bridge::pod::Backend>(std::move(b).value());
    }
    kc::bridge::pod::SlurmOptions o;
    o.resourceUrl = p.resourceUrl;
    o.credentialsDir = credentialsDir;
    o.tokenLifespan = std::chrono::seconds(slurmTokenLifespan);
    o.sharedRoot = slurmSharedRoot;
    o.apiVersion = slurmApiVersion;
    o.caFile = caFile;
    auto b = kc::bridge::pod::SlurmBackend::create(o);
    if (!b.ok()) {
      return b.error();
    }
    return std::unique_ptr<kc::bridge::pod::Backend>(std::move(b).value());
  };
  // SIGTERM (the pod deleted or evicted): the runner stops at its next wait and releases the
  // backend's session; the remote job keeps running for a replacement pod.
  kc::bridge::pod::StopRequest stop;
  kc::obs::ShutdownHandler shutdown({.stop = [&] { stop.request(); }});
  if (auto s = shutdown.install(); !s.ok()) {
    spdlog::error("signal handling: {}", s.error().message);
    return 1;
  }
  runner.stop = &stop;
  return kc::bridge::pod::runBridgePod(store, factory, runner);
}
