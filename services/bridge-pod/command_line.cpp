#include "services/bridge-pod/command_line.hpp"

#include <CLI/CLI.hpp>
#include <iostream>

#include "libcore/cli/flags.hpp"
#include "libcore/obs/log.hpp"
#include "services/bridge-pod/lsf_backend.hpp"
#include "services/bridge-pod/ray_backend.hpp"
#include "services/bridge-pod/slurm_backend.hpp"

namespace kc::bridge::pod {

std::variant<int, CommandLine> parseCommandLine(int argc, const char* const* argv) {
  CLI::App app{
      "bridge-pod: submits and follows one BridgeJob's remote job, writing its state into the "
      "job's ConfigMap."};
  CommandLine c;
  std::string& backendName = c.backend.name;
  std::string& credentialsDir = c.backend.credentialsDir;
  std::string& caFile = c.backend.caFile;
  RunnerOptions& runner = c.runner;
  std::int64_t backoffInitialMs = 1000, backoffMaxMs = 60'000, credentialRetryMs = 300'000;
  std::int64_t slurmTokenLifespan = 600;
  std::string& slurmSharedRoot = c.backend.slurmSharedRoot;
  std::string& slurmApiVersion = c.backend.slurmApiVersion;
  std::string& iamUrl = c.backend.iamUrl;
  std::string logLevel = "info", logFormat = "text";

  app.add_option("--backend", backendName, "slurm, ray, quantum or lsf (one per image)")
      ->envname("BRIDGE_BACKEND")
      ->required()
      ->check(CLI::IsMember({"slurm", "ray", "quantum", "lsf"}));
  app.add_option("--configmap", c.configMap, "the job's ConfigMap")
      ->envname("BRIDGE_CONFIGMAP")
      ->required();
  app.add_option("--namespace", c.ns, "its namespace")->envname("BRIDGE_NAMESPACE")->required();
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
  app.add_option("--credential-retry-ms", credentialRetryMs,
                 "retry period while the backend's credential has expired (Slurm: the exp of the "
                 "Secret's token is past), instead of the backoff; the Secret is re-read each time")
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
  cli::addVersionFlag(app, "bridge-pod");
  if (auto exit = cli::parse(app, argc, argv)) {
    return *exit;
  }
  auto format = obs::parseLogFormat(logFormat);
  if (!format || !obs::setupLogging({"bridge-pod", logLevel, *format})) {
    std::cerr << "error: bad --log-level or --log-format\n";
    return 2;
  }
  if (backoffInitialMs > backoffMaxMs) {
    std::cerr << "error: --backoff-initial-ms above --backoff-max-ms\n";
    return 2;
  }
  runner.backoff.initial = std::chrono::milliseconds(backoffInitialMs);
  runner.backoff.max = std::chrono::milliseconds(backoffMaxMs);
  runner.credentialRetry = std::chrono::milliseconds(credentialRetryMs);
  c.backend.slurmTokenLifespan = std::chrono::seconds(slurmTokenLifespan);
  return c;
}

BackendFactory makeBackendFactory(const BackendSettings& s) {
  return [s](const JobParameters& p) -> Result<std::unique_ptr<Backend>> {
    if (s.name == "lsf") {
      LsfOptions o;
      o.resourceUrl = p.resourceUrl;
      o.credentialsDir = s.credentialsDir;
      o.caFile = s.caFile;
      auto b = LsfBackend::create(o);
      if (!b.ok()) {
        return b.error();
      }
      return std::unique_ptr<Backend>(std::move(b).value());
    }
    if (s.name == "quantum") {
      QuantumOptions o;
      o.resourceUrl = p.resourceUrl;
      o.iamUrl = s.iamUrl;
      o.credentialsDir = s.credentialsDir;
      o.caFile = s.caFile;
      auto b = QuantumBackend::create(o);
      if (!b.ok()) {
        return b.error();
      }
      return std::unique_ptr<Backend>(std::move(b).value());
    }
    if (s.name == "ray") {
      RayOptions o;
      o.resourceUrl = p.resourceUrl;
      o.credentialsDir = s.credentialsDir;
      o.caFile = s.caFile;
      auto b = RayBackend::create(o);
      if (!b.ok()) {
        return b.error();
      }
      return std::unique_ptr<Backend>(std::move(b).value());
    }
    SlurmOptions o;
    o.resourceUrl = p.resourceUrl;
    o.credentialsDir = s.credentialsDir;
    o.tokenLifespan = s.slurmTokenLifespan;
    o.sharedRoot = s.slurmSharedRoot;
    o.apiVersion = s.slurmApiVersion;
    o.caFile = s.caFile;
    auto b = SlurmBackend::create(o);
    if (!b.ok()) {
      return b.error();
    }
    return std::unique_ptr<Backend>(std::move(b).value());
  };
}

}  // namespace kc::bridge::pod
