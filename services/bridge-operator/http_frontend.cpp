#include "services/bridge-operator/http_frontend.hpp"

#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>

#include "libcore/api/bridge_job.hpp"
#include "libcore/obs/health.hpp"

namespace kc::bridge {

struct BridgeHttpFrontend::Instruments {
  prometheus::Family<prometheus::Counter>& requests;
  prometheus::Family<prometheus::Histogram>& latency;
  prometheus::Family<prometheus::Counter>& jobStatus;

  explicit Instruments(prometheus::Registry& r)
      : requests(prometheus::BuildCounter()
                     .Name("bridge_hook_requests_total")
                     .Help("Hook requests by hook and HTTP status code")
                     .Register(r)),
        latency(prometheus::BuildHistogram()
                    .Name("bridge_hook_request_duration_seconds")
                    .Help("Hook request latency from body received to reply, by hook")
                    .Register(r)),
        jobStatus(prometheus::BuildCounter()
                      .Name("bridge_hook_replies_by_job_status_total")
                      .Help("Successful sync replies by the BridgeJob status they carried")
                      .Register(r)) {}
};

HookReply handleHook(HookKind kind, const std::string& body, const DecisionConfig& config,
                     std::chrono::system_clock::time_point now) {
  auto request = parseHookRequest(kind, body);
  if (!request) {
    return {400, {{"error", request.error().code}, {"message", request.error().message}}};
  }
  Desired desired = decide(*request, config, now);
  if (desired.refusal) {
    return {422, {{"error", desired.refusal->code}, {"message", desired.refusal->message}}};
  }
  return {200, renderResponse(desired)};
}

BridgeHttpFrontend::BridgeHttpFrontend(DecisionConfig config, kc::Clock& clock,
                                       obs::Metrics& metrics, obs::HealthChecks& health,
                                       net::ServerOptions options)
    : config_(std::move(config)),
      clock_(clock),
      instruments_(std::make_unique<Instruments>(metrics.registry())),
      server_(std::move(options)) {
  Instruments* ins = instruments_.get();
  // Every status a reply can carry exists from the start at 0, so that an alert on
  // increase(...{job_status="UNKNOWN"}) sees the first UNKNOWN (docs/monitoring.md).
  for (JobStatus st : {JobStatus::kSubmitted, JobStatus::kRunning, JobStatus::kDone,
                       JobStatus::kFailed, JobStatus::kKilled, JobStatus::kUnknown}) {
    ins->jobStatus.Add({{"job_status", jobStatusName(st)}});
  }
  ins->jobStatus.Add({{"job_status", "NONE"}});
  for (HookKind kind : {HookKind::kSync, HookKind::kFinalize}) {
    const std::string hook = hookName(kind);
    prometheus::Histogram* histogram = &ins->latency.Add(
        {{"hook", hook}}, prometheus::Histogram::BucketBoundaries{0.0001, 0.00025, 0.0005, 0.001,
                                                                  0.0025, 0.005, 0.01, 0.05, 0.1});
    server_.route("POST", "/" + hook, [this, ins, kind, hook, histogram](const net::Request& req) {
      const auto started = clock_.now();
      HookReply reply = handleHook(kind, req.body, config_, clock_.wallNow());
      const std::chrono::duration<double> took = clock_.now() - started;
      histogram->Observe(took.count());
      ins->requests.Add({{"hook", hook}, {"code", std::to_string(reply.status)}}).Increment();
      if (reply.status == 200) {
        const std::string s = reply.body["status"].value("jobStatus", "");
        ins->jobStatus.Add({{"job_status", s.empty() ? "NONE" : s}}).Increment();
      } else {
        spdlog::warn("{} answered {}: {}", hook, reply.status,
                     reply.body.value("message", std::string()));
      }
      return net::Response::json(reply.status, reply.body);
    });
  }
  obs::installHealthEndpoints(server_, health);
  obs::installMetricsEndpoint(server_, metrics, &health);
}

BridgeHttpFrontend::~BridgeHttpFrontend() {
  stop(std::chrono::milliseconds(0));
}

Result<std::uint16_t> BridgeHttpFrontend::start() {
  return server_.start();
}

void BridgeHttpFrontend::stop(std::chrono::milliseconds drain) {
  server_.stop(drain);
}

std::string BridgeHttpFrontend::baseUrl() const {
  return server_.baseUrl();
}

}  // namespace kc::bridge
