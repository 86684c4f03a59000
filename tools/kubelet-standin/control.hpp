#pragma once
// The stand-in's HTTP endpoint (kubelet's healthz port): /livez /readyz /healthz, /metrics,
// GET /debug/pods (pods, devices and Allocate's envs, as JSON), and with debugging handlers
// enabled POST /debug/simulate-restart and POST /debug/sync-node-status.

#include "libcore/net/http_server.hpp"
#include "libcore/obs/health.hpp"
#include "tools/kubelet-standin/standin.hpp"

namespace kc::kubelet {

void installControlEndpoints(net::HttpServer& server, KubeletStandin& standin,
                             bool debuggingHandlers);

}  // namespace kc::kubelet
