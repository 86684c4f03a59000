#include "services/vni-webhook/webhook_cli.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <chrono>
#include <iostream>
#include <sstream>
#include <thread>

#include "libcore/obs/daemon.hpp"
#include "libcore/obs/daemon_flags.hpp"
#include "libcore/obs/health.hpp"
#include "services/vni-webhook/http_frontend.hpp"
#include "services/vni-webhook/vni_service.hpp"

namespace kc::vni {

namespace {

std::int64_t unixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One allocating process per database file: an exclusive flock on "<db>.lock", held for the
// life of the process (the kernel drops it when the process dies, even by SIGKILL).
int acquireWriterLock(const std::string& db, std::chrono::seconds wait) {
  const std::string path = db + ".lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return -1;
  }
  const auto deadline = std::chrono::steady_clock::now() + wait;
  bool logged = false;
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      ::close(fd);
      return -1;
    }
    if (!logged) {
      spdlog::warn("another vni-webhook holds {}; waiting up to {} s", path, wait.count());
      logged = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return fd;
}

std::chrono::milliseconds toMillis(double sec) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(sec * 1000));
}

}  // namespace

void addWebhookFlags(CLI::App& app, WebhookFlags& f) {
  obs::addListenFlags(app, f.daemon);
  app.add_option("--db", f.db, "SQLite database file")->envname("VNI_WEBHOOK_DB");
  app.add_option("--vni-min", f.vniMin, "first VNI of the range [min, max)")
      ->envname("VNI_WEBHOOK_VNI_MIN")
      ->check(CLI::Range(0u, 65535u));
  app.add_option("--vni-max", f.vniMax, "end of the range (exclusive, <= 65536)")
      ->envname("VNI_WEBHOOK_VNI_MAX")
      ->check(CLI::Range(1u, 65536u));
  app.add_option("--reserved", f.reserved, "comma-separated VNIs never issued (0 always is)")
      ->envname("VNI_WEBHOOK_RESERVED");
  app.add_option("--cooldown-seconds", f.cooldownSec, "delay before a released VNI is reused")
      ->envname("VNI_WEBHOOK_COOLDOWN_SECONDS")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--pod-wait-timeout-seconds", f.podWaitSec,
                 "finalize waits this long after deletion for the job's pods")
      ->envname("VNI_WEBHOOK_POD_WAIT_TIMEOUT_SECONDS")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--durability", f.durability, "full (fsync each group commit) or normal")
      ->envname("VNI_WEBHOOK_DURABILITY")
      ->check(CLI::IsMember({"full", "normal"}));
  app.add_option("--max-body-bytes", f.bodyLimit, "request body limit (413 beyond)")
      ->envname("VNI_WEBHOOK_MAX_BODY_BYTES");
  app.add_option("--io-threads", f.ioThreads, "HTTP io threads")->envname("VNI_WEBHOOK_IO_THREADS");
  app.add_option("--max-batch", f.maxBatch, "operations per group commit")
      ->check(CLI::PositiveNumber);
  app.add_option("--tls-cert", f.tlsCert, "PEM certificate (enables HTTPS)")
      ->envname("VNI_WEBHOOK_TLS_CERT");
  app.add_option("--tls-key", f.tlsKey, "PEM private key")->envname("VNI_WEBHOOK_TLS_KEY");
  obs::addLogFlags(app, f.daemon);
  app.add_option("--lock-wait-seconds", f.lockWaitSec, "wait for another instance's writer lock");
  obs::addPortFileFlag(app, f.daemon);
  app.add_option("--shutdown-delay-seconds", f.shutdownDelaySec,
                 "on SIGTERM keep serving this long with /readyz failing, so the Service stops "
                 "routing here before the listener closes")
      ->check(CLI::Range(0.0, 600.0))
      ->envname("VNI_WEBHOOK_SHUTDOWN_DELAY_SECONDS");
  app.add_option("--drain-seconds", f.drainSec,
                 "then wait up to this long for in-flight requests before closing them")
      ->check(CLI::Range(0.0, 600.0))
      ->envname("VNI_WEBHOOK_DRAIN_SECONDS");
}

Result<std::vector<alloc::Vni>> parseReservedVnis(const std::string& text) {
  std::vector<alloc::Vni> out{0};  // 0 is always invalid
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto first = item.find_first_not_of(" \t");
    if (first == std::string::npos) {
      continue;
    }
    const auto last = item.find_last_not_of(" \t");
    const std::string_view v(item.data() + first, last - first + 1);
    std::uint64_t value = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
    if (ec != std::errc() || end != v.data() + v.size() || value >= alloc::kVniLimit) {
      return makeError(kc::errc::kInvalid, "--reserved: '" + std::string(v) +
                                               "' is not a VNI (a decimal number below 65536)");
    }
    out.push_back(static_cast<alloc::Vni>(value));
  }
  return out;
}

int runWebhook(const WebhookFlags& f) {
  if (!obs::setupDaemonLogging("vni-webhook", f.daemon)) {
    return 2;
  }
  if (f.tlsCert.empty() != f.tlsKey.empty()) {
    spdlog::critical("--tls-cert and --tls-key go together");
    return 2;
  }
  auto reservedVnis = parseReservedVnis(f.reserved);
  if (!reservedVnis) {
    std::cerr << "error: " << reservedVnis.error().message << "\n";
    return 2;
  }
  const int lockFd = acquireWriterLock(f.db, std::chrono::seconds(f.lockWaitSec));
  if (lockFd < 0) {
    spdlog::critical("cannot take the writer lock {}.lock (another vni-webhook running?)", f.db);
    return 1;
  }

  ServiceOptions options;
  options.store.path = f.db;
  options.store.range.min = f.vniMin;
  options.store.range.max = f.vniMax;
  options.store.range.reserved = std::move(*reservedVnis);
  options.store.range.cooldown = alloc::VniTime{static_cast<std::int64_t>(f.cooldownSec * 1000)};
  options.store.durability = f.durability == "full" ? Durability::kFull : Durability::kNormal;
  options.decision.podWaitTimeoutSec = f.podWaitSec;
  options.maxBatch = f.maxBatch;

  StoreReport report;
  auto service = VniService::start(options, unixMs, &report);
  if (!service) {
    spdlog::critical("{}", service.error().message);
    return 1;
  }
  for (const std::string& note : report.notes) {
    spdlog::warn("{}", note);
  }
  const auto counts = (*service)->stats().counts;
  spdlog::info("VNI range [{}, {}): {} allocations ({} outside the range), {} cooling, {} free",
               f.vniMin, f.vniMax, report.allocations, report.outOfRange, counts.cooling,
               counts.free);

  obs::Metrics metrics;
  obs::HealthChecks health;
  net::ServerOptions serverOptions;
  serverOptions.bindAddress = f.daemon.listen;
  serverOptions.port = f.daemon.port;
  serverOptions.bodyLimit = f.bodyLimit;
  serverOptions.ioThreads = f.ioThreads;
  serverOptions.serverHeader = "vni-webhook";
  if (!f.tlsCert.empty()) {
    net::ServerTlsOptions tls;
    tls.certFile = f.tlsCert;
    tls.keyFile = f.tlsKey;
    serverOptions.tls = tls;
  }
  VniHttpFrontend frontend(**service, metrics, health, serverOptions);
  auto bound = frontend.start();
  if (!bound) {
    spdlog::critical("cannot serve: {}", bound.error().message);
    return 1;
  }
  spdlog::info("vni-webhook serving on {}", frontend.baseUrl());

  // SIGTERM: readiness fails at once; requests are still served for --shutdown-delay-seconds;
  // then the listener closes and in-flight requests get up to --drain-seconds; then the
  // writer commits what is queued and stops.
  const int status =
      obs::runUntilSignalled({.name = "vni-webhook",
                              .steps = {&health,
                                        [&] {
                                          std::this_thread::sleep_for(toMillis(f.shutdownDelaySec));
                                          frontend.stop(toMillis(f.drainSec));
                                        },
                                        [&] { (*service)->stop(); }},
                              .portFile = f.daemon.portFile,
                              .port = *bound});
  ::close(lockFd);
  return status;
}

}  // namespace kc::vni
