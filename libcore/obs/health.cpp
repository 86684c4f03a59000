#include "libcore/obs/health.hpp"

#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "libcore/net/http_server.hpp"

namespace kc::obs {

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {}
Metrics::~Metrics() = default;

prometheus::Registry& Metrics::registry() {
  return *registry_;
}
std::shared_ptr<prometheus::Registry> Metrics::sharedRegistry() const {
  return registry_;
}

std::string Metrics::serialize() const {
  auto families = registry_->Collect();
  // Text format 0.0.4 escapes `\` and newline in HELP text; prometheus-cpp 1.0 writes it raw,
  // so a help string with a newline would break the whole exposition. Escape it here.
  for (auto& family : families) {
    std::string escaped;
    escaped.reserve(family.help.size());
    for (const char c : family.help) {
      if (c == '\\') {
        escaped += "\\\\";
      } else if (c == '\n') {
        escaped += "\\n";
      } else {
        escaped.push_back(c);
      }
    }
    family.help = std::move(escaped);
  }
  return prometheus::TextSerializer().Serialize(families);
}

void HealthChecks::addLivenessCheck(std::string name, Check check) {
  std::lock_guard lock(mutex_);
  live_.emplace_back(std::move(name), std::move(check));
}

void HealthChecks::addReadinessCheck(std::string name, Check check) {
  std::lock_guard lock(mutex_);
  ready_.emplace_back(std::move(name), std::move(check));
}

void HealthChecks::failReadiness(std::string reason) {
  std::lock_guard lock(mutex_);
  shutdownReason_ = reason.empty() ? std::string("shutting down") : std::move(reason);
}

bool HealthChecks::shuttingDown() const {
  std::lock_guard lock(mutex_);
  return !shutdownReason_.empty();
}

HealthChecks::Outcome HealthChecks::checkLive(const std::vector<std::string>& exclude) const {
  std::vector<std::pair<std::string, Check>> checks;
  {
    std::lock_guard lock(mutex_);
    checks = live_;
  }
  return run(checks, exclude, false);
}

HealthChecks::Outcome HealthChecks::checkReady(const std::vector<std::string>& exclude) const {
  std::vector<std::pair<std::string, Check>> checks;
  {
    std::lock_guard lock(mutex_);
    checks = ready_;
  }
  return run(checks, exclude, true);
}

HealthChecks::Outcome HealthChecks::run(const std::vector<std::pair<std::string, Check>>& checks,
                                        const std::vector<std::string>& exclude,
                                        bool readiness) const {
  // Checks run outside the lock: they may take a moment (e.g. ask the informer) and must not
  // block registration or failReadiness().
  Outcome out;
  if (readiness) {
    std::string reason;
    {
      std::lock_guard lock(mutex_);
      reason = shutdownReason_;
    }
    if (std::find(exclude.begin(), exclude.end(), "shutdown") == exclude.end()) {
      Status s = reason.empty() ? okStatus() : Status(makeError(kc::errc::kUnavailable, reason));
      out.ok = out.ok && s.ok();
      out.results.emplace_back("shutdown", std::move(s));
    }
  }
  for (const auto& [name, check] : checks) {
    if (std::find(exclude.begin(), exclude.end(), name) != exclude.end()) {
      continue;
    }
    Status s = okStatus();
    try {
      s = check ? check() : okStatus();
    } catch (const std::exception& e) {
      s = makeError(kc::errc::kInternal, std::string("check threw: ") + e.what());
    }
    out.ok = out.ok && s.ok();
    out.results.emplace_back(name, std::move(s));
  }
  return out;
}

namespace {

// Body in the kube-apiserver style: "ok" when healthy and not verbose; otherwise one line per
// check and a summary line.
net::Response renderOutcome(const HealthChecks::Outcome& outcome, std::string_view endpoint,
                            bool verbose) {
  const unsigned status = outcome.ok ? 200 : 503;
  if (outcome.ok && !verbose) {
    return net::Response::text(status, "ok");
  }
  std::string body;
  for (const auto& [name, result] : outcome.results) {
    if (result.ok()) {
      body += "[+]" + name + " ok\n";
    } else {
      body += "[-]" + name + " failed: " + result.error().message + "\n";
    }
  }
  body += std::string(endpoint) + (outcome.ok ? " check passed\n" : " check failed\n");
  return net::Response::text(status, std::move(body));
}

void installOne(net::HttpServer& server, const std::string& endpoint, bool readiness,
                const HealthChecks& checks) {
  server.route("GET", "/" + endpoint, [&checks, endpoint, readiness](const net::Request& req) {
    const auto exclude = req.queryParams("exclude");
    auto outcome = readiness ? checks.checkReady(exclude) : checks.checkLive(exclude);
    return renderOutcome(outcome, endpoint, req.hasQueryParam("verbose"));
  });
  // /readyz/<check>: run one named check only.
  server.routePrefix(
      "GET", "/" + endpoint + "/", [&checks, endpoint, readiness](const net::Request& req) {
        const std::string name = req.path.substr(endpoint.size() + 2);
        auto outcome = readiness ? checks.checkReady() : checks.checkLive();
        for (auto& [checkName, result] : outcome.results) {
          if (checkName == name) {
            HealthChecks::Outcome one;
            one.ok = result.ok();
            one.results.emplace_back(checkName, result);
            return renderOutcome(one, endpoint + "/" + name, req.hasQueryParam("verbose"));
          }
        }
        return net::Response::error(404, "not_found",
                                    "no " + endpoint + " check named '" + name + "'");
      });
}

}  // namespace

void installHealthEndpoints(net::HttpServer& server, const HealthChecks& checks) {
  installOne(server, "livez", false, checks);
  installOne(server, "readyz", true, checks);
  installOne(server, "healthz", true, checks);
}

void installMetricsEndpoint(net::HttpServer& server, const Metrics& metrics,
                            const HealthChecks* readiness) {
  server.route("GET", "/metrics", [&metrics, readiness](const net::Request&) {
    std::string text = metrics.serialize();
    if (readiness != nullptr) {
      // Evaluated at scrape time, so it is never stale; a family of its own after the
      // registry's (the text format does not order families).
      text +=
          "# HELP kubecomp_daemon_ready 1 while every readiness check passes (/readyz), else "
          "0\n# TYPE kubecomp_daemon_ready gauge\nkubecomp_daemon_ready ";
      text += readiness->checkReady().ok ? "1\n" : "0\n";
    }
    return net::Response::text(200, text, "text/plain; version=0.0.4; charset=utf-8");
  });
}

void writePortFile(const std::string& path, unsigned port) {
  if (path.empty()) {
    return;
  }
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << port << "\n";
  std::rename(tmp.c_str(), path.c_str());
}

}  // namespace kc::obs
