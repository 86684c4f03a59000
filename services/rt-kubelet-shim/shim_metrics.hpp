#pragma once
// RtShim's Prometheus metrics, shared by the units of the shim (shim.cpp, shim_hooks.cpp).

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "services/rt-kubelet-shim/shim.hpp"

namespace kc::rtshim {

struct RtShim::Metrics {
  explicit Metrics(prometheus::Registry& reg)
      : reservations(prometheus::BuildGauge()
                         .Name("kubecomp_rtshim_reservations")
                         .Help("Real-time containers holding a reservation on this node")
                         .Register(reg)
                         .Add({})),
        coreUsed(prometheus::BuildGauge()
                     .Name("kubecomp_rtshim_core_utilization")
                     .Help("Reserved RT bandwidth per core (runtime/period summed over servers)")
                     .Register(reg)),
        groupUsed(prometheus::BuildGauge()
                      .Name("kubecomp_rtshim_group_utilization")
                      .Help("Sum of runtime/period over all RT containers (cgroup v1 group limit)")
                      .Register(reg)
                      .Add({})),
        bound(prometheus::BuildGauge()
                  .Name("kubecomp_rtshim_core_bound")
                  .Help("Per-core RT bound (sched_rt_runtime_us/sched_rt_period_us); 0 = not "
                        "RT-capable")
                  .Register(reg)
                  .Add({})),
        refused(prometheus::BuildCounter()
                    .Name("kubecomp_rtshim_refused_total")
                    .Help("CRI calls the shim refused, by reason")
                    .Register(reg)),
        calls(prometheus::BuildHistogram()
                  .Name("kubecomp_rtshim_cri_call_seconds")
                  .Help("CRI calls through the proxy, arrival to end, by method and code")
                  .Register(reg)) {}
  prometheus::Gauge& reservations;
  prometheus::Family<prometheus::Gauge>& coreUsed;
  prometheus::Gauge& groupUsed;
  prometheus::Gauge& bound;
  prometheus::Family<prometheus::Counter>& refused;
  prometheus::Family<prometheus::Histogram>& calls;
};

}  // namespace kc::rtshim
