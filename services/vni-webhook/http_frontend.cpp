#include "services/vni-webhook/http_frontend.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <nlohmann/json.hpp>

#include "libcore/obs/health.hpp"

namespace kc::vni {

struct VniHttpFrontend::Instruments {
  prometheus::Gauge& allocated;
  prometheus::Gauge& free;
  prometheus::Gauge& cooling;
  prometheus::Gauge& outOfRange;
  prometheus::Counter& exhausted;
  prometheus::Family<prometheus::Counter>& requests;
  prometheus::Family<prometheus::Histogram>& latency;

  explicit Instruments(prometheus::Registry& r)
      : allocated(prometheus::BuildGauge()
                      .Name("vni_allocated")
                      .Help("VNIs held by live owners (in the configured range)")
                      .Register(r)
                      .Add({})),
        free(prometheus::BuildGauge()
                 .Name("vni_free")
                 .Help("VNIs that can be handed out now")
                 .Register(r)
                 .Add({})),
        cooling(prometheus::BuildGauge()
                    .Name("vni_cooling")
                    .Help("Released VNIs waiting for their cooldown")
                    .Register(r)
                    .Add({})),
        outOfRange(prometheus::BuildGauge()
                       .Name("vni_out_of_range_allocations")
                       .Help("Allocations outside the configured range (kept after a range change)")
                       .Register(r)
                       .Add({})),
        exhausted(prometheus::BuildCounter()
                      .Name("vni_exhausted_errors_total")
                      .Help("Sync requests refused because the range was exhausted")
                      .Register(r)
                      .Add({})),
        requests(prometheus::BuildCounter()
                     .Name("vni_hook_requests_total")
                     .Help("Hook requests by hook and HTTP status code")
                     .Register(r)),
        latency(prometheus::BuildHistogram()
                    .Name("vni_hook_request_duration_seconds")
                    .Help("Hook request latency from body received to reply, by hook")
                    .Register(r)) {}
};

namespace {

net::Response toResponse(const HookReply& reply) {
  net::Response r = net::Response::json(reply.status, reply.body);
  if (reply.status == 503) {
    r.withHeader("Retry-After", "5");
  }
  return r;
}

}  // namespace

VniHttpFrontend::VniHttpFrontend(VniService& service, obs::Metrics& metrics,
                                 obs::HealthChecks& health, net::ServerOptions options)
    : service_(service),
      instruments_(std::make_unique<Instruments>(metrics.registry())),
      server_(std::move(options)) {
  Instruments* ins = instruments_.get();
  service_.setStatsListener([ins](const ServiceStats& s) {
    ins->allocated.Set(s.counts.allocated);
    ins->free.Set(s.counts.free);
    ins->cooling.Set(s.counts.cooling);
    ins->outOfRange.Set(s.outOfRange);
  });
  auto route = [this, ins](HookKind kind, const char* path) {
    const std::string hook = hookName(kind);
    prometheus::Histogram* histogram = &ins->latency.Add(
        {{"hook", hook}},
        prometheus::Histogram::BucketBoundaries{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                0.1, 0.25, 0.5, 1, 2.5});
    server_.routeStream(
        "POST", path,
        [this, ins, kind, hook, histogram](const net::Request& request,
                                           std::shared_ptr<net::ResponseStream> stream) {
          const auto started = std::chrono::steady_clock::now();
          service_.handle(kind, request.body, [=](HookReply reply) {
            const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
            histogram->Observe(took.count());
            ins->requests.Add({{"hook", hook}, {"code", std::to_string(reply.status)}}).Increment();
            if (reply.status == 503 && reply.body.value("error", "") == "exhausted") {
              ins->exhausted.Increment();
            }
            stream->send(toResponse(reply));
          });
        });
  };
  route(HookKind::kSync, "/sync");
  route(HookKind::kFinalize, "/finalize");
  route(HookKind::kCustomize, "/customize");
  health.addReadinessCheck("vni-store", [this]() -> Status {
    if (!service_.accepting()) {
      return makeError(kc::errc::kUnavailable, "the VNI store writer is stopping");
    }
    return okStatus();
  });
  obs::installHealthEndpoints(server_, health);
  obs::installMetricsEndpoint(server_, metrics, &health);
}

VniHttpFrontend::~VniHttpFrontend() {
  stop(std::chrono::milliseconds(0));
  service_.setStatsListener(nullptr);
}

Result<std::uint16_t> VniHttpFrontend::start() {
  return server_.start();
}

void VniHttpFrontend::stop(std::chrono::milliseconds drain) {
  server_.stop(drain);
}

std::string VniHttpFrontend::baseUrl() const {
  return server_.baseUrl();
}

}  // namespace kc::vni
