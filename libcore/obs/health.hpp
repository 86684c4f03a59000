#pragma once
// Health and metrics endpoints for an HttpServer, following the Kubernetes conventions:
//   GET /livez, /readyz (and the legacy /healthz = readiness): 200 "ok" or 503 listing the failed
//   checks; `?verbose` prints one "[+]name ok" / "[-]name failed: reason" line per check;
//   `?exclude=name` (repeatable) skips a check; /livez/<name>, /readyz/<name> run one check.
//   GET /metrics: the Prometheus text exposition (format 0.0.4) of a prometheus-cpp registry.
//
// prometheus-cpp is only forward-declared here; code that creates metrics includes
// <prometheus/counter.h> etc. itself and registers them on Metrics::registry().

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "libcore/base/result.hpp"

namespace prometheus {
class Registry;
}

namespace kc::net {
class HttpServer;
}

namespace kc::obs {

// Owns the process's metrics registry (no global registry: create one Metrics in main() and
// pass it to whoever registers metrics).
class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  prometheus::Registry& registry();
  std::shared_ptr<prometheus::Registry> sharedRegistry() const;
  // Text format 0.0.4 of everything registered.
  std::string serialize() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
};

// Named checks behind /livez and /readyz. Thread-safe.
class HealthChecks {
 public:
  using Check = std::function<Status()>;  // ok = healthy; the error message is shown

  void addLivenessCheck(std::string name, Check check);
  void addReadinessCheck(std::string name, Check check);

  // Makes readiness fail with `reason` from now on (used on SIGTERM: the load balancer stops
  // sending traffic while in-flight work drains). Liveness is unaffected.
  void failReadiness(std::string reason);
  bool shuttingDown() const;

  struct Outcome {
    bool ok = true;
    std::vector<std::pair<std::string, Status>> results;  // in registration order
  };
  Outcome checkLive(const std::vector<std::string>& exclude = {}) const;
  Outcome checkReady(const std::vector<std::string>& exclude = {}) const;

 private:
  Outcome run(const std::vector<std::pair<std::string, Check>>& checks,
              const std::vector<std::string>& exclude, bool readiness) const;
  mutable std::mutex mutex_;
  std::vector<std::pair<std::string, Check>> live_;   // guarded by mutex_
  std::vector<std::pair<std::string, Check>> ready_;  // guarded by mutex_
  std::string shutdownReason_;                        // guarded by mutex_; non-empty = failing
};

// Installs /livez, /readyz, /healthz (+ /livez/<check>, /readyz/<check>) for `checks`.
// `checks` must outlive the server (or at least its stop()).
void installHealthEndpoints(net::HttpServer& server, const HealthChecks& checks);

// Tells tests which port a daemon bound (its --port-file): the port and a newline, written to
// `<path>.tmp` and renamed into place so a reader never sees a partial file. Empty path: nothing.
void writePortFile(const std::string& path, unsigned port);
// Installs GET /metrics serving `metrics` (text format 0.0.4). `metrics` must outlive the server.
// With `readiness`, every scrape also carries the gauge kubecomp_daemon_ready: 1 while all its
// readiness checks pass (what /readyz answers), else 0, for alerts on a daemon that serves but
// is not ready (docs/monitoring.md). `readiness` must outlive the server too.
void installMetricsEndpoint(net::HttpServer& server, const Metrics& metrics,
                            const HealthChecks* readiness = nullptr);

}  // namespace kc::obs
