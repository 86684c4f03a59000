// vni-webhook: Metacontroller DecoratorController hooks (/sync, /finalize, /customize) that
// allocate Slingshot VNIs to job-like objects. Thin main: flags -> library -> run.
// `vni-webhook admin ...` is the operator CLI (list, audit, release orphans).

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <charconv>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "libcore/obs/health.hpp"
#include "libcore/obs/log.hpp"
#include "libcore/obs/shutdown.hpp"
#include "services/vni-webhook/admin.hpp"
#include "services/vni-webhook/http_frontend.hpp"
#include "services/vni-webhook/vni_service.hpp"

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

// "1,10" -> {0, 1, 10} (0 is always reserved). Error on anything but decimal VNIs < 65536.
kc::Result<std::vector<kc::alloc::Vni>> parseReserved(const std::string& text) {
  std::vector<kc::alloc::Vni> out{0};  // 0 is always invalid
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
    if (ec != std::errc() || end != v.data() + v.size() || value >= kc::alloc::kVniLimit) {
      return kc::makeError(kc::errc::kInvalid, "--reserved: '" + std::string(v) +
                                          "' is not a VNI (a decimal number below 65536)");
    }
    out.push_back(static_cast<kc::alloc::Vni>(value));
  }
  return out;
}

int runAdmin(const std::string& db, const std::string& command, const std::string& ns,
             const std::string& liveFile, double marginSec, bool release, bool yes, bool json) {
  auto rows = kc::vni::readAllocations(db);
  if (!rows) {
    std::cerr << "error: " << rows.error().message << "\n";
    return 1;
  }
  if (command == "list") {
    std::vector<kc::vni::AllocationRow> shown;
    for (const auto& r : *rows) {
      if (ns.empty() || r.ns == ns) {
        shown.push_back(r);
      }
    }
    kc::vni::printAllocations(std::cout, shown, json);
    return 0;
  }
  // audit
  std::ifstream in(liveFile);
  if (!in) {
    std::cerr << "error: cannot read live owners file " << liveFile << "\n";
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto live = kc::vni::parseLiveOwners(text.str());
  if (!live) {
    std::cerr << "error: " << live.error().message << "\n";
    return 1;
  }
  // The live list is as old as its file: only rows allocated before that (minus a margin
  // for how long the listing took and clock skew) can be judged.
  std::error_code ec;
  const auto mtime = std::filesystem::last_write_time(liveFile, ec);
  if (ec) {
    std::cerr << "error: cannot stat " << liveFile << ": " << ec.message() << "\n";
    return 1;
  }
  const auto mtimeSys = std::chrono::time_point_cast<std::chrono::milliseconds>(
      std::chrono::file_clock::to_sys(mtime));
  const std::int64_t cutoffMs = mtimeSys.time_since_epoch().count() -
                                static_cast<std::int64_t>(marginSec * 1000);
  std::size_t tooRecent = 0;
  const auto orphans = kc::vni::findOrphans(*rows, *live, cutoffMs, &tooRecent);
  std::cout << rows->size() << " allocations, " << live->size() << " live owners, "
            << orphans.size() << " orphans";
  if (tooRecent > 0) {
    std::cout << ", " << tooRecent << " allocated after the live list was taken (not judged)";
  }
  std::cout << "\n";
  kc::vni::printAllocations(std::cout, orphans, json);
  if (!release || orphans.empty()) {
    return orphans.empty() ? 0 : 3;
  }
  if (!yes) {
    std::cout << "Release these " << orphans.size() << " VNIs? Type 'yes': " << std::flush;
    std::string answer;
    std::getline(std::cin, answer);
    if (answer != "yes") {
      std::cout << "nothing released\n";
      return 3;
    }
  }
  std::vector<kc::vni::OwnerKey> keys;
  for (const auto& o : orphans) {
    keys.push_back({o.uid, o.ns});
  }
  auto released = kc::vni::releaseOwners(db, keys, unixMs());
  if (!released) {
    std::cerr << "error: " << released.error().message << "\n";
    return 1;
  }
  std::cout << "released " << *released
            << " VNIs (a running vni-webhook reuses them after its next restart)\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"vni-webhook: Slingshot VNI allocation for Metacontroller DecoratorControllers"};
  app.set_config();
  std::string listen = "0.0.0.0";
  std::uint16_t port = 8842;
  std::string db = "/var/lib/vni-webhook/vni.sqlite3";
  std::uint32_t vniMin = kc::alloc::kDefaultVniMin;
  std::uint32_t vniMax = kc::alloc::kDefaultVniMax;
  std::string reserved = "1,10";
  double cooldownSec = 60;
  std::int64_t podWaitSec = 300;
  std::string durability = "full";
  std::size_t bodyLimit = 16u << 20;
  unsigned ioThreads = 2;
  std::size_t maxBatch = 1024;
  std::string tlsCert, tlsKey;
  std::string logLevel = "info", logFormat = "text";
  int lockWaitSec = 30;
  std::string portFile;
  double shutdownDelaySec = 0;
  double drainSec = 10;

  app.add_option("--listen", listen, "bind address")->envname("VNI_WEBHOOK_LISTEN");
  app.add_option("--port", port, "TCP port (0 = ephemeral)")->envname("VNI_WEBHOOK_PORT");
  app.add_option("--db", db, "SQLite database file")->envname("VNI_WEBHOOK_DB");
  app.add_option("--vni-min", vniMin, "first VNI of the range [min, max)")
      ->envname("VNI_WEBHOOK_VNI_MIN")->check(CLI::Range(0u, 65535u));
  app.add_option("--vni-max", vniMax, "end of the range (exclusive, <= 65536)")
      ->envname("VNI_WEBHOOK_VNI_MAX")->check(CLI::Range(1u, 65536u));
  app.add_option("--reserved", reserved, "comma-separated VNIs never issued (0 always is)")
      ->envname("VNI_WEBHOOK_RESERVED");
  app.add_option("--cooldown-seconds", cooldownSec, "delay before a released VNI is reused")
      ->envname("VNI_WEBHOOK_COOLDOWN_SECONDS")->check(CLI::NonNegativeNumber);
  app.add_option("--pod-wait-timeout-seconds", podWaitSec,
                 "finalize waits this long after deletion for the job's pods")
      ->envname("VNI_WEBHOOK_POD_WAIT_TIMEOUT_SECONDS")->check(CLI::NonNegativeNumber);
  app.add_option("--durability", durability, "full (fsync each group commit) or normal")
      ->envname("VNI_WEBHOOK_DURABILITY")->check(CLI::IsMember({"full", "normal"}));
  app.add_option("--max-body-bytes", bodyLimit, "request body limit (413 beyond)")
      ->envname("VNI_WEBHOOK_MAX_BODY_BYTES");
  app.add_option("--io-threads", ioThreads, "HTTP io threads")->envname("VNI_WEBHOOK_IO_THREADS");
  app.add_option("--max-batch", maxBatch, "operations per group commit")->check(CLI::PositiveNumber);
  app.add_option("--tls-cert", tlsCert, "PEM certificate (enables HTTPS)")
      ->envname("VNI_WEBHOOK_TLS_CERT");
  app.add_option("--tls-key", tlsKey, "PEM private key")->envname("VNI_WEBHOOK_TLS_KEY");
  app.add_option("--log-level", logLevel)->envname("VNI_WEBHOOK_LOG_LEVEL");
  app.add_option("--log-format", logFormat, "text or json")->envname("VNI_WEBHOOK_LOG_FORMAT");
  app.add_option("--lock-wait-seconds", lockWaitSec, "wait for another instance's writer lock");
  app.add_option("--port-file", portFile, "write the bound port here once serving (tests)");
  app.add_option("--shutdown-delay-seconds", shutdownDelaySec,
                 "on SIGTERM keep serving this long with /readyz failing, so the Service stops "
                 "routing here before the listener closes")
      ->check(CLI::Range(0.0, 600.0))
      ->envname("VNI_WEBHOOK_SHUTDOWN_DELAY_SECONDS");
  app.add_option("--drain-seconds", drainSec,
                 "then wait up to this long for in-flight requests before closing them")
      ->check(CLI::Range(0.0, 600.0))
      ->envname("VNI_WEBHOOK_DRAIN_SECONDS");

  CLI::App* admin = app.add_subcommand("admin", "operator commands on the database");
  std::string adminCommand, ns, liveFile;
  bool release = false, yes = false, json = false;
  double auditMarginSec = 300;
  admin->add_option("command", adminCommand, "list | audit")->required()
      ->check(CLI::IsMember({"list", "audit"}));
  admin->add_option("--db", db, "SQLite database file")->envname("VNI_WEBHOOK_DB");
  admin->add_option("--namespace", ns, "list: only this namespace");
  admin->add_option("--live", liveFile,
                    "audit: live owners (kubectl get ... -A -o json, or namespace/uid lines)");
  admin->add_option("--margin-seconds", auditMarginSec,
                    "audit: only judge rows allocated this long before the live file was written")
      ->check(CLI::Range(0.0, 86400.0));
  admin->add_flag("--release", release, "audit: free the orphans (asks for confirmation)");
  admin->add_flag("--yes", yes, "do not ask");
  admin->add_flag("--json", json, "JSON output");
  CLI11_PARSE(app, argc, argv);

  if (admin->parsed()) {
    if (adminCommand == "audit" && liveFile.empty()) {
      std::cerr << "error: audit needs --live FILE\n";
      return 2;
    }
    return runAdmin(db, adminCommand, ns, liveFile, auditMarginSec, release, yes, json);
  }

  auto format = kc::obs::parseLogFormat(logFormat);
  if (!format || !kc::obs::setupLogging({"vni-webhook", logLevel, *format})) {
    std::cerr << "error: bad --log-level or --log-format\n";
    return 2;
  }
  if (tlsCert.empty() != tlsKey.empty()) {
    spdlog::critical("--tls-cert and --tls-key go together");
    return 2;
  }
  auto reservedVnis = parseReserved(reserved);
  if (!reservedVnis) {
    std::cerr << "error: " << reservedVnis.error().message << "\n";
    return 2;
  }
  const int lockFd = acquireWriterLock(db, std::chrono::seconds(lockWaitSec));
  if (lockFd < 0) {
    spdlog::critical("cannot take the writer lock {}.lock (another vni-webhook running?)", db);
    return 1;
  }

  kc::vni::ServiceOptions options;
  options.store.path = db;
  options.store.range.min = vniMin;
  options.store.range.max = vniMax;
  options.store.range.reserved = std::move(*reservedVnis);
  options.store.range.cooldown =
      kc::alloc::VniTime{static_cast<std::int64_t>(cooldownSec * 1000)};
  options.store.durability =
      durability == "full" ? kc::vni::Durability::kFull : kc::vni::Durability::kNormal;
  options.decision.podWaitTimeoutSec = podWaitSec;
  options.maxBatch = maxBatch;

  kc::vni::StoreReport report;
  auto service = kc::vni::VniService::start(options, unixMs, &report);
  if (!service) {
    spdlog::critical("{}", service.error().message);
    return 1;
  }
  for (const std::string& note : report.notes) {
    spdlog::warn("{}", note);
  }
  const auto counts = (*service)->stats().counts;
  spdlog::info("VNI range [{}, {}): {} allocations ({} outside the range), {} cooling, {} free",
               vniMin, vniMax, report.allocations, report.outOfRange, counts.cooling, counts.free);

  kc::obs::Metrics metrics;
  kc::obs::HealthChecks health;
  kc::net::ServerOptions serverOptions;
  serverOptions.bindAddress = listen;
  serverOptions.port = port;
  serverOptions.bodyLimit = bodyLimit;
  serverOptions.ioThreads = ioThreads;
  serverOptions.serverHeader = "vni-webhook";
  if (!tlsCert.empty()) {
    kc::net::ServerTlsOptions tls;
    tls.certFile = tlsCert;
    tls.keyFile = tlsKey;
    serverOptions.tls = tls;
  }
  kc::vni::VniHttpFrontend frontend(**service, metrics, health, serverOptions);
  auto bound = frontend.start();
  if (!bound) {
    spdlog::critical("cannot serve: {}", bound.error().message);
    return 1;
  }
  spdlog::info("vni-webhook serving on {}", frontend.baseUrl());
  if (!portFile.empty()) {
    const std::string tmp = portFile + ".tmp";
    std::ofstream(tmp) << *bound << "\n";
    std::rename(tmp.c_str(), portFile.c_str());
  }

  // SIGTERM: readiness fails at once; requests are still served for --shutdown-delay-seconds;
  // then the listener closes and in-flight requests get up to --drain-seconds; then the
  // writer commits what is queued and stops.
  const auto toMillis = [](double sec) {
    return std::chrono::milliseconds(static_cast<std::int64_t>(sec * 1000));
  };
  kc::obs::ShutdownHandler shutdown({&health,
                                     [&] {
                                       std::this_thread::sleep_for(toMillis(shutdownDelaySec));
                                       frontend.stop(toMillis(drainSec));
                                     },
                                     [&] { (*service)->stop(); }});
  if (auto s = shutdown.install(); !s) {
    spdlog::critical("{}", s.error().message);
    return 1;
  }
  shutdown.wait();
  spdlog::info("vni-webhook stopped ({})", shutdown.reason());
  ::close(lockFd);
  return 0;
}
